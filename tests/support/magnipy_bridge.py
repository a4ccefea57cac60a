"""Bridge to the authors' reference library ``magnipy`` 1.0.0, which lives in its own virtualenv.

magnipy 1.0.0 pins ``scipy==1.13.0`` and imports ``scipy.integrate.trapz`` (removed in SciPy 1.14),
so it cannot be installed next to our package. The agreement tests (tests/magnitude/
test_magnitude_magnipy.py) and the benchmark (benchmarks/bench_magnitude.py) run it apart:

* :func:`magnipy_python` returns the path of a python that can ``import magnipy``: the one named by
  the environment variable ``MAGNIPY_PYTHON`` if set, otherwise a virtualenv at
  ``${XDG_CACHE_HOME:-~/.cache}/diversity_core/magnipy-venv`` that it creates on first use with
  ``pip install -c envs/constraints.txt magnipy==1.0.0`` (the constraint pins the CPU build of
  torch, which magnipy imports; ``--find-links /opt/wheels`` is passed when that folder exists,
  ``MAGNIPY_PIP_ARGS`` adds further pip arguments, e.g. an index for the torch CPU wheel, and
  ``MAGNIPY_BASE_PYTHON`` picks the interpreter the venv is made from: magnipy's pinned
  scipy==1.13.0 has wheels for Python 3.9-3.12 only; default: the running interpreter).
* :func:`run_magnipy` sends a batch of jobs to ``tests/support/magnipy_worker.py`` in that python:
  arrays go through a temporary ``.npz`` file, everything else through JSON, and the results come
  back as NumPy arrays and Python scalars. One call = one subprocess (importing magnipy imports
  torch, which costs seconds), so batch all jobs of a test module into one request.

Request format (a dict)::

    {"jobs": [job, ...]}            # -> {"jobs": [result, ...], "versions": {...}, ...}
    job                            # a single job dict is accepted too -> its result dict

A job of kind ``"space"`` (the default) describes one finite metric space, either as points
``X`` (n, d) with ``metric`` (any metric name magnipy accepts; magnipy computes the distances
itself and removes duplicate points with ``np.unique``) or as a distance matrix ``D`` (n, n)
(magnipy's ``metric="precomputed"``: no de-duplication). Optional fields:

``ts``           array of scales -> ``mag`` (magnipy's magnitude at ``ts``)
``weights``      True (with ``ts``) -> ``weights`` (n, len(ts)) in magnipy's row order, which for
                 points ``X`` is that of ``np.unique(X, axis=0)`` (sorted), not the input order
``t_conv``       True -> ``t_conv`` (magnipy's convergence-scale search, toms748 from guess 10)
``default``      True -> magnipy's default path: ``t_conv``, ``default_ts`` =
                 linspace(0, t_conv, n_ts), ``default_mag``, ``mag_area`` = ``Magnipy.MagArea()``
                 (trapezoid rule, no division by t_cut), with per-phase wall times ``time_*``
``mag_area_t_cut`` float -> ``mag_area_cut`` = ``MagArea(t_cut=...)`` of the default function
``target_prop``  default 0.95; ``n_ts`` default 30 (magnipy's defaults)
``repeats``      timing repeats (fresh object each time; the minimum of each phase is returned)

A job of kind ``"diversipy"`` takes ``Xs`` (a list of point clouds) and ``metric`` and runs
``Diversipy(Xs).MagAreas()``: the reference-free protocol (t_cut = median t_conv, 30 scales,
trapezoid, area divided by t_cut). Results: ``t_convs``, ``t_cut``, ``ts``, ``mags``,
``mag_areas``, ``time_total``.

A job on which magnipy raises returns ``{"error": "<type>: <message>"}`` (the other jobs of the
batch still run). Every other result also reports ``n`` (magnipy's cardinality after its
de-duplication), ``n_perturbed`` (how often magnipy hit a failed solve and retried with
Z + 0.01 I) and ``messages`` (what magnipy printed, which it does instead of warning).

This module is imported by the worker inside magnipy's venv as well: keep its top-level imports to
the standard library and NumPy.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["MAGNIPY_VERSION", "MagnipyError", "magnipy_python", "run_magnipy", "venv_dir"]

MAGNIPY_VERSION = "1.0.0"
REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().with_name("magnipy_worker.py")
CONSTRAINTS = REPO / "envs" / "constraints.txt"
_READY_MARKER = ".diversity_core-magnipy-ok"


class MagnipyError(RuntimeError):
    """Setting up magnipy's virtualenv or running the worker failed."""


# --------------------------------------------------------------------------------------------
# The interpreter
# --------------------------------------------------------------------------------------------


def venv_dir() -> Path:
    """Where :func:`magnipy_python` keeps magnipy's virtualenv when ``MAGNIPY_PYTHON`` is unset."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "diversity_core" / "magnipy-venv"


def magnipy_python(*, create: bool = True, verbose: bool = True) -> str:
    """Path of a python interpreter that can ``import magnipy`` (version 1.0.0).

    Uses ``$MAGNIPY_PYTHON`` if set (it must work: no fallback). Otherwise creates, or reuses, a
    virtualenv at :func:`venv_dir`. Creation takes a minute or two and needs PyPI (and the torch
    CPU wheel: ``/opt/wheels`` is used when it exists, ``$MAGNIPY_PIP_ARGS`` adds pip arguments).
    A half-made venv (no ready marker) is deleted and rebuilt; concurrent callers wait on a lock.

    Raises
    ------
    MagnipyError
        If the interpreter cannot import magnipy, or the venv cannot be created.
    """
    explicit = os.environ.get("MAGNIPY_PYTHON")
    if explicit:
        _check_python(explicit)
        return explicit

    venv = venv_dir()
    python = venv / "bin" / "python"
    if (venv / _READY_MARKER).exists() and python.exists():
        return str(python)
    if not create:
        raise MagnipyError(f"no magnipy venv at {venv} and create=False")

    venv.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(venv.parent / "magnipy-venv.lock"):
        if (venv / _READY_MARKER).exists() and python.exists():  # another process made it
            return str(python)
        if venv.exists():
            shutil.rmtree(venv)
        _log(verbose, f"[magnipy_bridge] creating {venv} (magnipy=={MAGNIPY_VERSION}) ...")
        base = os.environ.get("MAGNIPY_BASE_PYTHON") or sys.executable
        _run([base, "-m", "venv", str(venv)], "python -m venv")
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        if not CONSTRAINTS.exists():
            raise MagnipyError(f"constraints file {CONSTRAINTS} is missing (it pins CPU torch)")
        pip += ["-c", str(CONSTRAINTS)]
        if Path("/opt/wheels").is_dir():
            pip += ["--find-links", "/opt/wheels"]
        pip += os.environ.get("MAGNIPY_PIP_ARGS", "").split()
        _run(pip + [f"magnipy=={MAGNIPY_VERSION}"], "pip install magnipy")
        _check_python(str(python))
        (venv / _READY_MARKER).write_text(f"magnipy=={MAGNIPY_VERSION}\n")
        _log(verbose, f"[magnipy_bridge] magnipy venv ready at {venv}")
    return str(python)


def _check_python(python: str) -> None:
    code = "import magnipy, importlib.metadata as m; print(m.version('magnipy'))"
    try:
        out = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=300, check=False
        )
    except OSError as err:
        raise MagnipyError(f"cannot run {python}: {err}") from err
    if out.returncode != 0:
        raise MagnipyError(f"{python} cannot import magnipy:\n{out.stderr[-3000:]}")
    version = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "?"
    if version != MAGNIPY_VERSION:
        raise MagnipyError(f"{python} has magnipy {version}, the bridge expects {MAGNIPY_VERSION}")


def _run(cmd: list[str], what: str) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise MagnipyError(f"{what} failed ({' '.join(cmd)}):\n{(out.stdout + out.stderr)[-5000:]}")


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _file_lock(path: Path):
    import fcntl

    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------
# Running the worker
# --------------------------------------------------------------------------------------------


def run_magnipy(
    request: dict,
    *,
    python: str | None = None,
    timeout: float | None = None,
    threads: int | None = None,
) -> dict:
    """Run a batch of magnipy jobs in magnipy's interpreter and return their results.

    Parameters
    ----------
    request : dict
        ``{"jobs": [job, ...]}`` or a single job dict (format in the module docstring). Arrays
        may be NumPy arrays or nested lists of numbers.
    python : str, optional
        Interpreter to use; default :func:`magnipy_python`.
    timeout : float, optional
        Seconds before the worker is killed.
    threads : int, optional
        BLAS/OpenMP/numexpr threads of the worker (default: inherited environment, i.e. all
        cores). 1 is fastest for small matrices and on machines shared with other jobs.

    Returns
    -------
    dict
        ``{"jobs": [result, ...], "versions": {...}, "import_time": s}``, or the single result
        dict when a single job was given. Arrays come back as float64 NumPy arrays.
    """
    single = "jobs" not in request
    jobs = [request] if single else list(request["jobs"])
    python = python or magnipy_python()
    with tempfile.TemporaryDirectory(prefix="magnipy_bridge_") as tmp:
        tmp = Path(tmp)
        encode({"jobs": jobs}, tmp / "request")
        cmd = [python, str(WORKER), str(tmp / "request"), str(tmp / "result")]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        if threads:
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                        "NUMEXPR_NUM_THREADS"):
                env[var] = str(threads)
        try:
            out = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False
            )
        except subprocess.TimeoutExpired as err:
            raise MagnipyError(f"magnipy worker timed out after {timeout} s") from err
        if out.returncode != 0:
            raise MagnipyError(
                f"magnipy worker failed (exit {out.returncode}):\n{out.stderr[-5000:]}"
            )
        result = decode(tmp / "result")
    return result["jobs"][0] if single else result


# --------------------------------------------------------------------------------------------
# Codec: dicts of JSON values and NumPy arrays <-> <stem>.json + <stem>.npz
# --------------------------------------------------------------------------------------------


def encode(obj, stem: Path) -> None:
    """Write ``obj`` (dicts, lists, scalars, strings, arrays) to ``stem.json`` + ``stem.npz``."""
    arrays: dict[str, np.ndarray] = {}

    def walk(x):
        if isinstance(x, np.ndarray):
            key = f"a{len(arrays)}"
            arrays[key] = np.ascontiguousarray(x)
            return {"__array__": key}
        if isinstance(x, dict):
            return {str(k): walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        if isinstance(x, np.generic):
            return x.item()
        return x

    meta = walk(obj)
    np.savez(str(stem) + ".npz", **arrays)
    Path(str(stem) + ".json").write_text(json.dumps(meta))


def decode(stem: Path):
    """Inverse of :func:`encode`."""
    meta = json.loads(Path(str(stem) + ".json").read_text())
    with np.load(str(stem) + ".npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}

    def walk(x):
        if isinstance(x, dict):
            if set(x) == {"__array__"}:
                return arrays[x["__array__"]]
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(meta)
