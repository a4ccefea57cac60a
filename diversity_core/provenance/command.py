"""``python -m diversity_core audit [RESULTS_DIR]``: the command line of :mod:`.audit` (and of
the RO-Crate export, :mod:`.crate`). ``diversity_core/cli.py`` registers it as a subcommand."""

from __future__ import annotations

import argparse
import json
import os
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "audit", help="check every result against its provenance record and its chain",
        description="Re-hash every file of the results folder and every input its records "
                    "name; follow each final result's chain back through the interim files to "
                    "the pinned assets. Each file is ok, changed (its bytes differ from its "
                    "record), missing (a record without its file), stale (an input changed "
                    "after it was made) or unrecorded (no record).",
        epilog="Exit status: 0 when nothing was found, 1 on any finding, 2 when the folder "
               "cannot be audited. Inputs that are not on disk (a fresh clone holds no "
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
                   help="also write the run as a Workflow Run RO-Crate in DIR (a new folder): "
                        "copies of the recorded files and records, each job a CreateAction, "
                        "every file with its SHA-256")
    p.add_argument("--workers", type=int, default=2,
                   help="threads that hash files (default: 2)")
    return p


def run(args) -> int:
    from .audit import audit

    try:
        report = audit(args.results_dir, args.resources, args.workdir,
                       require_chain=args.require_chain, workers=max(1, args.workers))
    except (FileNotFoundError, NotADirectoryError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.ro_crate:
        from .crate import write_crate

        crate = write_crate(report, args.ro_crate)
        print(f"wrote the Workflow Run RO-Crate {crate}", file=sys.stderr)
    _emit(json.dumps(report.to_json(), indent=2) if args.json else
          report.to_text(show_ok=args.all))
    return 1 if report.findings else 0


def _emit(text: str) -> None:
    """Print, quietly stopping when the reader went away (``audit | head``)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
