"""Reference-free integration limit: the median of all convergence scales (paper §3.4)."""

import json

import numpy as np
from _contract import Inputs, Output
from _job import log, run

from diversity_core import reference_free_t_cut
from diversity_core.atomic import atomic_write


def main(scales: Inputs, t_cut: Output):
    """Write T_CUT (.json) from the SCALES chunk files."""
    t_conv = np.concatenate([np.load(path)["t_conv"] for path in scales])
    limit = reference_free_t_cut(convergence_scales=t_conv)
    record = {"t_cut": limit, "rule": "median of convergence scales",
              "n_spaces": int(t_conv.size), "t_conv_min": float(t_conv.min()),
              "t_conv_max": float(t_conv.max())}
    with atomic_write(t_cut) as f:
        json.dump(record, f, indent=2)
    log.info("t_cut = %.6g (median of %d convergence scales)", record["t_cut"], t_conv.size)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
