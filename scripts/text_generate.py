"""Sample the response sets of one chunk of a task's prompts at every temperature.

All responses of a prompt (every temperature) are one batch sharing the prompt's key/value cache;
each prompt's sets are cached in CACHE_DIR, so a rerun (interrupted, or with more prompts or
temperatures) samples only what is missing. Writes the chunk's sets (.jsonl) and the generation
statistics (tokens, CPU seconds, tokens per CPU second) of this run (.json).
"""

import json

from _helpers import Input, Output, chunk_indices, log, run

from diversity_core import language_model
from diversity_core.data import text_tasks


def main(prompts: Input, model: Input, sets: Output, stats: Output, task: str, chunk: int,
         n_chunks: int, temperatures: list, responses_per_set: int, max_new_tokens: int,
         seed: int, device: str, cache_dir: str):
    """Generate the sets of chunk CHUNK of N_CHUNKS of the prompts in PROMPTS with the model in
    folder MODEL; write SETS (.jsonl) and STATS (.json)."""
    with open(prompts, encoding="utf-8") as stream:
        all_prompts = json.load(stream)
    mine = [all_prompts[i] for i in chunk_indices(len(all_prompts), n_chunks, chunk)]
    records, numbers = language_model.generate_task(
        task, mine, temperatures, model_folder=model, n_responses=responses_per_set,
        max_new_tokens=max_new_tokens, seed=seed, cache_dir=cache_dir, device=device)
    text_tasks.write_sets(sets, records)
    numbers.update({"task": task, "chunk": chunk, "n_prompts": len(mine),
                    "n_sets": len(records)})
    with open(stats, "w") as stream:
        json.dump(numbers, stream, indent=2, sort_keys=True)
        stream.write("\n")
    log.info("%s chunk %d: %d prompts, %d sets (%d generated now: %d tokens, %.0f CPU s, "
             "%s tokens per CPU second)", task, chunk, len(mine), len(records),
             numbers["sets_generated"], numbers["tokens"], numbers["cpu_seconds"],
             f"{numbers['tokens_per_cpu_second']:.1f}" if numbers["tokens_per_cpu_second"]
             else "-")


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
