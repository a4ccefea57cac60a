"""Shared pytest fixtures."""

from __future__ import annotations

import http.server
import os
import threading

import pytest


@pytest.fixture(scope="session")
def magnipy():
    """The bridge to the reference library magnipy 1.0.0 (tests/magnipy_bridge.py).

    Yields the ``magnipy_bridge`` module with its interpreter resolved (``MAGNIPY_PYTHON`` or a
    cached venv created on first use). Skips only if ``DIVERSITY_CORE_SKIP_MAGNIPY=1``; any other
    set-up failure is an error, so that CI really compares against the reference.
    """
    if os.environ.get("DIVERSITY_CORE_SKIP_MAGNIPY") == "1":
        pytest.skip("magnipy comparison disabled by DIVERSITY_CORE_SKIP_MAGNIPY=1")
    import magnipy_bridge

    magnipy_bridge.magnipy_python()  # create or check the venv now: errors surface here
    yield magnipy_bridge


@pytest.fixture
def http_root(tmp_path):
    """A local HTTP server on 127.0.0.1 serving ``tmp_path / "www"``: (folder, base URL)."""
    root = tmp_path / "www"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
