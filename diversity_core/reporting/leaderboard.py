"""The leaderboard of diversity measures: one row per measure, one column per test, each test
judged by the paper's own criterion, read from the experiments' result files.

Every measure a result file names takes part: the readers group the rows of each file by its
measure column, whatever the names are. A name is resolved to the registry's (``mag_area``,
``MagArea``, ``VS``, ``Vendi Score (cosine)`` and ``-AvgSim (cosine)`` are ``magarea``,
``magarea``, ``vendi``, ``vendi`` and ``avgsim``) by its spellings in the catalogue the caller
passes (a mapping of names to objects with ``label`` and ``in_paper``, such as
``diversity_core.measures.registry.MEASURES``), without case or punctuation; a qualifier in
parentheses that no spelling includes names a variant (``MagArea (piecewise linear)``). A name
the catalogue does not know keeps its own spelling. Where a file holds several variants of one
measure, the measure's entry is its best variant, named in the cell.

Each test (:data:`TESTS`) gives every measure a value, a band (the uncertainty the result file
carries) and, for the image test, a tier (falls monotonically or not). A measure's rank is one
plus the number of measures better than it: in a better tier, or in the same tier with the whole
band on the better side of its band. Measures whose bands overlap are not told apart and can
share a rank (a tie, shown ``=``). A measure absent from a test's files is not applicable there.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .figure_style import COLOUR_MAP, STYLE
from .names import measure_spellings

__all__ = ["PAPER_MEASURES", "TESTS", "Score", "Test", "draw_leaderboard", "input_files",
           "leaderboard", "render_csv", "render_markdown", "resolve_name"]

# The measures the paper proposes (the others are its baselines).
PAPER_MEASURES = frozenset({"magarea", "magdiff"})
NOT_APPLICABLE = "n/a"


@dataclasses.dataclass(frozen=True)
class Score:
    """One measure's result in one test: the criterion's ``value``, the band ``[low, high]``
    within which two measures are not told apart, a ``tier`` compared before the band (0 best)
    and a ``note`` the cell shows beside the value."""

    value: float
    low: float
    high: float
    tier: int = 0
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Test:
    """One column: the experiment it reads, its files (relative to the results folder), the
    criterion and its direction, what defines a tie, and the reader (results folder -> {name
    as the file spells it: Score})."""

    column: str
    experiment: str
    files: tuple[str, ...]
    criterion: str
    higher_is_better: bool
    tie: str
    read: Callable[[Path], dict[str, Score]]
    digits: int = 3
    # Rows that name no measure of the catalogue are the file's baselines of another kind (Table
    # 1's SVR regresses on the whole distance matrix), not diversity measures: left out.
    measures_only: bool = False


def _csv(folder: Path, name: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """The table ``folder/name`` with at least ``columns``; one line naming the file otherwise."""
    path = Path(folder) / name
    try:
        table = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ValueError(f"{path}: cannot read it ({err}); run its experiment first.") from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: no column(s) {missing}; it has {list(table.columns)}.")
    return table


def _groups(table: pd.DataFrame, column: str):
    return table.groupby(table[column].astype(str), sort=False)


def _read_curvature(folder: Path) -> dict[str, Score]:
    table = _csv(folder, "curvature/table1.csv", ("method", "mse_mean", "mse_std"))
    return {str(row.method): Score(row.mse_mean, row.mse_mean - row.mse_std,
                                   row.mse_mean + row.mse_std)
            for row in table.itertuples()}


def _read_text(folder: Path) -> dict[str, Score]:
    r2 = _csv(folder, "text/r2_scores.csv", ("measure", "r2_mean", "r2_std"))
    ranking = _csv(folder, "text/ranking.csv", ("scope", "measure", "median_rank"))
    # The widest scope that ranks a measure (the one with the most measures) gives its rank.
    scopes = sorted(_groups(ranking, "scope"), key=lambda item: -len(item[1]))
    scores = {}
    for name, rows in _groups(r2, "measure"):
        ranked = next(((len(s), s.loc[s["measure"].astype(str) == name, "median_rank"].iloc[0])
                       for _, s in scopes if (s["measure"].astype(str) == name).any()), None)
        note = f"median rank {ranked[1]:g} of {ranked[0]}" if ranked else "not ranked"
        scores[name] = Score(rows["r2_mean"].median(),
                             (rows["r2_mean"] - rows["r2_std"]).median(),
                             (rows["r2_mean"] + rows["r2_std"]).median(), note=note)
    return scores


def _read_models(folder: Path) -> dict[str, Score]:
    table = _csv(folder, "models/table2.csv", ("measure", "accuracy_mean", "accuracy_std"))
    return {name: Score(rows["accuracy_mean"].median(),
                        (rows["accuracy_mean"] - rows["accuracy_std"]).median(),
                        (rows["accuracy_mean"] + rows["accuracy_std"]).median(),
                        note=f"{len(rows)} rows")
            for name, rows in _groups(table, "measure")}


def _falls_monotonically(curve: pd.DataFrame) -> bool:
    """Whether a mean curve (rows by fraction) falls from its first to its last fraction by more
    than the resample spread at either end, and never rises by more than the spread of the two
    points of a step."""
    curve = curve.sort_values("fraction")
    mean, spread = curve["mean"].to_numpy(float), curve["std"].to_numpy(float)
    if len(mean) < 2:
        return False
    steps_spread = np.maximum(spread[1:], spread[:-1])
    return bool(mean[0] - mean[-1] > max(spread[0], spread[-1])
                and np.all(np.diff(mean) <= steps_spread))


def _read_images(folder: Path) -> dict[str, Score]:
    agreement = _csv(folder, "images/scenario_agreement.csv",
                     ("metric", "drop_sequential", "drop_simultaneous", "max_gap"))
    curves = _csv(folder, "images/mode_dropping.csv",
                  ("scenario", "fraction", "metric", "mean", "std"))
    by_metric = dict(list(_groups(curves, "metric")))
    scores = {}
    for row in agreement.itertuples():
        name = str(row.metric)
        rows = by_metric.get(name)
        if rows is None:
            raise ValueError(f"{Path(folder) / 'images/mode_dropping.csv'}: no curve of {name}, "
                             "which scenario_agreement.csv lists; rerun the image experiment.")
        fall = abs((row.drop_sequential + row.drop_simultaneous) / 2)
        spread = rows["std"].median() / fall if fall > 0 else math.inf
        monotone = all(_falls_monotonically(c) for _, c in _groups(rows, "scenario"))
        scores[name] = Score(row.max_gap, row.max_gap - spread, row.max_gap + spread,
                             tier=0 if monotone else 1,
                             note="falls monotonically" if monotone else "not monotone")
    return scores


def _read_graphs(folder: Path) -> dict[str, Score]:
    table = _csv(folder, "graphs/summary.csv", ("metric", "mean", "ci_low", "ci_high"))
    return {name: Score(rows["mean"].mean(), rows["ci_low"].mean(), rows["ci_high"].mean(),
                        note=f"{len(rows)} panels")
            for name, rows in _groups(table, "metric")}


def _read_axioms(folder: Path) -> dict[str, Score]:
    table = _csv(folder, "axioms/axioms.csv", ("measure", "axiom", "result"))
    n_axioms = table["axiom"].nunique()
    scores = {}
    for name, rows in _groups(table, "measure"):
        holds = float((rows["result"].astype(str) == "holds").sum())
        scores[name] = Score(holds, holds, holds, note=f"of {n_axioms}")
    return scores


TESTS: tuple[Test, ...] = (
    Test("curvature", "curvature", ("curvature/table1.csv",),
         "cross-validated MSE of the curvature regressed on the measure", False,
         "overlapping mean ± sd over the folds", _read_curvature, measures_only=True),
    Test("text", "text_temperature", ("text/r2_scores.csv", "text/ranking.csv"),
         "median R² of the temperature predicted from the measure, over tasks and models; "
         "beside it the median rank over the resamples", True,
         "overlapping medians of R² ± sd over the folds", _read_text),
    Test("models", "model_distinguishing", ("models/table2.csv",),
         "median k-NN accuracy of telling the embedding models apart, over Table 2's rows",
         True, "overlapping medians of accuracy ± sd over the folds", _read_models),
    Test("images", "image_mode_dropping",
         ("images/scenario_agreement.csv", "images/mode_dropping.csv"),
         "largest gap between sequential and simultaneous mode dropping (in units of the "
         "measure's total fall); a measure that falls monotonically in both scenarios ranks "
         "before one that does not", False,
         "overlapping gap ± the median resample sd (in units of the fall)", _read_images, 2),
    Test("graphs", "graph_mode_collapse", ("graphs/summary.csv",),
         "mean Spearman ρ with the perturbation, over datasets and perturbations", True,
         "overlapping mean bootstrap intervals", _read_graphs),
    Test("axioms", "axioms", ("axioms/axioms.csv",),
         "number of the axioms that hold", True, "equal counts", _read_axioms, 0),
)


def _tests_of(experiments) -> list[Test]:
    experiments = set(experiments)
    return [test for test in TESTS if test.experiment in experiments]


def input_files(experiments) -> list[str]:
    """The result files (relative to the results folder) the leaderboard of ``experiments``
    reads, in column order."""
    return [name for test in _tests_of(experiments) for name in test.files]


def _key(text) -> str:
    return re.sub(r"[^0-9a-z]", "", str(text).casefold())


def _spellings(measures: Mapping) -> dict[str, str]:
    spellings = {}
    for name, texts in measure_spellings(measures).items():
        for text in texts:
            spellings.setdefault(_key(text), name)
    return spellings


def resolve_name(raw: str, measures: Mapping) -> tuple[str, str]:
    """``(name, variant)`` of a measure as a result file spells it: the catalogue's name where
    one of its spellings matches (a leading minus, a negated score, and a qualifier in
    parentheses at the end aside, the qualifier then naming the variant: "GMStds (unit)
    (piecewise linear)" is the label "GMStds (unit)" in the variant "piecewise linear", the
    longest spelling first); else ``raw`` itself."""
    spellings = _spellings(measures)
    raw = str(raw).strip()
    for text in (raw, raw.lstrip("-")):
        if _key(text) in spellings:
            return spellings[_key(text)], ""
    text = raw.lstrip("-")
    if text.endswith(")"):
        for start in reversed([i for i, char in enumerate(text) if char == "("]):
            if _key(text[:start]) in spellings:
                return spellings[_key(text[:start])], text[start + 1:-1].strip()
    return raw, ""


def _better(a: Score, b: Score, higher_is_better: bool) -> bool:
    """Whether ``a`` is better than ``b`` beyond their bands (a better tier first)."""
    tier_a = a.tier if not math.isnan(a.value) else math.inf
    tier_b = b.tier if not math.isnan(b.value) else math.inf
    if tier_a != tier_b:
        return tier_a < tier_b
    if math.isinf(tier_a):
        return False
    return a.low > b.high if higher_is_better else a.high < b.low


def _best(scores: list[Score], higher_is_better: bool) -> Score:
    sign = -1 if higher_is_better else 1
    return min(scores, key=lambda s: (s.tier, math.isnan(s.value),
                                      sign * s.value if not math.isnan(s.value) else 0))


def leaderboard(results_dir, experiments, measures: Mapping) -> pd.DataFrame:
    """The leaderboard of the configured ``experiments`` from the result files under
    ``results_dir``, names resolved through the catalogue ``measures`` (:func:`resolve_name`).

    One row per measure (the catalogue's order, then the other names in the order the files
    give them); per test (:data:`TESTS`, those of ``experiments``) the columns ``<test>``
    (the criterion's value), ``<test>_low``, ``<test>_high`` (the band), ``<test>_rank``,
    ``<test>_tied`` and ``<test>_note`` (the variant and what else the cell says); empty where
    the test does not apply to the measure."""
    results_dir = Path(results_dir)
    columns: dict[str, dict[str, tuple[Score, int, bool]]] = {}
    order: list[str] = []
    for test in _tests_of(experiments):
        variants: dict[str, list[tuple[str, Score]]] = {}
        for raw, score in test.read(results_dir).items():
            name, variant = resolve_name(raw, measures)
            if test.measures_only and name not in measures:
                continue
            note = "; ".join(part for part in (variant, score.note) if part)
            variants.setdefault(name, []).append(dataclasses.replace(score, note=note))
            if name not in order:
                order.append(name)
        best = {name: _best(scores, test.higher_is_better) for name, scores in variants.items()}
        ranks = {name: 1 + sum(_better(other, score, test.higher_is_better)
                               for o, other in best.items() if o != name)
                 for name, score in best.items()}
        columns[test.column] = {name: (score, ranks[name],
                                       list(ranks.values()).count(ranks[name]) > 1)
                                for name, score in best.items()}
    known = [name for name in measures if name in order]
    names = known + [name for name in order if name not in measures]
    rows = []
    for name in names:
        measure = measures.get(name)
        label = getattr(measure, "label", None) or name
        in_paper = getattr(measure, "in_paper", None) or label
        row = {"measure": name, "label": label if in_paper == label else f"{label} ({in_paper})",
               "proposed_in_paper": name in PAPER_MEASURES}
        for column, entries in columns.items():
            score, rank, tied = entries.get(name, (None, None, None))
            row.update({column: score.value if score else None,
                        f"{column}_low": score.low if score else None,
                        f"{column}_high": score.high if score else None,
                        f"{column}_rank": rank, f"{column}_tied": tied,
                        f"{column}_note": score.note if score else None})
        rows.append(row)
    table = pd.DataFrame(rows, columns=["measure", "label", "proposed_in_paper"] + [
        f"{c}{suffix}" for c in columns
        for suffix in ("", "_low", "_high", "_rank", "_tied", "_note")])
    for column in columns:
        table[f"{column}_rank"] = table[f"{column}_rank"].astype("Int64")
        table[f"{column}_tied"] = table[f"{column}_tied"].astype("boolean")
        for suffix in ("", "_low", "_high"):
            table[f"{column}{suffix}"] = table[f"{column}{suffix}"].astype(float)
    return table


def _test_columns(table: pd.DataFrame) -> list[Test]:
    return [test for test in TESTS if f"{test.column}_rank" in table.columns]


def render_csv(table: pd.DataFrame) -> str:
    """The leaderboard as CSV text (values to 6 significant digits)."""
    return table.to_csv(index=False, float_format="%.6g", lineterminator="\n")


def _rank_text(rank, tied) -> str:
    return f"={rank}" if tied else str(rank)


def _number(x: float, digits: int) -> str:
    if math.isnan(x):
        return "undefined"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.{digits}f}"


def _cell(row, test: Test) -> str:
    rank = row[f"{test.column}_rank"]
    if pd.isna(rank):
        return NOT_APPLICABLE
    value = _number(row[test.column], test.digits)
    low, high = row[f"{test.column}_low"], row[f"{test.column}_high"]
    band = "" if low == high else f" [{_number(low, test.digits)}, {_number(high, test.digits)}]"
    note = row[f"{test.column}_note"]
    note = f" ({note})" if isinstance(note, str) and note else ""
    rank_text = _rank_text(rank, bool(row[f"{test.column}_tied"]))
    return f"**{rank_text}** · {value}{band}{note}"


def render_markdown(table: pd.DataFrame) -> str:
    """The leaderboard as Markdown: the criteria, then one row per measure, one column per test
    (each cell: the rank, ``=`` for a tie, the value, its band and note)."""
    tests = _test_columns(table)
    lines = ["# Leaderboard of diversity measures", "",
             "Each test judges a measure by the paper's criterion. Rank 1 is best; a rank is one "
             "plus the number of measures better beyond the uncertainty band; `=` marks a tie. "
             "★: a measure the paper proposes. n/a: the test does not apply to the measure.", "",
             "| test | criterion | better | tie when |", "|---|---|---|---|"]
    for test in tests:
        lines.append(f"| {test.column} | {test.criterion} | "
                     f"{'higher' if test.higher_is_better else 'lower'} | {test.tie} |")
    lines += ["", "| measure | " + " | ".join(t.column for t in tests) + " |",
              "|---|" + "---|" * len(tests)]
    for _, row in table.iterrows():
        label = row["label"] + (" ★" if row["proposed_in_paper"] else "")
        lines.append(f"| {label} | " + " | ".join(_cell(row, t) for t in tests) + " |")
    return "\n".join(lines) + "\n"


def draw_leaderboard(table: pd.DataFrame):
    """A figure of the ranks: one row per measure, one column per test, each cell coloured by
    its rank among the measures of its test (n/a cells blank)."""
    import matplotlib
    import matplotlib.pyplot as plt

    tests = _test_columns(table)
    ranks = np.full((len(table), len(tests)), np.nan)
    for j, test in enumerate(tests):
        column = table[f"{test.column}_rank"]
        n = column.notna().sum()
        ranks[:, j] = [(r - 1) / max(n - 1, 1) if pd.notna(r) else np.nan for r in column]
    with matplotlib.rc_context({**STYLE, "axes.grid": False}):
        fig, ax = plt.subplots(figsize=(1.3 * len(tests) + 2.6, 0.38 * len(table) + 1.4))
        cmap = matplotlib.colormaps[COLOUR_MAP].reversed().copy()
        cmap.set_bad("#f2f2f2")
        ax.imshow(np.ma.masked_invalid(ranks), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        for i, (_, row) in enumerate(table.iterrows()):
            for j, test in enumerate(tests):
                rank = row[f"{test.column}_rank"]
                text = NOT_APPLICABLE if pd.isna(rank) else _rank_text(
                    rank, bool(row[f"{test.column}_tied"]))
                shade = ranks[i, j]
                ax.text(j, i, text, ha="center", va="center", fontsize=9,
                        color="white" if not np.isnan(shade) and shade > 0.55 else "black")
        ax.set_xticks(range(len(tests)), [t.column for t in tests])
        ax.set_yticks(range(len(table)), [row["label"] + (" ★" if row["proposed_in_paper"]
                                                          else "")
                                          for _, row in table.iterrows()])
        ax.tick_params(length=0)
        ax.xaxis.tick_top()
        for side in ax.spines.values():
            side.set_visible(False)
        ax.set_title("Rank per test (1 = best, = tie within uncertainty, ★ proposed in the "
                     "paper)", fontsize=9, pad=24)
        fig.tight_layout()
    return fig
