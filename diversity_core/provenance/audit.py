"""Audit a results folder against its provenance records: ``python -m diversity_core audit``.

Every file of the results tree (logs, benchmarks and memo caches aside) is re-hashed and checked
against the record beside it, every input a record names is re-hashed and compared with the
digest the record holds, and each final result's chain is followed back through the interim files
(through the records beside them) to the assets under ``resources/`` (checked against their
``.pins.json`` manifests). Each file gets one status:

``ok``
    its bytes are those its record holds, and so are those of every input its record names;
``changed``
    its bytes differ from its own record (an asset: from its pinned digest);
``missing``
    a record names it, but it is not on disk: a record without its file; with
    ``require_chain``, also any input of the chain that is not on disk;
``stale``
    an input changed after the file was made: the input's digest now differs from the one the
    file's record holds;
``unrecorded``
    it lies in the results tree without a record (or with one that holds no digests).

A fresh clone holds the committed final results and their records, but not ``interim/`` nor
``resources/``: their inputs are then *not on disk*, which the report says, and which is a
finding only with ``require_chain``.

Every audit ends. It reads only regular files: a FIFO, device or socket (or a link to
one) where a file should be is a finding (its bytes cannot be checked), one inside a folder
input is set aside with a note; a link to a folder inside the results tree is not followed (a
note). Each read is bounded by the file's size (:mod:`.digests`), each walk by
:data:`~.digests.MAX_FOLDER_ENTRIES` entries, the threads by :data:`~.digests.MAX_WORKERS`,
and they end with the audit on Ctrl-C. A folder that holds no provenance record near its top
(``/``, a home folder) is refused before it is walked (``ValueError``). A record that is not
the writer's format, or names a path outside its root, makes its file ``unrecorded`` with the
reason (:func:`.records.read_record`).

No blind spots: a file, input or record that leaves its root through a link (a
folder's or its own) is a finding and is never read; a name that is not valid UTF-8 or holds a
control character is a finding, printed escaped (:func:`.paths.printable`: the text report is
one line per item, whatever a name holds); and every output a record lists, not only the file it
lies beside, must be on disk with its recorded size and digest (an output under ``interim/``
that is not on disk is *not on disk*, as an input, since a fresh clone lacks interim/).
"""

from __future__ import annotations

import os
from pathlib import Path

from .audit_report import (
    AuditReport,
    ChainReport,
    FileReport,
    KeySet,
    display_key,
    shown_path,
)
from .digests import (
    MAX_FOLDER_ENTRIES,
    RECORD_SUFFIX,
    Hasher,
    ManifestError,
    NotRegularFile,
    check_workers,
    file_kind,
    find_manifest,
    listed_files,
    read_manifest,
    walk_bounded,
)
from .paths import leaves, name_problem, printable
from .records import RecordError, Roots, read_record, record_path

# Folders of the results tree that hold no results: rule logs, run times, and memo caches (each
# keyed and checked by the code that reads it).
SKIPPED_FOLDERS = ("logs", "benchmarks")
SKIPPED_SUFFIX = "_cache"
# Entries the walk of the results tree visits before it stops (a full default run: about 400).
MAX_TREE_ENTRIES = MAX_FOLDER_ENTRIES
# Is it a results folder? A provenance record lies beside every file the pipeline writes, the
# final results one or two levels down: one must turn up within these levels and entries.
PROBE_LEVELS = 6
PROBE_ENTRIES = 20_000


class Unreadable(ValueError):
    """A file whose bytes cannot be checked: ``why`` completes "it ..." (is a FIFO, not a
    regular file: not read; cannot be read (Permission denied); grew while it was read)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why



def audit(results_dir, resources_dir=None, workdir=".", *, require_chain: bool = False,
          workers: int = 2) -> AuditReport:
    """Audit ``results_dir`` (see the module). ``resources_dir``: where the records' assets lie
    (default: ``resources`` beside ``results_dir``); ``workdir``: the workflow's working
    directory (the repository) for inputs such as ``workflow/paper_claims.yaml``; ``workers``:
    threads that hash files, 1 to :data:`~.digests.MAX_WORKERS`.

    Raises ``FileNotFoundError`` / ``NotADirectoryError`` when ``results_dir`` is not a folder,
    ``ValueError`` (one line) for ``workers`` out of range or a folder that is not a results
    folder (no provenance record near its top) or too large to be one; all before any file is
    read."""
    check_workers(workers)
    results_dir = Path(results_dir)
    if not results_dir.exists():
        raise FileNotFoundError(f"{results_dir}: no such folder (the results folder to audit).")
    if not results_dir.is_dir():
        raise NotADirectoryError(f"{results_dir} is {file_kind(results_dir)}, not a folder "
                                 "(the results folder to audit).")
    found, looked_at = _holds_records(results_dir)
    if not found:
        raise ValueError(
            f"{results_dir} is not a results folder: no provenance record (*{RECORD_SUFFIX}) "
            f"within {PROBE_LEVELS} levels of it ({looked_at:,} entries looked at); give the "
            "folder the pipeline wrote its results to (results_dir, default results).")
    resources_dir = Path(resources_dir) if resources_dir is not None else (
        results_dir.absolute().parent / "resources")
    roots = Roots.of(results_dir, resources_dir, workdir)
    files, record_files, notes, bad_names = _walk(roots.results)
    report = _Auditor(roots, require_chain, workers).run(files, record_files, bad_names)
    report.notes[:0] = notes
    return report


def _skipped(name: str) -> bool:
    return name in SKIPPED_FOLDERS or name.endswith(SKIPPED_SUFFIX)


def _holds_records(results: Path) -> tuple[bool, int]:
    """(whether a provenance record lies within :data:`PROBE_LEVELS` levels of ``results``,
    entries looked at), looking at most at :data:`PROBE_ENTRIES` entries, level by level (the
    pipeline's records lie one or two levels down): ``/`` or a home folder is refused in a
    fraction of a second instead of walked."""
    level, seen = [results], 0
    for _ in range(PROBE_LEVELS):
        below = []
        for folder in level:
            try:
                with os.scandir(folder) as listing:
                    found = sorted(listing, key=lambda entry: entry.name)
            except OSError:
                continue  # the walk proper says so, if it is the results folder
            for entry in found:
                seen += 1
                if entry.name.endswith(RECORD_SUFFIX):
                    return True, seen
                if seen >= PROBE_ENTRIES:
                    return False, seen
                if not _skipped(entry.name) and entry.is_dir(follow_symlinks=False):
                    below.append(entry.path)
        level = below
    return False, seen


def _walk(results: Path) -> tuple[list[str], list[str], list[str], dict[str, str]]:
    """(files, records, notes, bad names) of the results tree: relative POSIX paths, sorted;
    bad names ``{path: why}`` (not valid UTF-8, a control character: not read, not walked
    into, each a finding); rule logs,
    run times and memo caches left out. A folder with a record beside it (a rule's folder
    output) is one file of the tree, checked as a whole against its record, not walked file by
    file. A link to a folder is not followed (a note); a folder that cannot be listed, or more
    than :data:`MAX_TREE_ENTRIES` entries, is a ``ValueError``: the audit would miss what lies
    there."""
    files, records, notes, bad = [], [], [], {}

    def unlistable(err: OSError):
        raise ValueError(f"cannot list {err.filename} ({err.strerror or err}): the audit "
                         "would miss what it holds.")

    for parent, dirs, names in walk_bounded(
            results, limit=MAX_TREE_ENTRIES, onerror=unlistable,
            refusal="not a results folder the pipeline wrote; not audited."):
        here = Path(parent)
        prefix = here.relative_to(results).as_posix()
        prefix = "" if prefix == "." else prefix + "/"
        refused = set()
        for name in (*dirs, *names):
            problem = name_problem(prefix + name)
            if problem and not _skipped(name):
                bad[prefix + name] = problem
                refused.add(name)
        if refused:
            dirs[:] = [d for d in dirs if d not in refused]
            names = [n for n in names if n not in refused]
        for name in sorted(dirs):
            if not _skipped(name) and os.path.islink(here / name):
                relative = (here / name).relative_to(results).as_posix()
                notes.append(f"{shown_path(here / name)}: a link to a folder "
                             f"({printable(os.readlink(here / name))}), not followed: what it "
                             "holds is "
                             f"not audited (results/{relative} is not where the pipeline "
                             "writes a folder of its own).")
        dirs[:] = sorted(d for d in dirs if not _skipped(d) and not os.path.islink(here / d))
        for name in list(dirs):
            if os.path.lexists(here / (name + RECORD_SUFFIX)):  # a folder output
                files.append((here / name).relative_to(results).as_posix())
                dirs.remove(name)
        for name in names:
            (records if name.endswith(RECORD_SUFFIX) else files).append(prefix + name)
    return sorted(files), sorted(records), notes, dict(sorted(bad.items()))


class _Auditor:
    def __init__(self, roots: Roots, require_chain: bool, workers: int):
        self.roots, self.require_chain, self.workers = roots, require_chain, workers
        self.hasher = Hasher()
        self.records: dict[tuple, dict | str | None] = {}
        self.reports: dict[tuple, FileReport] = {}
        self.not_on_disk: dict[tuple, list[tuple]] = {}
        self.code_changed: dict[tuple, tuple] = {}
        self.notes: list[str] = []
        self._leaving: dict[tuple, str | None] = {}
        self._real_roots: dict[str, str] = {}

    def leaving(self, key, suffix: str = "") -> str | None:
        """``"<link> -> <target>"`` when the file of ``key`` (with ``suffix``: its record)
        leaves its root through a link; None when it stays inside (or has no root)."""
        root, path = key
        if root is None:
            return None
        cache = (root, path + suffix)
        if cache not in self._leaving:
            if root not in self._real_roots:
                self._real_roots[root] = os.path.realpath(self.roots.named()[root])
            self._leaving[cache] = leaves(self.roots.named()[root], path + suffix,
                                          self._real_roots[root])
        return self._leaving[cache]

    # -- records ------------------------------------------------------------------------------
    def record(self, key) -> dict | str | None:
        """The record beside a file: a dict (checked: :func:`.records.read_record`), the
        message saying why it cannot be used (it names the file and the field), or None (none
        there)."""
        if key not in self.records:
            path = record_path(self.roots.path(*key))
            if not os.path.lexists(path):
                self.records[key] = None
            elif self.leaving(key, RECORD_SUFFIX):
                self.records[key] = (f"its record {path.name} leaves {key[0]}/ through a link "
                                     f"({self.leaving(key, RECORD_SUFFIX)}{_kind(path)}): "
                                     "not read")
            else:
                try:
                    self.records[key] = read_record(path)
                except RecordError as err:
                    self.records[key] = str(err)
        return self.records[key]

    def report(self, key) -> FileReport:
        if key not in self.reports:
            self.reports[key] = FileReport(*key)
        return self.reports[key]

    # -- digests ------------------------------------------------------------------------------
    def digest(self, key) -> str | None:
        """The digest of a file or folder now; None when it is not there. Raises
        :class:`Unreadable` when it is there but its bytes cannot be read: it leaves its root
        through a link (not read), not a regular file (nothing opened), no permission,
        growing, too large a folder."""
        measured = self.measure(key)
        return None if measured is None else measured[0]

    def measure(self, key) -> tuple[str, int] | None:
        """(digest, size in bytes) of a file or folder now (:meth:`digest`)."""
        path = self.roots.path(*key)
        link = self.leaving(key)
        if link is not None:
            raise Unreadable(f"leaves {key[0]}/ through a link ({link}{_kind(path)}): not read")
        try:
            if path.is_dir():
                digest, size, _ = self.hasher.folder(path)
                return digest, size
            return self.hasher.file(path)
        except FileNotFoundError:
            if os.path.lexists(path):
                raise Unreadable("is a dangling link, not a regular file: not read") from None
            return None
        except NotRegularFile as err:
            raise Unreadable(f"is {err.kind}, not a regular file: not read") from None
        except OSError as err:
            raise Unreadable(f"cannot be read ({err.strerror or err})") from None
        except ValueError as err:
            raise Unreadable(f"cannot be checked ({err})") from None

    # -- the audit ----------------------------------------------------------------------------
    def run(self, files: list[str], record_files: list[str],
            bad_names: dict[str, str] | None = None) -> AuditReport:
        for path, problem in (bad_names or {}).items():
            self.report(("results", path)).add(
                "unrecorded", f"its name {problem}: not a name the pipeline writes; not read")
        results = [("results", path) for path in files]
        artifacts = [("results", path[: -len(RECORD_SUFFIX)]) for path in record_files]
        # Every record reachable from the results tree, then every file they name: hashed once,
        # in parallel, largest first.
        finals = [key for key in artifacts
                  if isinstance(self.record(key), dict) and "interim" not in Path(key[1]).parts]
        graph = _ChainGraph(self, finals)
        named = set(results) | set(artifacts)
        for record in list(self.records.values()):
            if isinstance(record, dict):
                for entry in _entries(record, "inputs"):
                    named.add((entry.get("root"), entry.get("path")))
        self.hasher.prefetch([self.roots.path(*key) for key in named
                              if key[0] is not None and not self.leaving(key)],
                             workers=self.workers)

        for key in results:
            self.check_file(key)
        for key in artifacts:
            if not self.roots.path(*key).exists():
                record = self.record(key)
                rule = record.get("rule") if isinstance(record, dict) else None
                self.report(key).rule = rule
                self.report(key).add("missing", f"its record {Path(key[1]).name}{RECORD_SUFFIX}"
                                     f" is there (rule {rule}), the file is not")
        for key in artifacts:
            if isinstance(self.record(key), dict):
                self.check_inputs(key)
                self.check_outputs(key)
        # Files outside the results tree that a chain reaches: assets and their records.
        for key in graph.keys:
            if key[0] == "resources" and key not in self.reports and graph.on_disk(key):
                self.check_asset(key)
        for folder, aside in sorted(self.hasher.set_aside.items()):
            shown = ", ".join(f"{name} ({kind})" for name, kind in list(aside.items())[:10])
            more = f" and {len(aside) - 10} more" if len(aside) > 10 else ""
            self.notes.append(f"{shown_path(Path(folder))}: not read, not in its digest: {shown}"
                              f"{more}.")
        if self.require_chain:
            for key, by in self.not_on_disk.items():
                self.report(key).add("missing", "named as input by " + ", ".join(
                    self._display(k) for k in by) + "; not on disk")
        chains = graph.chains(self.reports)
        return AuditReport(self.roots, self.reports, chains, self.not_on_disk,
                           self.require_chain, self.code_changed, self.hasher.bytes,
                           self.hasher.files, self.notes)

    def _display(self, key) -> str:
        return display_key(self.roots, key)

    def check_file(self, key) -> None:
        """A file of the results tree against its own record."""
        report = self.report(key)
        record = self.record(key)
        kind = file_kind(self.roots.path(*key))
        special = "" if kind in ("a regular file", "a folder") else \
            f"; it is {kind}, not a regular file: not read"
        if record is None:
            report.add("unrecorded", "no record beside it" + special)
            return
        if isinstance(record, str):
            report.add("unrecorded", record + special)
            return
        report.rule = record.get("rule")
        self._against_own_record(key, record)
        for what, code in (("script", record["script"]),
                           *(("measure plugin", entry) for entry in record.get("measures", []))):
            source = (code["root"], code["path"])
            if self.roots.path(*source).is_file():
                try:
                    now = self.digest(source)
                except Unreadable as err:
                    self.notes.append(f"{what} {self._display(source)} {err.why}.")
                else:
                    if now != code["sha256"]:
                        self.code_changed.setdefault(key, source)

    def _against_own_record(self, key, record: dict) -> None:
        report = self.report(key)
        own = [e for e in _entries(record, "outputs") if (e.get("root"), e.get("path")) == key]
        if not own:
            report.add("unrecorded", f"its record (rule {record.get('rule')}) names no output "
                       f"{key[1]}")
            return
        try:
            now, size = self.measure(key) or (None, None)
        except Unreadable as err:
            report.add("changed", f"its bytes cannot be checked against its record (rule "
                       f"{record.get('rule')}): it {err.why}")
            return
        if now != own[0].get("sha256"):
            report.add("changed", f"its bytes differ from its record (rule {record.get('rule')}"
                       f"): sha256 {_short(own[0].get('sha256'))} recorded, {_short(now)} now"
                       + _folder_difference(own[0], self.roots.path(*key), self.hasher))
        elif own[0].get("size") is not None and size != own[0]["size"]:
            report.add("changed", f"its size differs from its record (rule "
                       f"{record.get('rule')}): {own[0]['size']:,} bytes recorded, {size:,} "
                       "now (the digest matches: the record was edited)")

    def check_inputs(self, key) -> None:
        """The inputs a file's record names, against the digests it holds."""
        record = self.record(key)
        for entry in _entries(record, "inputs"):
            source = (entry.get("root"), entry.get("path"))
            path = self.roots.path(*source)
            if not path.exists():
                self.not_on_disk.setdefault(source, []).append(key)
                continue
            try:
                now = self.digest(source)
            except Unreadable as err:
                self.report(key).add("stale", f"input {self._display(source)} cannot be "
                                     f"checked against its digest: it {err.why}")
                continue
            if now != entry.get("sha256"):
                self.report(key).add(
                    "stale", f"input {self._display(source)} changed after it was made: "
                    f"sha256 {_short(entry.get('sha256'))} recorded, {_short(now)} now")

    def check_outputs(self, key) -> None:
        """Every other output the record beside ``key`` lists (the rule's other outputs): on
        disk with the size and digest it records, unless the output's own record holds the
        same claim (then its own check says it). An output not on disk is missing; under
        ``interim/`` (a fresh clone has none), or outside the results folder, it is *not on
        disk*, as an input is."""
        record = self.record(key)
        rule = record.get("rule")
        name = f"{Path(key[1]).name}{RECORD_SUFFIX}"
        for label, group in record["outputs"].items():
            for i, entry in enumerate(group):
                other = (entry["root"], entry["path"])
                if other == key:
                    continue
                field = f"outputs.{label}[{i}]"
                own = self.record(other)
                if isinstance(own, dict) and any(
                        (e["root"], e["path"]) == other and e["sha256"] == entry["sha256"]
                        and e.get("size") == entry.get("size")
                        for e in _entries(own, "outputs")):
                    continue  # its own record says the same: checked as a file of its own
                path = self.roots.path(*other)
                if not os.path.lexists(path):
                    if other[0] != "results" or "interim" in Path(other[1]).parts:
                        self.not_on_disk.setdefault(other, []).append(key)
                    else:
                        self.report(other).rule = self.report(other).rule or rule
                        self.report(other).add("missing", f"{name} (rule {rule}) lists it as "
                                               f"output ({field}); it is not on disk")
                    continue
                try:
                    now, size = self.measure(other) or (None, None)
                except Unreadable as err:
                    self.report(other).add("changed", f"{name} (rule {rule}) lists it as output"
                                           f" ({field}); its bytes cannot be checked: it "
                                           f"{err.why}")
                    continue
                if now != entry["sha256"] or (entry.get("size") is not None
                                              and size != entry["size"]):
                    self.report(other).add(
                        "changed", f"its bytes differ from what {name} (rule {rule}) records "
                        f"for it ({field}): sha256 {_short(entry['sha256'])}, "
                        f"{entry.get('size')} bytes recorded; {_short(now)}, {size} bytes now")

    def check_asset(self, key) -> None:
        """An asset under resources/: against its manifest's pins and its fetch's record."""
        report = self.report(key)
        path = self.roots.path(*key)
        if self.leaving(key):
            report.add("changed", f"leaves resources/ through a link ({self.leaving(key)}"
                       f"{_kind(path)}): not read")
            return
        checked = False
        try:
            manifest_path = find_manifest(path, self.roots.resources)
            manifest = read_manifest(manifest_path) if manifest_path else None
        except ManifestError as err:
            report.add("changed", str(err))
            return
        if manifest:
            checked = True
            base = manifest_path.parent
            try:
                members = ([path / name for name in self.hasher.folder_names(path)]
                           if path.is_dir() else [path])
            except ValueError as err:  # a folder too large to walk
                report.add("changed", f"cannot be checked against its pins: {err}")
                members = []
            for member in members:
                name = member.relative_to(base).as_posix()
                pin = manifest["files"].get(name)
                try:
                    now = self.hasher.file(member)[0]
                except (OSError, ValueError) as err:
                    why = (f"is {err.kind}, not a regular file: not read"
                           if isinstance(err, NotRegularFile) else f"cannot be read ({err})")
                    report.add("changed", f"{name} {why}")
                    continue
                if pin is None:
                    report.add("changed", f"{name} is not in {shown_path(manifest_path)}")
                elif now != pin["sha256"].lower():
                    report.add("changed", f"{name} differs from its pinned digest in "
                               f"{shown_path(manifest_path)}")
            if path.is_dir():
                prefix = path.relative_to(base).as_posix()
                for name in manifest["files"]:
                    inside = prefix == "." or name.startswith(prefix + "/")
                    if inside and not (base / name).exists():
                        report.add("changed", f"{name} of {shown_path(manifest_path)} is gone")
        record = self.record(key)
        if isinstance(record, dict):
            checked = True
            report.rule = record.get("rule")
            self._against_own_record(key, record)
            self.check_inputs(key)
        elif isinstance(record, str):
            report.add("unrecorded", record)
            checked = True
        if not checked:
            report.add("unrecorded", "neither a .pins.json manifest nor a record vouches for it")

    def inputs(self, key) -> list[tuple]:
        """The files the record of ``key`` names as inputs, each once, in its order ([] for a
        file without a usable record)."""
        record = self.record(key)
        if not isinstance(record, dict):
            return []
        return list(dict.fromkeys((e.get("root"), e.get("path"))
                                  for e in _entries(record, "inputs")))


class _ChainGraph:
    """Every file the final results were made from, through the records beside them, and each
    final result's chain, in time and memory linear in the records (times a bit per file).

    The files the chains reach are numbered (in the report's order); each file's upstream is
    the bit mask of those numbers, computed once per file from its inputs' masks (strongly
    connected components first, so that records naming each other end too), never by walking
    the chain again for each final result: a chain of records in which each result is the
    input of the next costs one pass, not one walk per result. A file is followed through its
    record when it is on disk and its record is usable; a final result's own record is
    followed even when the file is gone."""

    def __init__(self, auditor: _Auditor, finals: list[tuple]):
        self.auditor, self.finals = auditor, finals
        self._on_disk: dict[tuple, bool] = {}
        found, todo, edges = set(finals), list(finals), {}
        while todo:  # every file reachable: each record read once
            key = todo.pop()
            if key in edges:
                continue
            edges[key] = self.auditor.inputs(key)
            for source in edges[key]:
                found.add(source)
                if source not in edges and self.follows(source):
                    todo.append(source)
        self.keys = sorted(found, key=lambda k: (k[0] or "", k[1]))
        self.index = {key: i for i, key in enumerate(self.keys)}
        self.edges = [[self.index[s] for s in edges[key]] if key in edges and (
            self.follows(key)) else [] for key in self.keys]
        self.forced = {self.index[k]: [self.index[s] for s in edges[k]] for k in finals
                       if not self.follows(k)}  # a final result whose file is gone

    def on_disk(self, key) -> bool:
        if key not in self._on_disk:
            self._on_disk[key] = self.auditor.roots.path(*key).exists()
        return self._on_disk[key]

    def follows(self, key) -> bool:
        """Whether a chain goes on through ``key``'s record."""
        return self.on_disk(key) and isinstance(self.auditor.record(key), dict)

    def upstream(self) -> list[int]:
        """Each file's upstream as a bit mask (Tarjan's components, iteratively: the
        components come out inputs first)."""
        n, edges = len(self.keys), self.edges
        order, low, component = [-1] * n, [0] * n, [-1] * n
        stack, on_stack, masks, counter = [], [False] * n, [0] * n, 0
        for start in range(n):
            if order[start] != -1:
                continue
            work = [(start, 0)]
            while work:
                v, i = work.pop()
                if i == 0:
                    order[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    on_stack[v] = True
                for j in range(i, len(edges[v])):
                    w = edges[v][j]
                    if order[w] == -1:
                        work += [(v, j + 1), (w, 0)]
                        break
                    if on_stack[w]:
                        low[v] = min(low[v], order[w])
                else:
                    if low[v] == order[v]:  # v roots a component: its mask, shared
                        members = []
                        while True:
                            w = stack.pop()
                            on_stack[w] = False
                            component[w] = v
                            members.append(w)
                            if w == v:
                                break
                        mask = 0
                        for u in members:
                            for w in edges[u]:
                                mask |= 1 << w
                                if component[w] != v:
                                    mask |= masks[w]
                        for u in members:
                            masks[u] = mask
                    if work:
                        parent = work[-1][0]
                        low[parent] = min(low[parent], low[v])
        return masks

    def chains(self, reports: dict) -> dict[tuple, ChainReport]:
        """Each final result's :class:`ChainReport`, its findings from ``reports``."""
        masks, keys = self.upstream(), self.keys
        for i, sources in self.forced.items():
            masks[i] = 0
            for w in sources:
                masks[i] |= (1 << w) | masks[w]

        def mask_of(test) -> int:  # bit i set where test(keys[i]), in one pass
            return int("0" + "".join("1" if test(key) else "0" for key in reversed(keys)), 2)

        pinned = self.pinned()
        absent = mask_of(lambda k: not self.on_disk(k))
        assets = mask_of(lambda k: k[0] == "resources" and self.on_disk(k))
        found = mask_of(lambda k: k in reports and reports[k].status != "ok")
        held = mask_of(pinned.__contains__)
        chains = {}
        for key in self.finals:
            i = self.index[key]
            upstream = masks[i] & ~(1 << i)
            chain = ChainReport(*key)
            chain.members = KeySet(upstream, keys, self.index)
            chain.not_on_disk = list(KeySet(upstream & absent, keys))
            chain.pinned_assets = list(KeySet(upstream & assets & held, keys))
            chain.unpinned_assets = list(KeySet(upstream & assets & ~held, keys))
            chain.findings = list(KeySet((masks[i] | 1 << i) & found, keys))
            chain.findings.sort(key=lambda k: k != key)  # the result itself first
            chains[key] = chain
        return chains

    def pinned(self) -> set[tuple]:
        """The assets every record naming them calls pinned."""
        said: dict[tuple, bool] = {}
        for key in self.keys:
            record = self.auditor.record(key) if self.follows(key) or key in self.finals \
                else None
            if isinstance(record, dict):
                for entry in _entries(record, "inputs"):
                    source = (entry.get("root"), entry.get("path"))
                    said[source] = said.get(source, True) and bool(entry.get("pinned"))
        return {key for key, pinned in said.items() if pinned}


def _entries(record: dict, group: str) -> list[dict]:
    """The entries of a checked record's ``inputs`` or ``outputs`` (:func:`.read_record`)."""
    return [entry for entries in record[group].values() for entry in entries]


def _folder_files(path: Path) -> list[str]:
    return listed_files(path)


def _folder_difference(entry: dict, path: Path, hasher: Hasher) -> str:
    """Which files of a folder output differ from its record."""
    if entry.get("kind") != "directory" or not path.is_dir():
        return ""
    recorded = entry.get("files") or {}
    try:
        now = {name: hasher.file(path / name)[0] for name in _folder_files(path)}
    except (OSError, ValueError):  # said by its digest's own check
        return ""
    changed = sorted(n for n in recorded.keys() & now.keys() if recorded[n] != now[n])
    gone = sorted(recorded.keys() - now.keys())
    new = sorted(now.keys() - recorded.keys())
    parts = [f"{label} {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
             for label, names in (("changed:", changed), ("gone:", gone), ("new:", new))
             if names]
    return " (" + "; ".join(parts) + ")" if parts else ""


def _kind(path) -> str:
    """``", a link to a FIFO, not a regular file"`` (what a link leads to), or ``""`` for a
    regular file or a folder."""
    kind = file_kind(path)
    return "" if kind in ("a regular file", "a folder") else f", {kind}, not a regular file"


def _short(digest) -> str:
    return f"{digest[:12]}…" if isinstance(digest, str) else "none"
