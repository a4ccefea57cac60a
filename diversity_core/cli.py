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
import zlib
from pathlib import Path

import numpy as np

from . import __version__
from .atomic import check_destination
from .comparison import (
    FREE_MEASURES,
    LABELS,
    REFERENCE_MEASURES,
    _fallback_note,
    compare,
)
from .embedding_files import EmbeddingFile, InputError, read_embeddings
from .magnitude import (
    DEFAULT_N_TS,
    DEFAULT_TARGET,
)
from .measures import MEASURES
from .provenance import command as audit_command
from .reporting.text import aligned
from .settings import MagnitudeSettings

__all__ = ["InputError", "load_embeddings", "main", "score"]

# name -> (label, needs a reference): the command line's view of the registry of measures.
METRICS = {name: (m.description, m.needs_reference) for name, m in MEASURES.items()}
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
    """Score's values and reasons, taken from compare's table: one undefined value never hides
    the others."""

    def __init__(self, sets):
        self.scores = {name: {} for name in (*sets, "comparison")}
        self.undefined = {name: {} for name in self.scores}

    def take(self, where: str, metric: str, value, why: str | None) -> None:
        """One of compare's values: NaN is undefined, with compare's reason."""
        if why is not None or not np.isfinite(value):
            self.scores[where][metric] = None
            self.undefined[where][metric] = why or f"the value is {value}"
        else:
            self.scores[where][metric] = float(value)


def score(X, reference=None, metrics=None, *, metric_space: str = "cosine", k: int = 5,
          tau: float = 1.0, magdiff_normalise: str | None = None,
          labels: dict[str, str] | None = None, memory_limit: int | None = None) -> dict:
    """Compute the requested metrics; returns ``{"scores": ..., "undefined": ..., "notes": ...,
    "t_cut": ...}``.

    ``score`` is :func:`~diversity_core.compare` of one set (and its reference): the same
    engine, the same memory rule (large sets on the engine's large-n path) and the same numbers
    at the same ``t_cut`` (this set's own convergence scale, or the reference's).
    ``scores["embeddings"]`` / ``scores["reference"]`` hold the reference-free metrics of each
    set, ``scores["comparison"]`` the reference-based ones. A metric undefined for its input has
    the value ``None``, and its reason in ``undefined[<set>][<metric>]`` and in its note;
    ``labels`` names the sets in those reasons (default: "embeddings", "reference"). Before
    anything is computed the memory it needs is checked (``MemoryError``, one line, beyond
    ``memory_limit``, default the memory available); ``fallbacks`` lists, per set, the scales
    where magnitude needed a fallback solver, with error bounds (also in the MagArea note).
    """
    metrics = list(metrics or (DEFAULT_FREE + (DEFAULT_BASED if reference is not None else ())))
    sets = {"embeddings": X} if reference is None else {"embeddings": X, "reference": reference}
    labels = {name: name for name in sets} | dict(labels or {})
    # The sets' names inside compare: the files' (so that every reason names the file), unless
    # the same file is given twice.
    keys = {name: str(labels[name]) for name in sets}
    if len(set(keys.values())) < len(keys):
        keys = {name: name for name in sets}
    result = compare({keys["embeddings"]: X}, reference, metric=metric_space, k=k, tau=tau,
                     reference_name=keys.get("reference", "reference"), measures=metrics,
                     memory_limit=memory_limit, progress=False)
    out = _Results(sets)
    table = result.table
    for name in sets:
        row, why = table.loc[keys[name]], result.undefined[keys[name]]
        for m in metrics:
            if not METRICS[m][1]:
                out.take(name, m, row[m], why.get(m))
    if reference is not None:
        row, why = table.loc[keys["embeddings"]], result.undefined[keys["embeddings"]]
        for m in metrics:
            if METRICS[m][1]:
                value = row[m]
                if m == "magdiff" and magdiff_normalise and np.isfinite(value):
                    value = value / (result.t_cut if magdiff_normalise == "t_cut"
                                     else table.loc[keys["reference"], "magarea"])
                out.take("comparison", m, value, why.get(m))
    notes = {
        "avgsim": "mean cosine similarity of pairs i != j: higher = LESS diverse",
        "dcscore": f"tau = {tau}",
        "isoscore": "isotropy of the variance, in [0, 1]",
    }
    t_cut = result.t_cut
    if t_cut is not None:
        source = ("the reference's convergence scale" if reference is not None
                  else "this space's own convergence scale")
        notes["magarea"] = (f"{metric_space} distance, ∫_0^t_cut Mag(t) dt, "
                            f"t_cut = {t_cut:.6g} ({source})")
        notes["magdiff"] = (
            f"∫_0^t_cut (Mag_X − Mag_ref) dt, {metric_space} distance, "
            f"t_cut = {t_cut:.6g} (reference's convergence scale)"
            + (f", divided by the {magdiff_normalise.replace('_', ' ')}"
               if magdiff_normalise else "")
            + "; < 0: less diverse than the reference")
    for m in ("precision", "recall", "density", "coverage"):
        notes[m] = f"k = {k}, reference = real, embeddings = fake"
    notes["mmd_rbf"] = "Euclidean, max over 10 bandwidths"
    notes["mmd_linear"] = "‖mean X − mean ref‖²"
    for by_measure in result.warned.values():  # a baseline's own warning says more
        for m, messages in by_measure.items():
            notes[m] = messages[-1]
    names = {v: k_ for k_, v in keys.items()}
    fallbacks = {labels[names[key]]: records for key, records in result.fallbacks.items()}
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


# The range of every numeric option, checked before any file is read (the README's table of
# errors lists them). The upper bounds keep every command finite: --n-ts scales cost one solve
# each, --k neighbours a sort each; a t_cut or tau beyond these is not a scale of any data that
# float64 distances can hold (t * d overflows, softmax(K / tau) is uniform to every digit).
OPTION_RANGES = {"--n-ts": (2, 10_000), "--k": (1, 10_000), "--subsample": (2, 10_000_000),
                 "--seed": (0, 2**63 - 1), "--t-cut": (0.0, 1e15), "--tau": (0.0, 1e6),
                 "--target": (0.0, 1.0)}


def _in_range(option: str, value, *, open_low: bool = False, open_high: bool = False) -> None:
    """InputError unless ``value`` lies in OPTION_RANGES[option] (ends closed unless said)."""
    low, high = OPTION_RANGES[option]
    ok = isinstance(value, int) or math.isfinite(value)
    ok = ok and (value > low if open_low else value >= low)
    ok = ok and (value < high if open_high else value <= high)
    if not ok:
        def shown(v):
            return str(v) if isinstance(v, int) else f"{v:g}"

        ends = (("(" if open_low else "[") + f"{shown(low)}, {shown(high)}"
                + (")" if open_high else "]"))
        kind = "an integer" if isinstance(value, int) else "a number"
        raise InputError(f"{option} must be {kind} in {ends}; got {value}.")


def _check_options(args) -> None:
    if args.subsample is not None:
        _in_range("--subsample", args.subsample)
    _in_range("--seed", args.seed)
    _in_range("--k", args.k)
    _in_range("--tau", args.tau, open_low=True)


def _writable_folder(option: str, folder) -> None:
    """InputError unless ``folder`` is a folder to write into, or one that can be made there
    (its nearest existing ancestor a writable folder); nothing is created here, so a command
    refused later leaves no trace."""
    path = Path(folder)
    if path.is_symlink() and not path.exists():
        raise InputError(f"{option} {folder}: a symbolic link to nothing.")
    if path.exists() and not path.is_dir():
        raise InputError(f"{option} {folder}: exists and is not a folder.")
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{option} {folder}: {existing} is not a folder.")
    # /proc and /sys answer os.access with yes and refuse every new file: not places to write.
    if not os.access(existing, os.W_OK | os.X_OK) or existing.parts[1:2] in (("proc",), ("sys",)):
        raise InputError(f"{option} {folder}: {existing} is not writable.")


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
                     help="device of the encoder: cpu (default), auto, cuda, cuda:N")
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
    if args.t_cut is not None:
        _in_range("--t-cut", args.t_cut, open_low=True)
    _in_range("--target", args.target, open_low=True, open_high=True)
    _in_range("--n-ts", args.n_ts)
    if args.plot is not None:
        plot = Path(args.plot)
        if plot.suffix.lower() not in (".png", ".pdf"):
            raise InputError(f"--plot {args.plot}: the figure is written as .png or .pdf; got "
                             f"{plot.suffix or 'no extension'!r}.")
        if not plot.parent.is_dir():
            raise InputError(f"--plot {args.plot}: no folder {plot.parent}.")
        try:
            check_destination(plot, what="--plot")
        except ValueError as err:
            raise InputError(str(err)) from None
        _writable_folder("--plot", plot.parent)
    for option, folder in (("--report", args.report), ("--cache", args.cache),
                           ("--models", args.models)):
        if folder is not None:
            _writable_folder(option, folder)
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


def _embed_sets(paths: list[str], args) -> tuple[dict, dict, list]:
    """Raw sets embedded with --embed: data, JSON records and descriptions by path."""
    from tqdm.auto import tqdm

    from .embed.raw import IMAGE_MODEL, embed_images, embed_texts, image_files, read_texts

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
            items[path] = read_texts(path, args.field)
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
        from .reporting.compare_report import report_files, write_report

        data_files = {"results.json": json_text + "\n", "results.csv": csv_text}
        replaced = report_files(args.report, data_files)
        if replaced:  # an earlier report's files: said, then replaced (the others are kept)
            print(f"note: --report {args.report}: replacing "
                  f"{', '.join(p.name for p in replaced)}.", file=sys.stderr)
        write_report(result, args.report, data=data_files, **show)
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
        except OSError as err:  # a file that cannot be read or written: the user's to fix
            where = f" ({err.filename})" if getattr(err, "filename", None) else ""
            print(f"error: {err.strerror or err}{where}.", file=sys.stderr)
            return 2
        except RecursionError:
            print("error: the input is nested too deeply to read.", file=sys.stderr)
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
