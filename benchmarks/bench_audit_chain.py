"""How the audit scales with the length of a chain of records, each result the input of the next.

    .venv/bin/python benchmarks/bench_audit_chain.py [--links 1000 5000] [--workers 2]

For each length N, builds in a temporary folder a results tree of N tiny recorded files
``results/chain/r00000.txt`` ... where each file's record names the one before it as its input
(the first reads a pinned asset), each record written by the real writer (``write_records``),
and none under ``interim/``: every file is a final result whose chain reaches back through all
the files before it, the audit's worst case for following chains. Then it times ``audit``
(``--workers`` hashing threads, as the command does) and prints the time per N with the load
average beside it: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from diversity_core.provenance import Hasher, Roots, audit, write_records
from diversity_core.provenance.digests import file_sha256


def build(root: Path, n_links: int) -> None:
    """A chain of ``n_links`` recorded files under ``root/results/chain`` (see the module)."""
    results, resources = root / "results", root / "resources"
    roots = Roots.of(results, resources, root)
    script = root / "scripts" / "job.py"
    script.parent.mkdir(parents=True)
    script.write_text("print('job')\n")
    asset = resources / "seed" / "seed.txt"
    asset.parent.mkdir(parents=True)
    asset.write_text("seed\n")
    (asset.parent / ".pins.json").write_text(json.dumps({
        "asset": "seed", "config_key": "assets.seed", "source": "test:local",
        "files": {"seed.txt": {"sha256": file_sha256(asset), "pinned": True}}}))
    folder = results / "chain"
    folder.mkdir(parents=True)
    hasher, previous = Hasher(), asset
    for i in range(n_links):
        made = folder / f"r{i:05d}.txt"
        made.write_text(f"link {i}\n")
        write_records({"out": [made]}, {"previous": [previous]}, roots=roots, hasher=hasher,
                      rule="link", script=script)
        previous = made


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    for n_links in args.links:
        with tempfile.TemporaryDirectory(prefix="bench_audit_chain.") as tmp:
            root = Path(tmp)
            started = time.perf_counter()
            build(root, n_links)
            built = time.perf_counter() - started
            started = time.perf_counter()
            report = audit(root / "results", root / "resources", root, workers=args.workers)
            took = time.perf_counter() - started
            counts = report.counts()
            print(f"{n_links:>6} linked records: audit {took:7.2f} s ({counts['ok']} ok, "
                  f"{len(report.findings)} findings; built in {built:.1f} s; load average "
                  f"{os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
