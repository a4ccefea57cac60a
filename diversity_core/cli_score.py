"""``score``: the measures of one embedding file, optionally against a reference.

:func:`score` is :func:`~diversity_core.compare` of one set (and its reference), its values
and reasons re-shaped per set; :func:`add_score_command` and :func:`run_score` are its parser
and its command (registered by :func:`diversity_core.cli.main`).
"""

from __future__ import annotations

import json
import math

import numpy as np

from .cli_options import (
    DEFAULT_BASED,
    DEFAULT_FREE,
    METRICS,
    add_measure_options,
    add_reading_options,
    check_options,
    describe_file,
    file_record,
    parse_metrics,
    read_files,
    subsample_points,
)
from .comparison import _fallback_note, compare
from .embedding_files import InputError
from .reporting.text import aligned
from .settings import MagnitudeSettings

__all__ = ["add_score_command", "finite_or_null", "render_table", "run_score", "score"]


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
          labels: dict[str, str] | None = None, memory_limit: int | None = None,
          device: str = "cpu") -> dict:
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
    ``device``: where the engine runs (``MagnitudeSettings.device``: ``cpu``, ``cuda``...).
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
                     memory_limit=memory_limit, progress=False,
                     settings=MagnitudeSettings(device=device))
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


def finite_or_null(value, path: str, notes: dict):
    """JSON has no NaN or Infinity: such a value becomes null, with a note saying what it was."""
    if isinstance(value, dict):
        return {k: finite_or_null(v, f"{path}.{k}" if path else k, notes)
                for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        notes[path] = f"{value} written as null"
        return None
    return value


def add_score_command(sub) -> None:
    """The ``score`` subcommand's parser, added to the subparsers ``sub``."""
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
    add_measure_options(p)
    add_reading_options(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run_score)


def run_score(args, argv) -> int:
    """Run ``score`` on the parsed ``args``; returns the exit status (0; bad input raises
    :class:`InputError`, said in one line by :func:`diversity_core.cli.main`)."""
    check_options(args)
    metrics = parse_metrics(args.metrics, args.reference is not None)
    rng = np.random.default_rng(args.seed)
    paths = {"embeddings": args.embeddings}
    if args.reference is not None:
        paths["reference"] = args.reference
    reads = dict(zip(paths, read_files(list(paths.values()), args), strict=True))
    data, files, headers = {}, {}, {}
    for name, read in reads.items():
        data[name] = subsample_points(read.data, args.subsample, rng)
        files[name] = file_record(read, data[name])
        headers[name] = describe_file(read, data[name], args.subsample, args.seed)
    X, ref = data["embeddings"], data.get("reference")
    if ref is not None and ref.shape[1] != X.shape[1]:
        raise InputError(f"mismatched dimensions: the embeddings ({args.embeddings}) have "
                         f"{X.shape[1]} features, the reference ({args.reference}) has "
                         f"{ref.shape[1]}.")
    result = score(X, ref, metrics, metric_space=args.metric_space, k=args.k, tau=args.tau,
                   magdiff_normalise=args.magdiff_normalise, labels=paths, device=args.device)
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
        out = finite_or_null(out, "", not_finite)
        if not_finite:
            out["not_finite"] = not_finite
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(render_table(result, headers))
    return 0
