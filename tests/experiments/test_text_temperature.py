"""The text-temperature protocol on synthetic scores: set scoring, isotonic cross-validation,
ranking, gains, the bootstrap interval of Spearman's rho and the ranking against the highest
temperature included."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diversity_core.experiments import text_temperature as protocol


def _synthetic(n_sets=120, noise=(0.05, 0.3, 3.0), seed=0):
    """Temperatures and three scores that track them with rising noise (a, b, c)."""
    rng = np.random.default_rng(seed)
    t = np.repeat(np.linspace(0.2, 1.5, 12), n_sets // 12)
    return t, {name: np.exp(t) + rng.normal(0, s, len(t))
               for name, s in zip("abc", noise, strict=True)}


def test_isotonic_r2_orders_noise_levels_and_is_deterministic():
    t, scores = _synthetic()
    r2 = {k: protocol.isotonic_cv_r2(v, t, n_splits=5, n_repeats=4, seed=3)
          for k, v in scores.items()}
    assert r2["a"].shape == (4, 5)
    assert r2["a"].mean() > 0.9 > r2["b"].mean() > r2["c"].mean()
    # Pure noise is no better than the training mean: R² near or below 0.
    assert r2["c"].mean() < 0.2
    again = protocol.isotonic_cv_r2(scores["b"], t, n_splits=5, n_repeats=4, seed=3)
    np.testing.assert_array_equal(again, r2["b"])


def test_isotonic_r2_needs_no_sign_flip():
    t, scores = _synthetic()
    up = protocol.isotonic_cv_r2(scores["a"], t, n_repeats=2)
    down = protocol.isotonic_cv_r2(-scores["a"], t, n_repeats=2)
    np.testing.assert_allclose(up, down)


@pytest.mark.parametrize("bad", [np.array([1.0, np.nan] * 10), np.zeros(5)])
def test_isotonic_r2_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        protocol.isotonic_cv_r2(bad, np.linspace(0.2, 1.5, len(bad)))


def test_r2_table_ranking_and_gains():
    scores, temperatures = {}, {}
    for task in ("story", "resp"):
        for model in ("m1", "m2"):
            t, s = _synthetic(seed=hash((task, model)) % 1000)
            scores[(task, model)] = {"mag_area": s["a"], "vendi": s["b"], "avg_sim": -s["c"]}
            temperatures[(task, model)] = t
    folds, summary = protocol.r2_table(scores, temperatures, measures=["mag_area", "vendi",
                                                                       "avg_sim"],
                                       n_splits=5, n_repeats=3, seed=0)
    assert len(folds) == 2 * 2 * 3 * 3 * 5
    assert list(summary.columns) == ["task", "model", "measure", "r2_mean", "r2_std", "n_sets"]
    assert (summary["n_sets"] == 120).all()
    ranks, ranking = protocol.rank_measures(folds, ["mag_area", "vendi", "avg_sim"])
    assert len(ranks) == 2 * 2 * 3 * 3
    ranking = ranking.set_index("measure")
    assert ranking.loc["mag_area", "median_rank"] == 1
    assert ranking.loc["mag_area", "share_best"] == 1.0
    assert ranking.loc["avg_sim", "share_last"] == 1.0
    assert ranking["share_best"].sum() == pytest.approx(1.0)
    gains = protocol.gains_over(summary, "mag_area", "avg_sim")
    assert list(gains["task"]) == ["story", "resp"]
    assert (gains["gain"] > 0.5).all()
    story = summary[summary.task == "story"]
    expected = (story[story.measure == "mag_area"].r2_mean.mean()
                - story[story.measure == "avg_sim"].r2_mean.mean())
    assert gains.loc[0, "gain"] == pytest.approx(expected)


def test_ranking_ties_share_the_best_rank():
    folds = pd.DataFrame({"task": "t", "model": "m", "repeat": 0, "fold": 0,
                          "measure": ["a", "b", "c"], "r2": [0.5, 0.5, 0.1]})
    ranks, summary = protocol.rank_measures(folds, ["a", "b", "c"])
    assert ranks.set_index("measure")["rank"].to_dict() == {"a": 1, "b": 1, "c": 3}
    assert summary.set_index("measure").loc["c", "share_last"] == 1.0


def test_spearman_bootstrap_interval():
    t, scores = _synthetic()
    rho, low, high = protocol.spearman_bootstrap(scores["a"], t, n_resamples=300, seed=1)
    # (near rho = 1 a percentile interval may sit just below the estimate: bootstrap bias)
    assert 0.9 < low < high <= 1.0 and rho > 0.9
    rho_c, low_c, high_c = protocol.spearman_bootstrap(scores["c"], t, n_resamples=300, seed=1)
    assert low_c < rho_c < high_c and high_c - low_c > high - low
    assert protocol.spearman_bootstrap(scores["a"], t, n_resamples=300, seed=1) == (rho, low, high)


def test_score_sets_orders_spread_sets_and_handles_identical_responses():
    rng = np.random.default_rng(0)
    centre = rng.normal(size=16)
    sets = [centre + s * rng.normal(size=(10, 16)) for s in (0.05, 0.2, 0.5, 1.0, 2.0)]
    sets.append(np.tile(centre, (10, 1)))  # ten identical responses
    scores, t_cut = protocol.score_sets(sets)
    assert set(scores) == set(protocol.MEASURES) | {"t_conv"}
    # t_cut is the median convergence scale of the sets that have one.
    assert np.isnan(scores["t_conv"][-1])
    assert t_cut == pytest.approx(np.median(scores["t_conv"][:-1]))
    spread = slice(0, 5)
    for measure in ("mag_area", "vendi", "gm_stds"):
        assert np.all(np.diff(scores[measure][spread]) > 0), measure
    assert np.all(np.diff(scores["avg_sim"][spread]) < 0)
    # The identical set: MagArea = t_cut (one point), Vendi 1, AvgSim 1, GMStds 0, IsoScore 0.
    assert scores["mag_area"][-1] == pytest.approx(t_cut)
    assert scores["vendi"][-1] == pytest.approx(1.0)
    assert scores["avg_sim"][-1] == pytest.approx(1.0)
    assert scores["gm_stds"][-1] == 0.0 and scores["iso_score"][-1] == 0.0


def test_score_sets_keeps_the_experiments_arithmetic_bit_for_bit():
    """MagArea and t_conv through the protocol (diversity_core.magnitude.sets) are the bits of the
    experiment's own arithmetic: settings.convergence_scales of the sets with several distinct
    responses, settings.reference_free_t_cut of them, settings.mag_areas of every set."""
    from diversity_core import pairwise_distances
    from diversity_core.magnitude.settings import MagnitudeSettings

    rng = np.random.default_rng(5)
    sets = [rng.normal(size=(10, 32)) * (0.1 + i / 8) for i in range(17)]
    sets[4][2] = sets[4][7]  # a repeated response
    sets.append(np.tile(rng.normal(size=32), (10, 1)))  # ten identical responses
    settings = MagnitudeSettings()
    distances = [pairwise_distances(X, "cosine") for X in sets]
    several = np.array([D.max() > 0 for D in distances])
    t_conv = np.full(len(sets), np.nan)
    t_conv[several] = settings.convergence_scales([D for D, k in zip(distances, several,
                                                                     strict=True) if k])
    t_cut = settings.reference_free_t_cut(convergence_scales=t_conv[several])
    scores, got_t_cut = protocol.score_sets(sets, settings, measures=["mag_area"])
    assert got_t_cut == t_cut
    np.testing.assert_array_equal(scores["t_conv"], t_conv)
    np.testing.assert_array_equal(scores["mag_area"], settings.mag_areas(distances, t_cut))


def test_score_sets_refuses_a_set_it_cannot_measure(monkeypatch):
    """Only a set of identical responses may lack a convergence scale; any other failure of a
    set (here: distances the engine refuses) is an error that names the set."""
    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(5, 4)) for _ in range(3)]
    real = protocol.pairwise_distances

    def broken_second(X, metric):
        D = real(X, metric)
        return -D if X is sets[1] else D

    monkeypatch.setattr(protocol, "pairwise_distances", broken_second)
    with pytest.raises(ValueError, match="set 1: .*negative distances"):
        protocol.score_sets(sets, measures=["mag_area"])


def test_score_sets_rejects_unknown_measures_and_all_identical_sets():
    with pytest.raises(ValueError, match="unknown measures"):
        protocol.score_sets([np.eye(3)], measures=["magarea"])
    with pytest.raises(ValueError, match="single distinct"):
        protocol.score_sets([np.ones((4, 3)), np.ones((4, 3))])


def test_scores_match_responses_that_numpy_strings_would_truncate(tmp_path, monkeypatch):
    """A response ending in NUL (SmolLM2 generates them) loses it in a NumPy string array; the
    scoring script matches embeddings by position and still scores every set."""
    import sys

    from diversity_core.data import text_tasks

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "scripts"))
    sys.modules.pop("text_scores", None)
    import text_scores

    rng = np.random.default_rng(0)
    records = [{"task": "resp", "prompt_id": i, "prompt": "p", "temperature": t,
                "responses": [f"answer {i} {t} {j}" + ("\x00" if j == 0 else "")
                              for j in range(4)]}
               for i in range(3) for t in (0.5, 1.0)]
    data = text_tasks.write_sets(tmp_path / "resp.jsonl", records)
    texts = list(dict.fromkeys(r for record in records for r in record["responses"]))
    assert np.asarray(texts)[0] != texts[0]  # the NUL is gone from the NumPy copy
    embeddings = tmp_path / "resp.npz"
    np.savez(embeddings, texts=np.asarray(texts),
             embeddings=rng.normal(size=(len(texts), 8)).astype(np.float32))
    scores = tmp_path / "scores.csv"
    settings = {"measures": ["mag_area", "vendi"], "dc_tau": 1.0, "magnitude": {}}
    text_scores.main(data, embeddings, scores, task="resp", model_name="m", perturbation=None,
                     **settings)
    table = pd.read_csv(scores)
    assert len(table) == len(records) and table["vendi"].gt(1).all()
    # The stability check's run: the embeddings moved by 2.5e-6 of each dimension's scale move
    # the scores by about as much, not more, and not at all is impossible.
    moved = tmp_path / "moved.csv"
    text_scores.main(data, embeddings, moved, task="resp", model_name="m",
                     perturbation={"index": 0, "relative_to_column": 2.5e-6,
                                   "common_to_column": 1.5e-6, "seed": 3}, **settings)
    for measure in ("mag_area", "vendi"):
        change = (pd.read_csv(moved)[measure] / table[measure] - 1).abs()
        assert 0 < change.max() < 1e-4, measure

    other = text_tasks.write_sets(tmp_path / "other.jsonl", records[:-1])
    with pytest.raises(ValueError, match="does not hold the responses"):
        text_scores.main(other, embeddings, tmp_path / "x.csv", task="resp", model_name="m",
                         perturbation=None, **settings)


def _saturating(n_prompts=6, seed=0):
    """Temperatures 0.2, 0.3, ..., 1.5 (n_prompts sets each) and two scores: ``mag_area`` tracks
    the temperature closely up to 0.8 and is flat noise above; ``vendi`` tracks it everywhere,
    with more noise."""
    rng = np.random.default_rng(seed)
    t = np.repeat(np.round(np.linspace(0.2, 1.5, 14), 2), n_prompts)
    early = np.minimum(t, 0.8) + rng.normal(0, 0.01, len(t))
    early[t > 0.8] = 0.8 + rng.normal(0, 0.3, int((t > 0.8).sum()))
    steady = t + rng.normal(0, 0.08, len(t))
    return t, {"mag_area": early, "vendi": steady, "avg_sim": rng.normal(0, 1, len(t))}


def test_ranking_by_max_temperature_flips_where_a_measure_stops_tracking():
    t, s = _saturating()
    scores, temps = {("story", "m1"): s}, {("story", "m1"): t}
    table = protocol.ranking_by_max_temperature(
        scores, temps, measures=["mag_area", "vendi", "avg_sim"],
        ranking_measures=["mag_area", "vendi"], n_splits=5, n_repeats=2, seed=0)
    assert list(table.columns) == ["max_temperature", "task", "model", "measure", "r2_mean",
                                   "r2_std", "rank", "n_sets", "n_temperatures"]
    # 6 sets a temperature: 0.4 is the first cap with >= 10 sets at >= 3 temperatures.
    caps = sorted(table["max_temperature"].unique())
    assert caps == pytest.approx(np.round(np.arange(0.4, 1.51, 0.1), 2))
    assert (table["measure"] == "avg_sim").sum() == len(caps)
    assert table.loc[table["measure"] == "avg_sim", "rank"].isna().all()
    rank = table.pivot(index="max_temperature", columns="measure", values="rank")
    below, above = rank.index <= 0.8, rank.index >= 1.1
    assert (rank.loc[below, "mag_area"] == 1).all() and (rank.loc[below, "vendi"] == 2).all()
    assert (rank.loc[above, "vendi"] == 1).all() and (rank.loc[above, "mag_area"] == 2).all()
    n_sets = table.drop_duplicates("max_temperature").set_index("max_temperature")["n_sets"]
    assert list(n_sets) == [6 * round((c - 0.1) * 10) for c in caps]


def test_ranking_by_max_temperature_at_the_largest_cap_is_the_r2_table():
    t, s = _saturating(seed=1)
    scores = {("story", "m1"): s, ("resp", "m1"): {k: v[::-1] for k, v in s.items()}}
    temps = {("story", "m1"): t, ("resp", "m1"): t[::-1]}
    table = protocol.ranking_by_max_temperature(
        scores, temps, measures=["mag_area", "vendi"], ranking_measures=["mag_area", "vendi"],
        caps=[0.6, 1.5], n_splits=5, n_repeats=3, seed=4)
    _, summary = protocol.r2_table(scores, temps, measures=["mag_area", "vendi"], n_splits=5,
                                   n_repeats=3, seed=4)
    last = table[table["max_temperature"] == 1.5].reset_index(drop=True)
    for column in ("r2_mean", "r2_std"):
        np.testing.assert_allclose(last[column], summary[column], rtol=1e-12)
    assert sorted(table["max_temperature"].unique()) == [0.6, 1.5]


def test_ranking_by_max_temperature_refuses_caps_with_too_few_sets():
    t, s = _saturating()
    scores, temps = {("story", "m1"): s}, {("story", "m1"): t}
    kwargs = {"measures": ["mag_area", "vendi"], "ranking_measures": ["mag_area", "vendi"],
              "n_splits": 5, "n_repeats": 1}
    # 0.3 keeps 12 sets but only 2 temperatures; 0.2 keeps 6 sets.
    with pytest.raises(ValueError, match=r"maximum temperature 0\.3: story / m1 keeps 12 sets "
                                         r"at 2 temperatures"):
        protocol.ranking_by_max_temperature(scores, temps, caps=[0.3, 1.0], **kwargs)
    with pytest.raises(ValueError, match="no maximum temperature is eligible"):
        protocol.ranking_by_max_temperature(scores, temps, **{**kwargs, "n_splits": 50})
    with pytest.raises(ValueError, match="ranking measures"):
        protocol.ranking_by_max_temperature(scores, temps, **{**kwargs, "measures": ["vendi"]})


def test_gm_stds_unit_is_gm_stds_of_the_normalised_rows():
    from diversity_core import gm_stds

    rng = np.random.default_rng(2)
    directions = rng.normal(size=(4, 10, 16))
    unit = directions / np.linalg.norm(directions, axis=2, keepdims=True)
    scaled = unit * rng.uniform(2.3, 7.5, size=(4, 10, 1))  # norms as an ONNX model's
    scores, _ = protocol.score_sets(list(scaled), measures=["gm_stds", "gm_stds_unit"])
    expected = [gm_stds(X) for X in unit]
    np.testing.assert_allclose(scores["gm_stds_unit"], expected, rtol=1e-12)
    assert not np.allclose(scores["gm_stds"], expected, rtol=1e-3)
    # On rows of unit norm the two agree.
    again, _ = protocol.score_sets(list(unit), measures=["gm_stds", "gm_stds_unit"])
    np.testing.assert_allclose(again["gm_stds_unit"], again["gm_stds"], rtol=1e-12)
    assert protocol.MEASURE_LABELS["gm_stds_unit"] == "GMStds (unit)"


def test_score_tables_are_checked_before_use(tmp_path):
    good = pd.DataFrame({"task": "resp", "model": "m", "temperature": [0.2, 1.0],
                         "mag_area": [3.0, 5.0], "vendi": [1.5, 2.5]})
    good.to_csv(tmp_path / "a.csv", index=False)
    tables, scores, temps = protocol.read_score_tables([tmp_path / "a.csv"], ["mag_area", "vendi"])
    assert list(tables) == [("resp", "m")]
    np.testing.assert_array_equal(scores[("resp", "m")]["vendi"], [1.5, 2.5])
    np.testing.assert_array_equal(temps[("resp", "m")], [0.2, 1.0])
    with pytest.raises(ValueError, match=r"no column\(s\) \['iso_score'\]"):
        protocol.read_score_tables([tmp_path / "a.csv"], ["mag_area", "iso_score"])
    with pytest.raises(ValueError, match="a second score table of resp / m"):
        protocol.read_score_tables([tmp_path / "a.csv"] * 2, ["mag_area"])
    good.assign(vendi=[1.5, float("nan")]).to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match=r"non-finite values in \['vendi'\]"):
        protocol.read_score_tables([tmp_path / "b.csv"], ["mag_area", "vendi"])
    good.assign(model=["m", "n"]).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(ValueError, match="one task and model per file"):
        protocol.read_score_tables([tmp_path / "c.csv"], ["mag_area"])


def test_caps_on_a_step():
    """step: the multiples of the step within the data and the largest temperature; on a grid of
    0.1 they are the grid's temperatures; continuous temperatures give a handful of caps."""
    t, s = _saturating()
    temps = {("story", "m1"): t}
    assert protocol.eligible_caps(temps, n_splits=5, step=0.1) == protocol.eligible_caps(
        temps, n_splits=5)
    rng = np.random.default_rng(0)
    continuous = {("story", "m1"): np.round(rng.uniform(0.2, 0.93, 300), 4)}
    caps = protocol.eligible_caps(continuous, n_splits=5, step=0.1)
    assert caps[:-1] == pytest.approx([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    assert caps[-1] == continuous[("story", "m1")].max()
    with pytest.raises(ValueError, match="step must be positive"):
        protocol.eligible_caps(continuous, n_splits=5, step=0.0)


def test_dictionary_share_counts_words_only():
    words = {"the", "cat", "sat", "don't", "rome's"}
    assert protocol.dictionary_share(["The cat sat.", "the CAT"], words) == 1.0
    assert protocol.dictionary_share(["the 42 cats!!"], words) == 0.5  # digits are no word
    assert protocol.dictionary_share(["Don’t", "Rome's"], words) == 1.0  # apostrophes inside
    assert protocol.dictionary_share(["the שלום cat"], words) == pytest.approx(2 / 3)
    assert np.isnan(protocol.dictionary_share(["42 ... !!", ""], words))


def test_temperature_cap_is_where_the_fitted_share_drops():
    """Shares flat at 0.99 up to τ = 0.9, then falling by 0.1 per 0.1 of τ, with noise: the cap
    is the last temperature at which the decreasing isotonic fit is within max_drop of the
    plateau's level."""
    rng = np.random.default_rng(1)
    t = np.round(np.linspace(0.2, 1.5, 131), 4)
    share = np.where(t <= 0.9, 0.99, 0.99 - (t - 0.9)) + rng.normal(0, 0.002, len(t))
    share[5] = np.nan  # a set without a word: left out
    found = protocol.temperature_cap(t, share, max_drop=0.02)
    assert found["level"] == pytest.approx(0.99, abs=0.002)
    assert 0.9 <= found["cap"] <= 0.93
    assert found["share_at_cap"] >= found["level"] - 0.02
    assert found["n_sets"] == 130 and np.isnan(found["fitted"][5])
    assert np.all(np.diff(found["fitted"][np.isfinite(found["fitted"])]) <= 1e-12)
    looser = protocol.temperature_cap(t, share, max_drop=0.1)
    assert looser["cap"] > found["cap"]
    # The level is the plateau's mean (lowest third of the range), not the fit's first value:
    # three lucky sets at the lowest temperatures would lift that to 1.0 and the cap down.
    lucky = share.copy()
    lucky[:3] = 1.0
    again = protocol.temperature_cap(t, lucky, max_drop=0.02)
    assert again["level"] == pytest.approx(0.99, abs=0.003) and again["fitted"][0] == 1.0
    assert 0.9 <= again["cap"] <= 0.93
    with pytest.raises(ValueError, match="3 or more temperatures"):
        protocol.temperature_cap([0.2, 0.3], [1.0, 1.0], max_drop=0.02)
    with pytest.raises(ValueError, match="max_drop"):
        protocol.temperature_cap(t, share, max_drop=1.5)
    with pytest.raises(ValueError, match="plateau"):
        protocol.temperature_cap(t, share, max_drop=0.02, plateau=0.0)


def test_temperature_caps_are_checked_before_use(tmp_path):
    path = tmp_path / "caps.csv"
    good = pd.DataFrame({"task": ["story", "resp"], "cap": [0.9, 1.1], "level": [0.92, 0.99],
                         "share_at_cap": [0.91, 0.98], "max_drop": [0.02, 0.02],
                         "n_pilot_sets": [90, 90]})
    good.to_csv(path, index=False)
    assert protocol.read_temperature_caps(path) == {"story": 0.9, "resp": 1.1}
    for bad, message in [(good.drop(columns="level"), "lacks the columns"),
                         (pd.concat([good, good.iloc[:1]]), "one row per task"),
                         (good.assign(cap=[0.9, -1.0]), "positive number")]:
        bad.to_csv(path, index=False)
        with pytest.raises(ValueError, match=message):
            protocol.read_temperature_caps(path)


def test_measure_names_and_labels_come_from_the_registry():
    """The experiment's spelling of each measure maps onto the registry, and its labels are the
    registry's as the paper shows them (the committed tables and figures: VS, MagArea, ...)."""
    from diversity_core.measures.registry import MEASURES as REGISTRY
    from diversity_core.measures.registry import get_measure

    assert all(REGISTRY[get_measure(name).name].column == name for name in protocol.MEASURES)
    assert protocol.MEASURE_LABELS == {
        "mag_area": "MagArea", "vendi": "VS", "avg_sim": "AvgSim", "gm_stds": "GMStds",
        "gm_stds_unit": "GMStds (unit)", "iso_score": "IsoScore", "dc_score": "DCScore"}
    assert set(protocol.PAPER_MEASURES) <= set(protocol.MEASURES)


def test_figure3_legend_covers_no_data(monkeypatch, tmp_path):
    """Figure 3's legend lies outside every panel (it used to sit on the prompt panel's points)
    and inside the figure, on a synthetic R² table of three tasks, three models, every measure."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    try:
        import text_figures
    finally:
        sys.path.pop(0)
    rng = np.random.default_rng(0)
    r2 = pd.DataFrame([{"task": task, "model": model, "measure": measure,
                        "r2_mean": rng.uniform(-0.1, 0.8), "r2_std": 0.05}
                       for task in ("story", "resp", "prompt")
                       for model in ("all-mpnet-base-v2", "all-MiniLM-L6-v2", "m3")
                       for measure in protocol.MEASURES])
    figures = []
    monkeypatch.setattr(text_figures, "save_figure", lambda fig, path, pdf=None: figures.append(
        fig))
    text_figures.draw_figure3(r2, list(protocol.MEASURES), "generated", tmp_path / "f.png")
    fig = figures[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    box = legends[0].get_window_extent(renderer)
    assert [t.get_text() for t in legends[0].get_texts()] == [
        protocol.MEASURE_LABELS[m] for m in protocol.MEASURES]
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()
    whole = fig.bbox
    assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 <= box.y1 <= whole.y1
