"""One writer for the benchmarks' result files, ``benchmarks/results/<name>.md``.

A benchmark script that takes ``--record NAME`` (see :func:`add_record_options`) runs its report
inside :func:`recording`: what it prints still goes to the terminal, and also into the file,
under a header that says what ran, when and where: the command, the date (UTC), the machine (CPU
model, the instruction sets that matter to NumPy's kernels, cores and those this process may
use), the versions, the load average before and after, and the user's ``--note`` (say there
whether the machine was shared). The documentation's Performance page includes these files;
figures are never typed into it by hand.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import platform
import shlex
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
_FLAGS = ("avx2", "fma", "avx512f", "avx512dq", "avx512vl")


def add_record_options(parser) -> None:
    parser.add_argument("--record", metavar="NAME",
                        help="also write the report to benchmarks/results/NAME.md, with the "
                             "machine, command and date")
    parser.add_argument("--note", default="",
                        help="a line for the record's header (e.g. whether the machine was shared)")


def machine() -> dict:
    """The CPU model, its vector instruction sets, cores, and the versions that matter."""
    model, flags = platform.processor() or platform.machine(), []
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = [f for f in _FLAGS if f in value.split()]
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    import numpy

    return {"cpu": model, "flags": ", ".join(flags) or "none of " + ", ".join(_FLAGS),
            "cores": os.cpu_count(), "usable_cores": usable,
            "system": f"{platform.system()} {platform.machine()}",
            "versions": f"Python {platform.python_version()}, NumPy {numpy.__version__}"}


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


def write_result(name: str, body: str, *, command: str, note: str = "",
                 load: tuple[str, str] = ("?", "?")) -> Path:
    """Write ``benchmarks/results/<name>.md``: the header, then ``body`` (Markdown)."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"--record {name!r}: a plain file name (no folder), e.g. compare_20x1000")
    m = machine()
    header = [
        "<!-- Written by the command below (benchmarks/record.py); do not edit by hand. -->",
        "",
        f"- command: `{command}`",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {m['cpu']} ({m['flags']}); {m['cores']} cores, {m['usable_cores']} usable; "
        f"{m['system']}; {m['versions']}",
        f"- load average (1/5/15 min) before → after: {load[0]} → {load[1]}",
    ]
    if note:
        header.append(f"- note: {note}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text("\n".join(header) + "\n\n" + body.strip() + "\n", encoding="utf-8")
    os.replace(partial, path)
    return path


@contextlib.contextmanager
def recording(name: str | None, note: str = ""):
    """Print as usual; with a ``name``, also write what was printed to the record file."""
    if not name:
        yield
        return
    buffer, before = io.StringIO(), _load()
    with contextlib.redirect_stdout(_Tee(sys.stdout, buffer)):
        yield
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    path = write_result(name, buffer.getvalue(), command=command, note=note,
                        load=(before, _load()))
    print(f"recorded: {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}",
          file=sys.stderr)
