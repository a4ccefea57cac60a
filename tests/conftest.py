"""Shared pytest fixtures."""

from __future__ import annotations

import http.server
import os
import threading
from pathlib import Path

import pytest
from workflow_runner import REPO, run_snakemake, run_tiny

# The image experiment's assets, fetched into the repository's resources/ by the pipeline's rules.
IMAGE_DATASET = REPO / "resources" / "fashion_mnist"
IMAGE_MODEL = REPO / "resources" / "inception" / "fid_inception_v3.pt"


@pytest.fixture(scope="session")
def magnipy():
    """The bridge to the reference library magnipy 1.0.0 (tests/support/magnipy_bridge.py).

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


def fetch_image_assets():
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


@pytest.fixture(scope="session")
def image_assets():
    """:func:`fetch_image_assets`, once per session."""
    return fetch_image_assets()


def link_image_assets(resources: Path) -> Path:
    """A resources folder for a tiny run that links to the fetched image assets (whole
    folders, so that each keeps the .pins.json its fetch wrote)."""
    resources.mkdir(parents=True, exist_ok=True)
    (resources / "fashion_mnist").symlink_to(IMAGE_DATASET, target_is_directory=True)
    (resources / "inception").symlink_to(IMAGE_MODEL.parent, target_is_directory=True)
    return resources


# The text assets a tiny run reads from the repository's resources/text (fetched there by the
# pipeline's rules when missing, as for a user); the embedding cache of the model experiment stays
# in the session's own resources, so that each session embeds from scratch once.
SHARED_TEXT_ASSETS = ("corpora", "models", "lm")


class TinyRuns:
    """Each experiment's tiny configuration (``.test/config_<target>.yaml``), run at most once per
    test session, when a test first asks for it, into one session folder: ``results/<folder>``
    per experiment beside the others (as rule ``all`` lays them out), one ``resources/`` for all
    (the image assets and the text assets linked to the repository's resources/, the ZINC
    molecules fetched into it on first use). ``tiny_run(target)`` returns the folder that holds
    ``results/`` and ``resources/``, like :func:`workflow_runner.run_tiny`'s ``out``.

    The outputs are shared: a test reads them and never writes into them; a test that changes a
    file works on a copy (``shutil.copytree`` keeps the timestamps: Snakemake sees the copy up to
    date). ``rerun(target)`` is a second run of the same configuration from an empty results
    folder (after the first, with the same resources), for the tests that compare a rerun byte
    for byte; it too runs once per session, in its own folder, and belongs to those tests (one
    adds a run with another batching into it)."""

    def __init__(self, root: Path):
        self.root = root
        self.resources = root / "resources"
        self._done: set[str] = set()
        self._reruns: dict[str, Path] = {}
        text = self.resources / "text"
        text.mkdir(parents=True)
        (text / "embedding_cache").mkdir()
        for name in SHARED_TEXT_ASSETS:
            shared = REPO / "resources" / "text" / name
            shared.mkdir(parents=True, exist_ok=True)
            (text / name).symlink_to(shared, target_is_directory=True)

    def _prepare(self, experiment: str) -> None:
        if experiment == "image_mode_dropping" and not (self.resources / "inception").exists():
            fetch_image_assets()
            (self.resources / "fashion_mnist").symlink_to(IMAGE_DATASET, target_is_directory=True)
            (self.resources / "inception").symlink_to(IMAGE_MODEL.parent,
                                                      target_is_directory=True)

    def __call__(self, experiment: str) -> Path:
        if experiment not in self._done:
            self._prepare(experiment)
            run_tiny(experiment, self.root, resources=self.resources)
            self._done.add(experiment)
        return self.root

    def rerun(self, experiment: str) -> Path:
        if experiment not in self._reruns:
            self(experiment)
            out = self.root / "reruns" / experiment
            run_tiny(experiment, out, resources=self.resources)
            self._reruns[experiment] = out
        return self._reruns[experiment]


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> TinyRuns:
    """The tiny experiments, each run once per session (see :class:`TinyRuns`)."""
    return TinyRuns(tmp_path_factory.mktemp("tiny"))
