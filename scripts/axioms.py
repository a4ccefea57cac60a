"""The axiom table: every measure x axiom (paper §3.1) -> holds / fails with a counterexample."""

from _contract import Output
from _job import log, run
from tqdm import tqdm

from diversity_core.atomic import atomic_path, atomic_write
from diversity_core.experiments.axioms import AXIOMS, check_axioms, results_table, summary_table


def main(table: Output, summary: Output, seed: int):
    """Write TABLE (.csv: measure, axiom, result, cases_tried, counterexample) and SUMMARY (.md)."""
    results = check_axioms(seed=seed, progress=lambda pairs: tqdm(pairs, desc="axiom checks"))
    frame = results_table(results)
    with atomic_path(table) as tmp:
        frame.to_csv(tmp, index=False)
    wide = summary_table(results)
    lines = ["| measure | " + " | ".join(AXIOMS) + " |",
             "|---|" + "---|" * len(AXIOMS)]
    for measure, row in wide.iterrows():
        lines.append(f"| {measure} | " + " | ".join(row[a] for a in AXIOMS) + " |")
    with atomic_write(summary) as f:
        f.write("\n".join(lines) + "\n")
    for r in results:
        log.info("%s / %s: %s (%s)", r.measure, r.axiom, r.verdict, r.counterexample)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
