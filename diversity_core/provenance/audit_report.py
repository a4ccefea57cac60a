"""What an audit found (:func:`.audit.audit`): one status per file, each final result's chain,
and the report as text (one line per item) or JSON.

The statuses, in the order a file shows them when several apply (its reasons list them all):
``missing``, ``changed``, ``stale``, ``unrecorded``, else ``ok``; :mod:`.audit` says what each
means.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .paths import printable
from .records import Roots

STATUSES = ("ok", "changed", "missing", "stale", "unrecorded")


@dataclass
class FileReport:
    """What the audit found about one file."""

    root: str | None
    path: str
    status: str = "ok"
    reasons: list[str] = field(default_factory=list)
    rule: str | None = None

    def add(self, status: str, reason: str) -> None:
        self.reasons.append(reason)
        if _RANK[status] < _RANK[self.status]:
            self.status = status


# Which status a file shows when several apply (its reasons list them all).
_RANK = {"missing": 0, "changed": 1, "stale": 2, "unrecorded": 3, "ok": 4}


class KeySet:
    """Files of the audit as a bit mask over their numbered keys (``keys[i]`` is bit ``i``):
    what a chain reaches, kept in a bit per file instead of a list per final result. Sized,
    iterable (in the keys' order) and tested for membership like the list it stands for."""

    def __init__(self, mask: int, keys: list[tuple], index: dict[tuple, int] | None = None):
        self.mask, self.keys, self.index = mask, keys, index

    def __len__(self) -> int:
        return self.mask.bit_count()

    def __bool__(self) -> bool:
        return self.mask != 0

    def __iter__(self):
        mask = self.mask
        while mask:
            low = mask & -mask
            yield self.keys[low.bit_length() - 1]
            mask ^= low

    def __contains__(self, key) -> bool:
        index = self.index if self.index is not None else {k: i for i, k in
                                                           enumerate(self.keys)}
        i = index.get(key)
        return i is not None and bool(self.mask >> i & 1)


@dataclass
class ChainReport:
    """A final result and every file it was made from, as far as the records reach."""

    root: str | None
    path: str
    members: list[tuple] | KeySet = field(default_factory=list)
    not_on_disk: list[tuple] = field(default_factory=list)
    pinned_assets: list[tuple] = field(default_factory=list)
    unpinned_assets: list[tuple] = field(default_factory=list)
    findings: list[tuple] = field(default_factory=list)


@dataclass
class AuditReport:
    roots: Roots
    files: dict[tuple, FileReport]
    chains: dict[tuple, ChainReport]
    not_on_disk: dict[tuple, list[tuple]]
    require_chain: bool
    code_changed: dict[tuple, tuple] = field(default_factory=dict)
    hashed_bytes: int = 0
    hashed_files: int = 0
    # What the audit did not read, and why (not findings): links to folders in the results
    # tree, FIFOs or devices inside a folder input.
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[FileReport]:
        return [f for f in self.files.values() if f.status != "ok"]

    def counts(self) -> dict[str, int]:
        counted = Counter(f.status for f in self.files.values())
        return {status: counted.get(status, 0) for status in STATUSES}

    def display(self, key) -> str:
        """A path as the user would type it (relative to the current folder where it can)."""
        return display_key(self.roots, key)

    def to_json(self) -> dict:
        shown = self.display
        return {
            "results_dir": shown_path(self.roots.results),
            "resources_dir": shown_path(self.roots.resources),
            "workdir": shown_path(self.roots.workdir),
            "require_chain": self.require_chain,
            "counts": self.counts(),
            "findings": len(self.findings),
            "hashed": {"files": self.hashed_files, "bytes": self.hashed_bytes},
            "files": [{"path": shown(key), "root": f.root,
                       "relative_path": printable(f.path),
                       "status": f.status, "reasons": f.reasons, "rule": f.rule}
                      for key, f in sorted(self.files.items(), key=_order)],
            "chains": [{"result": shown(key),
                        "status": _chain_status(chain),
                        "files": len(chain.members),
                        "findings": [shown(k) for k in chain.findings],
                        "not_on_disk": [shown(k) for k in chain.not_on_disk],
                        "pinned_assets": [shown(k) for k in chain.pinned_assets],
                        "unpinned_assets": [shown(k) for k in chain.unpinned_assets]}
                       for key, chain in sorted(self.chains.items(), key=_order)],
            "not_on_disk": [{"path": shown(key), "named_by": [shown(k) for k in by]}
                            for key, by in sorted(self.not_on_disk.items(), key=_order)],
            "made_by_earlier_script": [{"path": shown(key), "script": shown(script)}
                                       for key, script in sorted(self.code_changed.items(),
                                                                 key=_order)],
            "notes": list(self.notes),
        }

    def to_text(self, show_ok: bool = False) -> str:
        counts = self.counts()
        lines = [f"audit of {shown_path(self.roots.results)}/ (assets: "
                 f"{shown_path(self.roots.resources)}/): {len(self.files)} files, "
                 + ", ".join(f"{counts[s]} {s}" for s in STATUSES)]
        for key, report in sorted(self.files.items(), key=_order):
            if report.status == "ok" and not show_ok:
                continue
            lines.append(f"{report.status:<10} {self.display(key)}")
            lines += [f"{'':<10}   {reason}" for reason in report.reasons]
        if self.chains:
            lines.append("")
            lines.append("final results and their chains:")
        for key, chain in sorted(self.chains.items(), key=_order):
            status = _chain_status(chain)
            detail = [f"{len(chain.members)} file(s) upstream"]
            if chain.pinned_assets or chain.unpinned_assets:
                detail.append(f"{len(chain.pinned_assets)} pinned asset(s)"
                              + (f", {len(chain.unpinned_assets)} unpinned"
                                 if chain.unpinned_assets else ""))
            if chain.not_on_disk:
                detail.append(f"{len(chain.not_on_disk)} not on disk")
            lines.append(f"{status:<10} {self.display(key)}: {'; '.join(detail)}")
            # The causes upstream; the stale files between them and the result are listed
            # above (and in --json).
            causes = [k for k in chain.findings if k != key and self.files[k].status != "stale"]
            if causes:
                lines.append(f"{'':<10}   made from: " + ", ".join(
                    f"{self.display(k)} ({self.files[k].status})" for k in causes))
        if self.not_on_disk:
            lines.append("")
            first = sorted(self.not_on_disk, key=_order)[:3]
            lines.append(
                f"{len(self.not_on_disk)} input(s) named by the records are not on disk (e.g. "
                + ", ".join(self.display(k) for k in first) + "): the chain beyond the files "
                "above cannot be checked here. A fresh clone holds only the committed results; "
                "`snakemake` makes interim/ and resources/ again. "
                + ("They count as missing (--require-chain)." if self.require_chain else
                   "Not a finding; --require-chain makes it one."))
        if self.code_changed:
            lines.append("")
            scripts = sorted({self.display(s) for s in self.code_changed.values()})
            more = " ..." if len(scripts) > 4 else ""
            lines.append(f"{len(self.code_changed)} file(s) were made by an earlier version of "
                         f"their script or measure plugin ({', '.join(scripts[:4])}{more}): "
                         "not a finding "
                         "(`git diff <the record's commit> -- <script>` shows "
                         "what changed; rerun the rule to bring them up to date).")
        if self.notes:
            lines.append("")
            lines.append("notes (not findings):")
            lines += [f"  {note}" for note in self.notes]
        findings = len(self.findings)
        lines.append("")
        lines.append(f"{findings} finding(s)." if findings else "no findings: every file on disk "
                     "matches its record and every recorded input on disk matches its digest.")
        # One line per item whatever a name or a reason holds: a newline or an escape sequence
        # in a file's name is shown escaped, never as a line of its own.
        return "\n".join(printable(line) for line in lines)


def display_key(roots: Roots, key) -> str:
    """A file's ``(root, path)`` key as the user would type it: under its root as shown by
    :func:`shown_path`, escaped (:func:`.paths.printable`)."""
    root, path = key
    path = printable(path)
    if root is None:
        return path
    base = shown_path(roots.named()[root])
    return f"{base}/{path}" if base != "." else path


def shown_path(path: Path) -> str:
    """``path`` relative to the current folder where it lies below it, else as given;
    escaped."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return printable(str(path))
    return printable(str(path) if relative.startswith("..") else relative)


def _order(item):
    key = item[0]
    return (key[0] or "", key[1])


def _chain_status(chain: ChainReport) -> str:
    if chain.findings:
        return "affected"
    return "partial" if chain.not_on_disk else "ok"
