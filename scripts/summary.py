"""results/summary.md: every claim of the paper beside our result, with a verdict and its rule."""

import os
from pathlib import Path

import yaml
from _helpers import Input, Inputs, Output, log, run

from diversity_core.reporting.claims import VERDICTS, evaluate_claims, render_summary


def main(claims: Input, results: Inputs, summary: Output, results_dir: str):
    """Read the CLAIMS file (workflow/paper_claims.yaml) and the result files under RESULTS_DIR
    (RESULTS: the final files of the configured experiments) and write SUMMARY (.md). A claim
    whose result file is missing shows as "not run"."""
    with open(claims) as stream:
        spec = yaml.safe_load(stream)
    rows = evaluate_claims(spec, results_dir)
    tmp = Path(str(summary) + ".tmp")
    tmp.write_text(render_summary(rows, spec))
    os.replace(tmp, summary)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    log.info("%d claims from %d result files: %s", len(rows), len(results), counts)
    return {"verdicts": counts}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
