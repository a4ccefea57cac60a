# The chain of custody (docs/auditing.md): every file of the results folder against its
# provenance record, every recorded input against its digest, each final result's chain back to
# the pinned assets. Not part of `all`, and without inputs or outputs on purpose: it checks what
# is on disk (Snakemake would otherwise remake a missing or older file first), and it runs each
# time it is asked for, even when Snakemake sees nothing to do:
#
#   snakemake --cores 1 audit


rule audit:
    """Audit the results folder; fails (exit 1) on any changed, missing, stale or unrecorded
    file. The report is printed and kept in the log."""
    params:
        results=str(RESULTS),
        resources=str(RESOURCES),
    log:
        str(RESULTS / "logs" / "audit.log"),
    localrule: True
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../../scripts/audit.py"
