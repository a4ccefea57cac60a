"""Which digits of an experiment's tables are a property of the data.

The same text embedded on two machines, or with another thread count or batch order, gives
embeddings that differ in their last bits (float32 kernels sum in other orders). A cell of a
table whose printed digits move under such a change reads round-off, not the models. The check:
every embedding is moved at the level of its round-off (:func:`perturb`), the table computed
again exactly as the pipeline does (same documents, subsamples, grid rule and folds), several
times with independent draws, and each cell's spread over the unperturbed and the perturbed
runs recorded (:func:`spread_table`). The model experiment runs it for Tables 2 and S.5
(``results/models/stability.csv``, and a mark in ``table2.md``: :func:`table2_markdown`), the
text experiment for its R² table (target ``text_stability``: ``results/text/r2_stability.csv``).

The spread is what the draws showed, not a bound: a cell that did not move in a few draws can
still move on another machine (measured: AVX2 instead of AVX-512 kernels moved 13 of jargon's
175 printed cells, none of them marked, and 20 of fortunes', 10 of them beyond their spread).
So the model experiment also bounds each cell (:func:`possible_knn_predictions`): when a change
of machine moves every distance between two sets by at most a stated fraction of the block's
largest, every k-NN decision it can reach is counted both ways, which gives each cell the range
it can reach (:func:`reach_table`; ``stability.csv``'s ``reach_low``, ``reach_high``) and says
which printed digits cannot move at all. The fraction is an assumption about the other machine,
checked against measured changes (:func:`outside_reach`; benchmarks/cells_beyond_spread.py).
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

__all__ = [
    "BLOCK",
    "MODEL_CELL",
    "perturb",
    "perturbation_rng",
    "read_exact_csv",
    "possible_knn_predictions",
    "reach_table",
    "beyond_spread",
    "outside_reach",
    "spread_table",
    "table2_markdown",
]

# A cell of the model experiment's tables: its block (collection, preprocessing, distance of
# magnitude), measure, k.
BLOCK = ["dataset", "preprocessing", "distance"]
MODEL_CELL = (*BLOCK, "measure", "k")


# pandas reads every float with its round-trip converter from 3.1 on, and deprecates choosing
# it; before 3.1 its default converter could be a unit off in the last place.
_ROUND_TRIP = ({} if tuple(int(part) for part in pd.__version__.split(".")[:2]) >= (3, 1)
               else {"float_precision": "round_trip"})


def read_exact_csv(path) -> pd.DataFrame:
    """A CSV of the experiment's classifications (accuracies, confusion counts) with every float
    exactly as written at full precision: tables round them, and rounding must see them as
    computed."""
    return pd.read_csv(path, **_ROUND_TRIP)


def perturb(X, relative_to_column: float, rng: np.random.Generator, *,
            common_to_column: float = 0.0) -> np.ndarray:
    """``X`` (vectors × dimensions) with every value moved by a Gaussian fraction of its
    column's scale, and every column shifted by one more, shared by all vectors:
    ``x_ij + rms_j · (relative_to_column · g_ij + common_to_column · h_j)``, ``g ~ N(0, 1)``
    drawn per value, ``h ~ N(0, 1)`` per column (after ``g``: without the shared shift a draw is
    the same as before it existed), ``rms_j`` the root mean square of column ``j`` over ``X``'s
    vectors.

    Why this model (docs/model_distinguishing.md, "Reproducibility"): the same 2,000
    texts embedded with AVX2 instead of AVX-512 kernels moved, in every dimension, by about the
    same fraction of that dimension's scale (root mean square of the change over the column's:
    median 0.9e-6 to 1.6e-6, at most 2.2e-6, for all-MiniLM-L6-v2, sre-MiniLM and
    all-mpnet-base-v2), from the ordinary dimensions (scale 0.03) to nearly dead ones (scale
    1e-7: they moved by 1e-13) and dead ones (1e-33, moved by 1e-39: they stay dead). A
    fraction of each value would move the values near zero of an ordinary dimension far less
    than a change of CPU does; a fraction of the vector's length would move the nearly dead
    dimensions a million times more.

    Why the shared shift: the change of CPU was not independent from vector to vector. Its mean
    over the 2,000 vectors was 0.14 to 0.28 of its root mean square (independent draws: 0.02),
    up to 1.4e-6 of a column's scale, and it moved every subsample's Vendi Score of a model the
    same way (all-mpnet-base-v2: all 200 down, by a median 2.5e-7 relative); per-value draws
    alone moved them 10 to 20 times less, in both directions (and six such draws still left 6 of
    140 cells that the CPU change moved beyond their spread). The shift gives the scores the
    CPU change's size and coherence; it did not make the marks cover that change (see the
    module's note). Returned in ``X``'s precision
    (float32 embeddings stay float32, so the projections' rank rule sees the same round-off).
    """
    X = np.asarray(X)
    if not np.issubdtype(X.dtype, np.floating):
        raise ValueError(f"embeddings must be floating point; got {X.dtype}.")
    if X.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array (vectors × dimensions); got shape "
                         f"{X.shape}.")
    for name, fraction in (("relative_to_column", relative_to_column),
                           ("common_to_column", common_to_column)):
        if not fraction >= 0:
            raise ValueError(f"{name} must be >= 0; got {fraction}.")
    values = X.astype(np.float64)
    scale = np.sqrt(np.mean(values**2, axis=0))
    moved = values + relative_to_column * scale * rng.standard_normal(X.shape)
    if common_to_column:
        moved += common_to_column * scale * rng.standard_normal(X.shape[1])
    return moved.astype(X.dtype)


def perturbation_rng(seed: int, collection: str, model: str,
                     perturbation: int) -> np.random.Generator:
    """The generator of one perturbation of one (collection or task, model)'s embeddings: every
    block of a collection sees the same perturbed embeddings in draw ``perturbation``."""
    return np.random.default_rng([int(seed), zlib.crc32(collection.encode()),
                                  zlib.crc32(model.encode()), 2, int(perturbation)])


def possible_knn_predictions(distances, train_labels, classes, k: int,
                             reach: float) -> np.ndarray:
    """Which classes a k-nearest-neighbour vote can return for each test row when every distance
    may move by up to ``reach`` (a bound read from the decisions, not from sampled draws).

    The vote is scikit-learn's ``KNeighborsClassifier(n_neighbors=k, weights="uniform")`` on a
    precomputed distance matrix: the majority class of the ``k`` nearest training rows, a tie
    going to the smallest class. When each distance ``d_j`` may become any value in
    ``[d_j − reach, d_j + reach]`` (independently), a training row is surely among the ``k``
    nearest if ``d_j < s_k − 2·reach`` and surely not if ``d_j > s_(k−1) + 2·reach`` (``s_i``
    the row's ``i``-th smallest distance, from 0); the rows between are open, and any ``k −
    held`` of them may join the neighbours. Class ``c`` can win if it takes as many open rows
    as it can and the others' votes fit below it with the rest. With ``reach = 0`` only exact
    ties at the ``k``-th distance stay open (scikit-learn breaks them by the order of its
    partial sort).

    Why by hand: no library bounds a k-NN decision under a bounded change of its distances; the
    stability check needs every decision that a change of machine can reach, where a few
    sampled perturbations had missed cells that another CPU's kernels moved.

    Parameters
    ----------
    distances : (n_test, n_train) distances from each test row to the training rows
    train_labels : (n_train,) class of each training row
    classes : (n_classes,) the classes in increasing order (the vote's tie order)
    k : neighbours, at most ``n_train``
    reach : how far each distance may move, ``>= 0``

    Returns
    -------
    (n_test, n_classes) bool: the classes each test row can be assigned; the prediction on the
    distances as given is always among them.
    """
    D = np.asarray(distances, dtype=np.float64)
    classes = np.asarray(classes)
    if D.ndim != 2 or D.shape[1] != len(train_labels):
        raise ValueError(f"distances must be (n_test, {len(train_labels)}); got {D.shape}.")
    if not 1 <= k <= D.shape[1]:
        raise ValueError(f"k must be between 1 and the {D.shape[1]} training rows; got {k}.")
    if not reach >= 0:
        raise ValueError(f"reach must be >= 0; got {reach}.")
    if k < D.shape[1]:
        # the k + 1 smallest in order: one partition and a sort of k + 1 columns (a partition
        # at both k - 1 and k costs about three times as much)
        nearest = np.sort(np.partition(D, k, axis=1)[:, :k + 1], axis=1)
        last_in, first_out = nearest[:, k - 1:k], nearest[:, k:k + 1]
    else:
        last_in, first_out = D.max(axis=1, keepdims=True), np.inf
    members = [np.asarray(train_labels) == c for c in classes]

    def per_class(rows):
        # counts by summing each class's columns: about three times faster than an integer
        # product with a one-hot matrix, and no BLAS threads for so small a product
        return np.stack([rows[:, m].sum(axis=1) for m in members], axis=1)

    sure = D < first_out - 2 * reach
    held = per_class(sure)
    open_rows = per_class(~sure & (D <= last_in + 2 * reach))
    free = k - held.sum(axis=1)
    rank = np.arange(len(classes))
    possible = np.zeros(held.shape, dtype=bool)
    for c in rank:
        taken = np.minimum(open_rows[:, c], free)
        votes = held[:, c] + taken
        # Every other class must stay below c (at or below it when it comes after c in the
        # tie order), and the open rows c did not take must fit under those caps.
        cap = votes[:, None] - (rank < c)[None, :]
        others = rank != c
        fits = np.all((held <= cap) | ~others, axis=1)
        room = np.clip(np.minimum(open_rows, cap - held), 0, None)[:, others].sum(axis=1)
        possible[:, c] = fits & (room >= free - taken)
    return possible


def spread_table(reference: pd.DataFrame, perturbed: pd.DataFrame, *,
                 cell: tuple[str, ...] = MODEL_CELL, value: str = "accuracy_mean",
                 decimals: int = 4) -> pd.DataFrame:
    """Each cell's value as computed, and how far it moved when the embeddings were perturbed.

    Parameters
    ----------
    reference : one row per cell (the columns ``cell``) with its ``value`` as computed,
        unrounded (the model experiment: ``models_classify``' rows)
    perturbed : the same rows from each perturbed run, with a ``perturbation`` column
    decimals : the table's rounding

    Returns
    -------
    One row per cell, in ``reference``'s order: ``value`` (rounded as the table),
    ``perturbed_min`` and ``perturbed_max`` (rounded), ``spread`` (the largest minus the
    smallest of the unperturbed and perturbed values, unrounded), ``perturbations`` (how many
    runs) and ``moves`` (whether the printed value differs in some run: the cell reads
    round-off at the table's precision).
    """
    cell = list(cell)
    missing = [c for c in [*cell, value] if c not in reference.columns]
    if missing or "perturbation" not in perturbed.columns:
        raise ValueError(f"need the columns {cell + [value]} (and perturbation in the "
                         f"perturbed rows); missing {missing or ['perturbation']}.")
    runs = perturbed.groupby(cell, sort=False)[value].agg(["min", "max", "count"])
    table = reference[[*cell, value]].merge(runs.reset_index(), on=cell, how="left",
                                            validate="one_to_one")
    if table["count"].isna().any():
        absent = table.loc[table["count"].isna(), cell].head(3).to_dict("records")
        raise ValueError(f"cells without a perturbed run, e.g. {absent}.")
    low = np.minimum(table[value], table["min"])
    high = np.maximum(table[value], table["max"])
    return pd.DataFrame({
        **{c: table[c] for c in cell},
        value: table[value].round(decimals),
        "perturbed_min": table["min"].round(decimals),
        "perturbed_max": table["max"].round(decimals),
        "spread": high - low,
        "perturbations": table["count"].astype(int),
        "moves": (low.round(decimals) != high.round(decimals)),
    })


def reach_table(reference: pd.DataFrame, *, cell: tuple[str, ...] = MODEL_CELL,
                decimals: int = 4) -> pd.DataFrame:
    """Each cell's bounds under a bounded change of its distances, from the classification's
    rows (``classify_block(..., max_distance_change=...)``: ``accuracy_mean``,
    ``accuracy_std``, ``accuracy_low``, ``accuracy_high``, ``std_change``,
    ``decisions_within_reach``; unrounded).

    Returns
    -------
    One row per cell, in ``reference``'s order: ``reach_low`` and ``reach_high`` (the mean's
    bounds, rounded as the table), ``std_change`` (the most the sd can move, unrounded),
    ``decisions_within_reach``, ``mean_within_reach`` and ``std_within_reach`` (whether the
    printed mean, the printed sd, can change within the bounds).
    """
    cell = list(cell)
    columns = ["accuracy_mean", "accuracy_std", "accuracy_low", "accuracy_high", "std_change",
               "decisions_within_reach"]
    missing = [c for c in [*cell, *columns] if c not in reference.columns]
    if missing:
        raise ValueError(f"need the classification's bounds (max_distance_change); missing "
                         f"columns {missing}.")
    mean, sd, change = (reference[c] for c in ("accuracy_mean", "accuracy_std", "std_change"))

    def moves(value, low, high):
        return (low.round(decimals) != value.round(decimals)) | \
            (high.round(decimals) != value.round(decimals))

    return pd.DataFrame({
        **{c: reference[c] for c in cell},
        "reach_low": reference["accuracy_low"].round(decimals),
        "reach_high": reference["accuracy_high"].round(decimals),
        "std_change": change,
        "decisions_within_reach": reference["decisions_within_reach"].astype(int),
        "mean_within_reach": moves(mean, reference["accuracy_low"],
                                   reference["accuracy_high"]),
        "std_within_reach": moves(sd, (sd - change).clip(lower=0), sd + change),
    })


def beyond_spread(spread: pd.DataFrame, reference: pd.DataFrame, other: pd.DataFrame, *,
                  cell: tuple[str, ...] = MODEL_CELL, value: str = "accuracy_mean",
                  decimals: int = 4) -> pd.DataFrame:
    """The cells that ``other`` (the same cells computed elsewhere: on another machine, with
    other kernels; unrounded) moves beyond the published spread: their printed value differs
    from ``reference``'s and they lie farther from it than the cell's ``spread``.

    Parameters
    ----------
    spread : :func:`spread_table`'s rows (the published ``stability.csv``)
    reference : the cells as computed (unrounded) from which ``spread`` was measured
    other : the cells computed elsewhere (unrounded); only the cells it holds are compared

    Returns
    -------
    One row per cell beyond its spread: the cell, ``value`` (the reference's, unrounded),
    ``other``, ``change`` (other minus value) and ``spread``; empty when every compared cell
    lies inside its spread. A cell of ``other`` without a reference or a spread is an error.
    """
    cell = list(cell)
    table = other[[*cell, value]].rename(columns={value: "other"}).merge(
        reference[[*cell, value]], on=cell, how="left", validate="one_to_one").merge(
        spread[[*cell, "spread"]], on=cell, how="left", validate="one_to_one")
    unmatched = table[value].isna() | table["spread"].isna()
    if unmatched.any():
        raise ValueError(f"cells without a reference value or a spread, e.g. "
                         f"{table.loc[unmatched, cell].head(3).to_dict('records')}.")
    change = table["other"] - table[value]
    printed = table["other"].round(decimals) != table[value].round(decimals)
    # 1e-12: the spread is a difference of the same floating-point values
    beyond = printed & (change.abs() > table["spread"] + 1e-12)
    return table.assign(change=change)[beyond][[*cell, value, "other", "change", "spread"]] \
        .reset_index(drop=True)


def outside_reach(reference: pd.DataFrame, other: pd.DataFrame, *,
                  cell: tuple[str, ...] = MODEL_CELL, value: str = "accuracy_mean",
                  tolerance: float = 1e-12) -> pd.DataFrame:
    """The cells that ``other`` (computed elsewhere, unrounded) moves outside the bounds
    ``reference`` gives them (its ``accuracy_low`` and ``accuracy_high``: :func:`reach_table`'s
    source); empty when every compared cell lies inside. ``tolerance``: the bounds are sums of
    the same floating-point fractions in another order."""
    cell = list(cell)
    table = other[[*cell, value]].rename(columns={value: "other"}).merge(
        reference[[*cell, value, "accuracy_low", "accuracy_high"]], on=cell, how="left",
        validate="one_to_one")
    if table[value].isna().any():
        raise ValueError(f"cells without bounds, e.g. "
                         f"{table.loc[table[value].isna(), cell].head(3).to_dict('records')}.")
    outside = (table["other"] < table["accuracy_low"] - tolerance) | \
        (table["other"] > table["accuracy_high"] + tolerance)
    return table[outside].reset_index(drop=True)


def table2_markdown(table2: pd.DataFrame, stability: pd.DataFrame, *, k: int,
                    measures: list[str], relative_to_column: float,
                    common_to_column: float, max_distance_change: float) -> str:
    """Table 2 as Markdown: one row per block, one column per measure, ``mean ± sd``; the best
    of each row in bold; a cell whose printed mean a change of machine can move followed by the
    range it can reach, ``[low, high]``, and one whose printed value moved in a perturbed run
    marked ``†``; under the table, a legend that says so (a reader of the file alone sees which
    digits may move, under what, and by how much).

    Parameters
    ----------
    table2 : ``table2.csv`` (rounded)
    stability : :func:`spread_table`'s rows joined with :func:`reach_table`'s (every k; those
        of ``k`` are read)
    measures : the measure labels, in column order
    relative_to_column, common_to_column : the perturbation of the runs (see :func:`perturb`),
        for the legend
    max_distance_change : the change of machine the bounds assume (a fraction of a block's
        largest distance), for the legend
    """
    cells = stability[stability["k"] == k].set_index([*BLOCK, "measure"])
    lines = ["| collection | preprocessing | distance | " + " | ".join(measures) + " |",
             "|---" * (3 + len(measures)) + "|"]
    for block, rows in table2.groupby(BLOCK, sort=False):
        by_measure = rows.set_index("measure")
        best = by_measure["accuracy_mean"].max()
        out = []
        for measure in measures:
            mean, sd = by_measure.loc[measure, ["accuracy_mean", "accuracy_std"]]
            text = f"{mean:.4f}"
            text = f"**{text}**" if mean == best else text
            cell = cells.loc[(*block, measure)]
            reach = (f" [{cell['reach_low']:.4f}, {cell['reach_high']:.4f}]"
                     if cell["mean_within_reach"] else "")
            out.append(f"{text} ± {sd:.4f}{reach}{' †' if cell['moves'] else ''}")
        lines.append("| " + " | ".join([*block, *out]) + " |")
    runs = int(cells["perturbations"].max())
    lines += ["", (
        f"Accuracy of the {k}-nearest-neighbour classifier (mean ± sd over the folds of the "
        "repeated cross-validation); the best of each row in bold. `[low, high]`: the range "
        "the mean can reach when a change of machine moves every distance between two sets "
        f"by at most {max_distance_change:g} of the block's largest (every k-NN decision "
        "within that reach counted both ways); "
        f"{int(cells['mean_within_reach'].sum())} of {len(table2)} cells; "
        "the other means cannot move in their printed digits under such a change (the sd's "
        "bound is in results/models/stability.csv). `†`: the printed value differs in at least "
        f"one of {runs} run{'s' * (runs != 1)} on embeddings moved at their round-off level "
        f"(every value by a Gaussian {relative_to_column:g} of its dimension's root mean "
        f"square, every dimension shifted by one more Gaussian {common_to_column:g} shared by "
        f"all vectors; {int(cells['moves'].sum())} cells): what such a change did, not a bound "
        "(results/models/stability.csv holds every cell of Table S.5; "
        "docs/model_distinguishing.md, \"Reproducibility\", what was measured). The ranges "
        "cover the changes of kernels and of processor measured on one machine (an emulated "
        "one among them), not a second machine's run compared with this one: compare another "
        "machine's table with this one cell by cell (benchmarks/cells_beyond_spread.py) "
        "before reading a difference as the models'.")]
    return "\n".join(lines) + "\n"
