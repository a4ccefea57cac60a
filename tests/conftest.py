"""Shared pytest fixtures."""

from __future__ import annotations

import os

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
