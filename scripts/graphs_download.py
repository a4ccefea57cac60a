"""Download the paper's real graph datasets: TU DD ("Proteins") or Citeseer ("Ego").

Neither can be had offline; the default configuration uses MUTAG and Cuneiform instead. The
download is written under a temporary name and renamed only when complete and checksum-verified; a
configured ``sha256: null`` logs and prints the checksum of what arrived (pin it in config.yaml).
"""

from pathlib import Path

from _helpers import Outputs, log, run

from diversity_core.data.graphs import fetch_citeseer_graph, fetch_dd


def main(files: Outputs, source: str, url: str, sha256: str | None):
    """Fetch ``source`` ("proteins" or "ego") from ``url``; FILES are the files it must produce
    (proteins: <folder>/DD/DD_*.txt; ego: <folder>/ind.citeseer.graph)."""
    first = Path(files[0])
    folder = first.parent.parent if source == "proteins" else first.parent
    if source == "proteins":
        out = fetch_dd(folder, url=url, sha256=sha256)
    elif source == "ego":
        out = fetch_citeseer_graph(folder, url=url, sha256=sha256)
    else:
        raise ValueError(f"unknown graph download {source!r}; choose proteins or ego.")
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise RuntimeError(f"download of {source} did not produce {missing}")
    log.info("%s ready in %s", source, out)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
