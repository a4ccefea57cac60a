"""Files too large for one transfer to a remote GPU machine, carried in parts over several.

    .venv/bin/python benchmarks/gpu_carry.py split .gpu_carry/minilm --parts 2 \\
        resources/text/models/all-MiniLM-L6-v2 results/models/interim/documents
    # transfer 1 carries .gpu_carry/minilm/part-0 and the manifest, transfer 2 part-1; then there:
    python3 benchmarks/gpu_carry.py join .gpu_carry/minilm      # the paths again, checked

For a GPU machine that takes at most 64 MiB per transfer (the working tree included), has no
network and keeps what earlier transfers brought: a pinned model of 88 MB (all-MiniLM-L6-v2)
cannot reach it in one transfer, so the parts of one archive arrive over several and are
joined there.

``split`` writes one uncompressed tar of the sources (their paths relative to the current
folder, sorted, no owner or time: the same sources give the same bytes) cut into ``--parts``
files of nearly equal size, and ``manifest.json``: each part's size and SHA-256, the whole
archive's, and the sources. ``join`` checks every part against the manifest and the joined
archive against its digest before it unpacks anything (a missing, short or corrupt part is one
line naming it, exit 1), then unpacks with tarfile's ``data`` filter (no absolute paths, no
``..``, no links out, no devices). What is unpacked is checked again where it is read (a model
against its pins by ``load_text_model``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

from diversity_core.atomic import atomic_write

MANIFEST = "manifest.json"
FORMAT = 1


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _archive(sources: list[str]) -> bytes:
    """The tar of ``sources`` (files or folders, relative paths inside the current folder):
    regular files and folders only, sorted, owner and time zeroed."""
    paths: set[Path] = set()
    for source in sources:
        path = Path(source)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"{source}: give a path inside the current folder (relative, no "
                             "'..'): it is unpacked at the same path there.")
        if not path.exists():
            raise FileNotFoundError(f"{source}: no such file or folder.")
        found = [path, *path.rglob("*")] if path.is_dir() else [path]
        for item in found:
            if item.is_symlink() or not (item.is_file() or item.is_dir()):
                raise ValueError(f"{item}: not a regular file or folder; not carried.")
            paths.add(item)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(paths, key=lambda p: p.as_posix()):
            info = tar.gettarinfo(str(path), arcname=path.as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isdir():
                tar.addfile(info)
            else:
                with open(path, "rb") as stream:
                    tar.addfile(info, stream)
    return buffer.getvalue()


def split(folder, sources: list[str], parts: int) -> dict:
    """Write the parts and the manifest into ``folder`` (made; must not hold a manifest)."""
    if parts < 1:
        raise ValueError(f"--parts must be at least 1; got {parts}.")
    folder = Path(folder)
    if (folder / MANIFEST).exists():
        raise FileExistsError(f"{folder / MANIFEST} exists: split into an empty folder.")
    data = _archive(sources)
    size = -(-len(data) // parts)
    folder.mkdir(parents=True, exist_ok=True)
    listed = []
    for k in range(parts):
        chunk = data[k * size:(k + 1) * size]
        with atomic_write(folder / f"part-{k}", "wb") as out:
            out.write(chunk)
        listed.append({"name": f"part-{k}", "size": len(chunk), "sha256": _sha256(chunk)})
    manifest = {"format": FORMAT, "sources": sorted(sources), "size": len(data),
                "sha256": _sha256(data), "parts": listed}
    with atomic_write(folder / MANIFEST) as out:  # last: a split cut short has no manifest
        out.write(json.dumps(manifest, indent=1) + "\n")
    return manifest


def join(folder, to=".") -> list[str]:
    """Check every part and the joined archive, then unpack it under ``to``; the unpacked
    paths. ``ValueError`` naming the first part that is missing or differs."""
    folder = Path(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{folder / MANIFEST}: format {manifest.get('format')!r}, not "
                         f"{FORMAT}.")
    chunks = []
    for part in manifest["parts"]:
        path = folder / part["name"]
        if not path.is_file():
            raise ValueError(f"{path}: missing (carry it over before joining).")
        chunk = path.read_bytes()
        if len(chunk) != part["size"] or _sha256(chunk) != part["sha256"]:
            raise ValueError(f"{path}: {len(chunk):,} bytes, SHA-256 {_sha256(chunk)[:12]}; "
                             f"the manifest says {part['size']:,} bytes, "
                             f"{part['sha256'][:12]}: corrupt or from another split.")
        chunks.append(chunk)
    data = b"".join(chunks)
    if _sha256(data) != manifest["sha256"]:
        raise ValueError(f"{folder}: the joined parts' SHA-256 differs from the manifest's.")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        names = tar.getnames()
        tar.extractall(Path(to), filter="data")
    return names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cut = commands.add_parser("split", help="archive SOURCES into FOLDER in --parts parts")
    cut.add_argument("folder")
    cut.add_argument("sources", nargs="+")
    cut.add_argument("--parts", type=int, required=True)
    glue = commands.add_parser("join", help="check FOLDER's parts and unpack them")
    glue.add_argument("folder")
    glue.add_argument("--to", default=".")
    args = parser.parse_args(argv)
    try:
        if args.command == "split":
            manifest = split(args.folder, args.sources, args.parts)
            print(f"{len(manifest['parts'])} parts of {args.folder} ("
                  + ", ".join(f"{p['size'] / 2**20:.1f} MiB" for p in manifest["parts"])
                  + f"), archive {manifest['sha256'][:12]}")
        else:
            names = join(args.folder, args.to)
            print(f"joined {args.folder}: {len(names)} paths under {args.to}")
    except (OSError, ValueError, tarfile.TarError) as exc:  # a path the data filter refused
        print(f"gpu_carry: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
