"""How the RO-Crate export scales with the number of recorded files, against the audit's own time.

    .venv/bin/python benchmarks/bench_crate.py [--files 2500 5000 10000] [--repeat 1]

For each size N, builds in a temporary folder a results tree of N tiny recorded files (one
interim file, and N - 1 jobs each reading it and writing one file of 7 bytes: one record and
one job per file, the crate's worst case), each with the record the real writer
(``write_records``) writes. Then it times ``audit`` (two hashing threads, as the command
does) and ``write_crate`` of that audit's report, and prints both with their ratio (crate /
audit). The target is a
ratio of at most 3 at 10,000 files; docs/auditing.md records the numbers. The load average is
printed beside the times: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from diversity_core.provenance import Hasher, Roots, audit, write_records
from diversity_core.provenance.crate import write_crate


def build(root: Path, n_files: int) -> None:
    """``n_files`` recorded files: one interim file, and ``n_files - 1`` jobs that each read
    it and write one tiny file (one record and one job each: the crate's worst case)."""
    results, resources = root / "results", root / "resources"
    roots = Roots.of(results, resources, root)
    script = root / "scripts" / "job.py"
    script.parent.mkdir(parents=True)
    script.write_text("print('job')\n")
    (root / "Snakefile").write_text("rule all:\n    input: []\n")
    hasher = Hasher()
    source = results / "exp0" / "interim" / "source.csv"
    source.parent.mkdir(parents=True)
    source.write_text("source\n")
    write_records({"source": [source]}, {}, roots=roots, hasher=hasher, rule="source",
                  script=script)
    for job in range(n_files - 1):
        path = results / f"exp{job % 20}" / f"part{job:05d}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"{job:06d}\n".encode())
        write_records({"part": [path]}, {"source": [source]}, roots=roots, hasher=hasher,
                      rule=f"job{job % 7}", script=script, params={"job": job})


def measure(n_files: int, repeat: int) -> tuple[float, float]:
    audit_s, crate_s = [], []
    with tempfile.TemporaryDirectory(prefix="bench_crate.") as tmp:
        root = Path(tmp)
        build(root, n_files)
        for attempt in range(repeat):
            start = time.perf_counter()
            report = audit(root / "results", root / "resources", root, workers=2)
            audit_s.append(time.perf_counter() - start)
            assert not report.findings, report.to_text()[:2000]
            dest = root / f"crate{attempt}"
            start = time.perf_counter()
            write_crate(report, dest)
            crate_s.append(time.perf_counter() - start)
            shutil.rmtree(dest)
    return min(audit_s), min(crate_s)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[2500, 5000, 10000])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"{'files':>7} {'audit s':>9} {'crate s':>9} {'crate/audit':>12}  load")
    for n in args.files:
        audit_s, crate_s = measure(n, args.repeat)
        load = os.getloadavg()[0]
        print(f"{n:>7} {audit_s:>9.2f} {crate_s:>9.2f} {crate_s / audit_s:>12.2f}  {load:.1f}",
              flush=True)


if __name__ == "__main__":
    main()
