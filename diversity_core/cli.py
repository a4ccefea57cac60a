"""Command line: score your own embeddings.

    python -m diversity_core score EMBEDDINGS [--reference REF] [--metrics magarea,vendi,...]
                                   [--metric-space cosine|euclidean] [--json]

``EMBEDDINGS`` and ``REF`` are ``.npy``, ``.npz`` (one array, or pick one with ``--key``) or
``.csv`` (comma-separated numbers, one point per row, an optional header row) files of shape
(n_points, n_features). Also installed as the ``diversity-core`` console script.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from . import __version__
from .baselines import avg_sim, dc_score, gm_stds, iso_score, vendi_score
from .distances import pairwise_distances
from .magnitude import convergence_scale, mag_area, mag_diff
from .reference_based import mmd_linear, mmd_rbf, prdc

# name -> (label, needs a reference)
METRICS = {
    "magarea": ("MagArea", False),
    "vendi": ("Vendi Score (cosine)", False),
    "avgsim": ("AvgSim (cosine)", False),
    "gmstds": ("GMStds", False),
    "isoscore": ("IsoScore", False),
    "dcscore": ("DCScore (cosine, tau=1)", False),
    "magdiff": ("MagDiff", True),
    "precision": ("precision", True),
    "recall": ("recall", True),
    "density": ("density", True),
    "coverage": ("coverage", True),
    "mmd_rbf": ("MMD² (RBF, GGM-metrics)", True),
    "mmd_linear": ("MMD² (linear)", True),
}
ALIASES = {"prdc": ("precision", "recall", "density", "coverage"), "mmd": ("mmd_rbf", "mmd_linear")}
DEFAULT_FREE = ("magarea", "vendi", "avgsim", "gmstds", "isoscore", "dcscore")
DEFAULT_BASED = ("magdiff", "precision", "recall", "density", "coverage", "mmd_rbf",
                 "mmd_linear")
FORMATS = (".npy", ".npz", ".csv")


class InputError(ValueError):
    """A problem with the user's files or options: reported without a traceback."""


def load_embeddings(path, key: str | None = None) -> np.ndarray:
    """Read an (n_points, n_features) array from a ``.npy``, ``.npz`` or ``.csv`` file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"{path}: unsupported file type {path.suffix!r}; use "
                         f"{', '.join(FORMATS)}.")
    if not path.is_file():
        raise InputError(f"{path}: no such file.")
    try:
        if suffix == ".npy":
            X = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                names = list(archive.files)
                if key is None:
                    if len(names) != 1:
                        raise InputError(
                            f"{path}: the archive holds {len(names)} arrays ({', '.join(names)}); "
                            "choose one with --key.")
                    key = names[0]
                if key not in names:
                    raise InputError(f"{path}: no array {key!r} in the archive (it has "
                                     f"{', '.join(names) or 'none'}).")
                X = archive[key]
        else:
            X = _load_csv(path)
    except InputError:
        raise
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"{path}: cannot read it as {suffix} ({err}).") from err
    if X.dtype == object or not np.issubdtype(X.dtype, np.number):
        raise InputError(f"{path}: expected numbers, found dtype {X.dtype}.")
    if X.ndim != 2:
        raise InputError(f"{path}: expected a 2-D array (n_points, n_features), found shape "
                         f"{X.shape}.")
    return X.astype(np.float64, copy=False)


def _load_csv(path: Path) -> np.ndarray:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if not lines:
        raise InputError(f"{path}: the file is empty.")
    rows = []
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.split(",")]
        try:
            rows.append([float(c) for c in cells])
        except ValueError:
            if i == 0:  # a header row
                continue
            raise InputError(f"{path}: line {i + 1} is not a row of numbers: {line[:80]!r}.") \
                from None
    if not rows:
        raise InputError(f"{path}: no rows of numbers.")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise InputError(f"{path}: rows have different numbers of columns ({sorted(widths)}).")
    return np.array(rows)


def _parse_metrics(text: str | None, has_reference: bool) -> list[str]:
    if text is None:
        return list(DEFAULT_FREE + (DEFAULT_BASED if has_reference else ()))
    names = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        expanded = ALIASES.get(name, (name,))
        for n in expanded:
            if n not in METRICS:
                valid = ", ".join(list(METRICS) + list(ALIASES))
                raise InputError(f"unknown metric {raw.strip()!r}; choose from {valid}.")
            if METRICS[n][1] and not has_reference:
                raise InputError(f"metric {n!r} compares with a reference: give --reference.")
            if n not in names:
                names.append(n)
    if not names:
        raise InputError("--metrics is empty.")
    return names


def _subsample(X: np.ndarray, n: int | None, rng) -> np.ndarray:
    if n is None or len(X) <= n:
        return X
    return X[np.sort(rng.choice(len(X), size=n, replace=False))]


def score(X, reference=None, metrics=None, *, metric_space: str = "cosine", k: int = 5,
          tau: float = 1.0, magdiff_normalise: str | None = None) -> dict:
    """Compute the requested metrics; returns ``{"scores": ..., "notes": ..., "t_cut": ...}``.

    ``scores["embeddings"]`` / ``scores["reference"]`` hold the reference-free metrics of each set,
    ``scores["comparison"]`` the reference-based ones.
    """
    metrics = list(metrics or (DEFAULT_FREE + (DEFAULT_BASED if reference is not None else ())))
    requested = list(metrics)
    sets = {"embeddings": X} if reference is None else {"embeddings": X, "reference": reference}
    scores = {name: {} for name in sets}
    scores["comparison"] = {}
    notes = {}
    t_cut = None
    D = {}
    if any(m in ("magarea", "magdiff") for m in metrics):
        D = {name: pairwise_distances(A, metric=metric_space) for name, A in sets.items()}
        own = "reference" if reference is not None else "embeddings"
        try:
            t_cut = convergence_scale(D[own])
        except ValueError as err:  # e.g. too many duplicates for Mag to reach 0.95 n
            notes["magarea"] = notes["magdiff"] = f"not computed: {err}"
            for m in ("magarea", "magdiff"):
                if m in metrics:
                    where = ["comparison"] if m == "magdiff" else list(sets)
                    for name in where:
                        scores[name][m] = None
            metrics = [m for m in metrics if m not in ("magarea", "magdiff")]
        else:
            source = ("the reference's convergence scale" if reference is not None
                      else "this space's own convergence scale")
            notes["magarea"] = (f"{metric_space} distance, ∫_0^t_cut Mag(t) dt, "
                                f"t_cut = {t_cut:.6g} ({source})")
    free = {
        "vendi": vendi_score,
        "avgsim": avg_sim,
        "gmstds": gm_stds,
        "isoscore": iso_score,
        "dcscore": lambda A: dc_score(A, tau=tau),
    }
    notes.update({
        "avgsim": "mean cosine similarity of pairs i != j: higher = LESS diverse",
        "dcscore": f"tau = {tau}",
        "isoscore": "isotropy of the variance, in [0, 1]",
    })
    for name, A in sets.items():
        for m in metrics:
            if m == "magarea":
                scores[name][m] = mag_area(D[name], t_cut)
            elif m in free:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", UserWarning)
                    scores[name][m] = float(free[m](A))
                for w in caught:
                    notes[m] = str(w.message)
    if reference is not None:
        need_prdc = [m for m in metrics if m in ("precision", "recall", "density", "coverage")]
        if need_prdc:
            out = prdc(reference, X, k)
            for m in need_prdc:
                scores["comparison"][m] = out[m]
                notes[m] = f"k = {k}, reference = real, embeddings = fake"
        if "magdiff" in metrics:
            scores["comparison"]["magdiff"] = mag_diff(D["embeddings"], D["reference"], t_cut,
                                                       normalise=magdiff_normalise)
            notes["magdiff"] = (f"∫_0^t_cut (Mag_X − Mag_ref) dt, {metric_space} distance, "
                                f"t_cut = {t_cut:.6g} (reference's convergence scale)"
                                + (f", divided by the {magdiff_normalise.replace('_', ' ')}"
                                   if magdiff_normalise else "")
                                + "; < 0: less diverse than the reference")
        if "mmd_rbf" in metrics:
            scores["comparison"]["mmd_rbf"] = mmd_rbf(X, reference)
            notes["mmd_rbf"] = "Euclidean, max over 10 bandwidths"
        if "mmd_linear" in metrics:
            scores["comparison"]["mmd_linear"] = mmd_linear(X, reference)
            notes["mmd_linear"] = "‖mean X − mean ref‖²"
    scores["comparison"] = {m: scores["comparison"][m] for m in requested
                            if m in scores["comparison"]}
    return {"scores": scores, "notes": {m: notes[m] for m in requested if m in notes},
            "t_cut": t_cut, "metric_space": metric_space}


def _format_value(v) -> str:
    return "" if v is None else f"{v:.6g}"


def _aligned(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [(fmt + "  {}").format(*head), "  ".join("-" * w for w in widths) + "  ----"]
    lines += [(fmt + "  {}").format(*r).rstrip() for r in rows]
    return lines


def render_table(result: dict, headers: dict) -> str:
    """The scores as aligned text: reference-free metrics per file, then the comparison."""
    scores, notes = result["scores"], result["notes"]
    columns = [c for c in ("embeddings", "reference") if c in headers]
    lines = [f"{c}: {headers[c]}" for c in columns]
    free = list(dict.fromkeys(m for c in columns for m in scores[c]))
    if free:
        rows = [[METRICS[m][0], *(_format_value(scores[c].get(m)) for c in columns),
                 notes.get(m, "")] for m in free]
        lines += ["", *_aligned(["metric", *columns, "note"], rows)]
    if scores["comparison"]:
        rows = [[METRICS[m][0], _format_value(v), notes.get(m, "")]
                for m, v in scores["comparison"].items()]
        lines += ["", "embeddings compared with the reference:",
                  *_aligned(["metric", "value", "note"], rows)]
    return "\n".join(lines)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m diversity_core",
        description="Magnitude and baseline diversity measures for embeddings.")
    parser.add_argument("--version", action="version", version=f"diversity_core {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "score", help="score one embedding file, optionally against a reference",
        description="Score embeddings (n_points x n_features, .npy/.npz/.csv). Reference-free "
                    f"metrics: {', '.join(DEFAULT_FREE)}. With --reference also: "
                    f"{', '.join(DEFAULT_BASED)} (aliases: prdc, mmd).")
    p.add_argument("embeddings", help="embeddings file (.npy, .npz or .csv)")
    p.add_argument("--reference", help="reference embeddings in the same space")
    p.add_argument("--metrics", help="comma-separated metric names (default: all that apply)")
    p.add_argument("--metric-space", choices=("cosine", "euclidean"), default="cosine",
                   help="distance for MagArea/MagDiff (default: cosine)")
    p.add_argument("--k", type=int, default=5, help="neighbours for PRDC (default 5)")
    p.add_argument("--tau", type=float, default=1.0, help="DCScore temperature (default 1)")
    p.add_argument("--magdiff-normalise", choices=("t_cut", "reference_area"),
                   help="divide MagDiff by t_cut or by the reference's MagArea")
    p.add_argument("--key", help="array name inside .npz files")
    p.add_argument("--subsample", type=int,
                   help="score a random subset of at most this many points of each file "
                        "(magnitude costs O(n³) time and O(n²) memory)")
    p.add_argument("--seed", type=int, default=0, help="seed of --subsample")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def main(argv=None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        if args.subsample is not None and args.subsample < 2:
            raise InputError("--subsample must be at least 2.")
        metrics = _parse_metrics(args.metrics, args.reference is not None)
        rng = np.random.default_rng(args.seed)
        X = _subsample(load_embeddings(args.embeddings, args.key), args.subsample, rng)
        ref = None
        headers = {"embeddings": f"{args.embeddings} ({X.shape[0]} points x {X.shape[1]} dims)"}
        if args.reference is not None:
            ref = _subsample(load_embeddings(args.reference, args.key), args.subsample, rng)
            headers["reference"] = f"{args.reference} ({ref.shape[0]} points x {ref.shape[1]} dims)"
            if ref.shape[1] != X.shape[1]:
                raise InputError(f"mismatched dimensions: the embeddings have {X.shape[1]} "
                                 f"features, the reference has {ref.shape[1]}.")
        result = score(X, ref, metrics, metric_space=args.metric_space, k=args.k, tau=args.tau,
                       magdiff_normalise=args.magdiff_normalise)
    except ValueError as err:  # InputError and the measures' own input checks
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        out = {
            "embeddings": {"path": args.embeddings, "n_points": X.shape[0],
                           "n_features": X.shape[1]},
            "reference": None if ref is None else {"path": args.reference,
                                                   "n_points": ref.shape[0],
                                                   "n_features": ref.shape[1]},
            **result,
        }
        print(json.dumps(out, indent=2))
    else:
        print(render_table(result, headers))
    return 0
