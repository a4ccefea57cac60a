"""Distinguishing embedding models by the diversity of their embeddings (paper §4.3, Table 2).

Each of several embedding models embeds the same collection of documents. From each model's
embedding space, ``n_subsamples`` random sets of ``subsample_size`` documents are drawn; every
set is summarised by a diversity measure, and a k-nearest-neighbour classifier predicts from
those summaries which model embedded the set (5-fold cross-validation, repeated). A measure that
captures how a model lays out text tells the models apart.

* Magnitude: each set's magnitude function on one grid of scales shared by all sets of a
  (collection, preprocessing) pair, ``linspace(0, t_cut, n_ts)`` with ``t_cut`` the median
  convergence scale of all those sets (the paper's reference-free choice, §3.4), computed in
  batches of sets (:func:`diversity_core.magnitude.convergence_scales`,
  :func:`~diversity_core.magnitude.magnitude_functions`); MagDiff between
  two sets is the area between their functions, ``(1 / t_cut) ∫_0^t_cut |Mag_X − Mag_Y| dt``
  (the trapezoid rule on the stored grid, as magnipy's pairwise ``MagDiffs``: the integrand is
  not smooth where the functions cross, so the package's Chebyshev rule does not apply). The
  MagDiff matrix is the precomputed distance of the classifier (:func:`magdiff_matrix`,
  vectorised: ``Σ_k w_k |F_ik − F_jk|`` is a weighted city-block distance between the rows).
* Every other measure (MagArea, Vendi Score, AvgSim, GMStds, IsoScore, DCScore) is one number per
  set; the classifier uses the Euclidean distance between those numbers.

Functions here are NumPy in, NumPy out; the pipeline's scripts (``scripts/models_*.py``) do the
file handling.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence

import numpy as np

from ..magnitude.sets import measure_sets

# The trapezoid weights of the stored grid belong to the protocol; importable from here as before.
from ..magnitude.sets import trapezoid_weights as trapezoid_weights
from ..magnitude.settings import MagnitudeSettings
from ..measures.distances import pairwise_distances
from ..measures.registry import ScaleView, evaluate, get_measure, select_measures

__all__ = [
    "DOCUMENT_CHOICES",
    "MEASURES",
    "MEASURE_LABELS",
    "PREPROCESSINGS",
    "SCALAR_MEASURES",
    "scalar_measures",
    "knn_cross_validation",
    "magdiff_matrix",
    "magdiff_pairwise",
    "measures",
    "numerical_rank",
    "PCA_RANKS",
    "measure_distances",
    "approximate_diameter",
    "block_sets",
    "classify_block",
    "choose_documents",
    "first_documents",
    "preprocess",
    "preprocessing_rng",
    "scalar_distance",
    "scalar_scores",
    "select_documents",
    "subsample_indices",
    "subsample_rng",
    "summarise_sets",
    "trapezoid_weights",
]

log = logging.getLogger(__name__)

# Sets whose distance matrices are held at once (and batched): 64 of 300 points take 46 MB.
_BATCH_SETS = 64

# How an embedding space enters the comparison (models.variants[].preprocessing; preprocess).
PREPROCESSINGS = ("raw", "pca", "pca_uncentred", "presto")
# How many components a projection keeps (models.pca_rank; preprocess): those the embeddings
# span numerically (the default), or min(pca_dim, d) as the paper's PCA (round-off included).
PCA_RANKS = ("numerical", "full")

# Single-number measures, in table order: every measure of the registry of a set alone (plugins
# included, once registered); MagDiff is the one distance between functions. The labels are
# those of the paper's Table 2 (Measure.in_paper: the Vendi Score is "VS"), which
# results/models/table2.csv shows.


def scalar_measures() -> tuple[str, ...]:
    """The single-number measures, in table order: the registry's measures of a set alone."""
    return tuple(m.name for m in select_measures(reference=False, scale_rules=("median",)))


def measures() -> tuple[str, ...]:
    """Every measure of the experiment: MagDiff, then :func:`scalar_measures`."""
    return ("magdiff", *scalar_measures())


SCALAR_MEASURES = scalar_measures()
MEASURES = measures()
MEASURE_LABELS = {name: get_measure(name).in_paper for name in MEASURES}


def select_documents(documents: Sequence[str], n_documents: int, *, min_words: int,
                     max_words: int, seed) -> tuple[list[str], np.ndarray]:
    """Draw the documents of a collection that every model embeds.

    Documents are cut to their first ``max_words`` words (so every model sees the same text and
    the embedding cost is bounded), those with fewer than ``min_words`` words and repeats of an
    earlier text are dropped, and ``n_documents`` of the rest are drawn without replacement
    (nested: the draw of n documents is part of the draw of any m > n with the same seed).

    Returns
    -------
    texts : list of n_documents str, in corpus order
    indices : (n_documents,) int, their positions in ``documents``
    """
    if min_words < 1 or max_words < min_words:
        raise ValueError(f"need 1 <= min_words <= max_words; got {min_words}, {max_words}.")
    candidates, seen = [], set()
    for i, doc in enumerate(documents):
        words = doc.split()
        if len(words) < min_words:
            continue
        text = " ".join(words[:max_words])
        if text not in seen:
            seen.add(text)
            candidates.append((i, text))
    if len(candidates) < n_documents:
        raise ValueError(f"the collection has {len(candidates)} distinct documents of at least "
                         f"{min_words} words; n_documents is {n_documents}.")
    # The first n_documents of one seeded permutation: a larger draw contains a smaller one, so
    # enlarging n_documents embeds only the new documents (the embedding cache keeps the rest).
    order = np.random.default_rng(seed).permutation(len(candidates))
    chosen = np.sort(order[:n_documents])
    return [candidates[j][1] for j in chosen], np.array([candidates[j][0] for j in chosen])


def first_documents(documents: Sequence[str], n_documents: int) -> tuple[list[str], np.ndarray]:
    """The first ``n_documents`` documents of a collection as they are: Presto's choice
    (Wayland et al. embed the first 16,384 train rows of each dataset, with no filtering;
    aidos-lab/Presto, ``embeddings.py``). Repeats stay, so two identical documents are two
    points at distance 0 (the magnitude engine merges them: the twin property).

    Returns ``(texts, indices)`` as :func:`select_documents`.
    """
    if len(documents) < n_documents:
        raise ValueError(f"the collection has {len(documents)} documents; n_documents is "
                         f"{n_documents}.")
    return list(documents[:n_documents]), np.arange(n_documents)


# How a collection's documents are chosen (models.documents).
DOCUMENT_CHOICES = ("drawn", "presto")


def choose_documents(documents: Sequence[str], choice: str, n_documents: int, *,
                     min_words: int, max_words: int, seed) -> tuple[list[str], np.ndarray]:
    """The documents every model embeds: ``choice`` ``"drawn"`` (:func:`select_documents`:
    cut, filtered, drawn with ``seed``) or ``"presto"`` (:func:`first_documents`: the first
    ``n_documents`` as they are; ``min_words``, ``max_words`` and ``seed`` unused)."""
    if choice == "drawn":
        return select_documents(documents, n_documents, min_words=min_words,
                                max_words=max_words, seed=seed)
    if choice == "presto":
        return first_documents(documents, n_documents)
    raise ValueError(f"documents must be one of {DOCUMENT_CHOICES}; got {choice!r}.")


def preprocess(X, preprocessing: str, *, pca_dim: int | None = None,
               rng: np.random.Generator | None = None, pca_rank: str = "numerical") -> np.ndarray:
    """An embedding space as it enters the comparison (one of :data:`PREPROCESSINGS`).

    * ``raw``: unchanged.
    * ``pca``: centred, projected on its first ``min(pca_dim, d)`` principal components (fitted
      on all documents of the collection) and L2-normalised row by row (our reading of the
      paper's "PCA and normalisation to 384 dimensions"). Centring puts the mean of every model's
      embeddings at the origin, so every model's mean cosine similarity becomes about 0.
    * ``pca_uncentred``: projected on the first ``min(pca_dim, d)`` right singular vectors of
      the *uncentred* matrix, then L2-normalised row by row: the same reduction without moving
      the origin, so the cone in which a model's embeddings lie (its mean cosine similarity)
      survives.
    * ``presto``: Wayland et al.'s Presto, where the paper's protocol comes from: divided by the
      space's approximate diameter (:func:`approximate_diameter`), then projected by a centred
      PCA to ``min(pca_dim, d)`` dimensions, rows not normalised. Meant for the Euclidean
      distance (a cosine distance would undo the division).

    A model with fewer than ``pca_dim`` dimensions keeps all of its own (rotated): dimensions
    cannot be invented, and zero-padding to ``pca_dim`` would change no distance but make GMStds
    zero and IsoScore meaningless. For the same reason, with ``pca_rank="numerical"`` (the
    default) the projections keep only the components the embeddings span numerically
    (:func:`numerical_rank`, ``numpy.linalg.matrix_rank``'s rule in the precision of ``X``):
    along a direction of no variance (a model with a dead output dimension) a projected
    coordinate is round-off of the rotation, about 1e-18, whose logarithm GMStds would average
    in and which differs from machine to machine. ``pca_rank="full"`` keeps ``min(pca_dim, d)``
    components as the paper's PCA does, round-off directions included.

    Parameters
    ----------
    X : (n, d) embeddings of all documents of a collection
    rng : the start of ``presto``'s diameter search (needed for ``presto`` only)

    Returns
    -------
    X : (n, d') float64
    """
    X = np.asarray(X)
    # The round-off unit of the embeddings as stored (float32 for every model here): a
    # component below its bound is not a property of the model (numerical_rank).
    eps = float(np.finfo(X.dtype if np.issubdtype(X.dtype, np.floating) else np.float64).eps)
    X = X.astype(np.float64, copy=False)
    if preprocessing not in PREPROCESSINGS:
        raise ValueError(f"preprocessing must be one of {', '.join(PREPROCESSINGS)}; "
                         f"got {preprocessing!r}.")
    if pca_rank not in PCA_RANKS:
        raise ValueError(f"pca_rank must be one of {', '.join(PCA_RANKS)}; got {pca_rank!r}.")
    if preprocessing == "raw":
        return X
    n_components = min(int(pca_dim), X.shape[1], X.shape[0])
    spanned = eps if pca_rank == "numerical" else None
    if preprocessing == "presto":
        if rng is None:
            raise ValueError("the presto preprocessing needs rng (the diameter search's start).")
        return _centred_pca(X / approximate_diameter(X, rng=rng), n_components, spanned)
    if preprocessing == "pca":
        Z = _centred_pca(X, n_components, spanned)
    else:
        # NumPy's SVD, not scikit-learn's TruncatedSVD: that one cannot keep all d components
        # (ARPACK needs k < d) and draws a random start vector; this is exact and seedless.
        _, S, Vt = np.linalg.svd(X, full_matrices=False)
        if spanned is not None:
            n_components = min(n_components, numerical_rank(S, X.shape, spanned))
        Z = X @ Vt[:n_components].T
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"a document is projected onto the origin by {preprocessing}: it has "
                         "no direction.")
    return Z / norms


def _centred_pca(X, n_components: int, eps: float | None) -> np.ndarray:
    """The first ``n_components`` principal coordinates of ``X``; with ``eps``, only those of
    the components above :func:`numerical_rank`'s bound (the kept columns are computed exactly
    as without it)."""
    from sklearn.decomposition import PCA

    pca = PCA(n_components=n_components, svd_solver="full")
    Z = pca.fit_transform(X)
    if eps is None:
        return Z
    return Z[:, :numerical_rank(pca.singular_values_, X.shape, eps)]


def numerical_rank(singular_values, shape: tuple[int, int], eps: float) -> int:
    """How many singular values lie above the round-off bound ``σ_max · max(shape) · eps``:
    ``numpy.linalg.matrix_rank``'s rule (with ``eps`` the unit round-off of the data's
    precision), applied to the singular values a projection has already computed.

    Parameters
    ----------
    singular_values : the singular values of an (n, d) matrix (in any order; those a truncated
        decomposition kept suffice if they include the largest)
    shape : (n, d), the matrix's shape
    eps : the unit round-off of the precision the matrix was computed in (float32's 1.19e-7
        for embeddings stored as float32)
    """
    S = np.asarray(singular_values, dtype=np.float64)
    if S.size == 0 or S.max() == 0:
        return 0
    return int(np.count_nonzero(S > S.max() * max(shape) * eps))


def approximate_diameter(X, *, rng: np.random.Generator, n_iterations: int = 1000) -> float:
    """The approximate Euclidean diameter of a point cloud, as Presto's ``_normalize_space``.

    From a random point, walk ``n_iterations`` times to the point farthest from the last one;
    the diameter is the largest distance between the points visited (a lower bound of the true
    diameter, usually equal to it).

    Parameters
    ----------
    X : (n, d) points
    rng : draws the starting point

    Returns
    -------
    diameter : float, > 0
    """
    X = np.asarray(X, dtype=np.float64)
    if len(X) < 2:
        raise ValueError("a diameter needs at least two points.")
    visited = [int(rng.integers(len(X)))]
    for _ in range(n_iterations - 1):
        farthest = int(np.argmax(np.linalg.norm(X - X[visited[-1]], axis=1)))
        if farthest in visited:
            # The walk is deterministic in its last point: once a point comes back, it cycles
            # through points already visited, so the remaining iterations add nothing.
            break
        visited.append(farthest)
    diameter = float(pairwise_distances(X[visited], "euclidean").max())
    if diameter == 0:
        raise ValueError("every point is the same: the space has no diameter.")
    return diameter


def preprocessing_rng(seed: int, collection: str, model: str) -> np.random.Generator:
    """The random generator of one (collection, model) pair's preprocessing (Presto's diameter
    search), apart from :func:`subsample_rng` so that every block draws the same subsamples."""
    return np.random.default_rng(
        [int(seed), zlib.crc32(collection.encode()), zlib.crc32(model.encode()), 1])


def subsample_rng(seed: int, collection: str, model: str) -> np.random.Generator:
    """The random generator of one (collection, model) pair's subsamples: a function of the
    experiment's seed and the two names only, so adding a model changes no other draw."""
    return np.random.default_rng(
        [int(seed), zlib.crc32(collection.encode()), zlib.crc32(model.encode())])


def subsample_indices(n_documents: int, size: int, n_subsamples: int,
                      rng: np.random.Generator) -> np.ndarray:
    """``n_subsamples`` sets of ``size`` distinct document indices: (n_subsamples, size) int."""
    if not 2 <= size <= n_documents:
        raise ValueError(f"subsample_size must lie in [2, {n_documents}]; got {size}.")
    return np.stack([np.sort(rng.choice(n_documents, size, replace=False))
                     for _ in range(n_subsamples)])


def block_sets(embeddings: Sequence[np.ndarray], models: Sequence[str], *, collection: str,
               preprocessing: str, pca_dim: int, pca_rank: str, subsample_size: int,
               n_subsamples: int, seed: int) -> dict:
    """The subsampled sets of one (collection, preprocessing) block, for every model at once.

    Each model's embeddings of the collection are preprocessed (:func:`preprocess`) and
    ``n_subsamples`` sets of ``subsample_size`` documents drawn from them
    (:func:`subsample_indices` with :func:`subsample_rng`: the same documents in every block).

    Returns
    -------
    dict with ``spaces`` (list of n_models * n_subsamples arrays), ``labels`` (model index of
    each set), ``subsets`` (document indices of each set, (n_sets, subsample_size)) and
    ``dimensions`` (the preprocessed dimension of each model).
    """
    if len(embeddings) != len(models):
        raise ValueError(f"{len(embeddings)} embedding arrays for {len(models)} models.")
    spaces, labels, subsets, dimensions = [], [], [], []
    for label, (model, E) in enumerate(zip(models, embeddings, strict=True)):
        X = preprocess(E, preprocessing, pca_dim=pca_dim, pca_rank=pca_rank,
                       rng=preprocessing_rng(seed, collection, model))
        sets = subsample_indices(len(X), subsample_size, n_subsamples,
                                 subsample_rng(seed, collection, model))
        spaces.extend(X[s] for s in sets)
        labels.extend([label] * len(sets))
        subsets.append(sets)
        dimensions.append(X.shape[1])
    return {"spaces": spaces, "labels": np.array(labels), "subsets": np.concatenate(subsets),
            "dimensions": np.array(dimensions)}


def scalar_scores(X, *, dcscore_tau: float = 1.0, where: str = "a set") -> dict[str, float]:
    """The single-number diversity measures of one set (cosine similarities, as the paper's text
    experiments): Vendi Score, AvgSim, GMStds, IsoScore, DCScore (not MagArea: that needs the
    shared grid, see :func:`summarise_sets`)."""
    import warnings

    with warnings.catch_warnings():
        # IsoScore warns that 300 points span at most 299 of 384 or 768 dimensions: true of
        # every set alike, so it still ranks them (the paper uses it the same way).
        warnings.filterwarnings("ignore", message="IsoScore on")
        return {m.name: evaluate(m, X, where=where, tau=dcscore_tau)
                for m in map(get_measure, scalar_measures()) if not m.multi_scale}


class _LazyDistances(Sequence):
    """The sets' distance matrices, each formed when read (``pairwise_distances``): with
    :func:`~diversity_core.magnitude.sets.measure_sets`' ``chunk_size``, only one chunk of them
    exists at a time."""

    def __init__(self, spaces: Sequence[np.ndarray], metric: str):
        self.spaces, self.metric = spaces, metric

    def __len__(self) -> int:
        return len(self.spaces)

    def __getitem__(self, i):
        return pairwise_distances(self.spaces[i], self.metric)


def summarise_sets(spaces: Sequence[np.ndarray], settings: MagnitudeSettings, *,
                   metric: str = "cosine", dcscore_tau: float = 1.0,
                   progress: bool = False) -> dict[str, np.ndarray]:
    """Magnitude functions on one shared grid, and every scalar score, of a list of sets.

    Parameters
    ----------
    spaces : m arrays of shape (n_i, d_i): the subsampled embedding sets
    settings : magnitude conventions (convergence target and tolerance, ``n_ts``; not
        ``integration`` nor ``integration_rtol``: see below)
    metric : distance of magnitude (``cosine`` or ``euclidean``)

    Returns
    -------
    dict with ``ts`` (n_ts,), ``functions`` (m, n_ts), ``t_conv`` (m,), ``t_cut`` (),
    and one (m,) array per measure of :data:`SCALAR_MEASURES` (MagArea: the trapezoid integral
    of the stored function, in effective points × scale).

    The protocol is :func:`~diversity_core.magnitude.sets.measure_sets` (t_cut the median
    convergence scale) with ``area_rule="grid_trapezoid"``: MagArea is the trapezoid rule on
    the stored grid ``linspace(0, t_cut, n_ts)``, the grid MagDiff is computed on, as in the
    paper (one shared stored grid for both measures); ``magnitude.integration`` is not honoured
    here (an integral to ``integration_rtol`` would change the committed tables).
    """
    # Two passes over chunks of sets, so that the distance matrices never all sit in memory
    # (1,200 of them of 300 x 300 points would take 860 MB): convergence scales first, then the
    # functions; each chunk is one batch (diversity_core.magnitude._batch).
    mag = measure_sets(_LazyDistances(spaces, metric), **settings.as_dict(), functions=True,
                       area_rule="grid_trapezoid", chunk_size=_BATCH_SETS,
                       progress=progress)
    failed = {i: mag.failure(i) for i in range(len(spaces)) if mag.failure(i)}
    if failed:  # every set must have a convergence scale and a function, as it always had to
        raise ValueError("; ".join(f"set {i}: {why}" for i, why in failed.items()))
    for line in mag.warning_lines():
        log.warning("%s", line)
    scores = {name: np.empty(len(spaces)) for name in scalar_measures()}
    for i, X in enumerate(spaces):
        for name, value in scalar_scores(X, dcscore_tau=dcscore_tau, where=f"set {i}").items():
            scores[name][i] = value
    for m in map(get_measure, scalar_measures()):
        if m.multi_scale:
            scores[m.name] = np.array([m(X, engine=ScaleView(mag.t_cut, area=area))
                                       for X, area in zip(spaces, mag.areas, strict=True)])
    return {"ts": mag.ts, "functions": mag.functions, "t_conv": mag.t_conv,
            "t_cut": np.float64(mag.t_cut), **scores}


def magdiff_matrix(functions, ts) -> np.ndarray:
    """MagDiff between every pair of stored magnitude functions, vectorised.

    ``MagDiff(i, j) = (1 / t_cut) ∫ |F_i(t) − F_j(t)| dt`` by the trapezoid rule on ``ts``
    (``t_cut = ts[-1]``): the mean absolute difference in effective number of points. With the
    trapezoid weights ``w ≥ 0`` this is the city-block distance between the rows of ``F w``.

    Parameters
    ----------
    functions : (m, n_ts) magnitude functions on the common scales ``ts``
    ts : (n_ts,) increasing scales from 0

    Returns
    -------
    D : (m, m) symmetric, zero diagonal
    """
    from scipy.spatial.distance import cdist

    F = np.asarray(functions, dtype=np.float64)
    w = trapezoid_weights(ts)
    if F.ndim != 2 or F.shape[1] != len(w):
        raise ValueError(f"functions must be (m, {len(w)}); got {F.shape}.")
    weighted = F * w
    return cdist(weighted, weighted, "cityblock") / float(ts[-1])


def magdiff_pairwise(functions, ts) -> np.ndarray:
    """:func:`magdiff_matrix` by a loop over pairs (for testing the vectorised version)."""
    F = np.asarray(functions, dtype=np.float64)
    D = np.zeros((len(F), len(F)))
    for i in range(len(F)):
        for j in range(i + 1, len(F)):
            D[i, j] = D[j, i] = np.trapezoid(np.abs(F[i] - F[j]), ts) / ts[-1]
    return D


def knn_cross_validation(D, labels, *, ks: Sequence[int], n_splits: int, n_repeats: int,
                         seed: int, confusion_k: int | None = None,
                         reach: float | None = None) -> dict:
    """Accuracy of k-nearest-neighbour classification on a precomputed distance matrix.

    Repeated stratified k-fold cross-validation (scikit-learn's ``RepeatedStratifiedKFold``);
    for each fold, ``KNeighborsClassifier(metric="precomputed")`` is fitted on the training
    block of ``D`` and predicts the test rows from their distances to the training sets.

    Parameters
    ----------
    D : (m, m) distances between the sets
    labels : (m,) class of each set (the model that embedded it)
    ks : neighbour counts to evaluate (each on the same folds)
    confusion_k : the k whose confusion matrix (summed over all folds) is returned
    reach : if given, how far each distance may move (a change of machine); every decision is
        then bounded (:func:`~diversity_core.experiments.stability.possible_knn_predictions`)

    Returns
    -------
    dict with ``accuracy``: {k: (n_splits * n_repeats,) accuracy of each fold}, ``classes``
    and, if ``confusion_k`` is given, ``confusion``: (n_classes, n_classes) counts, rows the
    true class, columns the predicted one. With ``reach``: ``gain`` and ``loss`` ({k: each
    fold's largest rise and fall of accuracy within reach}), ``within_reach`` ({k: decisions
    that can change}) and, with ``confusion_k``, ``confusion_low`` and ``confusion_high`` (the
    counts' bounds).
    """
    from sklearn.metrics import confusion_matrix
    from sklearn.model_selection import RepeatedStratifiedKFold
    from sklearn.neighbors import KNeighborsClassifier

    from .stability import possible_knn_predictions

    D = np.asarray(D, dtype=np.float64)
    labels = np.asarray(labels)
    if D.shape != (len(labels), len(labels)):
        raise ValueError(f"D must be ({len(labels)}, {len(labels)}); got {D.shape}.")
    classes = np.unique(labels)
    folds = RepeatedStratifiedKFold(n_splits=n_splits, n_repeats=n_repeats, random_state=seed)
    accuracy = {int(k): [] for k in ks}
    gain, loss = {k: [] for k in accuracy}, {k: [] for k in accuracy}
    within_reach = dict.fromkeys(accuracy, 0)
    confusion = np.zeros((len(classes), len(classes)), dtype=np.int64)
    confusion_low, confusion_high = confusion.copy(), confusion.copy()
    for train, test in folds.split(np.zeros(len(labels)), labels):
        to_train, from_test = D[np.ix_(train, train)], D[np.ix_(test, train)]
        true = np.searchsorted(classes, labels[test])
        for k in accuracy:
            knn = KNeighborsClassifier(n_neighbors=k, metric="precomputed")
            knn.fit(to_train, labels[train])
            predicted = knn.predict(from_test)
            correct = predicted == labels[test]
            accuracy[k].append(float(np.mean(correct)))
            if k == confusion_k:
                confusion += confusion_matrix(labels[test], predicted, labels=classes)
            if reach is None:
                continue
            possible = possible_knn_predictions(from_test, labels[train], classes, k, reach)
            open_decision = possible.sum(axis=1) > 1
            gain[k].append(float(np.mean(~correct & possible[np.arange(len(test)), true])))
            loss[k].append(float(np.mean(correct & open_decision)))
            within_reach[k] += int(open_decision.sum())
            if k == confusion_k:
                # A count can lose each open decision it holds and gain each open decision of
                # its true class that can go to its column.
                held = np.searchsorted(classes, predicted)
                np.add.at(confusion_low, (true[open_decision], held[open_decision]), -1)
                can_move = possible.copy()
                can_move[np.arange(len(test)), held] = False
                np.add.at(confusion_high, true, can_move.astype(np.int64))
    out = {"accuracy": {k: np.array(v) for k, v in accuracy.items()}, "classes": classes}
    if confusion_k is not None:
        out["confusion"] = confusion
    if reach is not None:
        out.update(gain={k: np.array(v) for k, v in gain.items()},
                   loss={k: np.array(v) for k, v in loss.items()}, within_reach=within_reach)
        if confusion_k is not None:
            out.update(confusion_low=confusion + confusion_low,
                       confusion_high=confusion + confusion_high)
    return out


def classify_block(summary: Mapping[str, np.ndarray], *, ks: Sequence[int], k: int,
                   n_splits: int, n_repeats: int, seed: int,
                   max_distance_change: float | None = None) -> tuple[list[dict], list[dict]]:
    """The k-NN accuracies of every measure of one block (:func:`summarise_sets`' output with
    its ``labels``, ``models``, ``collection``, ``preprocessing`` and ``metric``), on the same
    folds for every measure and k, and MagDiff's confusion counts at ``k`` neighbours.

    ``max_distance_change``: if given, how far a change of machine may move any distance
    between two sets, as a fraction of the measure's largest distance in the block; every
    value is then given the bounds that such a change can reach.

    Returns
    -------
    accuracy : one row per measure and k (``ks`` and ``k``): the block's keys, ``measure`` (the
        paper's label), ``k``, ``accuracy_mean`` and ``accuracy_std`` (population sd) over the
        ``n_splits * n_repeats`` folds, unrounded; with ``max_distance_change`` also
        ``accuracy_low`` and ``accuracy_high`` (the lowest and highest mean within reach),
        ``std_change`` (the most the sd can move: the root mean square of each fold's largest
        move, as the sd is a norm of the centred fold accuracies) and ``decisions_within_reach``
    confusion : one row per (true, predicted) model: the block's keys and ``count`` (with
        ``max_distance_change`` also ``count_low`` and ``count_high``)
    """
    ks = sorted({*ks, k})
    block = {"dataset": str(summary["collection"]),
             "preprocessing": str(summary["preprocessing"]), "distance": str(summary["metric"])}
    models, labels = [str(m) for m in summary["models"]], np.asarray(summary["labels"])
    rows, confusion_rows = [], []
    for measure in (m for m in measures() if m == "magdiff" or m in summary):
        D = measure_distances(summary, measure)
        reach = None if max_distance_change is None else max_distance_change * float(D.max())
        cv = knn_cross_validation(
            D, labels, ks=ks, n_splits=n_splits, n_repeats=n_repeats, seed=seed,
            confusion_k=k if measure == "magdiff" else None, reach=reach)
        for k_i, fold_accuracy in cv["accuracy"].items():
            row = {**block, "measure": get_measure(measure).in_paper, "k": k_i,
                   "accuracy_mean": fold_accuracy.mean(), "accuracy_std": fold_accuracy.std()}
            if reach is not None:
                gain, loss = cv["gain"][k_i], cv["loss"][k_i]
                row.update(accuracy_low=row["accuracy_mean"] - loss.mean(),
                           accuracy_high=row["accuracy_mean"] + gain.mean(),
                           std_change=float(np.sqrt(np.mean(np.maximum(gain, loss) ** 2))),
                           decisions_within_reach=cv["within_reach"][k_i])
            rows.append(row)
        if measure == "magdiff":
            bounds = ({"count_low": "confusion_low", "count_high": "confusion_high"}
                      if reach is not None else {})
            confusion_rows.extend(
                {**block, "true_model": true, "predicted_model": predicted,
                 "count": int(cv["confusion"][i, j]),
                 **{column: int(cv[key][i, j]) for column, key in bounds.items()}}
                for i, true in enumerate(models) for j, predicted in enumerate(models))
        log.info("%s / %s / %s / %s: accuracy at k=%d %.3f", *block.values(), measure, k,
                 cv["accuracy"][k].mean())
    return rows, confusion_rows


def scalar_distance(values) -> np.ndarray:
    """Euclidean distance between single-number scores: ``|s_i − s_j|`` as an (m, m) matrix."""
    s = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite.")
    return np.abs(s[:, None] - s[None, :])


def measure_distances(summary: Mapping[str, np.ndarray], measure: str) -> np.ndarray:
    """The classifier's distance matrix for ``measure`` from :func:`summarise_sets`' output."""
    if measure == "magdiff":
        return magdiff_matrix(summary["functions"], summary["ts"])
    if measure not in scalar_measures():
        raise ValueError(f"unknown measure {measure!r}; known: {', '.join(measures())}.")
    return scalar_distance(summary[measure])


def config_problems(section: Mapping) -> list[str]:
    """The constraints between keys of the models section that the configuration schema cannot
    express, as sentences naming the keys (empty if there are none). The workflow checks them
    before any job runs (workflow/rules/common.smk: check_config)."""
    mod = section
    problems = []
    for variant in mod["variants"]:
        if variant["preprocessing"] == "presto" and variant["distance"] == "cosine":
            problems.append("models.variants: presto with the cosine distance is pca with the "
                            "cosine distance again for magnitude (a cosine distance ignores the "
                            "division by the diameter and the rows' lengths): use euclidean.")
    if mod["figure_collection"] not in mod["collections"]:
        problems.append(f"models.figure_collection ({mod['figure_collection']}) is not among "
                        f"models.collections {mod['collections']}.")
    if mod["subsample_size"] > mod["n_documents"]:
        problems.append(f"models.subsample_size ({mod['subsample_size']}) exceeds "
                        f"models.n_documents ({mod['n_documents']}).")
    if mod["cv_folds"] > mod["n_subsamples"]:
        problems.append(f"models.cv_folds ({mod['cv_folds']}) exceeds models.n_subsamples "
                        f"({mod['n_subsamples']}): a stratified fold needs a subsample of every "
                        "model.")
    else:
        # The smallest training part of a stratified split: (folds - 1) / folds of each model's
        # subsamples, rounded down.
        train = len(mod["models"]) * (mod["n_subsamples"] * (mod["cv_folds"] - 1)
                                      // mod["cv_folds"])
        for key, k in [("k", mod["k"])] + [("ks", k) for k in mod["ks"]]:
            if k > train:
                problems.append(f"models.{key} ({k}) exceeds the {train} training subsamples of "
                                f"a cross-validation fold (models.n_subsamples x models x "
                                f"(cv_folds - 1) / cv_folds).")
    return problems
