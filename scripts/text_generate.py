"""Sample the response sets of one chunk of a task.

DESIGN grid: every prompt of the chunk at every temperature; all responses of a prompt are one
batch sharing the prompt's key/value cache. DESIGN dectest: the task's prompts after its
PILOT_SETS pilot prompts, N_SETS of them, each sampled once at a temperature spread continuously
over [TEMPERATURE_MIN, the task's cap in CAPS]; BATCH_SETS prompts per left-padded batch. Each
prompt's sets are cached in CACHE_DIR, so a rerun (interrupted, or enlarged) samples only what
is missing. Writes the chunk's sets (.jsonl) and the generation statistics (tokens, CPU
seconds, tokens per CPU second) of this run (.json).
"""

import json

from _contract import Input, Inputs, Output
from _job import log, run

from diversity_core import language_model
from diversity_core.atomic import atomic_write
from diversity_core.data import text_tasks
from diversity_core.experiments import text_temperature as protocol
from diversity_core.experiments.chunks import chunk_indices


def main(prompts: Input, model: Input, caps: Inputs, sets: Output, stats: Output, task: str,
         chunk: int, n_chunks: int, design: str, grid: dict, dectest: dict,
         responses_per_set: int, max_new_tokens: int, seed: int, device: str, cache_dir: str):
    """Generate the sets of chunk CHUNK of N_CHUNKS of TASK from the prompts in PROMPTS with the
    model in folder MODEL (DESIGN dectest: CAPS, one .csv, holds the task's cap); write SETS
    (.jsonl) and STATS (.json)."""
    with open(prompts, encoding="utf-8") as stream:
        all_prompts = json.load(stream)
    common = {"model_folder": model, "n_responses": responses_per_set,
              "max_new_tokens": max_new_tokens, "seed": seed, "cache_dir": cache_dir,
              "device": device}
    if design == "grid":
        mine = [all_prompts[i] for i in chunk_indices(len(all_prompts), n_chunks, chunk)]
        records, numbers = language_model.generate_task(task, mine, grid["temperatures"],
                                                        **common)
    else:
        if len(caps) != 1:
            raise ValueError(f"design dectest needs one CAPS table; got {caps}.")
        cap = protocol.read_temperature_caps(caps[0])[task]
        first = dectest["pilot_sets"]
        main_prompts = all_prompts[first:first + dectest["n_sets"]]
        temperatures = text_tasks.decoding_temperatures(
            dectest["n_sets"], dectest["temperature_min"], cap, seed, task, "sets")
        plan = text_tasks.dectest_plan(main_prompts, temperatures)
        mine = [plan[i] for i in chunk_indices(len(plan), n_chunks, chunk)]
        records, numbers = language_model.generate_plan(task, mine,
                                                        batch_sets=dectest["batch_sets"],
                                                        **common)
    text_tasks.write_sets(sets, records)
    numbers.update({"task": task, "chunk": chunk, "n_prompts": len(mine),
                    "n_sets": len(records)})
    with atomic_write(stats) as stream:
        json.dump(numbers, stream, indent=2, sort_keys=True)
        stream.write("\n")
    log.info("%s chunk %d: %d prompts, %d sets (%d generated now: %d tokens, %.0f CPU s, "
             "%s tokens per CPU second)", task, chunk, len(mine), len(records),
             numbers["sets_generated"], numbers["tokens"], numbers["cpu_seconds"],
             f"{numbers['tokens_per_cpu_second']:.1f}" if numbers["tokens_per_cpu_second"]
             else "-")


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
