"""The ``compare`` command: many embedding sets (or raw texts and images, ``--embed``) on one
integration limit, printed as a table, JSON or CSV, with an optional figure and report.

Its parser is :func:`add_compare_command`, its command :func:`run_compare`; the numbers come
from :func:`diversity_core.comparison.compare`.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import sys
import zlib
from pathlib import Path

import numpy as np

from .. import __version__
from ..atomic import check_destination
from ..comparison import compare
from ..comparison.protocol import SCALE_GAP
from ..files.embeddings import InputError
from ..magnitude import DEFAULT_N_TS, DEFAULT_TARGET
from ..magnitude.settings import DEFAULT_INTEGRATION, MagnitudeSettings
from ..measures.registry import FREE_MEASURES, MEASURES, REFERENCE_MEASURES
from .options import (
    PROGRAM,
    add_measure_options,
    add_reading_options,
    check_options,
    describe_file,
    file_record,
    in_range,
    read_files,
    subsample_points,
    writable_folder,
)

__all__ = ["add_compare_command", "run_compare"]




def add_compare_command(sub) -> None:
    p = sub.add_parser(
        "compare", help="compare several embedding sets on one integration limit",
        description="Compare embedding sets (each n_i points x d, .npy/.npz/.csv; sizes may "
                    "differ): every set's MagArea on one integration limit t_cut (the median "
                    "convergence scale of the sets; with --reference the reference's; or "
                    "--t-cut), MagDiff between every pair, every reference-free baseline "
                    f"({', '.join(FREE_MEASURES[1:])}), and with --reference "
                    f"{', '.join(REFERENCE_MEASURES)} against it. Every table, --csv and --json "
                    "name the measures as above, as Python's compare(...).table does; a set "
                    f"whose convergence scale lies more than {SCALE_GAP:g}x from t_cut gets a "
                    "note.",
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
    add_measure_options(p)
    add_reading_options(p)
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
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of a table")
    out.add_argument("--csv", action="store_true",
                     help="print the per-set table as CSV instead of a table")
    p.add_argument("--plot", metavar="FILE",
                   help="draw the magnitude functions and the MagDiff matrix (.png or .pdf)")
    p.add_argument("--report", metavar="DIR",
                   help="write DIR/report.md with the tables, the figure and the command, and "
                        "the results as JSON and CSV")
    p.set_defaults(run=run_compare)


def _check_compare_options(args) -> None:
    check_options(args)
    if args.t_cut is not None:
        in_range("--t-cut", args.t_cut, open_low=True)
    in_range("--target", args.target, open_low=True, open_high=True)
    in_range("--n-ts", args.n_ts)
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
        writable_folder("--plot", plot.parent)
    for option, folder in (("--report", args.report), ("--cache", args.cache),
                           ("--models", args.models)):
        if folder is not None:
            writable_folder(option, folder)
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
        parts.append(f"--embed {args.embed}" + (f" --field {args.field}" if args.field else ""))
    if args.device.name != "cpu":
        parts.append(f"--device {args.device.name}")
    if args.integration != DEFAULT_INTEGRATION:
        parts.append(f"--integration {args.integration}")
    for name, value in (("--key", args.key), ("--index-column", args.index_column)):
        if value is not None:
            parts.append(f"{name} {value}")
    if args.header is not None:
        parts.append("--header" if args.header else "--no-header")
    return " ".join(parts)


def _text_models() -> list[str]:
    from ..embed.raw import text_model_names

    return text_model_names()


def _file_rng(seed: int, path: str) -> np.random.Generator:
    """The generator of a set's ``--subsample``: it depends only on ``--seed`` and the set's
    name, so that adding a set, or giving them in another order, draws the same points from
    every other set."""
    return np.random.default_rng([seed, zlib.crc32(os.fsencode(path))])


def _embed_sets(paths: list[str], args) -> tuple[dict, dict, list]:
    """Raw sets embedded with --embed: data, JSON records and descriptions by path."""
    from tqdm.auto import tqdm

    from ..embed.raw import IMAGE_MODEL, embed_images, embed_texts
    from ..files.images import image_files
    from ..files.texts import read_texts

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
        from ..files.images import read_image

        for files in items.values():
            for f in files:
                read_image(f)
    data, records, described = {}, {}, []
    bar = tqdm(paths, desc=f"embedding sets ({model})", unit="set", leave=False, file=sys.stderr,
               disable=None if len(paths) >= 2 else True)
    for path in bar:
        rng = _file_rng(args.seed, path)
        everything = items[path]
        keep = subsample_points(np.arange(len(everything))[:, None], args.subsample, rng)[:, 0]
        chosen = [everything[i] for i in keep]
        if images:
            A = embed_images(chosen, cache=args.cache, models=args.models,
                             device=args.device)
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


def run_compare(args, argv) -> int:
    _check_compare_options(args)
    paths = args.sets + ([args.reference] if args.reference else [])
    if args.embed is None:
        unused = [o for o, v in (("--field", args.field), ("--cache", args.cache),
                                 ("--models", args.models)) if v is not None]
        if unused:
            raise InputError(f"{', '.join(unused)} appl{'y' if len(unused) > 1 else 'ies'} to "
                             "raw sets; give --embed MODEL.")
        reads = read_files(paths, args)
        data, records, described = {}, {}, []
    else:
        reads = []
        data, records, described = _embed_sets(paths, args)
    for read in reads:
        rng = _file_rng(args.seed, read.path)
        data[read.path] = subsample_points(read.data, args.subsample, rng)
        records[read.path] = file_record(read, data[read.path])
        described.append(("reference: " if read.path == args.reference else "")
                         + describe_file(read, data[read.path], args.subsample, args.seed))
    settings = MagnitudeSettings(target=args.target, n_ts=args.n_ts, device=args.device,
                                 integration=args.integration)
    # The magnitude functions on the grid only where they are shown (JSON, figure, report): on
    # a large set they cost more than t_conv and MagArea together.
    shown = args.json or args.plot is not None or args.report is not None
    result = compare({name: data[name] for name in args.sets}, data.get(args.reference),
                     t_cut=args.t_cut, reference_name=args.reference or "reference",
                     metric=args.metric_space, k=args.k, tau=args.tau, settings=settings,
                     functions=shown)
    measures = [c for c in result.table.columns if c in MEASURES]
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
        from ..comparison.report import plot_comparison

        plot_comparison(result, args.plot, normalise=args.magdiff_normalise)
    if args.report is not None:
        from ..comparison.report import report_files, write_report

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
        from ..comparison.report import render_text

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
