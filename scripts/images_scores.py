"""Score every perturbed set of one mode-dropping scenario against the reference."""

import json

import numpy as np
from _contract import Inputs, Output
from _job import log, run

from diversity_core import MagnitudeSettings
from diversity_core.atomic import atomic_path, atomic_write
from diversity_core.experiments.image_mode_dropping import mode_dropping_scores


def main(embeddings: Inputs, scores: Output, info: Output, magnitude: dict, scenario: str,
         fractions: list, repeats_per_class: int, k: int, metrics: list, seed: int):
    """Write ``scores`` (one row per fraction, resample and metric) and ``info`` (the
    reference's t_conv, MagArea, Mag(t_conv/2), Vendi Score). MAGNITUDE: the configuration's
    ``magnitude`` section (JSON)."""
    settings = MagnitudeSettings.from_config(magnitude)
    parts = [np.load(path) for path in embeddings]
    reference = np.stack([p["reference"] for p in parts])
    pools = [p["pool"] for p in parts]
    log.info("%s: reference %s, pools of %s", scenario, reference.shape, [len(p) for p in pools])
    table, ref_info = mode_dropping_scores(
        reference, pools, scenario=scenario,
        fractions=fractions,
        repeats_per_class=repeats_per_class, k=k, seed=seed, metrics=metrics, settings=settings,
    )
    with atomic_path(scores) as tmp:
        table.to_csv(tmp, index=False, float_format="%.10g")
    with atomic_write(info) as out:
        json.dump(ref_info, out, indent=2, sort_keys=True)
        out.write("\n")
    log.info("reference: %s", ref_info)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
