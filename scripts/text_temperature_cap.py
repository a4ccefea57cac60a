"""Each task's temperature cap (decTest design), measured on its pilot sets.

Every pilot set's dictionary share (the share of its words that the word list DICTIONARY holds)
is fitted against temperature by a decreasing isotonic regression; a task's cap is the highest
pilot temperature at which the fit stays at most MAX_DROP below its lowest-temperature level.
Writes CAPS (.csv: task, cap, level, share_at_cap, max_drop, n_pilot_sets) and FLUENCY (.csv:
task, prompt_id, temperature, dictionary_share, fitted_share, one row per pilot set).
"""

import pandas as pd
from _contract import Input, Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.data import text as corpora
from diversity_core.data import text_tasks
from diversity_core.experiments import text_temperature as protocol


def main(pilot: Inputs, dictionary: Input, caps: Output, fluency: Output, dictionary_name: str,
         max_drop: float):
    """Read the tasks' PILOT sets (.jsonl) and the word list in folder DICTIONARY; write CAPS and
    FLUENCY."""
    words = {word.lower() for word in corpora.load_corpus(dictionary_name, dictionary)}
    rows, per_set = [], []
    for path in pilot:
        records = text_tasks.read_sets(path)
        tasks = {record["task"] for record in records}
        if len(tasks) != 1:
            raise ValueError(f"{path}: pilot sets of one task expected; got tasks {sorted(tasks)}.")
        task = tasks.pop()
        temperatures = [float(record["temperature"]) for record in records]
        shares = [protocol.dictionary_share(record["responses"], words) for record in records]
        found = protocol.temperature_cap(temperatures, shares, max_drop=max_drop)
        rows.append({"task": task, "cap": found["cap"], "level": found["level"],
                     "share_at_cap": found["share_at_cap"], "max_drop": max_drop,
                     "n_pilot_sets": found["n_sets"]})
        per_set += [{"task": task, "prompt_id": record["prompt_id"], "temperature": t,
                     "dictionary_share": share, "fitted_share": fit}
                    for record, t, share, fit in zip(records, temperatures, shares,
                                                     found["fitted"], strict=True)]
        log.info("%s: dictionary share %.3f at the lowest temperatures; cap %.4f (fitted "
                 "share %.3f)", task, found["level"], found["cap"], found["share_at_cap"])
    with atomic_path(caps) as tmp:
        pd.DataFrame(rows, columns=list(protocol.CAP_COLUMNS)).to_csv(tmp, index=False,
                                                                      float_format="%.4f")
    with atomic_path(fluency) as tmp:
        pd.DataFrame(per_set).to_csv(tmp, index=False, float_format="%.4f")
    return {"caps": {row["task"]: row["cap"] for row in rows}, "dictionary": dictionary_name}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
