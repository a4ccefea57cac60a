"""One task's temperature-labelled response sets out of Tevet & Berant's release (.jsonl)."""

from _contract import Input, Output
from _job import log, run

from diversity_core.data import text_tasks


def main(archive: Input, data: Output, task: str, members: dict):
    """Find TASK's CSV in ARCHIVE (or take MEMBERS[TASK]) and write its sets to DATA."""
    member = text_tasks.tevet_berant_members(archive, members)[task]
    records = text_tasks.load_tevet_berant(archive, task, member)
    text_tasks.write_sets(data, records)
    log.info("%s: %d sets from %s", task, len(records), member)
    return {"n_sets": len(records), "source_member": member}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
