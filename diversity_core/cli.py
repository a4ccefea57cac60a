"""Command line: score one embedding file, or compare many sets on one integration limit.

    python -m diversity_core score EMBEDDINGS [--reference REF] [--metrics magarea,vendi,...]
                                   [--metric-space cosine|euclidean] [--json]
    python -m diversity_core compare SET SET ... [--reference REF] [--t-cut T]
                                   [--json | --csv] [--plot FILE] [--report DIR]
    python -m diversity_core audit [RESULTS_DIR] [--json] [--require-chain] [--ro-crate DIR]

Files are ``.npy``, ``.npz`` (one array, or pick one with ``--key``) or ``.csv`` files of shape
(n_points, n_features), read by :func:`diversity_core.embedding_files.read_embeddings` (the rules
for CSV headers and index columns are there; ``--header/--no-header`` and ``--index-column``
override them). Every file read is described in the output: points × dimensions, the header or
its absence, the columns kept. Also installed as the ``diversity-core`` console script.

One rule for bad input. A problem with a file or an option (not a regular file, unreadable, not
what its extension says, not 2-D, NaN or inf, complex, mismatched dimensions, unknown metric, a
CSV header that could be data) is one line ``error: ...`` naming the file (and for CSV the line)
or the option, and exit status 2; never a traceback and never a wait (FIFOs and devices are
refused unread). A measure that is undefined for valid input (IsoScore of constant data, a
cosine measure of a zero vector, MagArea of a single distinct point alone, PRDC with k >= the
number of points) is reported as ``undefined`` with the reason, and the other measures are still
computed (exit 0); only when no requested measure can be computed is it an error (exit 2). Every
number printed is finite; ``--json`` writes ``null`` with the reason for an undefined value and
never ``NaN`` or ``Infinity``. Output that the terminal's encoding cannot show (``∫`` under
``PYTHONIOENCODING=ascii``, a file name that is not UTF-8) is transliterated, never an error.

Each subcommand is one parser (``_add_*``) and one function (``_run_*``) taking the parsed
arguments; :func:`main` dispatches through ``args.run``.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import json
import math
import os
import shlex
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np

from . import __version__
from ._validation import named_reason
from .baselines import avg_sim, dc_score, gm_stds, iso_score, vendi_score
from .comparison import (
    FREE_MEASURES,
    LABELS,
    REFERENCE_MEASURES,
    _fallback_note,
    _fallback_records,
    check_memory,
    compare,
)
from .distances import pairwise_distances
from .embedding_files import EmbeddingFile, InputError, read_embeddings
from .magnitude import (
    DEFAULT_N_TS,
    DEFAULT_TARGET,
    MagnitudeSpace,
    convergence_scale,
    mag_area,
    mag_diff,
)
from .provenance import command as audit_command
from .reference_based import mmd_linear, mmd_rbf, prdc
from .reporting.text import aligned
from .settings import MagnitudeSettings

__all__ = ["InputError", "load_embeddings", "main", "score"]

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
DEFAULT_FREE = FREE_MEASURES
DEFAULT_BASED = REFERENCE_MEASURES
PROGRAM = "python -m diversity_core"


def load_embeddings(path, key: str | None = None) -> np.ndarray:
    """The (n_points, n_features) float64 array of a ``.npy``, ``.npz`` or ``.csv`` file; see
    :func:`diversity_core.embedding_files.read_embeddings`."""
    return read_embeddings(path, key=key).data


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


class _Results:
    """Values and reasons, filled measure by measure: one failure never stops the others."""

    def __init__(self, sets):
        self.scores = {name: {} for name in (*sets, "comparison")}
        self.undefined = {name: {} for name in self.scores}

    def attempt(self, where: str, metric: str, compute, names: dict[str, str]) -> None:
        try:
            value = compute()
        except ValueError as err:  # the measures' documented failure: undefined for this input
            self.set_undefined(where, metric, named_reason(err, names))
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
          labels: dict[str, str] | None = None, memory_limit: int | None = None) -> dict:
    """Compute the requested metrics; returns ``{"scores": ..., "undefined": ..., "notes": ...,
    "t_cut": ...}``.

    ``scores["embeddings"]`` / ``scores["reference"]`` hold the reference-free metrics of each set,
    ``scores["comparison"]`` the reference-based ones. A metric undefined for its input has the
    value ``None``, and its reason in ``undefined[<set>][<metric>]`` and in its note; ``labels``
    names the sets in those reasons (default: "embeddings", "reference"). Before anything is
    computed the memory it needs is checked (``MemoryError``, one line, beyond
    ``memory_limit``, default the memory available); ``fallbacks`` lists, per set, the scales
    where magnitude needed a fallback solver, with error bounds (also in the MagArea note).
    """
    metrics = list(metrics or (DEFAULT_FREE + (DEFAULT_BASED if reference is not None else ())))
    sets = {"embeddings": X} if reference is None else {"embeddings": X, "reference": reference}
    labels = {name: name for name in sets} | dict(labels or {})
    own = {name: {"X": labels[name]} for name in sets}  # argument name -> file, per set
    both = {"real": labels.get("reference"), "fake": labels["embeddings"],
            "X": labels["embeddings"], "Y": labels.get("reference")}
    out = _Results(sets)
    if any(m in ("magarea", "magdiff") for m in metrics) or reference is not None:
        keys = {name: labels[name] for name in sets}
        if len(set(keys.values())) < len(keys):
            keys = {name: name for name in sets}
        check_memory({keys[name]: len(A) for name, A in sets.items()}, np.shape(X)[1],
                     metric=metric_space,
                     reference=keys["reference"] if reference is not None else None,
                     memory_limit=memory_limit, large_path=False)
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
                D[name] = MagnitudeSpace(pairwise_distances(A, metric_space))
            except ValueError as err:
                no_distances[name] = named_reason(err, own[name])
        if limit_set in no_distances:
            no_t_cut = f"no integration limit t_cut ({no_distances[limit_set]})"
        else:
            try:
                t_cut = convergence_scale(D[limit_set])
            except (ValueError, RuntimeError) as err:  # e.g. a single distinct point
                no_t_cut = f"no integration limit t_cut ({named_reason(err, own[limit_set])})"
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
                    out.set_undefined("comparison", m, named_reason(err, both))
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
    fallbacks = {labels[name]: records for name, space in D.items()
                 if (records := _fallback_records(space, t_cut))}
    said = [_fallback_note(r) + f" ({where})" for where, records in fallbacks.items()
            for r in records]
    for m in ("magarea", "magdiff"):
        if said and m in notes:
            notes[m] += "; " + "; ".join(said)
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
            "t_cut": t_cut, "metric_space": metric_space, "fallbacks": fallbacks}


def _format_value(v) -> str:
    return "undefined" if v is None else f"{v:.6g}"


def render_table(result: dict, headers: dict) -> str:
    """The scores as aligned text: reference-free metrics per file, then the comparison."""
    scores, notes = result["scores"], result["notes"]
    columns = [c for c in ("embeddings", "reference") if c in headers]
    lines = [f"{c}: {headers[c]}" for c in columns]
    free = list(dict.fromkeys(m for c in columns for m in scores[c]))
    if free:
        rows = [[METRICS[m][0], *(_format_value(scores[c].get(m)) for c in columns),
                 notes.get(m, "")] for m in free]
        lines += ["", *aligned(["metric", *columns, "note"], rows, free_last=True)]
    if scores["comparison"]:
        rows = [[METRICS[m][0], _format_value(v), notes.get(m, "")]
                for m, v in scores["comparison"].items()]
        lines += ["", "embeddings compared with the reference:",
                  *aligned(["metric", "value", "note"], rows, free_last=True)]
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


# --------------------------------------------------------------------------------------------
# Options shared by the subcommands: reading files, and the measures
# --------------------------------------------------------------------------------------------


def _add_reading_options(p) -> None:
    p.add_argument("--key", help="array name inside .npz files")
    p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                   help="CSV: the first line is (--header) or is not (--no-header) a header "
                        "(default: decided by the documented rule; a file it cannot decide is "
                        "refused)")
    p.add_argument("--index-column", choices=("drop", "keep"),
                   help="CSV: drop the first column (an index), or keep it as a feature where it "
                        "looks like an index (default: refuse a file whose first column looks "
                        "like an index)")
    p.add_argument("--subsample", type=int,
                   help="use a random subset of at most this many points of each file "
                        "(magnitude costs O(n³) time and O(n²) memory)")
    p.add_argument("--seed", type=int, default=0, help="seed of --subsample")


def _add_measure_options(p) -> None:
    p.add_argument("--metric-space", choices=("cosine", "euclidean"), default="cosine",
                   help="distance for MagArea/MagDiff (default: cosine)")
    p.add_argument("--k", type=int, default=5, help="neighbours for PRDC (default 5)")
    p.add_argument("--tau", type=float, default=1.0, help="DCScore temperature (default 1)")
    p.add_argument("--magdiff-normalise", choices=("t_cut", "reference_area"),
                   help="divide MagDiff by t_cut or by the reference's MagArea")


def _check_options(args) -> None:
    if args.subsample is not None and args.subsample < 2:
        raise InputError(f"--subsample must be at least 2; got {args.subsample}.")
    if args.seed < 0:
        raise InputError(f"--seed must be >= 0; got {args.seed}.")
    if args.k < 1:
        raise InputError(f"--k must be a positive integer; got {args.k}.")
    if not math.isfinite(args.tau) or args.tau <= 0:
        raise InputError(f"--tau must be a finite number > 0; got {args.tau}.")


def _read_files(paths: list[str], args) -> list[EmbeddingFile]:
    """Every file, each with the reading options that apply to its format; an option that
    applies to none of them is an error (it would otherwise be silently ignored)."""
    suffixes = [Path(p).suffix.lower() for p in paths]
    if args.key is not None and ".npz" not in suffixes:
        read_embeddings(paths[0], key=args.key)  # raises, naming the option and the file
    csv_options = [name for name, value in (("--header" if args.header else "--no-header",
                                             args.header), ("--index-column", args.index_column))
                   if value is not None]
    if csv_options and ".csv" not in suffixes:
        raise InputError(f"{' and '.join(csv_options)} appl{'y' if len(csv_options) > 1 else 'ies'}"
                         f" to .csv files, and none is given.")
    files = []
    for path, suffix in zip(paths, suffixes, strict=True):
        csv_file = suffix == ".csv"
        files.append(read_embeddings(
            path, key=args.key if suffix == ".npz" else None,
            header=args.header if csv_file else None,
            index_column=args.index_column if csv_file else None))
    return files


def _subsample(X: np.ndarray, n: int | None, rng) -> np.ndarray:
    if n is None or len(X) <= n:
        return X
    return X[np.sort(rng.choice(len(X), size=n, replace=False))]


def _describe(read: EmbeddingFile, A: np.ndarray, subsample: int | None, seed: int) -> str:
    """``x.csv (300 points x 16 dims; CSV; header on line 1: ...)``, and the subset taken."""
    n_in_file = read.shape[0]
    text = f"{read.path} ({A.shape[0]} points x {A.shape[1]} dims"
    if subsample is not None:
        text += (f"; random subset of {A.shape[0]} of {n_in_file} points, --subsample "
                 f"{subsample} --seed {seed}" if A.shape[0] < n_in_file
                 else f"; all {n_in_file} points, --subsample {subsample} not needed")
    return text + f"; {read.reading})"


def _file_record(read: EmbeddingFile, A: np.ndarray) -> dict:
    return {"path": read.path, "n_points": A.shape[0], "n_features": A.shape[1],
            "n_points_in_file": read.shape[0], "read": read.to_dict()}


# --------------------------------------------------------------------------------------------
# score
# --------------------------------------------------------------------------------------------


def _add_score(sub) -> None:
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
    _add_measure_options(p)
    _add_reading_options(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_run_score)


def _run_score(args, argv) -> int:
    _check_options(args)
    metrics = _parse_metrics(args.metrics, args.reference is not None)
    rng = np.random.default_rng(args.seed)
    paths = {"embeddings": args.embeddings}
    if args.reference is not None:
        paths["reference"] = args.reference
    reads = dict(zip(paths, _read_files(list(paths.values()), args), strict=True))
    data, files, headers = {}, {}, {}
    for name, read in reads.items():
        data[name] = _subsample(read.data, args.subsample, rng)
        files[name] = _file_record(read, data[name])
        headers[name] = _describe(read, data[name], args.subsample, args.seed)
    X, ref = data["embeddings"], data.get("reference")
    if ref is not None and ref.shape[1] != X.shape[1]:
        raise InputError(f"mismatched dimensions: the embeddings ({args.embeddings}) have "
                         f"{X.shape[1]} features, the reference ({args.reference}) has "
                         f"{ref.shape[1]}.")
    result = score(X, ref, metrics, metric_space=args.metric_space, k=args.k, tau=args.tau,
                   magdiff_normalise=args.magdiff_normalise, labels=paths)
    values = [v for where in result["scores"].values() for v in where.values()]
    if all(v is None for v in values):
        by_reason = {}
        for where in result["undefined"].values():
            for m, why in where.items():
                by_reason.setdefault(why, []).append(METRICS[m][0])
        raise InputError("no requested measure is defined for this input: " + "; ".join(
            f"{', '.join(dict.fromkeys(names))}: {why}" for why, names in by_reason.items()))
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


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------


def _add_compare(sub) -> None:
    p = sub.add_parser(
        "compare", help="compare several embedding sets on one integration limit",
        description="Compare embedding sets (each n_i points x d, .npy/.npz/.csv; sizes may "
                    "differ): every set's MagArea on one integration limit t_cut (the median "
                    "convergence scale of the sets; with --reference the reference's; or "
                    "--t-cut), MagDiff between every pair, every reference-free baseline "
                    f"({', '.join(DEFAULT_FREE[1:])}), and with --reference "
                    f"{', '.join(DEFAULT_BASED)} against it.",
        epilog="Exit status: 0 when the results were printed (a value undefined for one set is "
               "shown as 'undefined' with its reason, the other sets are still computed); 2 for "
               "a bad file or option.")
    p.add_argument("sets", nargs="+", metavar="SET", help="embedding files (.npy, .npz, .csv)")
    p.add_argument("--reference", help="reference embeddings in the same space")
    p.add_argument("--t-cut", type=float,
                   help="integration limit of every MagArea and MagDiff (default: the median "
                        "convergence scale of the sets, or the reference's)")
    p.add_argument("--target", type=float, default=DEFAULT_TARGET,
                   help="convergence scale: Mag(t_conv) = target x distinct points (default "
                        f"{DEFAULT_TARGET}, the paper's)")
    p.add_argument("--n-ts", type=int, default=DEFAULT_N_TS,
                   help=f"scales of the magnitude functions on [0, t_cut] (default "
                        f"{DEFAULT_N_TS})")
    _add_measure_options(p)
    _add_reading_options(p)
    raw = p.add_argument_group(
        "raw data (--embed)",
        "With --embed MODEL each SET (and --reference) is raw data, embedded first by the "
        "pipeline's own encoders: a text model for .txt files (one text per line) and .jsonl "
        "files (--field: a string, or a list of strings, per line), 'inception' (the FID "
        "Inception V3 network) for folders of PNG/JPEG images. Models are fetched pinned and "
        "verified into --models (default: CACHE/models, or ~/.cache/diversity_core/models).")
    raw.add_argument("--embed", metavar="MODEL",
                     help="embed raw sets with MODEL: " + ", ".join(_text_models())
                          + "; or inception")
    raw.add_argument("--field", help="the field of each .jsonl line that holds its text(s)")
    raw.add_argument("--cache", metavar="DIR",
                     help="cache the embeddings in DIR (per text / image file content and "
                          "model; safe for concurrent runs)")
    raw.add_argument("--models", metavar="DIR",
                     help="folder of the fetched models, one subfolder each (the pipeline's "
                          "resources/text/models, resources for inception)")
    raw.add_argument("--device", default="cpu",
                     help="device of the encoder: cpu (default), auto, cuda")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of a table")
    out.add_argument("--csv", action="store_true",
                     help="print the per-set table as CSV instead of a table")
    p.add_argument("--plot", metavar="FILE",
                   help="draw the magnitude functions and the MagDiff matrix (.png or .pdf)")
    p.add_argument("--report", metavar="DIR",
                   help="write DIR/report.md with the tables, the figure and the command, and "
                        "the results as JSON and CSV")
    p.set_defaults(run=_run_compare)


def _check_compare_options(args) -> None:
    _check_options(args)
    if args.t_cut is not None and not (math.isfinite(args.t_cut) and args.t_cut > 0):
        raise InputError(f"--t-cut must be a finite number > 0; got {args.t_cut}.")
    if not 0.0 < args.target < 1.0:
        raise InputError(f"--target must lie in (0, 1); got {args.target}.")
    if args.n_ts < 2:
        raise InputError(f"--n-ts must be at least 2; got {args.n_ts}.")
    if args.plot is not None:
        plot = Path(args.plot)
        if plot.suffix.lower() not in (".png", ".pdf"):
            raise InputError(f"--plot {args.plot}: the figure is written as .png or .pdf; got "
                             f"{plot.suffix or 'no extension'!r}.")
        if not plot.parent.is_dir():
            raise InputError(f"--plot {args.plot}: no folder {plot.parent}.")
    if args.report is not None and Path(args.report).exists() \
            and not Path(args.report).is_dir():
        raise InputError(f"--report {args.report}: exists and is not a folder.")
    if args.plot is not None or args.report is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise InputError("--plot and --report draw with matplotlib, which is not installed: "
                             "pip install 'diversity_core[pipeline]'.") from None
    names = args.sets + ([args.reference] if args.reference else [])
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InputError(f"{', '.join(repeated)} given more than once.")


def _compare_options(args) -> str:
    """Every option the numbers depend on, as the command line would say it (defaults too)."""
    parts = [f"--metric-space {args.metric_space}", f"--target {args.target:g}",
             f"--n-ts {args.n_ts}", f"--k {args.k}", f"--tau {args.tau:g}"]
    if args.t_cut is not None:
        parts.append(f"--t-cut {args.t_cut:.17g}")
    if args.magdiff_normalise:
        parts.append(f"--magdiff-normalise {args.magdiff_normalise}")
    if args.subsample is not None:
        parts.append(f"--subsample {args.subsample} --seed {args.seed}")
    if args.embed is not None:
        parts.append(f"--embed {args.embed}" + (f" --field {args.field}" if args.field else "")
                     + (f" --device {args.device}" if args.device != "cpu" else ""))
    for name, value in (("--key", args.key), ("--index-column", args.index_column)):
        if value is not None:
            parts.append(f"{name} {value}")
    if args.header is not None:
        parts.append("--header" if args.header else "--no-header")
    return " ".join(parts)


def _text_models() -> list[str]:
    from .embed.raw import text_model_names

    return text_model_names()


def _read_texts(path: str, field: str | None) -> list[str]:
    """The texts of a .txt file (one per non-blank line) or a .jsonl file (``field`` of every
    line: a string or a list of strings); InputError naming the file (and line)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".txt", ".jsonl"):
        raise InputError(f"{path}: --embed reads texts from .txt or .jsonl files; got "
                         f"{suffix or 'no extension'!r}.")
    if not p.is_file():
        raise InputError(f"{path}: no such file.")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}).") from None
    texts: list[str] = []
    if suffix == ".txt":
        texts = [line for line in lines if line.strip()]
    else:
        if field is None:
            raise InputError(f"{path}: a .jsonl file needs --field, the key of its texts.")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{path}, line {number}: not JSON ({err.msg}).") from None
            if not isinstance(record, dict) or field not in record:
                raise InputError(f"{path}, line {number}: no field {field!r}.")
            value = record[field]
            values = value if isinstance(value, list) else [value]
            if not values or not all(isinstance(v, str) for v in values):
                raise InputError(f"{path}, line {number}: field {field!r} is not a string or "
                                 "a list of strings.")
            texts.extend(values)
    if not texts:
        how = "one per line" if suffix == ".txt" else f"field {field!r}"
        raise InputError(f"{path}: no text in it ({how}).")
    return texts


def _embed_sets(paths: list[str], args) -> tuple[dict, dict, list]:
    """Raw sets embedded with --embed: data, JSON records and descriptions by path."""
    from tqdm.auto import tqdm

    from .embed.raw import IMAGE_MODEL, embed_images, embed_texts, image_files

    model = args.embed
    images = model == IMAGE_MODEL
    if not images and model not in _text_models():
        raise InputError(f"--embed {model}: unknown model; known: {', '.join(_text_models())}, "
                         f"{IMAGE_MODEL}.")
    if images and args.field is not None:
        raise InputError("--field applies to texts; --embed inception reads image folders.")
    if args.field is not None and not any(Path(p).suffix.lower() == ".jsonl" for p in paths):
        raise InputError("--field applies to .jsonl files, and none is given.")
    items = {}
    for path in paths:  # every input read (and checked) before any model is loaded
        if images:
            if not Path(path).is_dir():
                raise InputError(f"{path}: --embed inception reads folders of PNG/JPEG images.")
            items[path] = [str(f) for f in image_files(path)]
        elif Path(path).is_dir():
            raise InputError(f"{path}: a folder; --embed {model} reads .txt or .jsonl files "
                             "(folders of images: --embed inception).")
        else:
            items[path] = _read_texts(path, args.field)
    if images:
        from .embed.raw import read_image

        for files in items.values():
            for f in files:
                read_image(f)
    data, records, described = {}, {}, []
    bar = tqdm(paths, desc=f"embedding sets ({model})", unit="set", leave=False, file=sys.stderr,
               disable=None if len(paths) >= 2 else True)
    for path in bar:
        rng = np.random.default_rng([args.seed, zlib.crc32(os.fsencode(path))])
        everything = items[path]
        keep = _subsample(np.arange(len(everything))[:, None], args.subsample, rng)[:, 0]
        chosen = [everything[i] for i in keep]
        if images:
            A = embed_images(chosen, cache=args.cache, models=args.models, device=args.device)
        else:
            A = embed_texts(chosen, model, cache=args.cache, models=args.models,
                            device=args.device)
        A = np.asarray(A, dtype=np.float64)
        data[path] = A
        unit = "images" if images else "texts"
        records[path] = {"path": path, "n_points": A.shape[0], "n_features": A.shape[1],
                         "n_points_in_file": len(everything),
                         "read": {"format": "image folder" if images else Path(path).suffix[1:],
                                  "field": args.field, "embedded_with": model}}
        text = f"{path} ({A.shape[0]} {unit} embedded with {model}: {A.shape[1]} dims"
        if args.subsample is not None and len(chosen) < len(everything):
            text += (f"; random subset of {len(chosen)} of {len(everything)}, --subsample "
                     f"{args.subsample} --seed {args.seed}")
        described.append(("reference: " if path == args.reference else "") + text + ")")
    return data, records, described


def _run_compare(args, argv) -> int:
    _check_compare_options(args)
    paths = args.sets + ([args.reference] if args.reference else [])
    if args.embed is None:
        unused = [o for o, v in (("--field", args.field), ("--cache", args.cache),
                                 ("--models", args.models)) if v is not None]
        if unused:
            raise InputError(f"{', '.join(unused)} appl{'y' if len(unused) > 1 else 'ies'} to "
                             "raw sets; give --embed MODEL.")
        reads = _read_files(paths, args)
        data, records, described = {}, {}, []
    else:
        reads = []
        data, records, described = _embed_sets(paths, args)
    for read in reads:
        # Each file's subset depends only on --seed and the file's name: adding a set, or
        # giving them in another order, draws the same points from every other file.
        rng = np.random.default_rng([args.seed, zlib.crc32(os.fsencode(read.path))])
        data[read.path] = _subsample(read.data, args.subsample, rng)
        records[read.path] = _file_record(read, data[read.path])
        described.append(("reference: " if read.path == args.reference else "")
                         + _describe(read, data[read.path], args.subsample, args.seed))
    settings = MagnitudeSettings(target=args.target, n_ts=args.n_ts)
    result = compare({name: data[name] for name in args.sets}, data.get(args.reference),
                     t_cut=args.t_cut, reference_name=args.reference or "reference",
                     metric=args.metric_space, k=args.k, tau=args.tau, settings=settings)
    measures = [c for c in result.table.columns if c in LABELS and c != "t_conv"]
    if result.table[measures].isna().all().all():
        raise InputError("no measure is defined for any set: " + "; ".join(
            f"{name}: {note}" for name, note in result.table["note"].items() if note))
    command = " ".join([PROGRAM, *(shlex.quote(a) for a in argv)])
    options = _compare_options(args)
    payload = {"command": command, "version": __version__, "options_line": options,
               "files": records,
               "subsample": (None if args.subsample is None
                             else {"max_points": args.subsample, "seed": args.seed}),
               **result.to_dict()}
    json_text = json.dumps(payload, indent=2, allow_nan=False)
    csv_text = _comparison_csv(result, records)
    show = {"files": described, "options": options, "command": command,
            "normalise": args.magdiff_normalise}
    if args.plot is not None:
        from .reporting.compare_report import plot_comparison

        plot_comparison(result, args.plot, normalise=args.magdiff_normalise)
    if args.report is not None:
        from .reporting.compare_report import write_report

        write_report(result, args.report, data={"results.json": json_text + "\n",
                                                "results.csv": csv_text}, **show)
    if args.json:
        print(json_text)
    elif args.csv:
        print(csv_text, end="")
    else:
        from .reporting.compare_report import render_text

        print(render_text(result, **show))
    return 0


def _comparison_csv(result, records: dict) -> str:
    """One row per set: what was read, every measure, the signed MagDiff to every set
    (``magdiff_to:<name>``: row minus that set), the note, and t_cut and the distance."""
    table = result.table.copy()
    table.insert(1, "n_points_in_file", [records[n]["n_points_in_file"] for n in table.index])
    for name in result.mag_diff.columns:
        table[f"magdiff_to:{name}"] = result.mag_diff[name]
    table["warnings"] = [" | ".join(result.notes.get(n, [])) for n in table.index]
    table["t_cut"] = result.t_cut
    table["t_cut_rule"] = result.t_cut_rule
    table["distance"] = result.options["metric"]
    buffer = io.StringIO()
    table.to_csv(buffer, lineterminator="\n")
    return buffer.getvalue()


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

# What the command line prints, in ASCII, for a terminal that cannot show it (e.g.
# PYTHONIOENCODING=ascii, or LANG=C with a non-UTF-8 stdout).
_ASCII = {"∫": "integral", "‖": "||", "²": "^2", "−": "-", "×": "x", "…": "...", "≥": ">=",
          "≤": "<=", "→": "->", "·": "*", "∘": "o", "—": "-", "–": "-", "’": "'", "ᵀ": "^T",
          "√": "sqrt", "±": "+/-"}


def _transliterate(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    text = err.object[err.start:err.end]
    return "".join(_ASCII.get(c) or c.encode("ascii", "backslashreplace").decode("ascii")
                   for c in text), err.end


codecs.register_error("diversity_core.transliterate", _transliterate)


@contextlib.contextmanager
def _printable_streams():
    """stdout and stderr never fail on a character their encoding lacks (nor on a file name
    that is not UTF-8): it is written in ASCII instead; the streams are restored after."""
    changed = []
    for stream in (sys.stdout, sys.stderr):
        errors = getattr(stream, "errors", None)
        if hasattr(stream, "reconfigure") and errors in ("strict", None):
            with contextlib.suppress(Exception):  # a stream that cannot be reconfigured
                stream.reconfigure(errors="diversity_core.transliterate")
                changed.append((stream, errors or "strict"))
    try:
        yield
    finally:
        for stream, errors in changed:
            with contextlib.suppress(Exception):
                stream.reconfigure(errors=errors)


class _Parser(argparse.ArgumentParser):
    """argparse with the command line's one rule: a bad option is one line ``error: ...`` and
    exit status 2 (argparse's own format prints the whole usage first)."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _add_audit(sub) -> None:
    p = audit_command.add_parser(sub)
    p.set_defaults(run=lambda args, argv: audit_command.run(args))


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROGRAM, description="Magnitude and baseline diversity measures for embeddings.")
    parser.add_argument("--version", action="version", version=f"diversity_core {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_score(sub)
    _add_compare(sub)
    _add_audit(sub)
    return parser


def main(argv=None) -> int:
    """Run one subcommand; return its exit status (0, or 2 for bad input)."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    with _printable_streams():
        try:
            args = _build_parser().parse_args(argv)
        except SystemExit as exit_:  # --help, --version, or a bad option (said in one line)
            return exit_.code
        try:
            return args.run(args, argv)
        except ValueError as err:  # InputError and the measures' own input checks
            print(f"error: {err}", file=sys.stderr)
            return 2
        except MemoryError as err:
            why = str(err) if "subsample" in str(err) else ""
            print(f"error: {why}." if why else
                  "error: not enough memory for these sets; use --subsample N to measure a "
                  "random subset of N points of each.", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("error: interrupted.", file=sys.stderr)
            return 130
        except BrokenPipeError:
            # The reader of stdout went away (| head): nothing more to say, and Python's own
            # flush at exit must not fail again.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
