"""HTTP transfers that end: the one place where the pipeline's downloads and hub listings talk to
a server (:func:`stream_to_file`, :func:`get_json_pages`).

:mod:`requests` and :mod:`urllib3` do the protocol (connections, TLS, redirects, chunked and
content-encoded bodies); what they lack is written here, because no well-kept library offers it
for a plain GET and :mod:`pooch`'s ``HTTPDownloader`` (used before) offers only a per-read
timeout:

* an overall deadline and a minimum average rate: a per-read timeout never fires on a server that
  sends one byte every 59 s, so the body is read with ``read1`` (whatever has arrived, never
  waiting for a full chunk) and the clock and the rate are checked after every read;
* a byte cap enforced while streaming (a declared size, from a hub listing or a caller, is a
  cap: the transfer stops at the first byte past it, before the disk fills);
* the digest computed while streaming (the file is never read back whole);
* a redirect to plain HTTP outside the loopback refused in strict mode (a redirect hook), and a
  redirect loop cut at :attr:`HttpLimits.max_redirects`;
* paginated JSON (``Link: <...>; rel="next"``, the hub's tree API) bounded in pages and in bytes
  per page, a page that points back to one already read refused.

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
    """

    connect_timeout: float = 30.0
    read_timeout: float = 120.0
    min_rate: float = 4096.0
    rate_window: float = 120.0
    deadline: float | None = 6 * 3600.0
    max_redirects: int = 10
    max_pages: int = 10_000
    max_page_bytes: int = 64 << 20


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
    """A transfer that was stopped: too slow, past its deadline, past its size, a refused
    redirect, a listing that loops. ``str()`` says what and why, ``reason`` why alone."""

    def __init__(self, what: str, reason: str):
        super().__init__(f"{what}: {reason}")
        self.reason = reason


def _redirect_guard(strict: bool | None) -> Callable:
    """A response hook that refuses, in strict mode, a redirect from HTTPS (or the loopback) to
    plain HTTP elsewhere; outside strict mode it is logged."""

    def hook(response, *args, **kwargs):
        if not response.is_redirect:
            return response
        target = urllib.parse.urljoin(response.url, response.headers.get("location", ""))
        problems = url_problems(target)
        if problems and not url_problems(response.url):
            if strict_assets(strict):
                raise TransferError(response.url, f"redirects to {target}, plain HTTP "
                                    "outside the loopback: strict_assets refuses it")
            log.warning("%s redirects to plain HTTP: %s", response.url, target)
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


def _get(http, url: str, what: str):
    """``GET url`` streamed, status checked (``requests.HTTPError`` on 4xx/5xx)."""
    response = http.get(url, stream=True,
                        timeout=(LIMITS.connect_timeout, LIMITS.read_timeout))
    response.raise_for_status()
    return response


def _read(response, clock: _Clock, cap: int | None, what: str) -> Iterator[bytes]:
    """The body of ``response`` in pieces as they arrive, stopped at the first byte past ``cap``
    and whenever ``clock`` says so."""
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
        if cap is not None and received > cap:
            raise TransferError(what, f"the server sent more than {cap} bytes; stopped there")
        yield block


_REPORT_EVERY = 100 * 10**6


def stream_to_file(url: str, out: Path, *, algorithm: str = "sha256", size: int | None = None,
                   strict: bool | None = None, what: str) -> tuple[str, int]:
    """Write the body of ``GET url`` to ``out`` (a temporary file of the caller's, created
    exclusively: it is overwritten); return (digest, bytes).

    ``size``: the size the caller knows (a hub listing's): the transfer stops at the first byte
    past it, and fewer is an error too. A ``Content-Length`` larger than ``size`` is refused
    before the body is read. Raises :class:`TransferError` (deadline, rate, size, redirect) or
    :mod:`requests`' errors (HTTP status, connection, timeout, too many redirects).
    """
    h = hashlib.new(algorithm)
    clock = _Clock(what)
    with session(strict) as http, _get(http, url, what) as response:
        declared = response.headers.get("content-length")
        if size is not None and declared and declared.isdigit() and int(declared) > size:
            raise TransferError(what, f"the server announces {declared} bytes, the listing "
                                f"{size}; nothing was read")
        received, reported = 0, 0
        log.info("%s: downloading %s (%s bytes)", what, url, declared or size or "unknown")
        with open(out, "wb") as stream:
            for block in _read(response, clock, size, what):
                h.update(block)
                stream.write(block)
                received += len(block)
                if received - reported >= _REPORT_EVERY:  # a long download says it is alive
                    reported = received
                    log.info("%s: %d MB so far", what, received // 10**6)
    if size is not None and received != size:
        raise TransferError(what, f"{received} bytes arrived, the listing declares {size}")
    return h.hexdigest(), received


def get_json_pages(url: str, *, strict: bool | None = None, what: str) -> Iterator:
    """The JSON documents of ``url`` and of every page its ``Link: <...>; rel="next"`` headers
    lead to, in order (the hub's tree API pages its listings so).

    Bounded: at most :attr:`HttpLimits.max_pages` pages of :attr:`HttpLimits.max_page_bytes`
    each; a next page that was read already (a loop) raises :class:`TransferError`, as does a
    page that is not JSON (``ValueError`` naming the page).
    """
    seen = set()
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
            with _get(http, url, what) as response:
                body = b"".join(_read(response, clock, LIMITS.max_page_bytes, what))
                following = response.links.get("next", {}).get("url")
            try:
                yield json.loads(body)
            except (ValueError, RecursionError) as exc:
                raise ValueError(f"{what}: the listing page {url} is not JSON "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from None
            url = urllib.parse.urljoin(url, following) if following else None
