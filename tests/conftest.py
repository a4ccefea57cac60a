"""Shared pytest fixtures."""

from __future__ import annotations

import http.server
import os
import resource
import threading
from pathlib import Path

import pytest
from filelock import FileLock
from workflow_runner import REPO, run_snakemake, run_tiny

# The image experiment's assets, fetched into the repository's resources/ by the pipeline's rules.
IMAGE_DATASET = REPO / "resources" / "fashion_mnist"
IMAGE_MODEL = REPO / "resources" / "inception" / "fid_inception_v3.pt"


# The files whose Snakemake runs take minutes, longest first: pytest-xdist hands whole files to its
# two processes in collection order (`--no-loadscope-reorder` in pyproject.toml; by default it
# starts the files with the most tests first, and these have few), so that the long files start
# at once, side by side, and the many short files fill the gaps: no process is left with one
# long file at the end. The report comes after the experiments' own files, whose tiny runs it
# reads.
LONGEST_FIRST = (
    "pipeline/test_text_pipeline.py",
    "pipeline/test_paper_rehearsal.py",
    "pipeline/test_slurm.py",
    "pipeline/test_text_grid.py",
    "experiments/test_model_distinguishing.py",
    "pipeline/test_images_pipeline.py",
    "pipeline/test_pipeline_curvature.py",
    "pipeline/test_graphs_pipeline.py",
    "pipeline/test_report.py",
)


def pytest_collection_modifyitems(config, items):
    """The files of :data:`LONGEST_FIRST` first, in its order; the others as collected."""
    tests = Path(__file__).parent
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item):
        try:
            name = item.path.relative_to(tests).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=key)


def _cpu_seconds() -> float:
    """User and system CPU of this process and of its children that have ended (Snakemake and
    the interpreters a test starts)."""
    return sum(usage.ru_utime + usage.ru_stime for usage in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


_CPU_BY_FILE: dict[str, float] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The CPU seconds of each file's tests, with their fixtures (a tiny run counts to the
    first file that asks for it), written on DIVERSITY_CORE_TEST_CPU's file at the end
    (one line per file and test process: CPU seconds, tab, file)."""
    start = _cpu_seconds()
    yield
    _CPU_BY_FILE[item.nodeid.split("::")[0]] = (_CPU_BY_FILE.get(item.nodeid.split("::")[0], 0.0)
                                                + _cpu_seconds() - start)


def pytest_sessionfinish(session):
    path = os.environ.get("DIVERSITY_CORE_TEST_CPU")
    if path and _CPU_BY_FILE:
        with open(path, "a", encoding="utf-8") as log:
            log.writelines(f"{cpu:.1f}\t{name}\n" for name, cpu in _CPU_BY_FILE.items())


@pytest.fixture(autouse=True)
def _registry_unchanged():
    """The measure registry is one table every reader shares: a test that registers a measure
    restores it (tests/measures/test_plugins.py's ``clean_registry``) or runs in a process of
    its own, and the test that leaves a measure behind fails here, not a later test that
    happens to share its worker."""
    from diversity_core.measures.registry import MEASURES
    before = list(MEASURES)
    yield
    after = list(MEASURES)
    assert after == before, f"the test left the measure registry changed: {before} -> {after}"


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
    # One fetch at a time: the test processes that need the assets wait for the first one's.
    IMAGE_DATASET.parent.mkdir(exist_ok=True)
    with FileLock(IMAGE_DATASET.parent / ".image_assets.lock"):
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
# in the test run's own resources, so that each test run embeds from scratch once.
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
    for byte; it too runs once per session, in its own folder, and belongs to those tests.

    Once per session, not per test process: pytest-xdist's workers share the folder, the first
    to ask for a run makes it under a lock while the other waits for it, and a marker file
    says it is done."""

    def __init__(self, root: Path):
        self.root = root
        self.resources = root / "resources"
        self._done: set[str] = set()
        self._reruns: dict[str, Path] = {}
        root.mkdir(parents=True, exist_ok=True)
        with self._lock("resources"):
            text = self.resources / "text"
            (text / "embedding_cache").mkdir(parents=True, exist_ok=True)
            for name in SHARED_TEXT_ASSETS:
                shared = REPO / "resources" / "text" / name
                shared.mkdir(parents=True, exist_ok=True)
                if not (text / name).is_symlink():
                    (text / name).symlink_to(shared, target_is_directory=True)

    def _lock(self, name: str) -> FileLock:
        """The lock of one of the shared runs: the test processes (pytest-xdist's workers)
        share the session folder, and the first to ask for a run makes it while the others
        wait for it."""
        return FileLock(self.root / f".{name}.lock")

    def _once(self, name: str, run) -> None:
        """``run()`` unless this test run has already made ``name`` (in any test process): a
        marker file, written when the run succeeded, says so."""
        if name in self._done:
            return
        with self._lock(name):
            done = self.root / f".{name}.done"
            if not done.exists():
                run()
                done.touch()
        self._done.add(name)

    def _prepare(self, experiment: str) -> None:
        if experiment == "image_mode_dropping" and not (self.resources / "inception").exists():
            fetch_image_assets()
            (self.resources / "fashion_mnist").symlink_to(IMAGE_DATASET, target_is_directory=True)
            (self.resources / "inception").symlink_to(IMAGE_MODEL.parent,
                                                      target_is_directory=True)

    def __call__(self, experiment: str) -> Path:
        def run():
            self._prepare(experiment)
            run_tiny(experiment, self.root, resources=self.resources)

        self._once(experiment, run)
        return self.root

    def rerun(self, experiment: str) -> Path:
        self(experiment)
        out = self.root / "reruns" / experiment
        self._once(f"rerun-{experiment}",
                   lambda: run_tiny(experiment, out, resources=self.resources))
        return out


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> TinyRuns:
    """The tiny experiments, each run once per session (see :class:`TinyRuns`): in the folder
    that pytest-xdist's workers share (their own temporary folders lie in it), so that a run one
    worker made serves the other too."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return TinyRuns(tmp_path_factory.getbasetemp().parent / "tiny")
    return TinyRuns(tmp_path_factory.mktemp("tiny"))
