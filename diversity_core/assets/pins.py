"""Pins: what makes an asset pinned, the strict mode that refuses unpinned ones, and the list of
assets a pipeline configuration selects that are not pinned.

An asset is *pinned* when everything fetched for it is fixed before it is fetched: a checksum
for every download, archive and file (or the archive that holds the file), an exact version for
every package (``name==1.2.3``, a Debian ``package=version``), a commit for every Hugging Face
revision, and HTTPS for every address. Where a source publishes no checksum the pin is ``null``:
the file is taken on trust, its SHA-256 logged (to be pinned) and recorded as ``pinned: false``
in the asset's ``.pins.json``.

Strict mode (``strict_assets: true`` in the pipeline configuration, ``--config
strict_assets=true`` on the command line, or ``DIVERSITY_CORE_STRICT_ASSETS=1`` for the package
alone) refuses an unpinned asset before anything is fetched, naming the asset and the
configuration key that pins it (:func:`require_pinned`). Which assets a pipeline configuration
selects is the pipeline's knowledge, not this room's:
:func:`diversity_core.experiments.unpinned.unpinned_assets` lists those not pinned.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import urllib.parse
from collections.abc import Mapping

from .verify import is_exact_requirement, pip_requirement

__all__ = [
    "STRICT_ENV",
    "UnpinnedAssetError",
    "corpus_pin_problems",
    "is_commit",
    "is_loopback",
    "require_pinned",
    "strict_assets",
    "download_problems",
    "requirement_problems",
    "text_model_pin_problems",
    "url_problems",
]

log = logging.getLogger(__name__)

STRICT_ENV = "DIVERSITY_CORE_STRICT_ASSETS"


class UnpinnedAssetError(ValueError):
    """Strict mode refused an asset that is not pinned (raised before anything is fetched)."""


def strict_assets(strict: bool | None = None) -> bool:
    """``strict`` if given, else whether ``$DIVERSITY_CORE_STRICT_ASSETS`` is 1/true/yes (set by
    the pipeline when ``strict_assets: true``)."""
    if strict is not None:
        return bool(strict)
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes")


def require_pinned(problems, *, asset: str, config_key: str, strict: bool | None = None) -> None:
    """Refuse (strict) or warn about an asset whose pins have ``problems`` (a list of phrases such
    as "no checksum is pinned"); nothing happens when the list is empty.

    Raises :class:`UnpinnedAssetError` in strict mode, naming the asset and its configuration key.
    """
    problems = [problems] if isinstance(problems, str) else list(problems)
    if not problems:
        return
    what = "; ".join(problems)
    if strict_assets(strict):
        raise UnpinnedAssetError(
            f"{asset} is not pinned ({what}): strict_assets refuses it before fetching. Pin it "
            f"in the configuration key {config_key}, or run without strict_assets.")
    log.warning("%s is not pinned (%s): what arrives is taken on trust, its SHA-256 logged and "
                "recorded as unpinned in .pins.json; pin it in %s.", asset, what, config_key)


def is_commit(revision) -> bool:
    """Whether a Hugging Face (git) revision is a full commit hash, not a branch or tag."""
    return isinstance(revision, str) and re.fullmatch(r"[0-9a-f]{40}", revision) is not None


def is_loopback(host) -> bool:
    """Whether ``host`` (a URL's host name) is the loopback: ``localhost``, an address of
    127.0.0.0/8 or ``::1`` (RFC 1122, :attr:`ipaddress.IPv4Address.is_loopback`). The one
    definition: strict mode, the redirect and next-page checks and the configuration's check of
    an address all ask it."""
    if not isinstance(host, str) or not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_problems(url) -> list[str]:
    """["<url> is not HTTPS"] for an address that is neither HTTPS nor plain HTTP to the
    loopback (:func:`is_loopback`: a local mirror or test server), else []."""
    try:
        parts = urllib.parse.urlsplit(str(url))
        host = parts.hostname
    except ValueError:  # a malformed address (an unclosed "[")
        return [f"{url} is not HTTPS"]
    if parts.scheme == "https" or (parts.scheme == "http" and is_loopback(host)):
        return []
    return [f"{url} is not HTTPS"]


def requirement_problems(requirement, sha256, what: str) -> list[str]:
    """What is not pinned in a wheel's pins: an inexact ``requirement``, no ``sha256``."""
    problems = []
    if not is_exact_requirement(pip_requirement(requirement, what=what)):
        problems.append(f"{requirement} is not one exact version (name==version)")
    if not sha256:
        problems.append(f"the wheel of {requirement} has no pinned sha256")
    return problems


def corpus_pin_problems(pins: Mapping) -> list[str]:
    """What is not pinned in a corpus's pins (see :data:`diversity_core.data.text.CORPUS_PINS`)."""
    problems = []
    for source in pins["sources"]:
        if source["kind"] == "wheel":
            problems += requirement_problems(source["requirement"], source.get("sha256"),
                                              "a corpus wheel")
        elif source["kind"] == "hf":
            if not is_commit(source["revision"]):
                problems.append(f"revision {source['revision']!r} of {source['repo']} is not a "
                                "commit")
            files = source.get("files") or {}
            problems += [f"{path} of {source['repo']} has no pinned sha256"
                         for path, sha256 in files.items() if sha256 is None]
            if "split" in source and not any(files.values()):
                # Found in the listing: pinned only once every shard it gives is pinned by
                # path (checked again, shard by shard, when they are fetched).
                problems.append(f"the shards of {source.get('config')}/{source['split']} of "
                                f"{source['repo']} have no pinned sha256")
            problems += url_problems(source.get("endpoint") or "https://huggingface.co")
    return problems


def text_model_pin_problems(pins: Mapping) -> list[str]:
    """What is not pinned in a sentence model's pins (see
    :data:`diversity_core.embed.sentences.TEXT_MODELS`)."""
    problems = []
    for wheel in pins.get("wheels", []):
        problems += requirement_problems(wheel["requirement"], wheel.get("sha256"),
                                          "a text-model wheel")
    if "package" in pins:
        requirement = pins["package"]["requirement"]
        if not is_exact_requirement(pip_requirement(requirement, what="a text-model package")):
            problems.append(f"{requirement} is not one exact version (name==version)")
    if "hub" in pins:
        hub = pins["hub"]
        if not is_commit(hub.get("revision")):
            problems.append(f"revision {hub.get('revision')!r} of {hub['repo_id']} is not a "
                            "commit")
        if not pins.get("files"):
            problems.append(f"the files of {hub['repo_id']} have no pinned sha256")
    return problems


def download_problems(section: Mapping, checksum_keys) -> list[str]:
    """What is not pinned in a download's configuration section (``url`` and the checksums
    ``checksum_keys``): a plain-HTTP address, no checksum."""
    problems = url_problems(section["url"])
    if not any(section.get(key) for key in checksum_keys):
        problems.append(f"no checksum is pinned ({' or '.join(checksum_keys)} is null)")
    return problems
