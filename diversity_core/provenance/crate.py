"""The provenance records of a run as a Workflow Run RO-Crate (https://w3id.org/ro/wfrun/workflow),
so that a reader's tools (``rocrate``, ``runcrate``, WorkflowHub, ``rocrate-validator``) read our
chain of custody without our code: ``python -m diversity_core audit --ro-crate DIR``.

The crate holds

* the workflow (``Snakefile``, the crate's ``mainEntity``, a ``ComputationalWorkflow`` in
  Snakemake) and one ``CreateAction`` for the run: its ``object`` the assets the chains end in,
  its ``result`` the final results;
* one ``CreateAction`` per job that the records describe: ``instrument`` the rule's script (a
  ``SoftwareApplication`` copied into the crate), ``object`` its inputs, ``result`` its outputs,
  ``name`` the rule;
* a copy of every file of the results tree that a record names (final results and the interim
  files on disk: about 300 MB for a full default run) and of every record
  (``<file>.provenance.json``, ``about`` its file); every file carries its ``sha256`` and
  ``contentSize``. Assets under ``resources/`` (1.7 GB of public packages, fetched by their
  pins) and inputs not on disk (a fresh clone's interim files) are described, not copied:
  contextual entities ``#resources/...`` / ``#results/...`` with the same digests, whether they
  are pinned and by which configuration key.

The crate agrees with itself: every file copied into it carries the SHA-256 and size
of the bytes written there, hashed while they were copied (a file changed since its record says
so in its ``description``, beside the recorded digest); the records copied are read back from
the crate's own copies. A script whose bytes differ from the digest its records name (a result
made by an earlier version) is copied at the recorded commit, ``history/<commit>/<path>``,
when ``git cat-file blob <commit>:<path>`` gives exactly the recorded bytes; otherwise the
current version is copied under its own digest, described as the current version, and the
mismatch is returned in :attr:`CrateResult.notes` (the command prints them). Only regular files
are copied, each read bounded by its size (:func:`.digests.read_blocks`).

The crate is written into a fresh temporary folder beside ``DIR`` and renamed to ``DIR`` only
when complete: never half a crate. A file of the crate that cannot be written whole (a full
disk, a file size limit) ends it: the staging folder is removed and a ``ValueError`` names the
file (the command exits 2); only a file that cannot be *read* is described instead of copied.
``DIR`` must be new or an empty folder; a non-empty folder (a previous crate included: remove
it first), a file, a link or a place that cannot be written is a ``ValueError`` (one line),
checked by :func:`check_destination` before the audit starts.

Only what the records vouch for, from inside its root: every file is copied in one
read that hashes what it copies (the crate's digest is that of the bytes it holds, with no
second read that a link could redirect), opened through :func:`.paths.open_inside`, so a file
or folder that leaves its root through a link is never copied (it is described, with the
reason; the audit reports it). A script outside the workflow's folders (root null) is
described, never copied. Names that are not valid UTF-8 or hold a control character are left
out (the audit reports them). ``DIR`` may not lie inside the audited results folder (the next
audit would find the crate's copies unrecorded).

Built with the ``rocrate`` library (pinned in ``envs/requirements.txt``) for the entities and
the metadata file; validated in ``tests/provenance/test_audit.py`` against the Workflow Run Crate
profile of ``roc-validator``. In linear time (``benchmarks/bench_crate.py``): rocrate's
``get``/``dereference`` scans every entity for subcrates on each identifier it does not hold,
so the builder keeps its own index of the jobs it added instead of asking the crate, and never
looks up an identifier rocrate lacks. The copies are written with exclusive creation into the
private staging folder (``mkdtemp``, 0700, renamed whole at the end), which needs no per-file
temporary name.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import posixpath
import shutil
import subprocess
import tempfile
import warnings
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from .digests import (
    MAX_JSON_BYTES,
    RECORD_SUFFIX,
    NotRegularFile,
    file_kind,
    scan_folder,
    stream_blocks,
    tree_sha256,
)
from .paths import LeavesRoot, leaves, name_problem, open_inside, printable
from .records import RecordError, read_record, record_path

PROFILES = {
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
    "https://w3id.org/ro/wfrun/provenance/0.5": "Provenance Run Crate",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate",
}
PYTHON = {"@id": "https://www.python.org/", "@type": "ComputerLanguage", "name": "Python",
          "url": "https://www.python.org/"}
# Where a script's earlier version goes: history/<commit>/<its path in the repository>.
HISTORY = "history"
# The largest script taken from git (bytes): a script is a few kB; a record naming a path to
# something else (a data file of the repository) must not fill memory.
MAX_SCRIPT_BYTES = MAX_JSON_BYTES
GIT_TIMEOUT_S = 60


class CrateWriteError(ValueError):
    """A file of the crate could not be written whole (a full disk, a file size limit): the
    crate is not made. One line: the crate file, the system's reason, what to do."""

    def __init__(self, crate_path: str, err: OSError):
        self.crate_path, self.reason = crate_path, err.strerror or str(err)
        super().__init__(f"its file {printable(crate_path)} could not be written "
                         f"({self.reason})")


@dataclass
class CrateResult:
    """The crate written: its folder, and what a reader should know (one line each): scripts
    copied at their recorded commit, or as their current version with the digest mismatch."""

    path: Path
    notes: list[str] = field(default_factory=list)


def check_destination(dest, results=None) -> Path:
    """``dest`` as a :class:`Path` if a crate may be written there: not there yet, or an empty
    folder, in a place that can be written, outside the audited ``results`` folder (when
    given). Raises ``ValueError`` naming the problem; called before the audit, so that a wrong
    ``--ro-crate`` costs nothing."""
    dest = Path(dest)
    if results is not None:
        real_results = os.path.realpath(results)
        real_dest = os.path.realpath(dest)
        if real_dest == real_results or real_dest.startswith(real_results.rstrip(os.sep) + os.sep):
            raise ValueError(f"--ro-crate {printable(str(dest))} lies inside the audited folder "
                             f"{printable(str(results))}: the next audit would find the crate's "
                             "copies unrecorded; give a folder outside it.")
    if dest.is_symlink():
        raise ValueError(f"--ro-crate {dest} is a symbolic link (to {os.readlink(dest)}); "
                         "give a new folder.")
    if dest.exists():
        if not dest.is_dir():
            raise ValueError(f"--ro-crate {dest} is {file_kind(dest)}, not a folder; give a new "
                             "folder.")
        try:
            occupied = any(dest.iterdir())
        except OSError as err:
            raise ValueError(f"cannot read --ro-crate folder {dest} "
                             f"({err.strerror or err}).") from None
        if occupied:
            raise ValueError(f"--ro-crate {dest} is not empty; the crate needs a new or empty "
                             "folder (to replace a previous crate, remove it first).")
    parent = dest.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".probe", dir=parent))
    except OSError as err:
        raise ValueError(f"cannot write the crate {dest}: {err.strerror or err} "
                         f"({err.filename or parent}).") from None
    return dest


def write_crate(report, dest) -> CrateResult:
    """Write the crate of the run that ``report`` (an :class:`~.audit_report.AuditReport`)
    audited into folder ``dest`` (see the module): built in a temporary folder beside it, then
    renamed."""
    dest = check_destination(dest, report.roots.results)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp",
                                        dir=dest.absolute().parent))
    except OSError as err:
        raise ValueError(f"cannot write the crate {dest}: {err.strerror or err}.") from None
    try:
        try:
            notes = _Builder(report, staging).build()
        except CrateWriteError as err:
            raise ValueError(f"cannot write the crate {printable(str(dest))}: {err}; no crate "
                             "was made (nothing is kept): free space there (or raise the file "
                             "size limit) and rerun.") from None
        os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide the crate from its readers
        try:
            os.replace(staging, dest)  # onto a new name, or an empty folder: one step
        except OSError as err:
            raise ValueError(f"cannot move the finished crate into {dest}: "
                             f"{err.strerror or err}.") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # our own temporary folder, nothing else
        raise
    return CrateResult(dest, notes)


class _Builder:
    """One crate: the entities, and the files copied into ``staging``."""

    def __init__(self, report, staging: Path):
        from rocrate.model.contextentity import ContextEntity
        from rocrate.rocrate import ROCrate

        self.ContextEntity = ContextEntity
        self.report, self.roots, self.staging = report, report.roots, staging
        self.notes: list[str] = []
        # Version 1.1: the Workflow Run Crate profiles (0.5) build on RO-Crate 1.1.
        crate = self.crate = ROCrate(version="1.1")
        crate.name = "Metric space magnitude diversity: a run of the reference pipeline"
        crate.description = ("Every result of this run with the rule, script, parameters and "
                             "inputs that made it, each file with its SHA-256 (diversity_core "
                             "provenance records).")
        crate.license = "https://spdx.org/licenses/BSD-3-Clause"
        for uri, name in PROFILES.items():
            crate.add(ContextEntity(crate, uri, properties={
                "@type": "CreativeWork", "name": name, "version": uri.rsplit("/", 1)[1]}))
        crate.root_dataset["conformsTo"] = [{"@id": uri} for uri in PROFILES]
        # schema.org's sha256 came after the RO-Crate 1.1 context: defined here.
        crate.metadata.extra_terms["sha256"] = "http://schema.org/sha256"
        self.python = crate.add(ContextEntity(crate, PYTHON["@id"], properties=PYTHON))
        self.entities: dict[tuple, object] = {}
        self.scripts: dict[tuple, object] = {}
        self.current_scripts: dict[tuple, object] = {}
        # The jobs added: asking rocrate (crate.get) for an identifier it does not hold scans
        # every entity for subcrates, which made the crate quadratic in its files.
        self.actions: set[str] = set()
        self.folders: set[Path] = set()  # made in staging

    # -- copying ------------------------------------------------------------------------------
    def copy(self, source: tuple, crate_path: str) -> tuple[str, int]:
        """Copy the regular file ``source`` (``(root folder, relative path)``: opened without
        following a link out of the root, :func:`.paths.open_inside`) to ``crate_path`` in the
        crate; return (sha256, size in bytes) of the bytes written, hashed as they were copied
        (one read). Raises :class:`.paths.LeavesRoot`, :class:`NotRegularFile`, ``OSError`` or
        ``ValueError``; a partial copy is removed."""
        digest, size = hashlib.sha256(), 0
        root, relative = source
        with open_inside(root, relative) as (stream, at_opening):
            with self._new_file(crate_path) as write:
                for block in stream_blocks(stream, at_opening, Path(root) / relative):
                    digest.update(block)
                    write(block)
                    size += len(block)
        return digest.hexdigest(), size

    def write_bytes(self, data: bytes, crate_path: str) -> tuple[str, int]:
        with self._new_file(crate_path) as write:
            write(data)
        return hashlib.sha256(data).hexdigest(), len(data)

    @contextmanager
    def _new_file(self, crate_path: str):
        """A new file of the crate, created exclusively (never through a link) in the private
        staging folder, as a ``write(bytes)`` function; removed if the write fails. A failure
        to write (a full disk, a file size limit) is a :class:`CrateWriteError`: the crate
        cannot be whole, so no crate is made; a name taken twice (``FileExistsError``, a
        file where a folder goes) is not."""
        path = self.staging / crate_path
        try:
            if path.parent not in self.folders:
                path.parent.mkdir(parents=True, exist_ok=True)
                self.folders.add(path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), 0o644)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            raise  # a name the crate holds already: that entry is described, not copied
        except OSError as err:
            raise CrateWriteError(crate_path, err) from None
        out = os.fdopen(fd, "wb")

        def write(data: bytes) -> None:
            try:
                out.write(data)
            except OSError as err:
                raise CrateWriteError(crate_path, err) from None

        try:
            yield write
            try:
                out.close()  # the last buffered bytes reach the disk here, or fail here
            except OSError as err:
                raise CrateWriteError(crate_path, err) from None
        except BaseException:
            with suppress(OSError):
                out.close()
            path.unlink(missing_ok=True)
            raise

    def add_copy(self, source: tuple, crate_path: str, properties: dict) -> tuple:
        """(``File`` entity, None) for a copy of ``source`` (``(root folder, relative
        path)``) carrying the digest and size of the copy; (None, why not) when it cannot be
        copied."""
        try:
            digest, size = self.copy(source, crate_path)
        except CrateWriteError:
            raise  # the crate cannot be whole: no crate
        except LeavesRoot as err:
            where = next((f"{name}/" for name, folder in self.roots.named().items()
                          if folder == Path(source[0])), "its folder")
            return None, f"it leaves {where} through a link ({err.link})"
        except NotRegularFile as err:
            return None, f"it is {err.kind}, not a regular file"
        except FileExistsError:
            return None, "another entry of the crate has its name"
        except (OSError, ValueError) as err:
            return None, f"it cannot be read ({getattr(err, 'strerror', None) or err})"
        properties.update(sha256=digest, contentSize=str(size))
        return self.crate.add_file(self.staging / crate_path, crate_path,
                                   properties=properties), None

    # -- files of the run ---------------------------------------------------------------------
    def entity(self, key, entry: dict):
        """A file of the run: copied if it lies in the results tree (with the digest of the
        copy), else (an asset, a file not on disk or not a regular file) described by a
        contextual entity with its recorded digest."""
        if key in self.entities:
            return self.entities[key]
        root, path = key
        crate_path = posixpath.normpath(f"{root}/{path}")
        recorded = entry.get("sha256")
        notes = []
        if entry.get("kind") == "directory":
            notes.append("a folder; sha256 is that of its sha256sum-style listing "
                         "(docs/auditing.md)")
        if "pinned" in entry:
            notes.append(("pinned" if entry["pinned"] else "not pinned")
                         + (f" by configuration key {entry['config_key']}"
                            if entry.get("config_key") else ""))
        if entry.get("source"):
            notes.append(f"fetched from {entry['source']}")
        properties = {}
        source = self.roots.path(*key)
        if entry.get("kind") != "directory":
            properties["encodingFormat"] = _media_type(path)
        made, why = None, ("an asset under resources/, fetched and checked by its pins"
                           if root == "resources" else "not on disk when the crate was written")
        link = (leaves(self.roots.results, path) if root == "results" and source.is_dir()
                else None)  # a file's copy checks it as it opens (open_inside)
        if link is not None:
            why = f"it leaves results/ through a link ({link})"
        elif root == "results" and source.is_dir():
            made, why = self.folder(source, crate_path, properties, notes, recorded)
        elif root == "results" and os.path.lexists(source):
            made, not_copied = self.add_copy((self.roots.results, path), crate_path,
                                             properties)
            if made is None:
                why = not_copied
            elif properties["sha256"] != recorded:
                notes.append(f"changed since it was made: its record holds sha256 {recorded}")
            if made is not None and notes:
                made["description"] = "; ".join(notes)
        if made is None:
            properties.update({"@type": "CreativeWork", "name": crate_path, "sha256": recorded,
                               "contentSize": str(entry.get("size")),
                               "description": "; ".join([*notes, "sha256 as recorded; not "
                                                         f"copied: {why}"])})
            made = self.crate.add(self.ContextEntity(self.crate, f"#{crate_path}",
                                                     properties=properties))
        self.entities[key] = made
        return made

    def folder(self, source: Path, crate_path: str, properties: dict, notes: list,
               recorded) -> tuple:
        """A folder output: its regular files copied, each a ``File`` with its digest; the
        ``Dataset``'s sha256 is the listing digest of the copies."""
        try:
            names, aside = scan_folder(source)
        except (OSError, ValueError) as err:
            return None, f"it cannot be walked ({err})"
        parts, digests, total = [], {}, 0
        base = source.relative_to(self.roots.results).as_posix()
        for name in names:
            member, why = self.add_copy((self.roots.results, f"{base}/{name}"),
                                        f"{crate_path}/{name}",
                                        {"encodingFormat": _media_type(name)})
            if member is None:
                aside[name] = why.removeprefix("it ")
                continue
            parts.append(member)
            digests[name] = member["sha256"]
            total += int(member["contentSize"])
        if aside:
            notes.append("not copied, not in its digest: " + ", ".join(
                f"{name} ({kind})" for name, kind in aside.items()))
        digest = tree_sha256(digests)
        if digest != recorded:
            notes.append(f"changed since it was made: its record holds sha256 {recorded}")
        properties.update(sha256=digest, contentSize=str(total), description="; ".join(notes))
        dataset = self.crate.add_dataset(None, crate_path, properties=properties)
        dataset["hasPart"] = parts
        return dataset, None

    # -- scripts ------------------------------------------------------------------------------
    def script(self, record: dict):
        """The entity of the script version a record names (see the module)."""
        script, commit = record["script"], (record.get("git") or {}).get("commit")
        root, path, recorded = script["root"], script["path"], script["sha256"]
        key = (root, path, recorded)
        if key in self.scripts:
            return self.scripts[key]
        name = posixpath.basename(path)
        properties = {"@type": ["File", "SoftwareApplication", "SoftwareSourceCode"],
                      "name": name, "encodingFormat": "text/x-python",
                      "programmingLanguage": self.python}
        shown = _script_path(root, path)
        try:  # hashed first, copied only where a job names it
            now = _sha256_inside(self.roots.named()[root], path) if root is not None else None
        except (OSError, ValueError):
            now = None
        made = self.current_script(root, path) if now == recorded else None
        if made is None or made["sha256"] != recorded:  # an earlier version (or none on disk)
            old, why = self.git_version(commit, root, path, recorded)
            # Outside the workflow's folders (root null) only the very file the record vouches
            # for is copied: a record must not make the crate carry any file of the disk.
            current = (self.current_script(root, path) if old is None and now is not None
                       and root is not None else None)
            if old is not None:
                crate_path = f"{HISTORY}/{commit}/{shown}"
                digest, size = self.write_bytes(old, crate_path)
                properties.update(sha256=digest, contentSize=str(size), description=(
                    f"the version its records name, as of commit {commit} (git show "
                    f"{commit}:{path}); the current {shown} differs"))
                made = self.crate.add_file(self.staging / crate_path, crate_path,
                                           properties=properties)
                self.notes.append(f"{shown}: results made by an earlier version (sha256 "
                                  f"{recorded[:12]}…): copied as of commit {commit[:12]} to "
                                  f"{crate_path}")
            elif current is not None:
                made = current
                made["description"] = (made.get("description", "") + "; " if made.get(
                    "description") else "the current version; ") + (
                    f"not the version some records name (sha256 {recorded}), which {why}")
                self.notes.append(f"{shown}: results made by an earlier version (sha256 "
                                  f"{recorded[:12]}…), which {why}: the crate holds the "
                                  f"current version (sha256 {current['sha256'][:12]}…), "
                                  "labelled as such")
            else:
                where = path if root is None else shown
                missing = ("its bytes are not the recorded ones" if now is not None else
                           "it is not on disk as a regular file")
                properties.update(sha256=recorded, description=(
                    f"sha256 as recorded; not copied: {missing}, and it {why}"))
                properties["@type"] = ["SoftwareApplication", "SoftwareSourceCode"]
                made = self.crate.add(self.ContextEntity(self.crate, f"#{shown}@{recorded[:12]}",
                                                         properties=properties))
                self.notes.append(f"{where}: {missing}, and it {why}: described, not copied")
        self.scripts[key] = made
        return made

    def current_script(self, root: str, path: str):
        """The ``File`` entity of a script as it is now (copied once), or None."""
        if (root, path) not in self.current_scripts:
            shown = _script_path(root, path)
            properties = {"@type": ["File", "SoftwareApplication", "SoftwareSourceCode"],
                          "name": posixpath.basename(path), "encodingFormat": "text/x-python",
                          "programmingLanguage": self.python}
            made, _ = self.add_copy((self.roots.named()[root], path), shown, properties)
            self.current_scripts[(root, path)] = made
        return self.current_scripts[(root, path)]

    def git_version(self, commit, root: str, path: str, recorded: str) -> tuple:
        """(bytes, None) of the script at ``commit`` when they have the recorded digest; else
        (None, why not, completing "which ...")."""
        if root != "workdir":
            return None, "lies outside the workflow's working directory (no git version)"
        if not commit:
            return None, "its records name no commit"
        # <commit>:./<path> is relative to the folder git runs in: the workflow's working
        # directory, wherever it lies in its repository. The commit is hexadecimal (checked by
        # read_record), so it cannot be read as an option.
        spec = f"{commit}:./{path}"
        base = ["git", "-C", str(self.roots.workdir), "cat-file"]
        try:
            size = subprocess.run([*base, "-s", spec], capture_output=True, text=True,
                                  timeout=GIT_TIMEOUT_S)
            if size.returncode != 0:
                return None, (f"git cannot show as of commit {commit[:12]} "
                              f"({(size.stderr.strip().splitlines() or ['?'])[0][:120]})")
            if int(size.stdout.strip() or 0) > MAX_SCRIPT_BYTES:
                return None, f"is larger than {MAX_SCRIPT_BYTES:,} bytes as of {commit[:12]}"
            blob = subprocess.run([*base, "blob", spec], capture_output=True,
                                  timeout=GIT_TIMEOUT_S)
        except (OSError, ValueError, subprocess.TimeoutExpired) as err:
            return None, f"git cannot give ({type(err).__name__}: {err})"
        if blob.returncode != 0:
            return None, f"git cannot show as of commit {commit[:12]}"
        if hashlib.sha256(blob.stdout).hexdigest() != recorded:
            return None, (f"is not the recorded version as of commit {commit[:12]} either (the "
                          "working tree held uncommitted changes when it ran)")
        return blob.stdout, None

    # -- the crate ----------------------------------------------------------------------------
    def build(self) -> list[str]:
        crate, roots = self.crate, self.roots
        snakefile = roots.workdir / "Snakefile"
        properties = {"@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow"],
                      "name": "diversity_core reference pipeline"}
        try:
            properties["sha256"], size = self.copy((roots.workdir, "Snakefile"), "Snakefile")
            properties["contentSize"] = str(size)
            source = self.staging / "Snakefile"
        except CrateWriteError:
            raise
        except (OSError, ValueError) as err:
            self.notes.append(f"{snakefile}: not copied ({getattr(err, 'strerror', None) or err}"
                              "): the crate names the workflow without its file")
            source = None
        with warnings.catch_warnings():  # rocrate warns of a File without a source: said above
            warnings.simplefilter("ignore")
            workflow = crate.add_workflow(source, "Snakefile", main=True, lang="snakemake",
                                          properties=properties)
        final_results, assets = [], []
        for key in sorted(self.report.files, key=lambda k: (k[0] or "", k[1])):
            if key[0] != "results" or name_problem(key[1]):
                continue  # a name that is not the pipeline's: a finding of the audit
            record = self.record(key)
            if record is None:
                continue
            outputs = [((e["root"], e["path"]), e) for group in record["outputs"].values()
                       for e in group]
            inputs = [((e["root"], e["path"]), e) for group in record["inputs"].values()
                      for e in group]
            own = dict(outputs)[key]
            made = [self.entity(k, e) for k, e in outputs]
            used = [self.entity(k, e) for k, e in inputs]
            action_id = "#job-" + "-".join(sorted(k[1] for k, _ in outputs)).replace("/", "_")
            if action_id not in self.actions:
                self.actions.add(action_id)
                crate.add_action(self.script(record), identifier=action_id, object=used,
                                 result=made, properties={
                                     "name": f"rule {record.get('rule')}",
                                     "description": json.dumps(
                                         {"params": record.get("params"),
                                          "wildcards": record.get("wildcards")},
                                         sort_keys=True, default=str)})
            assets += [self.entity(k, e) for k, e in inputs if k[0] == "resources"]
            self.record_entity(key)["about"] = self.entity(key, own)
            if "interim" not in Path(key[1]).parts:
                final_results.append(self.entity(key, own))
        # The tools the workflow orchestrates: every script version the jobs name.
        workflow["hasPart"] = list(dict.fromkeys(self.scripts.values()))
        crate.add_action(workflow, identifier="#run", object=list(dict.fromkeys(assets)),
                         result=final_results, properties={
                             "name": "Run of the diversity_core reference pipeline",
                             "description": "Assets in, final results out; each job is a "
                                            "CreateAction of its own."})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Every entity's bytes are already in staging (File.write skips a file onto itself):
            # this writes ro-crate-metadata.json.
            try:
                crate.write(self.staging)
            except OSError as err:
                raise CrateWriteError("ro-crate-metadata.json", err) from None
        return self.notes

    def record(self, key) -> dict | None:
        """The record of a results file, read back from its copy in the crate (so the crate's
        jobs describe the bytes it holds); None when there is none or it cannot be used (then
        its copy, if any, says why)."""
        path = record_path(self.roots.path(*key))
        if not os.path.lexists(path):
            return None
        entity = self.record_entity(key)
        if entity is None:
            return None
        try:
            record = read_record(self.staging / entity.id)  # the copy: its name is the same
            if key not in {(e["root"], e["path"]) for group in record["outputs"].values()
                           for e in group}:
                raise RecordError(f"its record {path.name} names no output {key[1]}")
        except RecordError as err:
            entity["description"] = f"diversity_core provenance record, not usable: {err}"
            return None
        return record

    def record_entity(self, key):
        """The ``File`` of a results file's record, copied with its digest (once)."""
        crate_key = ("record", *key)
        if crate_key not in self.entities:
            crate_path = posixpath.normpath(f"results/{key[1]}{RECORD_SUFFIX}")
            properties = {"encodingFormat": "application/json",
                          "description": "diversity_core provenance record"}
            made, why = self.add_copy((self.roots.results, f"{key[1]}{RECORD_SUFFIX}"),
                                      crate_path, properties)
            if made is None:
                self.notes.append(f"{_shown_path(self.roots, key)}{RECORD_SUFFIX}: not copied "
                                  f"({why})")
            self.entities[crate_key] = made
        return self.entities[crate_key]


def _sha256_inside(root, relative: str) -> str:
    """SHA-256 of the regular file ``root/relative``, read without leaving ``root``."""
    digest = hashlib.sha256()
    with open_inside(root, relative) as (stream, size):
        for block in stream_blocks(stream, size, Path(root) / relative):
            digest.update(block)
    return digest.hexdigest()


def _media_type(path: str) -> str:
    known = {".npz": "application/zip", ".npy": "application/octet-stream",
             ".jsonl": "application/jsonl", ".md": "text/markdown", ".py": "text/x-python"}
    suffix = Path(path).suffix.lower()
    return known.get(suffix) or mimetypes.guess_type(path)[0] or "application/octet-stream"


def _script_path(root, path: str) -> str:
    """Where a script goes in the crate: its path in the repository (``scripts/x.py``); one
    outside the workflow's folders (root null) under ``scripts/`` by its name."""
    if root is None:
        return f"scripts/{posixpath.basename(path)}"
    return posixpath.normpath(path if root == "workdir" else f"{root}/{path}")


def _shown_path(roots, key) -> str:
    try:
        return os.path.relpath(roots.path(*key))
    except ValueError:
        return str(roots.path(*key))
