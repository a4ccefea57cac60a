"""Download Tevet & Berant's data release (the paper's text data), checksummed."""

from _contract import Output
from _job import log, run

from diversity_core.data import text_tasks


def main(archive: Output, url: str, sha256: str | None):
    """Download URL to ARCHIVE, verified against SHA256 (None: logged, to be pinned)."""
    text_tasks.fetch_tevet_berant(url, archive, sha256=sha256)
    log.info("downloaded %s", archive)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
