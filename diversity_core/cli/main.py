"""Command line: score one embedding file, or compare many sets on one integration limit.

    python -m diversity_core score EMBEDDINGS [--reference REF] [--metrics magarea,vendi,...]
                                   [--metric-space cosine|euclidean] [--json]
    python -m diversity_core compare SET SET ... [--reference REF] [--t-cut T]
                                   [--json | --csv] [--plot FILE] [--report DIR]
    python -m diversity_core audit [RESULTS_DIR] [--json] [--require-chain] [--ro-crate DIR]

Files are ``.npy``, ``.npz`` (one array, or pick one with ``--key``) or ``.csv`` files of shape
(n_points, n_features), read by :func:`diversity_core.files.read_embeddings` (the rules
for CSV headers and index columns are there; ``--header/--no-header`` and ``--index-column``
override them). Every file read is described in the output: points × dimensions, the header or
its absence, the columns kept. Also installed as the ``diversity-core`` console script.

One rule for bad input. A problem with a file or an option (not a regular file, unreadable, not
what its extension says, not 2-D, NaN or inf, complex, mismatched dimensions, unknown metric, a
CSV header that could be data) is one line ``error: ...`` naming the file (and for CSV the line)
or the option, and exit status 2; never a traceback and never a wait (FIFOs and devices are
refused unread). A measure that is undefined for valid input (IsoScore of constant data, a
cosine measure of a zero vector, MagArea of a single distinct point alone, PRDC with k >= the
number of points) is reported as ``undefined`` with the reason, and the other measures are still
computed (exit 0); only when no requested measure can be computed is it an error (exit 2). Every
number printed is finite; ``--json`` writes ``null`` with the reason for an undefined value and
never ``NaN`` or ``Infinity``. Output that the terminal's encoding cannot show (``∫`` under
``PYTHONIOENCODING=ascii``, a file name that is not UTF-8) is transliterated, never an error.

Each subcommand is one parser (``add_*`` / ``_add_*``) and one function (``run_*`` / ``_run_*``)
taking the parsed arguments; :func:`main` dispatches through ``args.run``. The rooms: this
module (the parser and :func:`main`), :mod:`.compare`, :mod:`.score` and :mod:`.audit` (one
command each), and :mod:`.options` (the measures' names, the shared options, their ranges,
reading files).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import os
import sys

from .. import __version__
from .._memory import MemoryNeedError
from . import audit as audit_command
from .compare import add_compare_command
from .options import (
    PROGRAM,
)
from .score import add_score_command

__all__ = ["main"]


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

# What the command line prints, in ASCII, for a terminal that cannot show it (e.g.
# PYTHONIOENCODING=ascii, or LANG=C with a non-UTF-8 stdout).
_ASCII = {"∫": "integral", "‖": "||", "²": "^2", "−": "-", "×": "x", "…": "...", "≥": ">=",
          "≤": "<=", "→": "->", "·": "*", "∘": "o", "—": "-", "–": "-", "’": "'", "ᵀ": "^T",
          "√": "sqrt", "±": "+/-"}


def _transliterate(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    text = err.object[err.start:err.end]
    return "".join(_ASCII.get(c) or c.encode("ascii", "backslashreplace").decode("ascii")
                   for c in text), err.end


codecs.register_error("diversity_core.transliterate", _transliterate)


@contextlib.contextmanager
def _printable_streams():
    """stdout and stderr never fail on a character their encoding lacks (nor on a file name
    that is not UTF-8): it is written in ASCII instead; the streams are restored after."""
    changed = []
    for stream in (sys.stdout, sys.stderr):
        errors = getattr(stream, "errors", None)
        if hasattr(stream, "reconfigure") and errors in ("strict", None):
            with contextlib.suppress(Exception):  # a stream that cannot be reconfigured
                stream.reconfigure(errors="diversity_core.transliterate")
                changed.append((stream, errors or "strict"))
    try:
        yield
    finally:
        for stream, errors in changed:
            with contextlib.suppress(Exception):
                stream.reconfigure(errors=errors)


class _Parser(argparse.ArgumentParser):
    """argparse with the command line's one rule: a bad option is one line ``error: ...`` and
    exit status 2 (argparse's own format prints the whole usage first)."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _add_audit(sub) -> None:
    p = audit_command.add_parser(sub)
    p.set_defaults(run=lambda args, argv: audit_command.run(args))


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROGRAM, description="Magnitude and baseline diversity measures for embeddings.")
    parser.add_argument("--version", action="version", version=f"diversity_core {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_score_command(sub)
    add_compare_command(sub)
    _add_audit(sub)
    return parser


def main(argv=None) -> int:
    """Run one subcommand; return its exit status (0, or 2 for bad input)."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    with _printable_streams():
        try:
            args = _build_parser().parse_args(argv)
        except SystemExit as exit_:  # --help, --version, or a bad option (said in one line)
            return exit_.code
        try:
            return args.run(args, argv)
        except ValueError as err:  # InputError and the measures' own input checks
            print(f"error: {err}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # before OSError, of which it is one
            # The reader of stdout went away (| head): nothing more to say, and Python's own
            # flush at exit must not fail again.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except OSError as err:  # a file that cannot be read or written: the user's to fix
            where = f" ({err.filename})" if getattr(err, "filename", None) else ""
            print(f"error: {err.strerror or err}{where}.", file=sys.stderr)
            return 2
        except RecursionError:
            print("error: the input is nested too deeply to read.", file=sys.stderr)
            return 2
        except MemoryNeedError as err:  # a memory rule's refusal: its figures, and our remedy
            print(f"error: {str(err).rstrip('.')}: use --subsample N to measure a random subset "
                  "of N points of each set.", file=sys.stderr)
            return 2
        except MemoryError:
            print("error: not enough memory for these sets; use --subsample N to measure a "
                  "random subset of N points of each.", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("error: interrupted.", file=sys.stderr)
            return 130
