"""results/summary.md: every claim of the paper beside our result, with a verdict and its rule."""

import yaml
from _contract import Input, Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.measures.registry import MEASURES
from diversity_core.reporting.claims import VERDICTS, evaluate_claims, render_summary


def main(claims: Input, results: Inputs, summary: Output, results_dir: str):
    """Read the CLAIMS file (workflow/paper_claims.yaml) and the result files under RESULTS_DIR
    (RESULTS: the final files of the configured experiments) and write SUMMARY (.md). A claim
    whose result file is missing shows as "not run"; the registry's measures (plugins included)
    are matched by every spelling it knows, and those beyond the paper's are named."""
    with open(claims) as stream:
        spec = yaml.safe_load(stream)
    rows = evaluate_claims(spec, results_dir, MEASURES)
    beyond = [m.label for m in MEASURES.values() if not m.from_paper]
    with atomic_write(summary) as out:
        out.write(render_summary(rows, spec, beyond))
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    log.info("%d claims from %d result files: %s", len(rows), len(results), counts)
    return {"verdicts": counts}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
