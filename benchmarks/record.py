"""One writer for the benchmarks' result files, ``benchmarks/results/<name>.md``.

A benchmark script that takes ``--record NAME`` (see :func:`add_record_options`) runs its report
inside :func:`recording`: what it prints still goes to the terminal, and also into the file,
under a header that says what ran, when and where: the command, the date (UTC), the machine (CPU
model, the instruction sets that matter to NumPy's kernels, cores and those this process may
use), the versions, the load average before and after, and the user's ``--note`` (say there
whether the machine was shared). The documentation's Performance page includes these files;
figures are never typed into it by hand. A script that writes a table instead writes it with
:func:`write_csv`: the same header as ``# key: value`` lines above the CSV's own header.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import io
import os
import platform
import shlex
import sys
from pathlib import Path

from diversity_core.device import cpu_features

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
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
                break
    features = cpu_features() or set()
    flags = [f for f in _FLAGS if f in features]
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    import numpy

    return {"cpu": model, "flags": ", ".join(flags) or "none of " + ", ".join(_FLAGS),
            "cores": os.cpu_count(), "usable_cores": usable,
            "system": f"{platform.system()} {platform.machine()}",
            "versions": f"Python {platform.python_version()}, NumPy {numpy.__version__}"}


def load_average() -> str:
    """The load average over 1, 5 and 15 minutes, ``"1.0 / 1.2 / 0.9"``."""
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


def command_line() -> str:
    """The command that runs this process, as typed from the repository root: ``nice -n K``
    where the process runs at niceness K > 0, the interpreter and script relative to the
    current folder where they lie under it, then the arguments."""
    def shown(path: str) -> str:
        absolute = Path(path).absolute()
        return str(absolute.relative_to(Path.cwd())) if absolute.is_relative_to(Path.cwd()) \
            else path

    niceness = os.nice(0) if hasattr(os, "nice") else 0
    words = [shown(sys.executable), shown(sys.argv[0]), *sys.argv[1:]]
    return (f"nice -n {niceness} " if niceness > 0 else "") + shlex.join(words)


def header(*, command: str, note: str = "", load: tuple[str, str] = ("?", "?"),
           extra: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, str]]:
    """The facts a result file starts with, as (key, value): command, date (UTC), machine,
    versions, ``extra`` (a script's own, e.g. BLAS threads), load average, note."""
    m = machine()
    return [("command", command),
            ("date", f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"),
            ("machine", f"{m['cpu']} ({m['flags']}); {m['cores']} cores, {m['usable_cores']} "
                        f"usable; {m['system']}"),
            ("versions", m["versions"]),
            *extra,
            ("load average (1/5/15 min) before → after", f"{load[0]} → {load[1]}"),
            ("note", note or "none")]


def write_aside(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: to a file beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_result(name: str, body: str, *, command: str, note: str = "",
                 load: tuple[str, str] = ("?", "?")) -> Path:
    """Write ``benchmarks/results/<name>.md``: the header, then ``body`` (Markdown)."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"--record {name!r}: a plain file name (no folder), e.g. compare_20x1000")
    facts = header(command=command, note=note, load=load)
    lines = ["<!-- Written by the command below (benchmarks/record.py); do not edit by hand. -->",
             ""]
    lines += [f"- {key}: `{value}`" if key == "command" else f"- {key}: {value}"
              for key, value in facts if not (key == "note" and not note)]
    path = RESULTS / f"{name}.md"
    write_aside(path, "\n".join(lines) + "\n\n" + body.strip() + "\n")
    return path


def write_csv(path: Path, columns: list[str], rows: list[dict], *, command: str,
              note: str = "", load: tuple[str, str] = ("?", "?"),
              extra: tuple[tuple[str, str], ...] = ()) -> Path:
    """Write a table to ``path``: the :func:`header` as ``# key: value`` lines (readers skip
    them with ``comment="#"``), then the CSV, one row per dict (keys ``columns``; a missing
    key an empty cell). Always the same number of ``#`` lines for the same ``extra`` keys."""
    buffer = io.StringIO()
    for key, value in header(command=command, note=note, load=load, extra=extra):
        buffer.write(f"# {key}: {value}\n".replace("\t", " "))
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_aside(Path(path), buffer.getvalue())
    return Path(path)


@contextlib.contextmanager
def recording(name: str | None, note: str = ""):
    """Print as usual; with a ``name``, also write what was printed to the record file."""
    if not name:
        yield
        return
    buffer, before = io.StringIO(), load_average()
    with contextlib.redirect_stdout(_Tee(sys.stdout, buffer)):
        yield
    path = write_result(name, buffer.getvalue(), command=command_line(), note=note,
                        load=(before, load_average()))
    print(f"recorded: {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}",
          file=sys.stderr)
