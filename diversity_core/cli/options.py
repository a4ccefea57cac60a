"""The command line's options: the measures it knows, the options every subcommand shares, the
range of every numeric option, and the reading of the files it is given.

:mod:`.cli` (``compare`` and :func:`~diversity_core.cli.main`) and :mod:`.cli_score` (``score``)
build their parsers from here. An option that every measuring command takes (such as
``--device``, of the engine and of ``compare --embed``'s encoders) is added once: its
definition in :func:`add_measure_options`, its range (if numeric) in :data:`OPTION_RANGES`, its
check in :func:`check_options`.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import numpy as np

from ..device import parse_device
from ..files.embeddings import EmbeddingFile, InputError, read_embeddings
from ..magnitude import DEFAULT_INTEGRATION, INTEGRATION_METHODS
from ..measures.registry import MEASURES, PluginError, get_measure_names, register_plugins

__all__ = ["ALIASES", "OPTION_RANGES", "PROGRAM",
           "add_measure_options", "add_reading_options", "check_options", "describe_file",
           "file_record", "in_range", "load_embeddings", "parse_metrics", "plugin_measure",
           "read_files", "subsample_points", "writable_folder"]

# Names --metrics takes for several measures of the registry at once.
ALIASES = {"prdc": tuple(name for name, m in MEASURES.items() if m.group == "prdc"),
           "mmd": ("mmd_rbf", "mmd_linear")}
PROGRAM = "python -m diversity_core"


def load_embeddings(path, key: str | None = None) -> np.ndarray:
    """The (n_points, n_features) float64 array of a ``.npy``, ``.npz`` or ``.csv`` file; see
    :func:`diversity_core.files.embeddings.read_embeddings`."""
    return read_embeddings(path, key=key).data


def parse_metrics(text: str | None, has_reference: bool) -> list[str]:
    """The measures ``--metrics`` names (aliases expanded, duplicates dropped, in the order
    given); None: every measure that applies. :class:`InputError` for an unknown name, or one
    that needs a reference when there is none."""
    if text is None:
        return get_measure_names(needs_reference=None if has_reference else False)
    names = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        expanded = ALIASES.get(name, (name,))
        for n in expanded:
            if n not in MEASURES:
                valid = ", ".join(list(MEASURES) + list(ALIASES))
                raise InputError(f"unknown metric {raw.strip()!r}; choose from {valid}.")
            if MEASURES[n].needs_reference and not has_reference:
                raise InputError(f"metric {n!r} compares with a reference: give --reference.")
            if n not in names:
                names.append(n)
    if not names:
        raise InputError("--metrics is empty.")
    return names



# --------------------------------------------------------------------------------------------
# Options shared by the subcommands: reading files, and the measures
# --------------------------------------------------------------------------------------------


def add_reading_options(p) -> None:
    """The options of reading files (``--key``, ``--header``, ``--index-column``,
    ``--subsample``, ``--seed``), added to the parser ``p``."""
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


def plugin_measure(spec: str) -> str:
    """``--plugin package.module:OBJECT``: the measure joins the registry (its name returned);
    one that does not import, has the wrong signature or takes a taken name is refused while the
    arguments are parsed."""
    try:
        return register_plugins([spec], entry_points=False)[0].name
    except PluginError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_measure_options(p) -> None:
    """The options of the measures (``--metric-space``, ``--k``, ``--tau``,
    ``--magdiff-normalise``, ``--plugin``, ``--integration``, ``--device``), added to the parser
    ``p``: shared by ``score`` and ``compare``."""
    p.add_argument("--plugin", action="append", default=[], type=plugin_measure,
                   metavar="package.module:OBJECT",
                   help="a measure of your own (a diversity_core Measure, or a function with "
                        "declared needs) computed beside the others; repeatable")
    p.add_argument("--metric-space", choices=("cosine", "euclidean"), default="cosine",
                   help="distance for MagArea/MagDiff (default: cosine)")
    p.add_argument("--k", type=int, default=5, help="neighbours for PRDC (default 5)")
    p.add_argument("--tau", type=float, default=1.0, help="DCScore temperature (default 1)")
    p.add_argument("--magdiff-normalise", choices=("t_cut", "reference_area"),
                   help="divide MagDiff by t_cut or by the reference's MagArea")
    p.add_argument("--integration", choices=INTEGRATION_METHODS, default=DEFAULT_INTEGRATION,
                   help=f"MagArea's quadrature rule (default: {DEFAULT_INTEGRATION}; "
                        "docs/performance.md compares them)")
    p.add_argument("--device", default="cpu",
                   help="where magnitude runs and, with --embed, the encoder: cpu (default: "
                        "the NumPy engine, the encoder on the CPU); auto (the encoder on CUDA "
                        "when torch sees a GPU; the NumPy engine); cuda or cuda:N (the "
                        "engine's torch path and the encoder on that GPU); torch:cpu (the "
                        "engine's torch path on the CPU)")


# The range of every numeric option, checked before any file is read (the README's table of
# errors lists them). The upper bounds keep every command finite: --n-ts scales cost one solve
# each, --k neighbours a sort each; a t_cut or tau beyond these is not a scale of any data that
# float64 distances can hold (t * d overflows, softmax(K / tau) is uniform to every digit).
OPTION_RANGES = {"--n-ts": (2, 10_000), "--k": (1, 10_000), "--subsample": (2, 10_000_000),
                 "--seed": (0, 2**63 - 1), "--t-cut": (0.0, 1e15), "--tau": (0.0, 1e6),
                 "--target": (0.0, 1.0)}


def in_range(option: str, value, *, open_low: bool = False, open_high: bool = False) -> None:
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


def check_options(args) -> None:
    """The ranges of the shared numeric options (:data:`OPTION_RANGES`), before any file is
    read; :class:`InputError` naming the first out of range. ``--device`` is parsed here, the
    command line's one parse of it: ``args.device`` is a :class:`~diversity_core.device.Device`
    from here on (the engine's and the encoders')."""
    try:  # the installed packages' measures (entry-point group diversity_core.measures)
        register_plugins((), entry_points=True)
    except PluginError as err:
        raise InputError(str(err)) from None
    if args.subsample is not None:
        in_range("--subsample", args.subsample)
    in_range("--seed", args.seed)
    in_range("--k", args.k)
    in_range("--tau", args.tau, open_low=True)
    try:
        args.device = parse_device(args.device, key="--device")
    except ValueError as err:
        raise InputError(str(err)) from None


def writable_folder(option: str, folder) -> None:
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


def read_files(paths: list[str], args) -> list[EmbeddingFile]:
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


def subsample_points(X: np.ndarray, n: int | None, rng) -> np.ndarray:
    """At most ``n`` rows of ``X`` (n_points, d), drawn without replacement by ``rng`` and kept
    in file order; ``X`` itself when it has no more (or ``n`` is None)."""
    if n is None or len(X) <= n:
        return X
    return X[np.sort(rng.choice(len(X), size=n, replace=False))]


def describe_file(read: EmbeddingFile, A: np.ndarray, subsample: int | None, seed: int) -> str:
    """``x.csv (300 points x 16 dims; CSV; header on line 1: ...)``, and the subset taken."""
    n_in_file = read.shape[0]
    text = f"{read.path} ({A.shape[0]} points x {A.shape[1]} dims"
    if subsample is not None:
        text += (f"; random subset of {A.shape[0]} of {n_in_file} points, --subsample "
                 f"{subsample} --seed {seed}" if A.shape[0] < n_in_file
                 else f"; all {n_in_file} points, --subsample {subsample} not needed")
    return text + f"; {read.reading})"


def file_record(read: EmbeddingFile, A: np.ndarray) -> dict:
    """What ``--json`` says of a file read (``read``) and the points kept of it (``A``)."""
    return {"path": read.path, "n_points": A.shape[0], "n_features": A.shape[1],
            "n_points_in_file": read.shape[0], "read": read.to_dict()}
