"""The ``score`` command: :func:`diversity_core.comparison.score` of one embedding file,
optionally against a reference, printed as a table or JSON. :func:`add_score_command` and
:func:`run_score` are its parser and its command (registered by :mod:`diversity_core.cli.main`).
"""

from __future__ import annotations

import json
import math

import numpy as np

from ..comparison.score import score
from ..files.embeddings import InputError
from ..measures.registry import FREE_MEASURES, MEASURES, REFERENCE_MEASURES
from ..reporting.text import aligned
from .options import (
    add_measure_options,
    add_reading_options,
    check_options,
    describe_file,
    file_record,
    parse_metrics,
    read_files,
    subsample_points,
)

__all__ = ["add_score_command", "finite_or_null", "render_table", "run_score"]


def _format_value(v) -> str:
    return "undefined" if v is None else f"{v:.6g}"


def render_table(result: dict, headers: dict) -> str:
    """The scores as aligned text: reference-free metrics per file, then the comparison."""
    scores, notes = result["scores"], result["notes"]
    columns = [c for c in ("embeddings", "reference") if c in headers]
    lines = [f"{c}: {headers[c]}" for c in columns]
    free = list(dict.fromkeys(m for c in columns for m in scores[c]))
    if free:
        rows = [[m, *(_format_value(scores[c].get(m)) for c in columns),
                 MEASURES[m].description, notes.get(m, "")] for m in free]
        lines += ["", *aligned(["metric", *columns, "about", "note"], rows, free_last=True)]
    if scores["comparison"]:
        rows = [[m, _format_value(v), MEASURES[m].description, notes.get(m, "")]
                for m, v in scores["comparison"].items()]
        lines += ["", "embeddings compared with the reference:",
                  *aligned(["metric", "value", "about", "note"], rows, free_last=True)]
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
                    f"metrics: {', '.join(FREE_MEASURES)}. With --reference also: "
                    f"{', '.join(REFERENCE_MEASURES)} (aliases: prdc, mmd). The table and --json "
                    "name the metrics so, as --metrics takes them.",
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
                   magdiff_normalise=args.magdiff_normalise, labels=paths, device=args.device,
                   integration=args.integration)
    values = [v for where in result["scores"].values() for v in where.values()]
    if all(v is None for v in values):
        by_reason = {}
        for where in result["undefined"].values():
            for m, why in where.items():
                by_reason.setdefault(why, []).append(MEASURES[m].description)
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
