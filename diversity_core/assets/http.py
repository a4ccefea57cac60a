"""HTTP transfers that end: the one place where the pipeline's downloads and hub listings talk to
a server (:func:`stream_to_file`, :func:`get_json_pages`).

:mod:`requests` and :mod:`urllib3` do the protocol (connections, TLS, redirects, chunked and
content-encoded bodies); what they lack is written here, because no well-kept library offers it
for a plain GET and :mod:`pooch`'s ``HTTPDownloader`` (used before) offers only a per-read
timeout:

* an overall deadline and a minimum average rate: a per-read timeout never fires on a server that
  sends one byte every 59 s, so the body is read with ``read1`` (whatever has arrived, never
  waiting for a full chunk) and the clock and the rate are checked after every read;
* a byte cap on every transfer, set before it starts and enforced while streaming: the size a
  hub listing or a caller declares, else the caller's ceiling for the asset (at most
  :attr:`HttpLimits.max_file_bytes`); the bytes counted are those that reach the disk, after
  :mod:`urllib3` decodes a ``Content-Encoding`` (gzip, deflate: a small compressed response
  cannot write more than the cap), and a ``Content-Length`` past the cap is refused unread;
* only a ``200 OK`` is a body: a ``206`` nobody asked for (half a file), a ``204``, a ``3xx``
  that was not followed (no ``Location``) is refused before anything is written;
* the digest computed while streaming (the file is never read back whole);
* every address the client follows, a redirect's ``Location`` and a listing's next page alike,
  goes through one check (:func:`follow_problem`): only HTTP(S), and in strict mode no plain
  HTTP outside the loopback (:func:`.pins.url_problems`); a redirect loop is cut at
  :attr:`HttpLimits.max_redirects`;
* paginated JSON (``Link: <...>; rel="next"``, the hub's tree API) bounded in pages, in bytes
  per page, and in entries and bytes in all (a listing whose every page carries a new cursor
  ends there), a page that points back to one already read refused.

The limits are one frozen :class:`HttpLimits`, :data:`LIMITS`; tests give shorter ones
(:func:`limits`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .pins import strict_assets, url_problems

__all__ = [
    "LIMITS",
    "HttpLimits",
    "TransferError",
    "WriteError",
    "follow_problem",
    "get_json_pages",
    "limits",
    "session",
    "stream_to_file",
]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class HttpLimits:
    """How long and how much any one transfer may take.

    Attributes
    ----------
    connect_timeout : seconds to open a connection
    read_timeout : seconds a single read may wait for data
    min_rate : bytes per second, averaged over ``rate_window`` seconds, below which a transfer is
        abandoned (a trickling server)
    rate_window : seconds over which ``min_rate`` is measured (the first window is grace)
    deadline : seconds a whole transfer may take, whatever its rate (None: no such limit; the
        minimum rate still ends a slow one)
    max_redirects : redirects followed per request (a loop ends here)
    max_pages : pages of one paginated listing
    max_page_bytes : bytes of one page of JSON
    max_listing_bytes : bytes of all the pages of one listing together
    max_listing_entries : entries of all the pages of one listing together (a page that is a
        JSON list counts its items)
    max_file_bytes : bytes of one download whose size nobody declares (the ceiling of a
        caller's own, per asset, is lower)
    """

    connect_timeout: float = 30.0
    read_timeout: float = 120.0
    min_rate: float = 4096.0
    rate_window: float = 120.0
    deadline: float | None = 6 * 3600.0
    max_redirects: int = 10
    max_pages: int = 10_000
    max_page_bytes: int = 64 << 20
    max_listing_bytes: int = 256 << 20
    max_listing_entries: int = 200_000
    max_file_bytes: int = 8 << 30


LIMITS = HttpLimits()


@contextmanager
def limits(**changes) -> Iterator[HttpLimits]:
    """Use :data:`LIMITS` with ``changes`` inside the block (tests: short deadlines)."""
    global LIMITS
    saved = LIMITS
    LIMITS = dataclasses.replace(saved, **changes)
    try:
        yield LIMITS
    finally:
        LIMITS = saved


class TransferError(OSError):
    """A transfer that was stopped: too slow, past its deadline, past its size, a response that
    is not the file, a refused address, a listing that loops or grows without end. ``str()``
    says what and why, ``reason`` why alone."""

    def __init__(self, what: str, reason: str):
        super().__init__(f"{what}: {reason}")
        self.reason = reason


def follow_problem(source: str, target: str, strict: bool | None = None) -> str | None:
    """Why the client must not follow ``source`` to ``target`` (a redirect's ``Location``, a
    listing's next page), in words ("<target>, <why>" reads whole), or None: a scheme other
    than HTTP(S) always; in strict mode an address that is not pinned
    (:func:`.pins.url_problems`: plain HTTP outside the loopback). Outside strict mode a step
    from HTTPS (or the loopback) down to plain HTTP elsewhere is logged."""
    scheme = urllib.parse.urlsplit(target).scheme.lower()
    if scheme not in ("http", "https"):
        return "not an HTTP(S) address"
    if url_problems(target):
        if strict_assets(strict):
            return "plain HTTP outside the loopback: strict_assets refuses it"
        if not url_problems(source):
            log.warning("%s leads to plain HTTP: %s", source, target)
    return None


def _redirect_guard(strict: bool | None) -> Callable:
    """A response hook that puts every redirect through :func:`follow_problem`."""

    def hook(response, *args, **kwargs):
        if not response.is_redirect:
            return response
        target = urllib.parse.urljoin(response.url, response.headers.get("location", ""))
        problem = follow_problem(response.url, target, strict)
        if problem:
            raise TransferError(response.url, f"redirects to {target}, {problem}")
        return response

    return hook


def session(strict: bool | None = None):
    """A :class:`requests.Session` with the redirect bound and the strict-mode redirect guard."""
    import requests

    http = requests.Session()
    http.max_redirects = LIMITS.max_redirects
    http.hooks["response"].append(_redirect_guard(strict))
    return http


class _Clock:
    """The deadline and the minimum rate of one transfer."""

    def __init__(self, what: str):
        self.what = what
        self.start = self.window_start = time.monotonic()
        self.window_bytes = 0

    def tick(self, received: int) -> None:
        now = time.monotonic()
        if LIMITS.deadline is not None and now - self.start > LIMITS.deadline:
            raise TransferError(self.what, f"stopped after {now - self.start:.0f} s, past the "
                                f"deadline of {LIMITS.deadline:g} s")
        self.window_bytes += received
        elapsed = now - self.window_start
        if elapsed >= LIMITS.rate_window:
            rate = self.window_bytes / elapsed
            if rate < LIMITS.min_rate:
                raise TransferError(self.what, f"stopped, {rate:.0f} bytes/s over the last "
                                    f"{elapsed:.0f} s, under the minimum of "
                                    f"{LIMITS.min_rate:g} bytes/s")
            self.window_start, self.window_bytes = now, 0


def _get(http, url: str, what: str, strict: bool | None):
    """``GET url`` streamed, the address put through :func:`follow_problem` first (the first
    address of a transfer as every later one), status checked: ``requests.HTTPError`` on
    4xx/5xx, :class:`TransferError` for any other status but ``200 OK`` (no ``Range`` is sent, so a
    ``206`` is a part nobody asked for; a ``204`` or ``304`` has no body; a ``3xx`` that was not
    followed has no ``Location``): nothing of such a response is read."""
    problem = follow_problem(url, url, strict)
    if problem:
        raise TransferError(what, f"{url}, {problem}")
    response = http.get(url, stream=True,
                        timeout=(LIMITS.connect_timeout, LIMITS.read_timeout))
    try:
        response.raise_for_status()
        if response.status_code != 200:
            raise TransferError(what, f"the server answered HTTP {response.status_code} "
                                f"{response.reason}, not 200 OK: not the file asked for")
    except BaseException:
        response.close()
        raise
    return response


def _read(response, clock: _Clock, cap: int, bound: str, what: str) -> Iterator[bytes]:
    """The body of ``response`` in pieces as they arrive (decoded: what reaches the disk),
    stopped at the first byte past ``cap`` (``bound`` says what it is) and whenever ``clock``
    says so."""
    import urllib3

    raw = response.raw
    received = 0
    while True:
        # read1: what has arrived (at most 1 MiB), not a full chunk: the clock runs between reads.
        try:
            block = raw.read1(1 << 20, decode_content=True)
        except urllib3.exceptions.ReadTimeoutError:
            raise TransferError(what, f"timed out: no data for {LIMITS.read_timeout:g} s after "
                                      f"{received} bytes") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # a broken or short body
            raise TransferError(what, f"the transfer broke after {received} bytes "
                                      f"({type(exc).__name__}: {exc})") from None
        clock.tick(len(block))
        if not block:
            return
        received += len(block)
        if received > cap:
            raise TransferError(what, f"the server sent more than {bound}; stopped there")
        yield block


_REPORT_EVERY = 100 * 10**6


class WriteError(OSError):
    """The file a transfer was written to could not take more (a full disk, a file size limit):
    not the server's fault. ``str()`` names the file and the system's reason, ``reason`` is the
    system's reason alone, ``received`` how many bytes had arrived."""

    def __init__(self, path, exc: OSError, received: int):
        super().__init__(exc.errno, f"{path}: {exc.strerror or exc}")
        self.reason = exc.strerror or str(exc)
        self.received = received


def stream_to_file(url: str, out: Path, *, algorithm: str = "sha256", size: int | None = None,
                   max_bytes: int | None = None, strict: bool | None = None,
                   what: str) -> tuple[str, int]:
    """Write the body of ``GET url`` to ``out`` (a temporary file of the caller's, created
    exclusively: it is overwritten); return (digest, bytes).

    The transfer has a byte cap before it starts: ``size``, the size the caller knows (a hub
    listing's: fewer bytes are an error too), else ``max_bytes``, the caller's ceiling for the
    asset, else :attr:`HttpLimits.max_file_bytes` (never more). It stops at the first byte past
    the cap, counted as written (after a ``Content-Encoding`` is decoded); a ``Content-Length``
    past it is refused before the body is read. Raises :class:`TransferError` (deadline, rate,
    size, status, refused address), :class:`WriteError` (the disk) or :mod:`requests`' errors
    (HTTP status, connection, timeout, too many redirects).
    """
    ceiling = min(max_bytes if max_bytes is not None else LIMITS.max_file_bytes,
                  LIMITS.max_file_bytes)
    cap = size if size is not None else ceiling
    bound = (f"{size} bytes (the size the listing declares)" if size is not None else
             f"{cap} bytes (the ceiling for this file)")
    h = hashlib.new(algorithm)
    clock = _Clock(what)
    with session(strict) as http, _get(http, url, what, strict) as response:
        declared = response.headers.get("content-length")
        encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
        if declared and declared.isdigit() and int(declared) > cap and not encoded:
            raise TransferError(what, f"the server announces {declared} bytes, more than "
                                f"{bound}; nothing was read")
        received, reported = 0, 0
        log.info("%s: downloading %s (%s bytes)", what, url, declared or size or "unknown")
        try:
            with open(out, "wb") as stream:
                for block in _read(response, clock, cap, bound, what):
                    h.update(block)
                    stream.write(block)
                    received += len(block)
                    if received - reported >= _REPORT_EVERY:  # a long download says it is alive
                        reported = received
                        log.info("%s: %d MB so far", what, received // 10**6)
        except TransferError:
            raise
        except OSError as exc:
            raise WriteError(out, exc, received) from exc
    if size is not None and received != size:
        raise TransferError(what, f"{received} bytes arrived, the listing declares {size}")
    return h.hexdigest(), received


def get_json_pages(url: str, *, strict: bool | None = None, what: str) -> Iterator:
    """The JSON documents of ``url`` and of every page its ``Link: <...>; rel="next"`` headers
    lead to, in order (the hub's tree API pages its listings so).

    Bounded: at most :attr:`HttpLimits.max_pages` pages of :attr:`HttpLimits.max_page_bytes`
    each, :attr:`HttpLimits.max_listing_bytes` and :attr:`HttpLimits.max_listing_entries` (the
    items of pages that are lists) in all; a next page that was read already (a loop), or that
    :func:`follow_problem` refuses, raises :class:`TransferError`, as does a page that is not
    JSON (``ValueError`` naming the page).
    """
    seen = set()
    total_bytes = total_entries = 0
    with session(strict) as http:
        while url:
            if url in seen:
                raise TransferError(what, f"the listing's page {url} links back to a page "
                                    "already read (a pagination loop); stopped")
            if len(seen) >= LIMITS.max_pages:
                raise TransferError(what, f"the listing has more than {LIMITS.max_pages} "
                                    "pages; stopped")
            seen.add(url)
            clock = _Clock(what)
            left = LIMITS.max_listing_bytes - total_bytes
            cap, bound = ((LIMITS.max_page_bytes, f"{LIMITS.max_page_bytes} bytes (a page's "
                           "limit)") if LIMITS.max_page_bytes <= left else
                          (left, f"{left} bytes (what is left of the listing's limit of "
                           f"{LIMITS.max_listing_bytes} bytes in all)"))
            with _get(http, url, what, strict) as response:
                body = b"".join(_read(response, clock, cap, bound, what))
                following = response.links.get("next", {}).get("url")
            total_bytes += len(body)
            try:
                page = json.loads(body)
            except (ValueError, RecursionError) as exc:
                raise ValueError(f"{what}: the listing page {url} is not JSON "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from None
            del body
            total_entries += len(page) if isinstance(page, list) else 1
            if total_entries > LIMITS.max_listing_entries:
                raise TransferError(what, f"the listing holds more than "
                                    f"{LIMITS.max_listing_entries} entries; stopped")
            yield page
            if following:
                target = urllib.parse.urljoin(url, following)
                problem = follow_problem(url, target, strict)
                if problem:
                    raise TransferError(what, f"the listing's page {url} links its next page "
                                        f"to {target}, {problem}")
                url = target
            else:
                url = None
