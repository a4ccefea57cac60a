"""Command line: score your own embeddings.

    python -m diversity_core score EMBEDDINGS [--reference REF] [--metrics magarea,vendi,...]
                                   [--metric-space cosine|euclidean] [--json]
    python -m diversity_core audit [RESULTS_DIR] [--json] ...   (diversity_core.provenance)

``EMBEDDINGS`` and ``REF`` are ``.npy``, ``.npz`` (one array, or pick one with ``--key``) or
``.csv`` (comma-separated numbers, one point per row, an optional header row) files of shape
(n_points, n_features). Also installed as the ``diversity-core`` console script.

One rule for bad input. A problem with a file or an option (unreadable, not 2-D, NaN or inf,
complex, mismatched dimensions, unknown metric) is one line ``error: ...`` naming the file (and
for CSV the line) or the option, and exit status 2. A measure that is undefined for valid input
(IsoScore of constant data, a cosine measure of a zero vector, MagArea of a single distinct
point, PRDC with k >= the number of points) is reported in its own row as ``undefined`` with the
reason, and the other measures are still computed (exit 0); only when no requested measure can be
computed is it an error (exit 2). Every number printed is finite; ``--json`` writes ``null`` with
the reason for an undefined value and never ``NaN`` or ``Infinity``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import warnings
from pathlib import Path

import numpy as np

from . import __version__
from .baselines import avg_sim, dc_score, gm_stds, iso_score, vendi_score
from .distances import pairwise_distances
from .magnitude import convergence_scale, mag_area, mag_diff
from .provenance import command as audit_command
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
    """Read an (n_points, n_features) array of finite real numbers from a ``.npy``, ``.npz`` or
    ``.csv`` file; raise :class:`InputError` naming the file (and for CSV the line)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if path.is_dir():
        raise InputError(f"{path} is a directory; give a {', '.join(FORMATS)} file.")
    if suffix not in FORMATS:
        raise InputError(f"{path}: unsupported file type {path.suffix!r}; use "
                         f"{', '.join(FORMATS)}.")
    if not path.exists():
        raise InputError(f"{path}: no such file.")
    if key is not None and suffix != ".npz":
        raise InputError(f"--key {key!r} names an array inside a .npz file, but {path} is a "
                         f"{suffix} file; drop --key.")
    csv_lines = None
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
            X, csv_lines = _load_csv(path)
    except InputError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure to read is the file's, said so once
        raise InputError(f"{path}: cannot read it as {suffix} ({type(err).__name__}: "
                         f"{err}).") from err
    if np.iscomplexobj(X):
        raise InputError(f"{path}: complex numbers (dtype {X.dtype}); the measures take real "
                         "embeddings: save the real part, the modulus or both parts as columns.")
    if X.dtype == object or not np.issubdtype(X.dtype, np.number):
        raise InputError(f"{path}: expected numbers, found dtype {X.dtype}.")
    if X.ndim != 2:
        raise InputError(f"{path}: expected a 2-D array (n_points, n_features), found shape "
                         f"{X.shape}.")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"{path}: no {'points' if X.shape[0] == 0 else 'features'} (shape "
                         f"{X.shape}).")
    X = X.astype(np.float64, copy=False)
    bad = ~np.isfinite(X)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        where = (f"line {csv_lines[row]}" if csv_lines is not None else f"row {row}")
        raise InputError(
            f"{path}: {int(bad.sum())} non-finite value(s) ({int(np.isnan(X).sum())} NaN, "
            f"{int(np.isinf(X).sum())} inf), the first at {where}, column {col + 1} "
            f"({X[row, col]}).")
    return X


def _load_csv(path: Path) -> tuple[np.ndarray, list[int]]:
    """The rows of numbers of a CSV file and the line number (1-based) of each."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file; a .csv holds comma-separated numbers.") \
            from None
    rows, line_numbers, first = [], [], True
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append([float(c) for c in line.split(",")])
            line_numbers.append(number)
        except ValueError:
            if not first:  # only the first non-blank line may be a header
                raise InputError(f"{path}: line {number} is not a row of numbers: "
                                 f"{line[:80]!r}.") from None
        first = False
    if not rows:
        raise InputError(f"{path}: " + ("the file is empty." if not text.strip()
                                        else "no rows of numbers."))
    widths = [len(r) for r in rows]
    if len(set(widths)) != 1:
        odd = next(i for i, w in enumerate(widths) if w != widths[0])
        raise InputError(f"{path}: rows have different numbers of columns ({sorted(set(widths))}):"
                         f" line {line_numbers[odd]} has {widths[odd]}, line {line_numbers[0]} "
                         f"has {widths[0]}.")
    return np.array(rows), line_numbers


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


# Argument names the measures use in their messages, replaced by the file they stand for.
_ARGUMENT = re.compile(r"^(X|Y|real|fake)\b")


def _reason(err: Exception, names: dict[str, str]) -> str:
    """The measure's message with its argument name (X, real, ...) replaced by the file's label;
    a message naming no argument is prefixed with the label of the set it concerns."""
    message = str(err)
    match = _ARGUMENT.match(message)
    if match and match.group(1) in names:
        return names[match.group(1)] + message[match.end():]
    if len(set(names.values())) == 1:
        return f"{next(iter(names.values()))}: {message}"
    return message


class _Results:
    """Values and reasons, filled measure by measure: one failure never stops the others."""

    def __init__(self, sets):
        self.scores = {name: {} for name in (*sets, "comparison")}
        self.undefined = {name: {} for name in self.scores}

    def attempt(self, where: str, metric: str, compute, names: dict[str, str]) -> None:
        try:
            value = compute()
        except ValueError as err:  # the measures' documented failure: undefined for this input
            self.set_undefined(where, metric, _reason(err, names))
            return
        if not math.isfinite(value):  # the measures never return one; never print one either
            self.set_undefined(where, metric, f"the value is {value} (outside the float64 range)")
            return
        self.scores[where][metric] = value

    def set_undefined(self, where: str, metric: str, reason: str) -> None:
        self.scores[where][metric] = None
        self.undefined[where][metric] = reason


def score(X, reference=None, metrics=None, *, metric_space: str = "cosine", k: int = 5,
          tau: float = 1.0, magdiff_normalise: str | None = None,
          labels: dict[str, str] | None = None) -> dict:
    """Compute the requested metrics; returns ``{"scores": ..., "undefined": ..., "notes": ...,
    "t_cut": ...}``.

    ``scores["embeddings"]`` / ``scores["reference"]`` hold the reference-free metrics of each set,
    ``scores["comparison"]`` the reference-based ones. A metric undefined for its input has the
    value ``None``, and its reason in ``undefined[<set>][<metric>]`` and in its note; ``labels``
    names the sets in those reasons (default: "embeddings", "reference").
    """
    metrics = list(metrics or (DEFAULT_FREE + (DEFAULT_BASED if reference is not None else ())))
    sets = {"embeddings": X} if reference is None else {"embeddings": X, "reference": reference}
    labels = {name: name for name in sets} | dict(labels or {})
    own = {name: {"X": labels[name]} for name in sets}  # argument name -> file, per set
    both = {"real": labels.get("reference"), "fake": labels["embeddings"],
            "X": labels["embeddings"], "Y": labels.get("reference")}
    out = _Results(sets)
    notes = {
        "avgsim": "mean cosine similarity of pairs i != j: higher = LESS diverse",
        "dcscore": f"tau = {tau}",
        "isoscore": "isotropy of the variance, in [0, 1]",
    }

    # Magnitude: one distance matrix per set, one integration limit t_cut for all.
    D, no_distances, t_cut, no_t_cut = {}, {}, None, None
    limit_set = "reference" if reference is not None else "embeddings"
    if any(m in ("magarea", "magdiff") for m in metrics):
        for name, A in sets.items():
            try:
                D[name] = pairwise_distances(A, metric_space)
            except ValueError as err:
                no_distances[name] = _reason(err, own[name])
        if limit_set in no_distances:
            no_t_cut = f"no integration limit t_cut ({no_distances[limit_set]})"
        else:
            try:
                t_cut = convergence_scale(D[limit_set])
            except (ValueError, RuntimeError) as err:  # e.g. a single distinct point
                no_t_cut = f"no integration limit t_cut ({_reason(err, own[limit_set])})"
        if t_cut is not None:
            source = ("the reference's convergence scale" if reference is not None
                      else "this space's own convergence scale")
            notes["magarea"] = (f"{metric_space} distance, ∫_0^t_cut Mag(t) dt, "
                                f"t_cut = {t_cut:.6g} ({source})")

    def magnitude_measure(where, metric, compute, needs):
        missing = [no_distances[n] for n in needs if n in no_distances]
        if missing or t_cut is None:
            out.set_undefined(where, metric, "; ".join(missing) or no_t_cut)
        else:
            out.attempt(where, metric, compute, both if where == "comparison" else own[where])

    free = {
        "vendi": vendi_score,
        "avgsim": avg_sim,
        "gmstds": gm_stds,
        "isoscore": iso_score,
        "dcscore": lambda A: dc_score(A, tau=tau),
    }
    for name, A in sets.items():
        for m in metrics:
            if m == "magarea":
                magnitude_measure(name, m, lambda n=name: mag_area(D[n], t_cut), [name])
            elif m in free:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", UserWarning)
                    out.attempt(name, m, lambda f=free[m], A=A: float(f(A)), own[name])
                for w in caught:
                    notes[m] = str(w.message)
    if reference is not None:
        need_prdc = [m for m in metrics if m in ("precision", "recall", "density", "coverage")]
        if need_prdc:
            too_small = [f"{labels[n]} has {len(A)} points" for n, A in sets.items()
                         if k >= len(A)]
            try:
                if too_small:
                    raise ValueError(f"--k {k} needs more than k points: "
                                     + ", ".join(too_small))
                values = prdc(reference, X, k)
            except ValueError as err:
                for m in need_prdc:
                    out.set_undefined("comparison", m, _reason(err, both))
            else:
                for m in need_prdc:
                    out.scores["comparison"][m] = values[m]
                    notes[m] = f"k = {k}, reference = real, embeddings = fake"
        if "magdiff" in metrics:
            magnitude_measure("comparison", "magdiff", lambda: mag_diff(
                D["embeddings"], D["reference"], t_cut, normalise=magdiff_normalise),
                ["embeddings", "reference"])
            if t_cut is not None:
                notes["magdiff"] = (
                    f"∫_0^t_cut (Mag_X − Mag_ref) dt, {metric_space} distance, "
                    f"t_cut = {t_cut:.6g} (reference's convergence scale)"
                    + (f", divided by the {magdiff_normalise.replace('_', ' ')}"
                       if magdiff_normalise else "")
                    + "; < 0: less diverse than the reference")
        if "mmd_rbf" in metrics:
            out.attempt("comparison", "mmd_rbf", lambda: mmd_rbf(X, reference), both)
            notes["mmd_rbf"] = "Euclidean, max over 10 bandwidths"
        if "mmd_linear" in metrics:
            out.attempt("comparison", "mmd_linear", lambda: mmd_linear(X, reference), both)
            notes["mmd_linear"] = "‖mean X − mean ref‖²"
    # A row's note is its reason wherever it is undefined, else what the number means.
    for m in metrics:
        reasons = list(dict.fromkeys(why for where in out.undefined.values()
                                     if (why := where.get(m))))
        if reasons:
            notes[m] = "undefined: " + "; ".join(reasons)
    out.scores["comparison"] = {m: out.scores["comparison"][m] for m in metrics
                                if m in out.scores["comparison"]}
    return {"scores": out.scores,
            "undefined": {where: why for where, why in out.undefined.items() if why},
            "notes": {m: notes[m] for m in metrics if m in notes},
            "t_cut": t_cut, "metric_space": metric_space}


def _format_value(v) -> str:
    return "undefined" if v is None else f"{v:.6g}"


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


def _finite_or_null(value, path: str, notes: dict):
    """JSON has no NaN or Infinity: such a value becomes null, with a note saying what it was."""
    if isinstance(value, dict):
        return {k: _finite_or_null(v, f"{path}.{k}" if path else k, notes)
                for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        notes[path] = f"{value} written as null"
        return None
    return value


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
                    f"{', '.join(DEFAULT_BASED)} (aliases: prdc, mmd).",
        epilog="Exit status: 0 when the scores were printed (a measure undefined for this input "
               "is shown as 'undefined' with its reason); 2 for a bad file or option, or when no "
               "requested measure is defined.")
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
    audit_command.add_parser(sub)
    return parser


def _check_options(args) -> None:
    if args.subsample is not None and args.subsample < 2:
        raise InputError(f"--subsample must be at least 2; got {args.subsample}.")
    if args.seed < 0:
        raise InputError(f"--seed must be >= 0; got {args.seed}.")
    if args.k < 1:
        raise InputError(f"--k must be a positive integer; got {args.k}.")
    if not math.isfinite(args.tau) or args.tau <= 0:
        raise InputError(f"--tau must be a finite number > 0; got {args.tau}.")


def _describe(path: str, A: np.ndarray, n_in_file: int, subsample: int | None,
              seed: int) -> str:
    text = f"{path} ({A.shape[0]} points x {A.shape[1]} dims"
    if subsample is not None:
        text += (f"; random subset of {A.shape[0]} of {n_in_file} points, --subsample "
                 f"{subsample} --seed {seed}" if A.shape[0] < n_in_file
                 else f"; all {n_in_file} points, --subsample {subsample} not needed")
    return text + ")"


def main(argv=None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "audit":
        return audit_command.run(args)
    try:
        _check_options(args)
        metrics = _parse_metrics(args.metrics, args.reference is not None)
        rng = np.random.default_rng(args.seed)
        loaded = {"embeddings": (args.embeddings, load_embeddings(
            args.embeddings, args.key if Path(args.embeddings).suffix.lower() == ".npz"
            or args.reference is None else None))}
        if args.reference is not None:
            npz = [Path(f).suffix.lower() == ".npz" for f in (args.embeddings, args.reference)]
            if args.key is not None and not any(npz):
                load_embeddings(args.reference, args.key)  # raises: --key without a .npz
            loaded["reference"] = (args.reference, load_embeddings(
                args.reference, args.key if npz[1] else None))
        data, files, headers = {}, {}, {}
        for name, (path, A) in loaded.items():
            data[name] = _subsample(A, args.subsample, rng)
            files[name] = {"path": path, "n_points": data[name].shape[0],
                           "n_features": data[name].shape[1], "n_points_in_file": A.shape[0]}
            headers[name] = _describe(path, data[name], A.shape[0], args.subsample, args.seed)
        X, ref = data["embeddings"], data.get("reference")
        if ref is not None and ref.shape[1] != X.shape[1]:
            raise InputError(f"mismatched dimensions: the embeddings ({args.embeddings}) have "
                             f"{X.shape[1]} features, the reference ({args.reference}) has "
                             f"{ref.shape[1]}.")
        result = score(X, ref, metrics, metric_space=args.metric_space, k=args.k, tau=args.tau,
                       magdiff_normalise=args.magdiff_normalise,
                       labels={name: path for name, (path, _) in loaded.items()})
        values = [v for where in result["scores"].values() for v in where.values()]
        if all(v is None for v in values):
            by_reason = {}
            for where in result["undefined"].values():
                for m, why in where.items():
                    by_reason.setdefault(why, []).append(METRICS[m][0])
            raise InputError("no requested measure is defined for this input: " + "; ".join(
                f"{', '.join(dict.fromkeys(names))}: {why}" for why, names in by_reason.items()))
    except ValueError as err:  # InputError and the measures' own input checks
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        out = {
            "embeddings": files["embeddings"],
            "reference": files.get("reference"),
            "subsample": (None if args.subsample is None
                          else {"max_points": args.subsample, "seed": args.seed}),
            **result,
        }
        not_finite = {}
        out = _finite_or_null(out, "", not_finite)
        if not_finite:
            out["not_finite"] = not_finite
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(render_table(result, headers))
    return 0
