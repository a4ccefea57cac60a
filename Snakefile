# Reproduction of "Metric Space Magnitude for Evaluating the Diversity of Latent Representations".
#
#   snakemake --cores 8                 every experiment listed in config["experiments"]
#   snakemake --cores 8 curvature       one experiment by target
#
# Rules live in workflow/rules/<topic>.smk; rule scripts in scripts/; the metrics in diversity_core/.

from snakemake.utils import min_version

# The package's process settings, inherited by every job: OpenBLAS's idle threads sleep almost at
# once instead of holding cores for 0.1 s (diversity_core/_threads.py, quiet_blas_workers).
import diversity_core  # noqa: F401

min_version("9.0")


configfile: "config.yaml"


# Front page of `snakemake --report report.html`; every final file has a caption in workflow/report/.
report: "workflow/report/workflow.rst"


# The configuration checked whole first, inside common.smk before any value is used (its size
# once expanded, typed command-line overrides, the schema's types, ranges and defaults, the
# folders, the pins); the constraints between keys (registered by each rule file) and, with
# strict_assets, the pins of every asset once the rules are read: a bad configuration fails
# before any job runs, one line per problem naming its key.
include: "workflow/rules/common.smk"


include: "workflow/rules/text_assets.smk"
include: "workflow/rules/curvature.smk"
include: "workflow/rules/images.smk"
include: "workflow/rules/axioms.smk"
include: "workflow/rules/graphs.smk"
include: "workflow/rules/text.smk"
include: "workflow/rules/models.smk"
# After every experiment: it reads their final files.
include: "workflow/rules/summary.smk"
include: "workflow/rules/leaderboard.smk"
# `snakemake audit`: the results against their provenance records.
include: "workflow/rules/audit.smk"


check_config(config)
check_assets(config)


rule all:
    input:
        experiment_targets(),
        SUMMARY,
        list(LEADERBOARD.values()),
    default_target: True
