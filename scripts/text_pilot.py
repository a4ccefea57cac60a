"""The pilot sets of one task (decTest design): the task's first PILOT_SETS prompts, each sampled
once at a temperature spread continuously over [TEMPERATURE_MIN, PILOT_TEMPERATURE_MAX]; the
temperature cap of the experiment's sets is measured on them (text_temperature_cap.py).

Writes the pilot sets (.jsonl, the data files' format) and the generation statistics (.json).
"""

import json

from _contract import Input, Output
from _job import log, run

from diversity_core import language_model
from diversity_core.atomic import atomic_write
from diversity_core.data import text_tasks


def main(prompts: Input, model: Input, sets: Output, stats: Output, task: str, pilot_sets: int,
         temperature_min: float, pilot_temperature_max: float, batch_sets: int,
         responses_per_set: int, max_new_tokens: int, seed: int, device: str, cache_dir: str):
    """Sample PILOT_SETS sets of TASK from the first prompts of PROMPTS (.json) with the model in
    folder MODEL; write SETS (.jsonl) and STATS (.json)."""
    with open(prompts, encoding="utf-8") as stream:
        pilot_prompts = json.load(stream)[:pilot_sets]
    temperatures = text_tasks.decoding_temperatures(pilot_sets, temperature_min,
                                                    pilot_temperature_max, seed, task, "pilot")
    records, numbers = language_model.generate_plan(
        task, text_tasks.dectest_plan(pilot_prompts, temperatures), batch_sets=batch_sets,
        model_folder=model, n_responses=responses_per_set, max_new_tokens=max_new_tokens,
        seed=seed, cache_dir=cache_dir, device=device)
    text_tasks.write_sets(sets, records)
    numbers.update({"task": task, "n_sets": len(records)})
    with atomic_write(stats) as stream:
        json.dump(numbers, stream, indent=2, sort_keys=True)
        stream.write("\n")
    log.info("%s pilot: %d sets at temperatures %.2f-%.2f (%d generated now, %.0f CPU s)", task,
             len(records), temperatures.min(), temperatures.max(), numbers["sets_generated"],
             numbers["cpu_seconds"])


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
