"""The model experiment's robustness to the last bits of its embeddings: the
projections' numerical-rank rule, the perturbation, and the stability table."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diversity_core.experiments import model_distinguishing as md
from diversity_core.experiments import stability as ms
from diversity_core.measures.baselines import gm_stds


def _embeddings_with_a_dead_dimension(n=400, d=24, seed=0) -> np.ndarray:
    """float32 unit-ish embeddings whose first output dimension is dead: about 1e-33 on every
    text (as a trained model's output can be)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.linspace(1.0, 0.2, d)
    X[:, 0] = 1e-33 * (1 + 0.1 * rng.standard_normal(n))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X.astype(np.float32)


def _embeddings_in_a_hyperplane(n=400, d=24, seed=0) -> np.ndarray:
    """float32 embeddings that span d - 1 dimensions in exact arithmetic (a linear constraint
    oblique to the axes, as a normalisation layer can leave): stored in float32, their spread
    along the normal is float32 round-off, different on every machine."""
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((n, d)) * np.linspace(1.0, 0.2, d)
    Y[:, -1] = 0.0
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = Y @ Q.T
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("rank", [1, 5, 12])
def test_numerical_rank_is_matrix_rank(dtype, rank):
    rng = np.random.default_rng(rank)
    A = (rng.standard_normal((60, rank)) @ rng.standard_normal((rank, 12))).astype(dtype)
    S = np.linalg.svd(A.astype(np.float64), compute_uv=False)
    eps = float(np.finfo(dtype).eps)
    assert md.numerical_rank(S, A.shape, eps) == np.linalg.matrix_rank(A) == rank
    # The order does not matter, and a truncated list that holds the largest suffices.
    assert md.numerical_rank(S[::-1], A.shape, eps) == rank
    assert md.numerical_rank(S[:3], A.shape, eps) == min(3, rank)
    assert md.numerical_rank(np.zeros(4), A.shape, eps) == 0


@pytest.mark.parametrize("preprocessing", ["pca", "presto", "pca_uncentred"])
def test_projections_keep_the_components_the_embeddings_span(preprocessing):
    X = _embeddings_in_a_hyperplane()
    rng = np.random.default_rng(3)
    numerical = md.preprocess(X, preprocessing, pca_dim=64, rng=rng)
    full = md.preprocess(X, preprocessing, pca_dim=64, rng=np.random.default_rng(3),
                         pca_rank="full")
    assert full.shape == (400, 24) and numerical.shape == (400, 23)
    # The kept columns are those of the full projection (up to the rows' lengths, which lose the
    # dropped column's ~1e-8: the last bit): the rule only drops.
    np.testing.assert_allclose(numerical, full[:, :23], rtol=1e-13, atol=1e-15)
    # The dropped column is the float32 round-off along the hyperplane's normal: a spread a
    # thousand times below the smallest real one, but not zero.
    spreads = full.std(axis=0)
    assert 0 < spreads[23] < 1e-3 * spreads[22]


def test_gmstds_after_pca_reads_the_models_not_the_round_off():
    """The paper's PCA keeps a direction whose coordinates are round-off; GMStds averages its
    logarithm in, so moving the embeddings by a few millionths of their length (as another
    machine's float32 kernels do) moves GMStds by far more than that. The numerical rank drops
    that direction, and GMStds moves by about the perturbation."""
    X = _embeddings_in_a_hyperplane()
    moved = ms.perturb(X, 2.5e-6, np.random.default_rng(9))
    change = {}
    for rule in md.PCA_RANKS:
        a, b = (md.preprocess(E, "pca", pca_dim=64, pca_rank=rule) for E in (X, moved))
        change[rule] = abs(gm_stds(a[:300]) / gm_stds(b[:300]) - 1)
    assert change["numerical"] < 1e-4
    assert change["full"] > 1e-3


def test_preprocess_refuses_an_unknown_rank_rule():
    with pytest.raises(ValueError, match="pca_rank must be one of numerical, full"):
        md.preprocess(np.eye(3), "pca", pca_dim=2, pca_rank="exact")


def test_perturb_moves_each_value_by_a_fraction_of_its_dimensions_scale():
    # A change of CPU kernels moved every dimension by about the same fraction of that
    # dimension's scale, from ordinary ones to nearly dead and dead ones: so does the
    # perturbation, whatever the size of the value itself.
    X = _embeddings_with_a_dead_dimension()
    X[:, 1] *= 1e-6  # a nearly dead dimension, as all-mpnet-base-v2 has (scale 1e-7)
    # (seed 5: not the helper's 0, whose draws made X)
    moved = ms.perturb(X, 2.5e-6, np.random.default_rng(5))
    assert moved.dtype == np.float32 and moved.shape == X.shape
    delta = moved.astype(np.float64) - X
    rms = np.sqrt(np.mean(X.astype(np.float64) ** 2, axis=0))
    ratio = np.sqrt(np.mean(delta**2, axis=0)) / rms
    # 2.5e-6 of each column's scale, within float32's rounding of the ordinary columns (their
    # values near 0.2 round to 1.5e-8, 1/16 of the move) and the sampling of 400 draws
    assert np.all((ratio > 2.0e-6) & (ratio < 3.0e-6)), ratio
    # not a fraction of each value: values near zero of a column move as much as large ones
    column = np.abs(X[:, 2])
    near_zero, large = column < np.quantile(column, 0.2), column > np.quantile(column, 0.8)
    assert 0.7 < delta[near_zero, 2].std() / delta[large, 2].std() < 1.4
    # The dead dimension stays dead (about 1e-33, moved by about 1e-39), the nearly dead one
    # moves by its own scale's fraction, not by the vector's length's.
    assert np.abs(moved[:, 0]).max() < 2e-33
    assert np.abs(delta[:, 1]).max() < 2e-5 * rms[1]
    # Independent draws per perturbation; the same draw from the same seed.
    again = ms.perturb(X, 2.5e-6, np.random.default_rng(5))
    assert np.array_equal(moved, again)
    first, second = (ms.perturb(X, 2.5e-6, ms.perturbation_rng(1, "jargon", "glove", p))
                     for p in (0, 1))
    assert not np.array_equal(first, second)
    with pytest.raises(ValueError, match="floating point"):
        ms.perturb(np.ones((2, 2), dtype=int), 1e-6, np.random.default_rng(0))
    with pytest.raises(ValueError, match="2-D"):
        ms.perturb(np.ones(3), 1e-6, np.random.default_rng(0))
    with pytest.raises(ValueError, match="relative_to_column must be >= 0"):
        ms.perturb(X, -1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="common_to_column must be >= 0"):
        ms.perturb(X, 1e-6, np.random.default_rng(0), common_to_column=-1.0)


def test_perturb_shifts_every_dimension_alike_for_all_vectors():
    # A change of CPU moved all of a model's vectors alike too (its mean over 2,000 vectors 0.14
    # to 0.28 of its root mean square): common_to_column adds one shift per dimension, shared.
    rng = np.random.default_rng(1)
    X = (rng.standard_normal((2000, 32)) * np.geomspace(1e-3, 1.0, 32)).astype(np.float64)
    rms = np.sqrt(np.mean(X**2, axis=0))
    plain = ms.perturb(X, 2.5e-6, np.random.default_rng(7)) - X
    shifted = ms.perturb(X, 2.5e-6, np.random.default_rng(7), common_to_column=1.5e-6) - X
    # the per-value draws are the same as without the shift (drawn first); the rest is one
    # vector, the same in every row, of 1.5e-6 of each column's scale
    shift = shifted - plain
    assert np.allclose(shift, shift[0], rtol=0, atol=1e-12 * rms.max())
    ratio = np.abs(shift[0]) / rms
    assert 0.3e-6 < np.sqrt(np.mean(ratio**2)) < 3e-6 and ratio.max() < 6e-6
    # so the mean change over the vectors is no longer near zero: an independent draw's mean
    # is 1/sqrt(2000) of its rms, the shared shift's about 0.5 of it here
    def common_share(change):
        scaled = change / rms
        return np.linalg.norm(scaled.mean(axis=0)) / np.sqrt(np.mean(scaled**2) * 32)

    assert common_share(plain) < 0.05 < 0.2 < common_share(shifted)
    # without the shift, the draw is the one before it existed
    assert np.array_equal(ms.perturb(X, 2.5e-6, np.random.default_rng(7), common_to_column=0.0),
                          ms.perturb(X, 2.5e-6, np.random.default_rng(7)))


def _knn_predictions(D, train_labels, k):
    from sklearn.neighbors import KNeighborsClassifier

    knn = KNeighborsClassifier(n_neighbors=k, metric="precomputed")
    knn.fit(np.zeros((D.shape[1], D.shape[1])), train_labels)
    return knn.predict(D)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_possible_knn_predictions_hold_every_vote_a_bounded_change_can_give(k):
    # Distances on a coarse grid (many ties and near-ties), moved within the reach at random
    # and at the corners of the box: scikit-learn's vote on every moved matrix is among the
    # classes the bound allows, and with reach 0 and no ties it allows exactly the vote made.
    rng = np.random.default_rng(k)
    classes = np.array([0, 1, 2])
    train_labels = rng.permutation(np.arange(15) % 3)
    D = rng.integers(1, 13, (40, 15)).astype(float) / 10
    reach = 0.05
    possible = ms.possible_knn_predictions(D, train_labels, classes, k, reach)
    seen = np.zeros_like(possible)
    for draw in range(400):
        noise = rng.uniform(-reach, reach, D.shape) if draw % 2 else \
            reach * rng.choice([-1.0, 1.0], D.shape)
        seen[np.arange(len(D)), _knn_predictions(D + noise, train_labels, k)] = True
    assert not (seen & ~possible).any()
    assert possible[np.arange(len(D)), _knn_predictions(D, train_labels, k)].all()
    # the bound is not vacuous: rows with one possible class exist, and moves reached others
    assert (possible.sum(axis=1) == 1).any() and (seen.sum(axis=1) > 1).any()
    distinct = D + rng.uniform(0, 1e-3, D.shape)
    exact = ms.possible_knn_predictions(distinct, train_labels, classes, k, 0.0)
    assert (exact.sum(axis=1) == 1).all()
    assert exact[np.arange(len(D)), _knn_predictions(distinct, train_labels, k)].all()


def test_possible_knn_predictions_open_a_near_tie_only_within_reach():
    # One test row, 1-NN: class 1 at distance 1.0, class 0 at 1.0 + gap. The decision is open
    # when the gap is within twice the reach (each distance moves by up to it), not beyond.
    train_labels, classes = np.array([1, 0, 0]), np.array([0, 1])
    for gap, reach, expected in [(0.3, 0.1, [False, True]), (0.19, 0.1, [True, True]),
                                 (0.0, 0.0, [True, True])]:
        D = np.array([[1.0, 1.0 + gap, 5.0]])
        assert ms.possible_knn_predictions(D, train_labels, classes, 1, reach)[0].tolist() \
            == expected
    # a tie of votes goes to the smallest class (scikit-learn's mode): 2-NN, one of each
    D = np.array([[1.0, 2.0, 9.0]])
    assert ms.possible_knn_predictions(D, train_labels, classes, 2, 0.0)[0].tolist() \
        == [True, False]
    assert _knn_predictions(D, train_labels, 2).tolist() == [0]
    for bad, match in [({"k": 0}, "k must be"), ({"k": 4}, "k must be"),
                       ({"reach": -1.0}, "reach must be")]:
        with pytest.raises(ValueError, match=match):
            ms.possible_knn_predictions(D, train_labels, classes,
                                        **{"k": 1, "reach": 0.0, **bad})


def test_classify_block_bounds_every_cell_a_change_of_distances_can_reach():
    # A block of 4 models x 10 sets whose scores overlap: the bounds hold the accuracies and
    # the confusion counts of the same block with every score moved within reach, and they are
    # the values themselves when nothing can move.
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(4), 10)
    ts = np.linspace(0, 1, 5)
    summary = {"labels": labels, "models": np.array(["a", "b", "c", "d"]),
               "collection": "x", "preprocessing": "raw", "metric": "cosine", "ts": ts,
               "functions": 1 + labels[:, None] * ts + rng.normal(0, 0.6, (40, 5)),
               **{m: labels + rng.normal(0, 0.7, 40) for m in md.SCALAR_MEASURES}}
    settings = dict(ks=[1, 3], k=3, n_splits=2, n_repeats=3, seed=0)
    rows, confusion = md.classify_block(summary, **settings, max_distance_change=0.02)
    bounds = pd.DataFrame(rows)
    assert (bounds.accuracy_low <= bounds.accuracy_mean).all()
    assert (bounds.accuracy_mean <= bounds.accuracy_high).all()
    assert (bounds.decisions_within_reach > 0).any() and (bounds.std_change > 0).any()
    counts = pd.DataFrame(confusion)
    assert (counts.count_low <= counts["count"]).all()
    assert (counts["count"] <= counts.count_high).all()
    for _ in range(4):
        # each score moves by at most 1 % of the measure's largest distance, so each distance
        # by at most 2 %
        moved = dict(summary)
        for m in md.SCALAR_MEASURES:
            span = np.ptp(summary[m])
            moved[m] = summary[m] + 0.01 * span * rng.uniform(-1, 1, 40)
        moved["functions"] = summary["functions"] * (1 + rng.uniform(-1e-3, 1e-3, (40, 5)))
        again, moved_confusion = md.classify_block(moved, **settings)
        again = pd.DataFrame(again)
        scalar = again.measure != "MagDiff"
        assert (again.accuracy_mean[scalar] >= bounds.accuracy_low[scalar] - 1e-12).all()
        assert (again.accuracy_mean[scalar] <= bounds.accuracy_high[scalar] + 1e-12).all()
        assert (abs(again.accuracy_std - bounds.accuracy_std)[scalar]
                <= bounds.std_change[scalar] + 1e-12).all()
    # no reach, no open decision unless distances tie exactly: the bounds are the values
    exact = pd.DataFrame(md.classify_block(summary, **settings, max_distance_change=0.0)[0])
    assert (exact.accuracy_low == exact.accuracy_mean).all()
    assert (exact.accuracy_high == exact.accuracy_mean).all()
    # without max_distance_change the rows are the former ones
    plain = pd.DataFrame(md.classify_block(summary, **settings)[0])
    assert list(plain.columns) == [*ms.MODEL_CELL, "accuracy_mean", "accuracy_std"]
    assert plain.accuracy_mean.equals(exact.accuracy_mean)


def _rows(values, perturbation=None):
    rows = pd.DataFrame({"dataset": "jargon", "preprocessing": "pca", "distance": "cosine",
                         "measure": ["MagDiff", "GMStds", "VS"], "k": 5,
                         "accuracy_mean": values, "accuracy_std": 0.01})
    if perturbation is not None:
        rows["perturbation"] = perturbation
    return rows


def test_spread_table_marks_the_cells_whose_printed_value_moves():
    reference = _rows([0.90001, 0.84, 0.70004])
    perturbed = pd.concat([_rows([0.90002, 0.90, 0.70004], 0),
                           _rows([0.90001, 0.85, 0.70006], 1)])
    table = ms.spread_table(reference, perturbed)
    assert list(table.measure) == ["MagDiff", "GMStds", "VS"]
    assert table.spread.tolist() == pytest.approx([1e-5, 0.06, 2e-5])
    # 0.90001 and 0.90002 both print 0.9000; 0.70004 and 0.70006 print 0.7000 and 0.7001.
    assert table.moves.tolist() == [False, True, True]
    assert table.perturbed_min.tolist() == [0.9, 0.85, 0.7]
    assert (table.perturbations == 2).all()
    with pytest.raises(ValueError, match="without a perturbed run"):
        ms.spread_table(reference, perturbed[perturbed.measure != "VS"])
    with pytest.raises(ValueError, match="perturbation"):
        ms.spread_table(reference, reference)


def _with_bounds(rows, low, high, std_change=0.0):
    within = [7 * (h > lo) for lo, h in zip(low, high, strict=True)]
    return rows.assign(accuracy_low=low, accuracy_high=high, std_change=std_change,
                       decisions_within_reach=within)


def test_reach_table_says_which_printed_digits_a_change_of_machine_can_move():
    reference = _with_bounds(_rows([0.90001, 0.84, 0.70004]), [0.90001, 0.8396, 0.70001],
                             [0.90004, 0.8403, 0.70004], std_change=[0.0, 0.0002, 0.00004])
    table = ms.reach_table(reference)
    assert list(table.measure) == ["MagDiff", "GMStds", "VS"]
    assert table.reach_low.tolist() == [0.9, 0.8396, 0.7]
    assert table.reach_high.tolist() == [0.9, 0.8403, 0.7]
    # 0.90001..0.90004 print 0.9000; 0.8396..0.8403 cross 0.8400; the sd 0.01 ± 4e-5 prints 0.0100
    assert table.mean_within_reach.tolist() == [False, True, False]
    assert table.std_within_reach.tolist() == [False, True, False]
    assert table.decisions_within_reach.tolist() == [7, 7, 7]
    with pytest.raises(ValueError, match="max_distance_change"):
        ms.reach_table(_rows([0.9, 0.84, 0.7]))


def test_table2_markdown_marks_round_off_and_the_best():
    reference = _with_bounds(_rows([0.9, 0.84, 0.7]), [0.9, 0.8371, 0.69996],
                             [0.9, 0.8425, 0.7])
    stability = ms.spread_table(reference, _rows([0.9, 0.9, 0.7], 0)).merge(
        ms.reach_table(reference), on=list(ms.MODEL_CELL))
    table2 = reference.drop(columns="k")
    lines = ms.table2_markdown(table2, stability, k=5, measures=["MagDiff", "GMStds", "VS"],
                               relative_to_column=2.5e-6, common_to_column=1.5e-6,
                               max_distance_change=2.5e-6).splitlines()
    assert lines[0] == "| collection | preprocessing | distance | MagDiff | GMStds | VS |"
    # the mean's range where its printed digits can move (0.69996 still prints 0.7000), and †
    # where a perturbed run moved it
    assert lines[2] == ("| jargon | pca | cosine | **0.9000** ± 0.0100 | 0.8400 ± 0.0100 "
                        "[0.8371, 0.8425] † | 0.7000 ± 0.0100 |")
    # The legend under the table says what both marks are: the reach assumed, how many cells,
    # how many runs of which perturbation.
    assert lines[3] == ""
    legend = lines[4]
    assert legend.startswith("Accuracy of the 5-nearest-neighbour classifier")
    assert "by at most 2.5e-06 of the block's largest" in legend and "1 of 3 cells;" in legend
    assert "in at least one of 1 run on" in legend and "Gaussian 2.5e-06 of" in legend
    assert "one more Gaussian 1.5e-06 shared by all vectors; 1 cells)" in legend
    # ... and that the ranges are not checked against a second machine's run, and how to
    assert "not a second machine's run compared with this one" in legend
    assert legend.endswith("(benchmarks/cells_beyond_spread.py) before reading a difference "
                           "as the models'.")
    assert len(lines) == 5


def test_beyond_spread_names_the_cells_another_run_moved_too_far():
    reference = _rows([0.90002, 0.85, 0.70004])
    perturbed = pd.concat([_rows([0.90002, 0.85, 0.70004], 0), _rows([0.9, 0.85, 0.70004], 1)])
    spread = ms.spread_table(reference, perturbed)
    # inside (moved by 2e-5 = the spread), unchanged in print (1e-6), beyond (0.001)
    other = _rows([0.90004, 0.850001, 0.70104])
    moved = ms.beyond_spread(spread, reference, other)
    assert moved["measure"].tolist() == ["VS"]
    assert moved["change"].iloc[0] == pytest.approx(0.001)
    assert moved["spread"].iloc[0] == 0.0
    # a cell moved by more than its spread whose printed value is the same is not beyond it
    assert ms.beyond_spread(spread, reference, _rows([0.90002, 0.850004, 0.70004])).empty
    with pytest.raises(ValueError, match="without a reference value or a spread"):
        ms.beyond_spread(spread, reference.iloc[:2], other)


def test_cells_beyond_spread_script_compares_two_runs(tmp_path):
    # benchmarks/cells_beyond_spread.py: another run's accuracy files against the reference's
    # and the published spread; exit status 1 and the cell named when one is beyond it.
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "cells_beyond_spread.py"
    reference = _rows([0.90002, 0.85, 0.70004])
    spread = ms.spread_table(reference, _rows([0.9, 0.85, 0.70004], 0))
    spread.to_csv(tmp_path / "stability.csv", index=False)
    for run, values in (("ref", [0.90002, 0.85, 0.70004]), ("same", [0.90001, 0.85, 0.70004]),
                        ("moved", [0.90002, 0.85, 0.70104])):
        (tmp_path / run / "accuracy").mkdir(parents=True)
        _rows(values).to_csv(tmp_path / run / "accuracy" / "jargon_pca_cosine.csv", index=False)

    def compare(run):
        return subprocess.run([sys.executable, str(script), str(tmp_path / "ref"),
                               str(tmp_path / run), str(tmp_path / "stability.csv"),
                               "--collection", "jargon"], capture_output=True, text=True)

    same, moved = compare("same"), compare("moved")
    assert same.returncode == 0 and "3 cells of 1 blocks compared" in same.stdout
    assert "0 beyond their spread; no bounds" in same.stdout
    assert moved.returncode == 1 and "1 beyond their spread" in moved.stdout
    assert "VS" in moved.stdout.splitlines()[-1]
    # With the classification's bounds, a cell beyond its (sampled) spread but inside its
    # bounds passes; one outside them fails, named.
    _with_bounds(reference, [0.9, 0.85, 0.6999], [0.9001, 0.85, 0.7011]).to_csv(
        tmp_path / "ref" / "accuracy" / "jargon_pca_cosine.csv", index=False)
    inside = compare("moved")
    assert inside.returncode == 0, inside.stdout
    assert "1 beyond their spread; 0 outside their bounds" in inside.stdout
    _rows([0.90002, 0.8501, 0.70004]).to_csv(
        tmp_path / "moved" / "accuracy" / "jargon_pca_cosine.csv", index=False)
    outside = compare("moved")
    assert outside.returncode == 1 and "1 outside their bounds" in outside.stdout
    assert "GMStds" in outside.stdout.splitlines()[-1]
    # Another run's published stability.csv: its printed values, each standing for every value
    # that rounds to it (0.7011 inside [0.6999, 0.7011]; 0.8501 half a unit beyond 0.85: out).
    for name, values in (("inside", [0.9, 0.85, 0.7011]), ("beyond", [0.9, 0.8501, 0.7011])):
        _rows(values).round(4).to_csv(tmp_path / f"{name}.csv", index=False)
    inside, beyond = compare("inside.csv"), compare("beyond.csv")
    assert inside.returncode == 0 and "0 outside their bounds" in inside.stdout, inside.stderr
    assert beyond.returncode == 1 and "1 outside their bounds" in beyond.stdout
    assert "GMStds" in beyond.stdout.splitlines()[-1]


PORTABILITY = Path(__file__).resolve().parents[2] / "benchmarks" / "embedding_portability.py"


def _portability_module():
    # The benchmarks import each other by module name: their folder is on the path for the
    # import only, as in test_bench_magnitude.py.
    sys.path.insert(0, str(PORTABILITY.parent))
    try:
        spec = importlib.util.spec_from_file_location("embedding_portability", PORTABILITY)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(PORTABILITY.parent))
    return module


def test_embedding_portability_measures_what_the_vectors_share():
    # benchmarks/embedding_portability.py's comparison: a shift shared by every vector is "the
    # change's share" 1; independent changes of n vectors about 1/sqrt(n).
    module = _portability_module()
    rng = np.random.default_rng(3)
    reference = rng.standard_normal((400, 16))
    shared = module.differences(reference, reference + 1e-6 * rng.standard_normal(16))
    assert shared["common_share"] == pytest.approx(1.0)
    assert shared["common_max"] == pytest.approx(shared["column_max"], rel=1e-6)
    independent = module.differences(reference, reference + 1e-6 * rng.standard_normal((400, 16)))
    assert 0.02 < independent["common_share"] < 0.1  # 1/sqrt(400) = 0.05
    assert not independent["identical"] and module.differences(reference, reference)["identical"]


def test_embedding_portability_names_the_emulator_it_lacks(tmp_path):
    # The emulated CPU runs the embedding under qemu-x86_64: without it, the run is refused in
    # one line that says what to install, before any model is loaded.
    done = subprocess.run([sys.executable, str(PORTABILITY), "all-MiniLM-L6-v2",
                           str(tmp_path / "no-model"), str(tmp_path / "no-documents.json"),
                           "--variants", "native,haswell"], capture_output=True, text=True,
                          env={**os.environ, "PATH": str(tmp_path)}, timeout=300)
    assert done.returncode == 2
    assert "variant haswell runs under qemu-x86_64, which is not installed" in done.stderr
    assert "apt-get install qemu-user" in done.stderr


def test_classifications_are_read_back_exactly_as_written(tmp_path):
    # Tables round the accuracies, so they are read back bit for bit as models_classify wrote
    # them (full precision), without pandas' deprecation warning for choosing its converter.
    import warnings

    values = np.random.default_rng(3).random(2000) * np.logspace(-9, 3, 2000)
    path = tmp_path / "accuracy.csv"
    pd.DataFrame({"accuracy_mean": values}).to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = ms.read_exact_csv(path)
    np.testing.assert_array_equal(read["accuracy_mean"].to_numpy(), values)
