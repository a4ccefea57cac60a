"""`snakemake audit`: the results folder against its provenance records (docs/auditing.md).

The same check as ``python -m diversity_core audit RESULTS --resources RESOURCES``: the report
goes to the terminal and to the rule's log, and the job fails on any finding."""

from _job import log, run

from diversity_core.provenance.audit import audit


def main(results: str, resources: str):
    """Audit RESULTS (the results folder), with the assets in RESOURCES."""
    try:
        report = audit(results, resources, ".")
    except (OSError, ValueError) as err:  # not a results folder, say: one line, not findings
        log.error("%s", err)
        raise SystemExit(2) from None
    text = report.to_text()
    print(text, flush=True)
    log.info("audit report:\n%s", text)
    if report.findings:
        log.error("%d finding(s) in %s (python -m diversity_core audit --json for machines)",
                  len(report.findings), results)
        raise SystemExit(1)  # the job fails, without a traceback: the report says why


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
