"""Fetch a graph dataset that is not generated or shipped with grakel: TU DD ("Proteins") or
Citeseer ("Ego") over HTTPS (the paper configuration), or ZINC's molecules out of the molsets
wheel (the default configuration).

Every file is verified against its pin before it is renamed into place (a configured ``sha256:
null`` for a download logs and prints the checksum of what arrived: pin it in config.yaml), and
its folder gets its ``.pins.json``.
"""

from pathlib import Path

from _contract import Outputs
from _job import log, run

from diversity_core.data.graphs import fetch_graph_asset


def main(files: Outputs, source: str, pins: dict, resources_dir: str):
    """Fetch ``source`` (proteins, ego or zinc) into RESOURCES_DIR as PINS (its configuration
    section, JSON) say; FILES are the files it must produce."""
    folder = fetch_graph_asset(source, resources_dir, pins)
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise RuntimeError(f"the fetch of {source} did not produce {missing}")
    log.info("%s ready in %s", source, folder)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
