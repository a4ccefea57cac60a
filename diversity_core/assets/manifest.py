"""The ``.pins.json`` manifest every fetch writes into the folder of the asset it made.

Format (the contract with the provenance and audit code, see docs/assets.md)::

    {"asset": "fashion_mnist", "config_key": "images.fashion_mnist",
     "source": "deb:dataset-fashion-mnist=0.0~git20200523.55506a9-1",
     "files": {"train-images-idx3-ubyte.gz": {"sha256": "<64 hex>", "pinned": true}, ...}}

``files`` lists every file of the folder but ``.pins.json`` and the ``.snakemake_timestamp`` that
Snakemake adds to a directory output after the job (relative POSIX paths), each with
the SHA-256 of the file as it lies on disk; ``pinned`` says whether that content was checked
against a pin before anything read it (a file taken out of a verified archive counts: the
archive's pin fixes its bytes); an entry may carry the other-algorithm pin it was checked
against (``"md5": ...``). The manifest is written last, atomically, after every file was
verified; a loader checks the folder against it (:func:`verify_manifest`) before reading.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..atomic import atomic_write
from .verify import file_digest, inside

__all__ = ["MANIFEST", "read_manifest", "verify_manifest", "write_manifest"]

MANIFEST = ".pins.json"


# Snakemake stamps a directory output with this empty file after the job: not the asset's.
_NOT_ASSET = (MANIFEST, ".snakemake_timestamp")


def _files_of(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*")
                  if path.is_file() and path.name not in _NOT_ASSET)


def write_manifest(folder, *, asset: str, config_key: str, source: str,
                   pinned: Mapping[str, str | None], extra: Mapping[str, Mapping] | None = None,
                   ) -> Path:
    """Write ``folder/.pins.json`` for every file in ``folder`` (atomically); return its path.

    ``pinned`` maps a file (relative path) to the SHA-256 it was verified against (its digest is
    then taken from the pin, not hashed again) or to None (checked through the archive that held
    it: hashed here, ``pinned: true``). A file of the folder missing from ``pinned`` is recorded
    as ``pinned: false`` (taken on trust, or made from the asset, e.g. a dequantised model).
    ``extra`` adds keys to an entry (``{"a.tar.gz": {"md5": ...}}``).
    """
    folder = Path(folder)
    entries = {}
    for rel in _files_of(folder):
        digest = pinned.get(rel)
        entry = {"sha256": digest.lower() if digest else file_digest(folder / rel),
                 "pinned": rel in pinned}
        entry.update((extra or {}).get(rel, {}))
        entries[rel] = entry
    missing = sorted(set(pinned) - set(entries))
    if missing:
        raise ValueError(f"{asset}: {folder} lacks the pinned files {missing}.")
    record = {"asset": asset, "config_key": config_key, "source": source, "files": entries}
    with atomic_write(folder / MANIFEST, what="asset manifest") as out:
        out.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return folder / MANIFEST


def read_manifest(folder) -> dict | None:
    """The manifest of ``folder`` (None if it has none); ``ValueError`` if it is malformed."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        files = record["files"]
        if not isinstance(files, dict) or not all(
                isinstance(e, dict) and isinstance(e.get("sha256"), str) for e in files.values()):
            raise ValueError("'files' must map paths to {sha256, pinned}")
        for key in ("asset", "config_key", "source"):
            record[key]  # noqa: B018 - presence check
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a valid asset manifest ({exc}): delete "
                         f"{Path(folder)} to fetch it again.") from None
    return record


def verify_manifest(folder, *, what: str, files=None) -> dict:
    """Check ``folder`` against its ``.pins.json`` before anything in it is read; return it.

    Every file of the manifest (or only ``files``, a list of relative paths, each of which must be
    in the manifest) must exist inside ``folder`` with its recorded SHA-256. A folder without a
    manifest was not made by a verifying fetch (it predates manifests or was placed by hand):
    ``ValueError`` says so and how to fetch it again, naming ``what`` (the asset).
    """
    folder = Path(folder)
    record = read_manifest(folder)
    if record is None:
        raise ValueError(
            f"{what}: {folder} has no {MANIFEST}, so nothing vouches for its files (fetched "
            f"before manifests were written, or placed by hand). Delete {folder} and run its "
            "fetch rule again: the fetch verifies every file against its pin (a file placed by "
            "hand where the fetch looks for its download included) and writes the manifest.")
    names = list(record["files"]) if files is None else list(files)
    for rel in names:
        entry = record["files"].get(rel)
        if entry is None:
            raise ValueError(f"{what}: {rel} is not in {folder / MANIFEST}.")
        path = inside(folder, rel, what=f"{what} ({MANIFEST})")
        if not path.is_file():
            raise ValueError(f"{what}: {path} is missing; delete {folder} to fetch it again.")
        actual = file_digest(path)
        if actual != entry["sha256"]:
            raise ValueError(
                f"{what}: {path} changed since it was fetched: sha256 is {actual}, "
                f"{MANIFEST} records {entry['sha256']}. Delete {folder} to fetch it again.")
    return record
