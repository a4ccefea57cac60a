"""``python -m diversity_core audit [RESULTS_DIR]``: the command line of :mod:`.audit` (and of
the RO-Crate export, :mod:`.crate`). ``diversity_core/cli.py`` registers it as a subcommand.

Exit status: 0 when nothing was found, 1 on an audit finding and for nothing else, 2 for a usage
or input error (said in one line ``error: ...`` on stderr, before any file is read where it
can be: ``--workers`` out of 1..32, ``--ro-crate`` onto a file, a link, a non-empty folder or a
place that cannot be written, a results folder that is not one), and when the crate cannot be
written whole (a full disk): then no crate is made.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..provenance.digests import MAX_WORKERS


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "audit", help="check every result against its provenance record and its chain",
        description="Re-hash every file of the results folder and every input its records "
                    "name; follow each final result's chain back through the interim files to "
                    "the pinned assets. Each file is ok, changed (its bytes differ from its "
                    "record), missing (a record without its file), stale (an input changed "
                    "after it was made) or unrecorded (no record).",
        epilog="Exit status: 0 when nothing was found, 1 on any finding (and only then), 2 "
               "for a usage or input error (the folder cannot be audited, a bad option). "
               "Inputs that are not on disk (a fresh clone holds no "
               "interim/ nor resources/) are reported, and count as missing only with "
               "--require-chain. docs/auditing.md walks through an example.")
    p.add_argument("results_dir", nargs="?", default="results",
                   help="the results folder (default: results)")
    p.add_argument("--resources", metavar="DIR",
                   help="where the assets lie (default: resources beside RESULTS_DIR)")
    p.add_argument("--workdir", metavar="DIR", default=".",
                   help="the workflow's working directory, for inputs from the repository "
                        "such as workflow/paper_claims.yaml (default: .)")
    p.add_argument("--require-chain", action="store_true",
                   help="an input named by a record but not on disk is a finding (missing)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--all", action="store_true", help="list the files that are ok as well")
    p.add_argument("--ro-crate", metavar="DIR",
                   help="also write the run as a Workflow Run RO-Crate in DIR (a new or empty "
                        "folder): copies of the recorded files and records, each job a "
                        "CreateAction, every file with the SHA-256 of its copy")
    p.add_argument("--workers", type=_workers, default=2, metavar="N",
                   help=f"threads that hash files, 1 to {MAX_WORKERS} (default: 2)")
    return p


def _workers(text: str) -> int:
    """``--workers``: an integer from 1 to MAX_WORKERS (checked before any work)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 1 <= value <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to {MAX_WORKERS}; got "
                                         f"{text!r}")
    return value


def run(args) -> int:
    """Run the audit of parsed ``args``; return the exit status (0, 1 on findings, 2 for an
    error, said in one line)."""
    from ..provenance.audit import audit
    from ..provenance.crate import check_destination, write_crate

    try:
        if args.ro_crate:
            # before the audit: a wrong DIR (inside the audited folder too) costs nothing
            check_destination(args.ro_crate, args.results_dir)
        report = audit(args.results_dir, args.resources, args.workdir,
                       require_chain=args.require_chain, workers=args.workers)
        if args.ro_crate:
            crate = write_crate(report, args.ro_crate)
            for note in crate.notes:
                print(f"note: {note}", file=sys.stderr)
            print(f"wrote the Workflow Run RO-Crate {crate.path}", file=sys.stderr)
    except (OSError, ValueError) as err:
        # A usage or input error, never a finding: exit 2 (1 would read as "findings").
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return 2
    _emit(json.dumps(report.to_json(), indent=2) if args.json else
          report.to_text(show_ok=args.all))
    return 1 if report.findings else 0


def _one_line(err: Exception) -> str:
    """An error as one line: our messages are; an unexpected ``OSError`` gets its path."""
    if isinstance(err, OSError) and err.strerror and err.filename and \
            str(err.filename) not in str(err.args[-1] if err.args else ""):
        text = f"{err.filename}: {err.strerror}"
    else:
        text = str(err) or type(err).__name__
    return " ".join(text.split())


def _emit(text: str) -> None:
    """Print, quietly stopping when the reader went away (``audit | head``)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
