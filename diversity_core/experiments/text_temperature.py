"""Text temperature (paper §4.2, Figures 3 and 4): which diversity measure predicts the softmax
temperature at which a set of responses was generated?

Each *set* holds the responses (10 in the paper) that a language model sampled for one prompt at
one temperature; higher temperature, more diverse sets. Every set is embedded by a sentence
embedding model and scored by each measure; then, per task and embedding model, an isotonic
regression predicts the temperature from one measure's scores, and its cross-validated R² says how
well the measure tracks the ground-truth diversity.

* :func:`score_sets`: MagArea (cosine distance, ``t_cut`` = the median convergence scale of all
  sets of the task and model, §3.4; all sets' convergence scales and MagAreas computed as one
  batch, :func:`diversity_core.magnitude.convergence_scales` and ``mag_areas``), Vendi Score,
  AvgSim, GMStds, GMStds of the L2-normalised vectors, IsoScore and DCScore of each set;
* :func:`isotonic_cv_r2`: R² of isotonic regression, repeated K-fold cross-validation (the paper:
  5 folds repeated 20 times, the caption of Figure 3 says 10);
* :func:`rank_measures`: each measure's rank per (task, model, repeat), its median rank and its
  share of first places (the paper: MagArea median rank 1, best in 77%);
* :func:`gains_over`: the mean R² gain of one measure over another per task (the paper: MagArea
  over AvgSim +0.12 on story, +0.07 on resp and prompt);
* :func:`spearman_bootstrap`: Spearman's ρ of a measure with the temperature and its percentile
  bootstrap interval (Figure 4: 95%, 1,000 resamples);
* :func:`ranking_by_max_temperature`: every measure's R² and rank when only the sets generated at
  ``τ ≤ τ_max`` are kept, for every cap ``τ_max`` (is a measure's lead made by the
  hottest temperatures alone?);
* :func:`dictionary_share` and :func:`temperature_cap`: the decTest design's measured cap, the
  highest temperature at which the language model still writes words (the share of a set's
  words that an English word list holds, against temperature, on pilot sets).

Conventions, on purpose:

* The same cross-validation splits serve every measure of a (task, model) (one ``random_state``),
  so that measures are compared on identical folds.
* GMStds comes twice: ``gm_stds`` on the embedding model's own vectors (the paper's; in the units
  of the vectors, so a model whose norms vary, as an ONNX model's 2.3-7.5 do, scores the norms as
  much as the spread) and ``gm_stds_unit`` on the row-wise L2-normalised vectors (the geometry
  the cosine measures see). :func:`diversity_core.measures.gm_stds` itself does not normalise.
* ``IsotonicRegression(increasing="auto")`` picks the direction on each training fold, so AvgSim,
  a similarity that *falls* as diversity rises, needs no sign flip.
* A set whose responses are all identical has no IsoScore (its covariance is zero: 0/0; the
  reference package returns NaN). It is scored 0, the least isotropic value: such a set has no
  diversity at all. Every other measure is defined for it (MagArea = ``t_cut``, Vendi Score 1,
  AvgSim 1, GMStds and its unit-norm variant 0, DCScore 1), and it never enters the median
  convergence scale (it has none).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from ..magnitude.sets import measure_sets
from ..magnitude.settings import MagnitudeSettings
from ..measures.distances import pairwise_distances
from ..measures.registry import (
    ScaleView,
    evaluate,
    get_measure,
    get_measure_names,
    labels,
    select_measures,
)

log = logging.getLogger(__name__)

__all__ = [
    "MEASURES",
    "MEASURE_LABELS",
    "PAPER_MEASURES",
    "PAPER_RESULTS",
    "score_sets",
    "isotonic_cv_r2",
    "r2_table",
    "rank_measures",
    "gains_over",
    "spearman_bootstrap",
    "ranking_by_max_temperature",
    "eligible_caps",
    "read_score_tables",
    "dictionary_share",
    "temperature_cap",
    "read_temperature_caps",
    "CAP_COLUMNS",
    "configured_measures",
]

# The experiment's names of its measures: the configuration's ``text.measures`` and the committed
# tables (results/text/*.csv: rows and headers such as ``mag_area``) spell them by the registry's
# ``column`` (diversity_core.measures). Every measure of a set alone fits; the default list is
# the registry's measures of a set alone, variants included (``gm_stds_unit``: GMStds of the
# L2-normalised vectors).
MEASURES = tuple(get_measure(name).column
                 for name in get_measure_names(needs_reference=False, defaults=False))
# Labels of the figures: the registry's as the paper shows them (Figure 3: the Vendi Score is
# "VS"; Measure.in_paper).
MEASURE_LABELS = labels(MEASURES, paper=True)
# The measures of the paper's Figure 3 and of its ranking.
PAPER_MEASURES = ("mag_area", "vendi", "avg_sim", "gm_stds")

# What the paper reports (§4.2), for the tables that put ours beside it.
PAPER_RESULTS = {
    "mag_area_median_rank": 1,
    "mag_area_share_best": 0.77,
    "avg_sim_share_last": 0.27,
    "gain_over_avg_sim": {"story": 0.12, "resp": 0.07, "prompt": 0.07},
}


def score_sets(embeddings: Sequence[np.ndarray], settings: MagnitudeSettings | None = None, *,
               measures: Sequence[str] = MEASURES, dc_tau: float = 1.0) -> tuple[dict, float]:
    """Every measure of every set of one (task, embedding model).

    Parameters
    ----------
    embeddings : sequence of arrays of shape (n_responses, n_features)
        One array per set.
    settings : the magnitude conventions (convergence target, integration); package defaults if
        None.
    measures : names out of :data:`MEASURES`
    dc_tau : DCScore's softmax temperature (cosine kernel)

    Returns
    -------
    scores : measure -> (n_sets,) float array, plus ``t_conv`` -> (n_sets,) (NaN for a set with a
        single distinct response)
    t_cut : the MagArea integration bound: the median convergence scale of the sets
    """
    chosen = _chosen(measures)
    if not len(embeddings):
        raise ValueError("no sets to score.")
    settings = settings or MagnitudeSettings()
    embeddings = [np.asarray(X, dtype=np.float64) for X in embeddings]
    distances = [pairwise_distances(X, "cosine") for X in embeddings]
    # The reference-free protocol, written once (diversity_core.magnitude.sets): every set's
    # convergence scale in one batch, t_cut their median (a set of identical responses, one
    # distinct point, has none and is left out), every MagArea on [0, t_cut] in one batch.
    mag = measure_sets(distances, **settings.as_dict(),
                       areas=any(m.multi_scale for m in chosen))
    if mag.t_cut is None:
        raise ValueError("every set has a single distinct response: no convergence scale, "
                         "no t_cut.")
    failed = {i: mag.failure(i) for i in range(len(distances))
              if mag.failure(i) and mag.n_distinct[i] != 1}
    if failed:  # anything but a single distinct response is a fault, as it always was
        raise ValueError("; ".join(f"set {i}: {why}" for i, why in failed.items()))
    for line in mag.warning_lines():
        log.warning("%s", line)
    t_conv, t_cut = mag.t_conv, mag.t_cut
    # The registry computes each measure (named by its column); a set of identical responses
    # has IsoScore 0 (``constant``).
    scores = {m.column: np.array([
        evaluate(m, X, where=f"set {i}", tau=dc_tau, constant=0.0,
                 engine=ScaleView(t_cut, area=mag.areas[i]) if m.multi_scale else None)
        for i, X in enumerate(embeddings)]) for m in chosen}
    scores["t_conv"] = t_conv
    return scores, float(t_cut)


def isotonic_cv_r2(score, temperature, *, n_splits: int = 5, n_repeats: int = 20,
                   seed: int = 0) -> np.ndarray:
    """R² of an isotonic regression of ``temperature`` on ``score``, repeated K-fold CV.

    Parameters
    ----------
    score : (n_sets,) one measure's score per set
    temperature : (n_sets,) the temperature each set was generated at
    n_splits, n_repeats : folds and repetitions (sklearn ``RepeatedKFold``, shuffled by ``seed``)

    Returns
    -------
    r2 : (n_repeats, n_splits) R² on each held-out fold (can be negative: worse than predicting
        the training mean). Out-of-range scores are clipped to the training range.
    """
    from sklearn.isotonic import IsotonicRegression
    from sklearn.metrics import r2_score
    from sklearn.model_selection import RepeatedKFold

    x = np.asarray(score, dtype=np.float64)
    y = np.asarray(temperature, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"score and temperature must be 1-d of one length; got {x.shape} and "
                         f"{y.shape}.")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("score and temperature must be finite.")
    if len(x) < 2 * n_splits:
        raise ValueError(f"{len(x)} sets are too few for {n_splits}-fold cross-validation.")
    splits = RepeatedKFold(n_splits=n_splits, n_repeats=n_repeats, random_state=seed)
    r2 = np.empty(n_splits * n_repeats)
    for k, (train, test) in enumerate(splits.split(x)):
        model = IsotonicRegression(increasing="auto", out_of_bounds="clip")
        with warnings.catch_warnings():
            # A score with no trend in a training fold gets a direction by the sign of a
            # Spearman correlation near 0 (sklearn warns); a poor R² is then the honest outcome.
            warnings.filterwarnings("ignore", message="Confidence interval of the Spearman",
                                    category=UserWarning)
            model.fit(x[train], y[train])
        r2[k] = r2_score(y[test], model.predict(x[test]))
    return r2.reshape(n_repeats, n_splits)


def read_score_tables(paths, measures: Sequence[str]):
    """The score tables of ``scripts/text_scores.py`` (one CSV per task and embedding model),
    checked before use: each names one (task, model), has a ``temperature`` column and one column
    per measure, all finite, and no two files share a (task, model).

    Returns
    -------
    tables : (task, model) -> DataFrame, in the order of ``paths``
    scores : (task, model) -> measure -> (n_sets,) scores
    temperatures : (task, model) -> (n_sets,) temperatures
    """
    import pandas as pd

    tables = {}
    for path in paths:
        table = pd.read_csv(path)
        missing = [c for c in ("task", "model", "temperature", *measures)
                   if c not in table.columns]
        if missing:
            raise ValueError(f"{path}: no column(s) {missing}; it has {list(table.columns)}.")
        if table.empty:
            raise ValueError(f"{path}: no sets.")
        keys = set(zip(table["task"], table["model"], strict=True))
        if len(keys) != 1:
            raise ValueError(f"{path}: one task and model per file; found {sorted(keys)}.")
        key = keys.pop()
        if key in tables:
            raise ValueError(f"{path}: a second score table of {key[0]} / {key[1]}.")
        values = table[["temperature", *measures]].to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(values)):
            bad = [c for c in ("temperature", *measures) if not np.isfinite(table[c]).all()]
            raise ValueError(f"{path}: non-finite values in {bad}.")
        tables[key] = table
    scores = {key: {m: t[m].to_numpy() for m in measures} for key, t in tables.items()}
    temperatures = {key: t["temperature"].to_numpy() for key, t in tables.items()}
    return tables, scores, temperatures


def r2_table(scores: Mapping[tuple[str, str], Mapping[str, np.ndarray]],
             temperatures: Mapping[tuple[str, str], np.ndarray], *, measures: Sequence[str],
             n_splits: int = 5, n_repeats: int = 20, seed: int = 0):
    """Cross-validated R² of every measure for every (task, model).

    Parameters
    ----------
    scores : (task, model) -> measure -> (n_sets,) scores
    temperatures : (task, model) -> (n_sets,) temperatures

    Returns
    -------
    folds : DataFrame ``task, model, measure, repeat, fold, r2`` (one row per held-out fold)
    summary : DataFrame ``task, model, measure, r2_mean, r2_std, n_sets`` (over all folds)
    """
    import pandas as pd

    rows = []
    for (task, model), by_measure in scores.items():
        for measure in measures:
            r2 = isotonic_cv_r2(by_measure[measure], temperatures[(task, model)],
                                n_splits=n_splits, n_repeats=n_repeats, seed=seed)
            for repeat, fold in np.ndindex(r2.shape):
                rows.append({"task": task, "model": model, "measure": measure, "repeat": repeat,
                             "fold": fold, "r2": float(r2[repeat, fold]),
                             "n_sets": len(temperatures[(task, model)])})
    folds = pd.DataFrame(rows)
    summary = (folds.groupby(["task", "model", "measure"], sort=False)
               .agg(r2_mean=("r2", "mean"), r2_std=("r2", "std"), n_sets=("n_sets", "first"))
               .reset_index())
    return folds.drop(columns="n_sets"), summary


def rank_measures(folds, measures: Sequence[str]):
    """Rank measures by R² within each (task, model, repeat) resample.

    A repeat's R² is the mean over its folds; rank 1 is the highest R² (ties share the best
    rank). Only ``measures`` take part.

    Returns
    -------
    ranks : DataFrame ``task, model, repeat, measure, r2, rank``
    summary : DataFrame ``measure, median_rank, mean_rank, share_best, share_last``, one row per
        measure in the order given
    """
    import pandas as pd

    subset = folds[folds["measure"].isin(measures)]
    per_repeat = (subset.groupby(["task", "model", "repeat", "measure"], sort=False)["r2"]
                  .mean().reset_index())
    per_repeat["rank"] = (per_repeat.groupby(["task", "model", "repeat"])["r2"]
                          .rank(ascending=False, method="min").astype(int))
    worst = per_repeat.groupby(["task", "model", "repeat"])["rank"].transform("max")
    per_repeat["last"] = per_repeat["rank"] == worst
    summary = pd.DataFrame([{
        "measure": m,
        "median_rank": float(per_repeat.loc[per_repeat["measure"] == m, "rank"].median()),
        "mean_rank": float(per_repeat.loc[per_repeat["measure"] == m, "rank"].mean()),
        "share_best": float((per_repeat.loc[per_repeat["measure"] == m, "rank"] == 1).mean()),
        "share_last": float(per_repeat.loc[per_repeat["measure"] == m, "last"].mean()),
    } for m in measures])
    return per_repeat.drop(columns="last"), summary


def gains_over(summary, measure: str = "mag_area", baseline: str = "avg_sim"):
    """Per task, the mean R² (over embedding models) of ``measure`` minus that of ``baseline``.

    Returns a DataFrame ``task, <measure>, <baseline>, gain`` in the tasks' order of appearance.
    """
    import pandas as pd

    rows = []
    for task in dict.fromkeys(summary["task"]):
        of_task = summary[summary["task"] == task]
        a = float(of_task.loc[of_task["measure"] == measure, "r2_mean"].mean())
        b = float(of_task.loc[of_task["measure"] == baseline, "r2_mean"].mean())
        rows.append({"task": task, measure: a, baseline: b, "gain": a - b})
    return pd.DataFrame(rows)


def spearman_bootstrap(score, temperature, *, n_resamples: int = 1000, confidence: float = 0.95,
                       seed: int = 0) -> tuple[float, float, float]:
    """Spearman's ρ of ``score`` with ``temperature`` and its percentile bootstrap interval.

    Sets are resampled with replacement ``n_resamples`` times (a resample whose scores or
    temperatures are all equal has no ρ and is skipped).

    Returns
    -------
    (rho, low, high)
    """
    from scipy.stats import spearmanr

    x = np.asarray(score, dtype=np.float64)
    y = np.asarray(temperature, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 3:
        raise ValueError("score and temperature must be 1-d of one length >= 3.")
    rho = float(spearmanr(x, y).statistic)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_resamples):
        idx = rng.integers(0, len(x), len(x))
        if np.ptp(x[idx]) == 0 or np.ptp(y[idx]) == 0:
            continue
        draws.append(spearmanr(x[idx], y[idx]).statistic)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return rho, float(low), float(high)


def eligible_caps(temperatures: Mapping[tuple[str, str], np.ndarray], *, n_splits: int,
                  min_temperatures: int = 3, caps: Sequence[float] | None = None,
                  step: float | None = None) -> list[float]:
    """The highest temperatures ``τ_max`` that :func:`ranking_by_max_temperature` can study.

    A cap is eligible when, in every (task, model), the sets with ``τ ≤ τ_max`` number at least
    ``2 * n_splits`` (so that each held-out fold has 2 sets or more) and span at least
    ``min_temperatures`` distinct temperatures (fewer leave an isotonic fit of two steps).

    ``caps`` None: every distinct temperature of the data that is eligible, in increasing order
    (eligibility grows with the cap, so these run from the smallest eligible one to the largest
    temperature); with ``step``, instead of every distinct temperature (continuous temperatures
    have as many as sets), the multiples of ``step`` within the data's range (rounded to 6
    decimals, so 0.1 steps fall on a grid's 0.3, 0.4, ...) and the largest temperature. Given
    caps are all checked: one that is not eligible is an error that names it.
    """
    temps = {key: np.asarray(t, dtype=np.float64) for key, t in temperatures.items()}
    if not temps:
        raise ValueError("no (task, model) to study.")

    def shortfall(cap: float) -> str | None:
        for (task, model), t in temps.items():
            kept = t[t <= cap]
            n_distinct = len(np.unique(kept))
            if len(kept) < 2 * n_splits or n_distinct < min_temperatures:
                return (f"{task} / {model} keeps {len(kept)} sets at {n_distinct} temperatures "
                        f"(needs >= {2 * n_splits} sets for {n_splits}-fold CV and >= "
                        f"{min_temperatures} temperatures)")
        return None

    if caps is not None:
        for cap in caps:
            problem = shortfall(float(cap))
            if problem:
                raise ValueError(f"maximum temperature {cap}: {problem}.")
        return sorted(float(c) for c in caps)
    every = np.unique(np.concatenate(list(temps.values())))
    if step is not None:
        if not step > 0:
            raise ValueError(f"step must be positive; got {step}.")
        multiples = np.arange(np.ceil(every[0] / step - 1e-9), np.floor(every[-1] / step + 1e-9)
                              + 1) * step
        every = np.unique(np.round(np.append(multiples, every[-1]), 6))
    chosen = [float(cap) for cap in every if shortfall(float(cap)) is None]
    if not chosen:
        raise ValueError(f"no maximum temperature is eligible: at the largest, {every[-1]}, "
                         f"{shortfall(float(every[-1]))}.")
    return chosen


def ranking_by_max_temperature(scores: Mapping[tuple[str, str], Mapping[str, np.ndarray]],
                               temperatures: Mapping[tuple[str, str], np.ndarray], *,
                               measures: Sequence[str], ranking_measures: Sequence[str],
                               caps: Sequence[float] | None = None,
                               step: float | None = None, n_splits: int = 5,
                               n_repeats: int = 20, seed: int = 0, min_temperatures: int = 3,
                               log=None):
    """Every measure's cross-validated R² and rank when only the sets with ``τ ≤ τ_max`` count,
    for every cap ``τ_max``.

    Per cap and (task, model), the kept sets' temperatures are predicted from each measure by
    :func:`isotonic_cv_r2` with the conventions of :func:`r2_table` (the same ``seed`` and so
    the same folds for every measure; mean and sample sd over all held-out folds): at the
    largest temperature of the data it reproduces ``r2_table``. Caps: :func:`eligible_caps`
    (``caps``, ``step``).

    Parameters
    ----------
    scores : (task, model) -> measure -> (n_sets,) scores
    temperatures : (task, model) -> (n_sets,) temperatures
    measures : the measures whose R² is computed (every one reported)
    ranking_measures : the measures ranked, among themselves, by mean R² per (cap, task, model)
        (1 = best, ties share the best rank); the other measures get no rank (NaN)

    Returns
    -------
    DataFrame ``max_temperature, task, model, measure, r2_mean, r2_std, rank, n_sets,
    n_temperatures``, ordered by cap, then (task, model) and measure as given.
    """
    import pandas as pd

    missing = sorted(set(ranking_measures) - set(measures))
    if missing:
        raise ValueError(f"ranking measures {missing} are not among the measures {list(measures)}.")
    chosen = eligible_caps(temperatures, n_splits=n_splits, min_temperatures=min_temperatures,
                           caps=caps, step=step)
    rows = []
    for cap in chosen:
        for (task, model), by_measure in scores.items():
            t = np.asarray(temperatures[(task, model)], dtype=np.float64)
            keep = t <= cap
            for measure in measures:
                r2 = isotonic_cv_r2(np.asarray(by_measure[measure])[keep], t[keep],
                                    n_splits=n_splits, n_repeats=n_repeats, seed=seed).ravel()
                rows.append({"max_temperature": cap, "task": task, "model": model,
                             "measure": measure, "r2_mean": float(r2.mean()),
                             "r2_std": float(r2.std(ddof=1)) if r2.size > 1 else np.nan,
                             "n_sets": int(keep.sum()),
                             "n_temperatures": len(np.unique(t[keep]))})
        if log is not None:
            log.info("maximum temperature %g done", cap)
    table = pd.DataFrame(rows)
    ranked = table["measure"].isin(ranking_measures)
    table["rank"] = (table[ranked].groupby(["max_temperature", "task", "model"])["r2_mean"]
                     .rank(ascending=False, method="min"))
    table["rank"] = table["rank"].astype("Int64")
    return table[["max_temperature", "task", "model", "measure", "r2_mean", "r2_std", "rank",
                  "n_sets", "n_temperatures"]]


_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


def dictionary_share(responses: Sequence[str], dictionary: set[str]) -> float:
    """The share of the words of ``responses`` that ``dictionary`` holds (NaN if none has a word).

    A word is a run of letters (any script), apostrophes inside allowed ("don't", "Rome's");
    digits and punctuation are not words. ``dictionary`` holds lower-case words; a word counts
    if its lower-case form is in it. Word salad made of real words ("Look her pebbly soaked
    bristled") passes this test, so it measures the onset of non-words, not fluency: a floor
    that the temperature range must keep, not a quality score.
    """
    words = [word.lower().replace("’", "'") for text in responses for word in _WORD.findall(text)]
    if not words:
        return float("nan")
    return float(np.mean([word in dictionary for word in words]))


def temperature_cap(temperatures, shares, *, max_drop: float,
                    plateau: float = 1 / 3) -> dict:
    """The highest temperature at which the words of a set are still dictionary words.

    ``level`` is the mean dictionary share (:func:`dictionary_share`) of the sets in the lowest
    ``plateau`` of the temperature range (the lowest third by default: below where the small
    model's words break down, and enough sets for a stable mean); a decreasing isotonic
    regression of every set's share on its temperature gives the share's trend, and the cap is
    the highest temperature of the data at which that fit is at least ``level - max_drop``
    (``max_drop`` 0.02: at most two words in a hundred more than on the plateau are missing from
    the word list). A mean, not the fit's own value at the lowest temperature: that value is
    the largest mean of the first sets, biased upwards by their noise. Sets without a word (NaN
    share) are left out.

    Returns ``{"cap", "level", "share_at_cap", "n_sets", "fitted"}``, ``fitted`` the
    ``(n_sets,)`` fitted shares in the order given (NaN where the share was NaN).
    """
    from sklearn.isotonic import IsotonicRegression

    t = np.asarray(temperatures, dtype=np.float64)
    y = np.asarray(shares, dtype=np.float64)
    if t.shape != y.shape or t.ndim != 1:
        raise ValueError(f"temperatures {t.shape} and shares {y.shape} must be equal 1-d arrays.")
    if not 0 <= max_drop < 1:
        raise ValueError(f"max_drop must be in [0, 1); got {max_drop}.")
    if not 0 < plateau <= 1:
        raise ValueError(f"plateau must be in (0, 1]; got {plateau}.")
    ok = np.isfinite(y)
    if ok.sum() < 3 or len(np.unique(t[ok])) < 3:
        raise ValueError(f"a cap needs sets at 3 or more temperatures with words; got "
                         f"{int(ok.sum())} sets at {len(np.unique(t[ok]))} temperatures.")
    t_ok, y_ok = t[ok], y[ok]
    low = t_ok <= t_ok.min() + plateau * (t_ok.max() - t_ok.min())
    level = float(y_ok[low].mean())
    fitted = np.full_like(y, np.nan)
    fitted[ok] = IsotonicRegression(increasing=False).fit(t_ok, y_ok).predict(t_ok)
    within = t_ok[fitted[ok] >= level - max_drop - 1e-12]
    if not len(within):  # the whole range is below the plateau's level less the drop
        within = t_ok[[np.argmin(t_ok)]]
    cap = float(within.max())
    return {"cap": cap, "level": level, "share_at_cap": float(fitted[ok][t_ok == cap].min()),
            "n_sets": int(ok.sum()), "fitted": fitted}


CAP_COLUMNS = ("task", "cap", "level", "share_at_cap", "max_drop", "n_pilot_sets")


def read_temperature_caps(path) -> dict[str, float]:
    """Each task's cap from a table written by the ``text_temperature_cap`` rule (columns
    :data:`CAP_COLUMNS`), checked: one row per task, every cap a positive finite number.
    Returns ``{task: cap}``."""
    import pandas as pd

    table = pd.read_csv(path)
    missing = [c for c in CAP_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: lacks the columns {missing}.")
    if table["task"].duplicated().any() or table.empty:
        raise ValueError(f"{path}: needs exactly one row per task; got {list(table['task'])}.")
    caps = pd.to_numeric(table["cap"], errors="coerce")
    if not (np.isfinite(caps) & (caps > 0)).all():
        raise ValueError(f"{path}: every cap must be a positive number; got {list(table['cap'])}.")
    return dict(zip(table["task"], caps.astype(float), strict=True))


def _chosen(names: Sequence[str]) -> list:
    """The registry's measures ``names`` spells (as the tables do: each measure's column), and
    after them every plugin that fits; ``ValueError`` for a name spelt otherwise."""
    chosen = select_measures(reference=False, scale_rules=("median",), named=names)
    unknown = [name for name, m in zip(names, chosen, strict=False) if m.column != name]
    if unknown:
        raise ValueError(f"unknown measures {unknown}; the text tables spell them "
                         f"{[get_measure(name).column for name in unknown]}.")
    return chosen


def configured_measures(section: Mapping) -> list[str]:
    """The text section's ``measures`` (checked against the registry: measures of a set alone)
    and after them every measure plugin that fits, as the tables name them (their column)."""
    return [m.column for m in _chosen(section["measures"])]


def config_problems(section: Mapping) -> list[str]:
    """The constraints between keys of the text section that the configuration schema cannot
    express, as sentences naming the keys (empty if there are none). The workflow checks them
    before any job runs (workflow/rules/common.smk: check_config)."""
    text = section
    problems = []
    for key, among in (("figure_task", "tasks"), ("figure_model", "models")):
        if text[key] not in text[among]:
            problems.append(f"text.{key} ({text[key]}) is not among text.{among} {text[among]}.")
    if not set(text["ranking_measures"]) <= set(text["measures"]):
        problems.append(f"text.ranking_measures {text['ranking_measures']} must be among "
                        f"text.measures {text['measures']}.")
    if text["data"] == "generated":
        gen = text["generation"]
        if text["design"] == "grid":
            grid = gen["grid"]
            n_prompts, what = grid["n_prompts"], "text.generation.grid.n_prompts"
            n_sets = grid["n_prompts"] * len(grid["temperatures"])
            sets_from = "text.generation.grid.n_prompts x temperatures"
        else:
            dectest = gen["dectest"]
            n_prompts = n_sets = dectest["n_sets"]
            what = sets_from = "text.generation.dectest.n_sets"
            if dectest["temperature_min"] >= dectest["pilot_temperature_max"]:
                problems.append(
                    f"text.generation.dectest.temperature_min ({dectest['temperature_min']}) "
                    f"must be below pilot_temperature_max ({dectest['pilot_temperature_max']}).")
        if gen["n_chunks"] > n_prompts:
            problems.append(f"text.generation.n_chunks ({gen['n_chunks']}) exceeds {what} "
                            f"({n_prompts}): a job would get no prompt.")
        if 2 * text["cv_folds"] > n_sets:
            problems.append(
                f"text.cv_folds ({text['cv_folds']}) needs at least {2 * text['cv_folds']} sets "
                f"per task; {sets_from} gives {n_sets}.")
    return problems
