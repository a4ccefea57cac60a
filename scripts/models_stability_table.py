"""Each Table 2 / S.5 cell's spread under the stability check's perturbations and its bounds
under a change of machine (results/models/stability.csv), and Table 2 as Markdown with the cells
that read round-off marked (results/models/table2.md)."""

import pandas as pd
from _contract import Input, Inputs, Output
from _job import run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import model_distinguishing as md
from diversity_core.experiments import stability as ms
from diversity_core.measures.registry import get_measure


def main(accuracy: Inputs, stability: Inputs, table2: Input, stability_table: Output,
         table2_markdown: Output, k: int, relative_to_column: float,
         common_to_column: float, max_distance_change: float):
    """Write ``stability_table`` (one row per cell of Table S.5: the value, the perturbed
    runs' range, the spread and whether the printed value moves; the bounds within reach of a
    change of machine that moves every distance by at most MAX_DISTANCE_CHANGE of the block's
    largest, as models_classify computed them) and ``table2_markdown``."""
    # the accuracies compared exactly as computed
    reference = pd.concat([ms.read_exact_csv(path) for path in accuracy], ignore_index=True)
    perturbed = pd.concat([ms.read_exact_csv(path) for path in stability], ignore_index=True)
    spreads = ms.spread_table(reference, perturbed).merge(
        ms.reach_table(reference), on=list(ms.MODEL_CELL), validate="one_to_one")
    with atomic_path(stability_table) as tmp:
        spreads.to_csv(tmp, index=False)
    labels = [get_measure(name).in_paper for name in md.measures()]
    markdown = ms.table2_markdown(pd.read_csv(table2), spreads, k=k, measures=labels,
                                  relative_to_column=relative_to_column,
                                  common_to_column=common_to_column,
                                  max_distance_change=max_distance_change)
    with atomic_path(table2_markdown) as tmp:
        tmp.write_text(markdown)
    return {"moves": "the printed (4-decimal) value differs in some perturbed run",
            "mean_within_reach": "the printed mean can change when every distance moves by "
                                 f"at most {max_distance_change} of its block's largest"}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
