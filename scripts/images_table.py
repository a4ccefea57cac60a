"""Mean and standard deviation of each measure over the resamples: mode_dropping.csv."""

import json

import pandas as pd
from _contract import Input, Inputs, Output
from _job import run

from diversity_core.atomic import atomic_path
from diversity_core.experiments.image_mode_dropping import scenario_agreement, summarise_scores


def main(scores: Inputs, info: Input, table: Output, agreement: Output):
    """Write ``table`` (columns ``scenario,fraction,metric,mean,std``) and ``agreement`` (how
    alike each measure's curves are across the two scenarios)."""
    frames = [pd.read_csv(path) for path in scores]
    summary = summarise_scores(pd.concat(frames, ignore_index=True))
    with atomic_path(table) as tmp:
        summary.to_csv(tmp, index=False, float_format="%.6g")
    with atomic_path(agreement) as tmp:
        scenario_agreement(summary).to_csv(tmp, index=False, float_format="%.4g")
    with open(info) as stream:
        reference = json.load(stream)
    n_resamples = int(frames[0]["resample"].nunique()) if frames else 0
    return {"reference": reference, "n_resamples": n_resamples}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
