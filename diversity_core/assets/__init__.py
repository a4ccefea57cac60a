"""What every stage shares to trust the files it reads: fetching, pins, verification, caches.

* :mod:`.fetch`: checksummed downloads (through :mod:`.http`), Debian packages, files out of PyPI
  wheels, tar members, staged folders; locks and the clean-up of what killed fetches left;
* :mod:`.http`: the one HTTP client of downloads and hub listings, every transfer bounded
  (timeouts, a deadline, a minimum rate, a byte cap set before it starts, redirects, listing
  pages, entries and bytes), only a ``200 OK`` taken as a body, every address followed checked;
* :mod:`.formats`: what a downloaded file is (its magic bytes or parser; never an HTML page),
  what an archive must hold, and archive members' sizes from the directory, checked before
  anything is kept;
* :mod:`.hub`: files of Hugging Face hub repositories (the paper configurations' datasets and
  sentence models), each through :func:`.fetch.download`;
* :mod:`.verify`: digests, names that stay inside their folder (the one rule for every name
  from outside: no control or invisible character), values that reach external tools,
  restricted unpickling;
* :mod:`.pins`: what makes an asset pinned, the one definition of the loopback, strict mode
  (the unpinned assets of a pipeline configuration: :mod:`diversity_core.experiments.unpinned`);
* :mod:`.manifest`: the ``.pins.json`` every fetch writes last and every loader checks first;
* :mod:`.pinned`: the one pinned fetch of an asset kept in a folder of its own (text corpora,
  sentence models): pins, strict mode, verify-or-fetch into a staged folder, the manifest;
* :mod:`.cache`: caches written under a lock to unique temporary names, merged with what another
  process wrote, a corrupt one named and rebuilt.

Where the pins live is documented in docs/assets.md: every asset has exactly one home for its
pins (the configuration section that selects it, or the package's table for the text corpora,
sentence models and the TU files that ``grakel`` ships), and every fetch goes through this room.
"""

from .cache import read_cache, update_cache
from .fetch import (
    apt_download,
    download,
    extract_deb,
    extract_from_wheel,
    extract_tar,
    folder_lock,
    pip_download_wheel,
    remove_leftovers,
    scratch_folder,
    staged_folder,
)
from .manifest import MANIFEST, read_manifest, verify_manifest, write_manifest
from .pinned import PinnedAsset, fetch_pinned, verify_pinned_files
from .pins import UnpinnedAssetError, require_pinned, strict_assets
from .verify import (
    RestrictedUnpickler,
    check_file,
    file_digest,
    inside,
    relative_name,
    restricted_load,
    verify_checksum,
)

__all__ = [
    "MANIFEST",
    "PinnedAsset",
    "RestrictedUnpickler",
    "UnpinnedAssetError",
    "apt_download",
    "check_file",
    "download",
    "extract_deb",
    "extract_from_wheel",
    "extract_tar",
    "fetch_pinned",
    "file_digest",
    "folder_lock",
    "inside",
    "pip_download_wheel",
    "read_cache",
    "read_manifest",
    "relative_name",
    "remove_leftovers",
    "require_pinned",
    "restricted_load",
    "scratch_folder",
    "staged_folder",
    "strict_assets",
    "update_cache",
    "verify_checksum",
    "verify_manifest",
    "verify_pinned_files",
    "write_manifest",
]
