# The leaderboard of diversity measures (results/leaderboard.{csv,md,png,pdf}, part of `all`): every
# measure the configured experiments' final tables name, ranked per test by the paper's criterion.
# Included after every experiment's rules: it reads their final files.

from diversity_core.reporting.leaderboard import input_files as leaderboard_inputs

LEADERBOARD = {kind: str(RESULTS / f"leaderboard.{kind}") for kind in ("csv", "md", "png", "pdf")}


rule leaderboard:
    """results/leaderboard.*: one row per measure, one column per configured experiment's test."""
    input:
        results=[str(RESULTS / name) for name in leaderboard_inputs(config["experiments"])],
    output:
        table=report(LEADERBOARD["csv"], caption="../report/leaderboard.rst", category="Summary"),
        markdown=report(LEADERBOARD["md"], caption="../report/leaderboard.rst",
                        category="Summary"),
        figure=report(LEADERBOARD["png"], caption="../report/leaderboard_figure.rst",
                      category="Summary"),
        figure_pdf=report(LEADERBOARD["pdf"], caption="../report/leaderboard_figure.rst",
                          category="Summary"),
    params:
        results_dir=lambda wildcards, output: str(Path(output.table).parent),
        experiments=config["experiments"],
    conda:
        "../../envs/pipeline.yaml"
    log:
        str(RESULTS / "logs" / "leaderboard.log"),
    threads: 1
    script:
        "../../scripts/leaderboard.py"
