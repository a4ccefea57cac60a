"""How far each cell of the text experiment's R² table (r2_scores.csv) moves when every embedding
is moved at the level of its round-off: the R² of every (task, model, measure) computed again,
with the same folds, from each perturbed run's scores (rule text_stability_scores), against the
unperturbed scores. Writes results/text/r2_stability.csv
(diversity_core.experiments.stability.spread_table).
"""

from pathlib import Path

import pandas as pd
from _contract import Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import stability
from diversity_core.experiments import text_temperature as protocol


def _r2(paths, measures, cv_folds, cv_repeats, seed) -> pd.DataFrame:
    _, by_measure, temperatures = protocol.read_score_tables(paths, measures)
    _, summary = protocol.r2_table(by_measure, temperatures, measures=measures,
                                   n_splits=cv_folds, n_repeats=cv_repeats, seed=seed)
    return summary


def main(scores: Inputs, perturbed: Inputs, table: Output, measures: list, cv_folds: int,
         cv_repeats: int, perturbations: int, seed: int):
    """Write TABLE: per (task, model, measure) the R² as in r2_scores.csv, the perturbed runs'
    range, the spread and whether the printed (4-decimal) value moves."""
    reference = _r2(scores, measures, cv_folds, cv_repeats, seed)
    # The perturbed scores are named {task}_{perturbation}.csv: one R² table per draw.
    draws = {p: [path for path in perturbed if Path(path).stem.rsplit("_", 1)[1] == str(p)]
             for p in range(perturbations)}
    runs = []
    for p, paths in draws.items():
        if len(paths) != len(scores):
            raise ValueError(f"perturbation {p}: {len(paths)} score tables for {len(scores)}.")
        runs.append(_r2(paths, measures, cv_folds, cv_repeats, seed).assign(perturbation=p))
    spreads = stability.spread_table(reference, pd.concat(runs, ignore_index=True),
                                     cell=("task", "model", "measure"), value="r2_mean")
    with atomic_path(table) as tmp:
        spreads.to_csv(tmp, index=False)
    log.info("%d of %d cells move in their 4th decimal; largest spread %.2g", spreads.moves.sum(),
             len(spreads), spreads.spread.max())
    return {"moves": "the printed (4-decimal) R² differs in some perturbed run"}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
