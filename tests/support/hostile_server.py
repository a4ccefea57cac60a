"""One local HTTP server on 127.0.0.1 that misbehaves in every way a download or a hub listing
must survive, one behaviour per path, each bounded so that it stops by itself:

==============================  ============================================================
path                            behaviour
==============================  ============================================================
``/file/<name>``                the bytes registered for ``<name>`` (an honest file), also
                                at ``/<repo>/resolve/<revision>/<name>`` (the hub's files)
``/stall-headers``              accepts, never answers (until the server closes)
``/stall-body``                 headers and 10 bytes of a 1,000-byte body, then silence
``/trickle``                    one byte every ``trickle_interval`` s, up to 600 bytes
``/endless``                    no Content-Length, ``endless_bytes`` bytes of zeros
``/announce-big``               Content-Length of 1 GiB, a few bytes
``/html``                       an HTML error page with status 200
``/redirect-loop``              302 to itself
``/redirect-http``              302 to plain HTTP on a host that is not the loopback
``/api/.../tree/<rev>``         a listing (``listings[<rev>]``): pages of 2 entries, Link next
``/api/.../tree/self-link``     a page whose ``Link: rel="next"`` is the page itself
``/api/.../tree/endless``       pages without end, each linking to the next
``/api/.../tree/not-json``      a page that is not JSON
``/api/agent-harnesses``        a JSON list (what broke huggingface_hub's cache)
``/gzip``                       ``Content-Encoding: gzip`` of ``gzip_bytes`` zeros (a few KB
                                on the wire)
``/status/<code>/<name>``       status ``<code>`` (206, 300 without Location, 204) with the
                                registered file ``<name>`` as body (none for a 204)
``/api/.../tree/new-cursor``    pages of ``page_entries`` entries, each linking to a new
                                cursor, ``cursor_pages`` pages at most
``/api/.../tree/next-to``       one page linking its next page to ``next_url``
==============================  ============================================================

``hold``: a :class:`threading.Event` that ``/file/`` and the hub's files wait for before they
answer (a download caught in the middle, for races between processes), None by default.

Every path that was asked for is recorded (``server.requested``).
"""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import urllib.parse
from contextlib import contextmanager

_BOUND = 20.0  # seconds any misbehaviour lasts at most, whatever the client does


class _Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: dict

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server is closing; whether to go on."""
        return not self.state["closing"].wait(seconds)

    def do_GET(self):  # noqa: C901 - one branch per behaviour, listed in the module docstring
        path, _, query = self.path.partition("?")
        self.state["requested"].append(path)
        base = f"http://{self.headers['Host']}"
        try:
            if path.startswith("/file/") or "/resolve/" in path:
                name = (path[len("/file/"):] if path.startswith("/file/") else
                        path.split("/resolve/", 1)[1].split("/", 1)[1])
                body = self.state["files"].get(urllib.parse.unquote(name))
                if body is not None and self.state["hold"] is not None:
                    self.state["hold"].wait(_BOUND)
                return self._send(404, b"") if body is None else self._send(200, body)
            if path == "/gzip":
                body = gzip.compress(b"\0" * self.state["gzip_bytes"], compresslevel=9)
                return self._send(200, body, {"Content-Encoding": "gzip"})
            if path.startswith("/status/"):
                code, name = path[len("/status/"):].split("/", 1)
                body = b"" if code == "204" else self.state["files"].get(name, b"")
                if code == "204":  # no body, no length
                    self.send_response(204)
                    self.end_headers()
                    return None
                headers = {"Content-Range": f"bytes 0-{len(body) - 1}/{2 * len(body)}"} \
                    if code == "206" else {}
                return self._send(int(code), body, headers)
            if path == "/stall-headers":
                self._wait(_BOUND)
                return None
            if path == "/stall-body":
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b"0123456789")
                self.wfile.flush()
                self._wait(_BOUND)
                return None
            if path == "/trickle":
                self.send_response(200)
                self.send_header("Content-Length", "600")
                self.end_headers()
                for _ in range(600):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    if not self._wait(self.state["trickle_interval"]):
                        break
                return None
            if path == "/endless":
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                block, sent = b"\0" * 65536, 0
                while sent < self.state["endless_bytes"] and not self.state["closing"].is_set():
                    self.wfile.write(block)
                    sent += len(block)
                self.close_connection = True
                return None
            if path == "/announce-big":
                self.send_response(200)
                self.send_header("Content-Length", str(1 << 30))
                self.end_headers()
                self.wfile.write(b"PK\x03\x04")
                self.close_connection = True
                return None
            if path == "/html":
                return self._send(200, b"<!DOCTYPE html>\n<html><body>Error 503: try again "
                                       b"later</body></html>\n",
                                  {"Content-Type": "text/html"})
            if path == "/redirect-loop":
                return self._send(302, b"", {"Location": "/redirect-loop"})
            if path == "/redirect-http":
                return self._send(302, b"", {"Location": "http://example.invalid/data.zip"})
            if path == "/api/agent-harnesses":
                return self._send(200, b"[]", {"Content-Type": "application/json"})
            if path.startswith("/api/") and "/tree/" in path:
                return self._listing(path, query, base)
            return self._send(404, b"")
        except (BrokenPipeError, ConnectionResetError):  # the client gave up: as it should
            return None

    def _listing(self, path: str, query: str, base: str) -> None:
        revision = urllib.parse.unquote(path.split("/tree/", 1)[1])
        cursor = int(urllib.parse.parse_qs(query).get("cursor", ["0"])[0])
        if revision == "self-link":
            return self._send(200, b"[]", {"Link": f'<{base}{path}?{query}>; rel="next"'})
        if revision == "endless":
            following = f"{base}{path}?cursor={cursor + 1}"
            return self._send(200, b"[]", {"Link": f'<{following}>; rel="next"'})
        if revision == "new-cursor":
            page = [{"type": "file", "path": f"p{cursor}/f{i}.txt", "size": 1,
                     "oid": f"{i:040x}"} for i in range(self.state["page_entries"])]
            headers = {"Content-Type": "application/json"}
            if cursor + 1 < self.state["cursor_pages"]:
                headers["Link"] = f'<{base}{path}?cursor={cursor + 1}>; rel="next"'
            return self._send(200, json.dumps(page).encode(), headers)
        if revision == "next-to":
            return self._send(200, b"[]", {"Link": f'<{self.state["next_url"]}>; rel="next"'})
        if revision == "not-json":
            return self._send(200, b"<html>not json</html>")
        entries = self.state["listings"].get(revision)
        if entries is None:
            return self._send(404, b"")
        page = entries[cursor:cursor + 2]
        headers = {"Content-Type": "application/json"}
        if cursor + 2 < len(entries):
            headers["Link"] = f'<{base}{path}?recursive=true&cursor={cursor + 2}>; rel="next"'
        return self._send(200, json.dumps(page).encode(), headers)


class HostileServer:
    """The server's state, as tests set and read it: ``url``, ``files`` (name -> bytes for
    ``/file/<name>``), ``listings`` (revision -> tree entries), ``requested`` (paths asked for),
    ``trickle_interval``, ``endless_bytes``, ``gzip_bytes``, ``page_entries``, ``cursor_pages``,
    ``next_url`` and ``hold``."""

    def __init__(self, url: str, state: dict):
        self.url = url
        self._state = state

    def __getattr__(self, name):
        try:
            return self._state[name]
        except KeyError:
            raise AttributeError(name) from None

    def set(self, **values) -> None:
        self._state.update(values)


@contextmanager
def hostile_server():
    """Serve the behaviours of the module docstring on 127.0.0.1; yields a
    :class:`HostileServer`. On exit every stalled handler is released and the server closed."""
    state = {"files": {}, "listings": {}, "requested": [], "trickle_interval": 0.1,
             "endless_bytes": 64 << 20, "gzip_bytes": 8 << 20, "page_entries": 10,
             "cursor_pages": 200, "next_url": "", "hold": None,
             "closing": threading.Event()}
    handler = type("Handler", (_Hostile,), {"state": state})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield HostileServer(f"http://127.0.0.1:{server.server_address[1]}", state)
    finally:
        state["closing"].set()
        if state["hold"] is not None:
            state["hold"].set()
        server.shutdown()
        server.server_close()
