"""Shared pytest fixtures."""

from __future__ import annotations

import http.server
import os
import threading
from pathlib import Path

import pytest
from workflow_runner import REPO, run_snakemake

# The image experiment's assets, fetched into the repository's resources/ by the pipeline's rules.
IMAGE_DATASET = REPO / "resources" / "fashion_mnist"
IMAGE_MODEL = REPO / "resources" / "inception" / "fid_inception_v3.pt"


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


@pytest.fixture(scope="session")
def image_assets():
    """Fashion-MNIST and the Inception TorchScript in resources/, fetched (and checksummed) by
    the pipeline's own rules if missing (the package registries are reachable wherever the
    project installs, CI included), so that the image tests run rather than skip."""
    rules = ("images_fetch_fashion_mnist", "images_fetch_inception")
    if not (IMAGE_DATASET / "train-images-idx3-ubyte.gz").exists() or not IMAGE_MODEL.exists():
        run_snakemake(*rules)
    elif not all((folder / ".pins.json").exists() for folder in (IMAGE_DATASET,
                                                                 IMAGE_MODEL.parent)):
        # Fetched before fetches wrote manifests: nothing would read them now; fetch again.
        run_snakemake(*rules, "--forcerun", *rules)
    return IMAGE_DATASET, IMAGE_MODEL


def link_image_assets(resources: Path) -> Path:
    """A resources folder for a tiny run that links to the fetched image assets (whole
    folders, so that each keeps the .pins.json its fetch wrote)."""
    resources.mkdir(parents=True, exist_ok=True)
    (resources / "fashion_mnist").symlink_to(IMAGE_DATASET, target_is_directory=True)
    (resources / "inception").symlink_to(IMAGE_MODEL.parent, target_is_directory=True)
    return resources
