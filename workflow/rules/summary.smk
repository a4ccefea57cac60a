# What a reader sees at the end: the paper's claims beside our results (results/summary.md, part
# of `all`) and the run time of each experiment (results/timings.md, target `timings`).
# Included after every experiment's rules: it reads EXPERIMENT_TARGETS.

PAPER_CLAIMS = "workflow/paper_claims.yaml"
SUMMARY = str(RESULTS / "summary.md")
TIMINGS = str(RESULTS / "timings.md")
# The software environment of every rule of this file (--sdm conda).
SUMMARY_ENV = "../../envs/pipeline.yaml"


check_claims_against_targets(PAPER_CLAIMS)


rule summary:
    """results/summary.md: each claim of the paper, our value, the gap and a verdict."""
    input:
        claims=PAPER_CLAIMS,
        results=experiment_targets(),
    output:
        summary=report(SUMMARY, caption="../report/summary.rst", category="Summary"),
    params:
        results_dir=lambda wildcards, output: str(Path(output.summary).parent),
        config={"experiments": config["experiments"]},
    conda:
        SUMMARY_ENV
    log:
        str(RESULTS / "logs" / "summary.log"),
    threads: 1
    script:
        "../../scripts/summary.py"


rule timings:
    """results/timings.md: wall and CPU time per experiment from the benchmark files. Not part of
    `all` (timings differ from run to run); run after the workflow: `snakemake timings`."""
    input:
        results=experiment_targets(),
    output:
        timings=TIMINGS,
    params:
        folders={name: f"{folder}/benchmarks" for name, folder in experiment_folders().items()},
    conda:
        SUMMARY_ENV
    log:
        str(RESULTS / "logs" / "timings.log"),
    threads: 1
    script:
        "../../scripts/timings.py"
