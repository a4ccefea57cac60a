"""Mean and standard deviation of every measure over the resamples: results/images/mode_dropping.csv."""

import json
import os

import pandas as pd
from _helpers import run, write_provenance

from diversity_core.experiments.images import summarise_scores


def main(scores, info, table, images_config=None, magnitude=None, seed=0):
    """Write ``table`` with columns ``scenario,fraction,metric,mean,std``."""
    frames = [pd.read_csv(path) for path in scores]
    summary = summarise_scores(pd.concat(frames, ignore_index=True))
    tmp = str(table) + ".tmp"
    summary.to_csv(tmp, index=False, float_format="%.6g")
    os.replace(tmp, table)
    with open(info) as stream:
        reference = json.load(stream)
    write_provenance(table, config={"images": images_config, "magnitude": magnitude}, seed=seed,
                     reference=reference,
                     n_resamples=int(frames[0]["resample"].nunique()) if frames else 0)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
