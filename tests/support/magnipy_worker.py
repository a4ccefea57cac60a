"""Worker run by tests/support/magnipy_bridge.py INSIDE magnipy's own virtualenv (never in ours).

Usage: ``<magnipy python> tests/support/magnipy_worker.py <request> <result>`` (stems): request and
result are ``<stem>.json`` + ``<stem>.npz`` pairs written by :func:`magnipy_bridge.encode`. The job
format is documented in magnipy_bridge's module docstring. Everything computed here uses
magnipy's own public objects (``Magnipy``, ``Diversipy``) with their default settings unless the
job says otherwise; nothing of magnipy is re-implemented.

magnipy prints where it should warn (de-duplication, the Z + 0.01 I retry after a failed
Cholesky): that output is captured per job and returned as ``messages``, and the retries are
counted in ``n_perturbed``.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from magnipy_bridge import decode, encode  # noqa: E402  (stdlib + numpy only)

_PERTURB_MSG = "perturbing matrix"
_MAX_MESSAGES = 50


def _space(job: dict) -> dict:
    from magnipy import Magnipy

    metric = job.get("metric", "euclidean")
    if "D" in job:
        data, metric = np.asarray(job["D"], dtype=np.float64), "precomputed"
    else:
        data = np.asarray(job["X"], dtype=np.float64)
    target_prop = float(job.get("target_prop", 0.95))
    n_ts = int(job.get("n_ts", 30))
    repeats = max(int(job.get("repeats", 1)), 1)

    def make(**kw):
        return Magnipy(data, metric=metric, target_prop=target_prop, n_ts=n_ts, **kw)

    res: dict = {"n_input": int(data.shape[0])}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        m = make()
        res["n"] = int(m._n)
        if job.get("ts") is not None:
            ts = np.asarray(job["ts"], dtype=np.float64)
            t0 = time.perf_counter()
            mag, _ = make(ts=ts).get_magnitude()
            res["time_mag_ts"] = time.perf_counter() - t0
            res["mag"] = np.asarray(mag, dtype=np.float64)
            if job.get("weights"):
                # (n, n_ts), rows in magnipy's order: np.unique(X, axis=0) sorts them.
                w, _ = make(ts=ts).get_magnitude_weights()
                res["weights"] = np.asarray(w, dtype=np.float64)
        if job.get("default"):
            best: dict[str, float] = {}
            for _ in range(repeats):
                times = {}
                t0 = time.perf_counter()
                m = make()  # distances (+ de-duplication) and Z = exp(-D)
                t1 = time.perf_counter()
                t_conv = m.get_t_conv()
                t2 = time.perf_counter()
                mag, ts = m.get_magnitude()  # linspace(0, t_conv, n_ts)
                t3 = time.perf_counter()
                area = m.MagArea()  # trapezoid, absolute_area=True, scale=False
                t4 = time.perf_counter()
                times = {
                    "time_dist": t1 - t0,
                    "time_t_conv": t2 - t1,
                    "time_function": t3 - t2,
                    "time_area": t4 - t3,
                    "time_total": t4 - t0,
                }
                for k, v in times.items():
                    best[k] = min(best.get(k, np.inf), v)
            res.update(best)
            res["t_conv"] = float(t_conv)
            res["default_ts"] = np.asarray(ts, dtype=np.float64)
            res["default_mag"] = np.asarray(mag, dtype=np.float64)
            res["mag_area"] = float(area)
            if job.get("mag_area_t_cut") is not None:
                m._magnitude_area = None  # MagArea caches its first value
                res["mag_area_cut"] = float(m.MagArea(t_cut=float(job["mag_area_t_cut"])))
        elif job.get("t_conv"):
            t0 = time.perf_counter()
            res["t_conv"] = float(make().get_t_conv())
            res["time_t_conv"] = time.perf_counter() - t0
    _add_messages(res, buf.getvalue())
    return res


def _diversipy(job: dict) -> dict:
    from magnipy import Diversipy

    Xs = [np.asarray(X, dtype=np.float64) for X in job["Xs"]]
    metric = job.get("metric", "euclidean")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        t0 = time.perf_counter()
        div = Diversipy(Xs, metric=metric, n_ts=int(job.get("n_ts", 30)))
        areas = div.MagAreas()  # median t_conv as t_cut; trapezoid; divided by t_cut
        elapsed = time.perf_counter() - t0
        mags, ts = div.get_magnitude_functions()
    res = {
        "t_convs": np.asarray(div._t_convs, dtype=np.float64),
        "t_cut": float(div._t_cut),
        "ts": np.asarray(ts, dtype=np.float64),
        "mags": np.asarray(mags, dtype=np.float64),
        "mag_areas": np.asarray(areas, dtype=np.float64),
        "time_total": elapsed,
        "n": [int(M._n) for M in div._Mags],
    }
    _add_messages(res, buf.getvalue())
    return res


def _add_messages(res: dict, text: str) -> None:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    res["n_perturbed"] = sum(_PERTURB_MSG in ln for ln in lines)
    res["messages"] = lines[:_MAX_MESSAGES]


_KINDS = {"space": _space, "diversipy": _diversipy}


def main(request_stem: str, result_stem: str) -> None:
    t0 = time.perf_counter()
    import importlib.metadata as md

    import magnipy  # noqa: F401  (imports torch: seconds)

    import_time = time.perf_counter() - t0
    request = decode(Path(request_stem))
    results = []
    for job in request["jobs"]:
        kind = job.get("kind", "space")
        if kind not in _KINDS:
            raise ValueError(f"unknown job kind {kind!r}")
        try:
            results.append(_KINDS[kind](job))
        except Exception as err:  # magnipy itself failed on this job: report, go on
            results.append({"error": f"{type(err).__name__}: {err}", "n_perturbed": -1})
    versions = {p: md.version(p) for p in ("magnipy", "numpy", "scipy", "torch")}
    encode(
        {"jobs": results, "versions": versions, "import_time": import_time},
        Path(result_stem),
    )


if __name__ == "__main__":
    main(*sys.argv[1:3])
