"""Compare your own sets: the paper's protocols for any number of embedding sets at once.

>>> result = compare({"T=0.5": A, "T=1.0": B, "T=1.5": C})   # reference-free (median t_conv)
>>> result = compare([A, B], reference=R)                     # against a reference
>>> result = compare([A, B, C], t_cut=2.5)                    # a given integration limit
>>> result.table        # one row per set: MagArea, t_conv, every baseline (+ against the reference)
>>> result.mag_diff     # signed MagDiff between every pair of sets
>>> result.functions    # Mag(t) of every set on one grid, linspace(0, t_cut, n_ts) and beyond

**One integration limit for all sets.** MagAreas integrated up to different limits cannot be
compared, so every set is integrated on the same ``[0, t_cut]``:

* ``t_cut`` given: that one (``t_cut_source == "given"``); nothing then depends on the other
  sets, so adding a set changes no other set's numbers;
* with a ``reference``: the reference's convergence scale (the reference-based protocol,
  ``"reference"``);
* otherwise the median of the sets' convergence scales (the reference-free protocol of the
  paper, §3.4, ``"median"``). A set without a convergence scale (a single distinct point, whose
  magnitude is 1 at every scale; a set whose distances are undefined) is left out of the median,
  and :attr:`Comparison.t_cut_rule` says so.

**What is computed.** Per set: the number of points and of distinct points (under the chosen
distance), the convergence scale ``t_conv`` (``Mag(t_conv) = target · n_distinct``), MagArea
``= ∫_0^t_cut Mag(t) dt`` (to ``settings.integration_rtol``, see :func:`mag_area`), and every
reference-free baseline (Vendi Score, AvgSim, GMStds, IsoScore, DCScore; cosine where the measure
is defined so). With a reference, per set also MagDiff against it, precision, recall, density and
coverage (the reference is "real", the set "fake") and MMD² (RBF and linear). Between every pair,
``MagDiff(i, j) = ∫_0^t_cut (Mag_i − Mag_j) dt = MagArea_i − MagArea_j``: antisymmetric, zero on
the diagonal; :meth:`Comparison.mag_diff_matrix` gives its absolute value and the
normalisations of :func:`mag_diff`. A single distinct point has MagArea ``t_cut`` (Mag ≡ 1).

**Nothing aborts the others.** A value that is undefined for one set (IsoScore of constant data,
a cosine measure of a zero vector, PRDC with ``k`` at least the set's size, ...) is NaN in the
table, with its reason in :attr:`Comparison.undefined` and in the row's ``note``. Bad input (no
sets, an empty or non-finite set, sets of different dimensions, unknown options) raises
``ValueError`` naming the set.

All magnitude work goes through one function, :func:`_magnitude_of_sets`: one call of the
reference-free protocol, :func:`diversity_core.magnitude.sets.measure_sets` (convergence scales,
the integration limit, the functions on the grid and the areas of all sets, failures and
warnings per set as data), which runs on the engine's batch path (many small sets solved as
stacks; a set beyond 10,000 points on :func:`~diversity_core.magnitude.magnitude_space`'s
large-n path).

**Scale.** Before anything is computed, :func:`check_memory` (in
:mod:`diversity_core.comparison.memory`, importable from here) compares the memory the sets will
need (:func:`required_memory`: the engine's ``magnitude_memory``, the distance matrices held,
PRDC's and MMD's distances against a reference) with the memory available, and refuses in one
line naming the figure and ``--subsample``. Where a fallback solver answered (a similarity
matrix not numerically positive definite: near-collinear data, the cosine distance at small
scales), :attr:`Comparison.fallbacks` and the set's notes say at which scales and with which
error bound.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .._threads import allowed_threads, single_threaded_if
from .._validation import check_embeddings, named_reason
from ..device import free_memory
from ..magnitude import (
    DIFF_NORMALISATIONS,
    magnitude_plan,
    magnitude_space,
)

# The progress bar and the warnings kept as a set's notes are the protocol's own.
from ..magnitude.sets import (
    GivenTCut,
    MedianTCut,
    ReferenceTCut,
    SetMagnitudes,
    TCutRule,
    grid,
    measure_sets,
    progress_bar,
    record_warnings,
)
from ..magnitude.settings import MagnitudeSettings
from ..measures.distances import METRICS, pairwise_distances

# The measures' names, labels, order and computations come from the one registry.
from ..measures.registry import (
    MEASURES,
    ScaleView,
    get_measure,
    get_measure_names,
    prdc_values,
)
from .memory import check_memory

__all__ = ["Comparison", "compare"]

# Distances, the reference-free baselines and the magnitude of the sets run with single-threaded
# BLAS: many sets are measured one after the other, each on matrices where BLAS threads that
# spin-wait on a busy machine cost up to 100 times the work. On the 2-core machine under a load
# of 3 to 5, the Vendi Score of 300 x 384 points took 1.40 s with two BLAS threads and 0.013 s
# with one (IsoScore 1.4 s / 0.013 s; of 1,000 x 384 points, 2.4 s / 0.036 s), and the magnitude
# of one set of 1,000 x 384 points (convergence scale, MagArea to 1e-8, 43 grid scales) 8 to
# 20 s with two and 0.4 s with one. On an idle machine two threads are at most about 1.3 times
# faster at 1,000 points (diversity_core.magnitude, SINGLE_THREAD_BELOW). Running sets side by
# side is the batched engine's business (the seam below).
def _single_threaded_blas():
    return single_threaded_if(True)


# The shared grid of the magnitude functions runs this far beyond t_cut (a share of t_cut), so
# that a plot shows where the integration stops and how the functions go on.
GRID_BEYOND = 0.5
# Progress bars (stderr, on a terminal) from this many sets on, unless asked for or off.
PROGRESS_MIN_SETS = 5
# A set whose own convergence scale lies more than this factor from t_cut (either way) gets a
# note: its MagArea then measures it where its magnitude is still about 1, or already about its
# number of distinct points, so it says little about that set's diversity.
SCALE_GAP = 100.0


def scale_gap_note(t_conv: float, t_cut: float, rule: str) -> str | None:
    """The note of a set whose convergence scale ``t_conv`` lies more than :data:`SCALE_GAP`
    from ``t_cut`` (chosen by ``rule``); None when it does not, or either is undefined."""
    if not (np.isfinite(t_conv) and t_conv > 0 and t_cut is not None and t_cut > 0):
        return None
    ratio = t_cut / t_conv
    if 1 / SCALE_GAP <= ratio <= SCALE_GAP:
        return None
    return (f"t_cut = {t_cut:.6g} ({rule}) is {ratio:.3g} times this set's own convergence "
            f"scale t_conv = {t_conv:.6g}: its MagArea is measured far from the scales where its "
            "magnitude changes; compare sets of similar scale, or rescale them")


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What :func:`compare` found.

    Attributes
    ----------
    table : DataFrame, one row per set (index: the set's name; the reference last)
        ``role`` ("set" or "reference"), ``n_points``, ``n_distinct``, ``n_features``,
        ``t_conv``, ``magarea`` and the baselines ``vendi``, ``avgsim``, ``gmstds``,
        ``isoscore``, ``dcscore``; with a reference also ``magdiff`` (against it, signed),
        ``precision``, ``recall``, ``density``, ``coverage``, ``mmd_rbf``, ``mmd_linear``
        (NaN in the reference's own row); ``note``: the reasons of the row's undefined values.
        Undefined values are NaN.
    mag_diff : DataFrame (sets × sets, the reference included)
        ``∫_0^t_cut (Mag_row − Mag_column) dt``, signed; NaN where either MagArea is undefined.
    functions : DataFrame (sets × scales)
        ``Mag(t)`` on one grid (the columns): ``linspace(0, t_cut, n_ts)`` (the first ``n_ts``
        columns, the last of them ``t_cut``), continued by the same step up to 1.5 ``t_cut``;
        NaN where undefined.
    t_cut : float or None
        The integration limit of every MagArea and MagDiff (None: none could be chosen).
    t_cut_source : {"given", "reference", "median"}
    t_cut_rule : str
        How ``t_cut`` was chosen, in words, naming any set left out of the median.
    reference : str or None
        The reference's name (a row of ``table``).
    options : dict
        Every option the numbers depend on: distance, k, tau, the magnitude settings.
    undefined : dict
        ``{set: {measure: reason}}`` for every undefined value.
    notes : dict
        ``{set: [message, ...]}``: warnings raised while measuring a set (a magnitude fallback
        solver, IsoScore on fewer points than dimensions, ...), and one line for a set whose
        convergence scale lies more than :data:`SCALE_GAP` times from ``t_cut``.
    warned : dict
        ``{set: {measure: [message, ...]}}``: the same warnings of the baselines, by the measure
        that raised them (data, not text to parse).
    fallbacks : dict
        ``{set: [record, ...]}`` for every set whose magnitude needed a fallback solver (its
        similarity matrix not numerically positive definite at some scales: near-collinear or
        duplicate-heavy data, cosine distance at small t): per solver (``"ldl"``, ``"pinv"``)
        the scale range ``t_min``, ``t_max``, ``count``, the largest ``relative_residual`` and
        ``mag_error_bound`` (on Mag(t)), and ``area_error_bound`` (on MagArea, on top of the
        integration tolerance). Also said in the set's notes.
    """

    table: pd.DataFrame
    mag_diff: pd.DataFrame
    functions: pd.DataFrame
    t_cut: float | None
    t_cut_source: str
    t_cut_rule: str
    reference: str | None
    options: dict
    undefined: dict
    notes: dict
    fallbacks: dict = dataclasses.field(default_factory=dict)
    warned: dict = dataclasses.field(default_factory=dict)

    @property
    def sets(self) -> list[str]:
        """The names of the compared sets (the reference left out)."""
        return [name for name, role in self.table["role"].items() if role == "set"]

    @property
    def ts(self) -> np.ndarray:
        """The scales of :attr:`functions` (the shared grid)."""
        return self.functions.columns.to_numpy(dtype=np.float64)

    def mag_diff_matrix(self, normalise: str | None = None, *,
                        absolute: bool = False) -> pd.DataFrame:
        """MagDiff between every pair, under one of :func:`mag_diff`'s conventions.

        ``normalise``: None (``∫ (Mag_row − Mag_col) dt``), ``"t_cut"`` (divided by ``t_cut``:
        the mean difference in effective points) or ``"reference_area"`` (divided by the
        column's MagArea: a relative change, the column being the pair's reference; not
        antisymmetric). ``absolute``: its absolute value."""
        if normalise not in DIFF_NORMALISATIONS:
            raise ValueError(f"normalise must be one of {DIFF_NORMALISATIONS}; got "
                             f"{normalise!r}.")
        M = self.mag_diff.copy()
        if normalise == "t_cut" and self.t_cut is not None:
            M /= self.t_cut
        elif normalise == "reference_area":
            M = M.div(self.table["magarea"].to_numpy(), axis=1)
        return M.abs() if absolute else M

    def to_dict(self) -> dict:
        """Everything as plain JSON values (NaN as None, with the reasons under ``undefined``)."""
        names = list(self.table.index)
        rows = {}
        for name, row in self.table.iterrows():
            rows[name] = {k: _plain(v) for k, v in row.items() if k != "note"}
        diffs = {"names": names, "rows_minus_columns": True}
        for normalise in DIFF_NORMALISATIONS:
            key = normalise or "signed"
            diffs[key] = _plain_matrix(self.mag_diff_matrix(normalise))
        diffs["absolute"] = _plain_matrix(self.mag_diff_matrix(absolute=True))
        return {
            "t_cut": self.t_cut, "t_cut_source": self.t_cut_source, "t_cut_rule": self.t_cut_rule,
            "reference": self.reference, "options": self.options, "sets": rows,
            "mag_diff": diffs,
            "functions": {"ts": self.ts.tolist(),
                          "values": {name: [_plain(v) for v in self.functions.loc[name]]
                                     for name in names}},
            "undefined": {k: v for k, v in self.undefined.items() if v},
            "notes": {k: v for k, v in self.notes.items() if v},
            "fallbacks": self.fallbacks,
        }

    def plot(self, path, *, normalise: str | None = None, title: str | None = None):
        """Draw the magnitude functions on the shared scale (t_cut marked) and the MagDiff
        heat map into ``path`` (.png or .pdf), in the project's figure style; see
        :func:`diversity_core.comparison.report.plot_comparison`."""
        from .report import plot_comparison

        return plot_comparison(self, path, normalise=normalise, title=title)


def _plain(value):
    if value is pd.NA:
        return None
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _plain_matrix(M: pd.DataFrame) -> list[list]:
    return [[_plain(v) for v in row] for row in M.to_numpy()]



# --------------------------------------------------------------------------------------------
# The magnitude of many sets: one call of the protocol (diversity_core.magnitude.sets)
# --------------------------------------------------------------------------------------------


def _magnitude_of_sets(distance_matrices: Sequence, choose_t_cut: TCutRule, *,
                       settings: MagnitudeSettings, functions: bool = True,
                       progress: bool | None = False) -> SetMagnitudes:
    """Convergence scales, the integration limit, the magnitude functions on one grid and the
    MagAreas of many sets: the one place where :func:`compare` evaluates magnitude.

    Parameters
    ----------
    distance_matrices : sequence of (n_i, n_i) arrays, prepared spaces (a
        :class:`~diversity_core.magnitude.LargeMagnitudeSpace` from
        :func:`~diversity_core.magnitude.magnitude_space`'s large-n path), or None for a set
        without distances
    choose_t_cut : the rule that chooses the integration limit from the convergence scales
        (:class:`~diversity_core.magnitude.sets.TCutRule`)
    settings : convergence target and tolerance, integration rule and tolerance, ``n_ts``
    functions : whether the functions on the grid are computed too

    One call of :func:`~diversity_core.magnitude.sets.measure_sets` (the protocol: the
    engine's batch path, failures and warnings per set as data), with the functions on
    ``linspace(0, t_cut, n_ts)`` continued by ``GRID_BEYOND``, BLAS single-threaded (see
    ``_single_threaded_blas``).
    """
    with _single_threaded_blas():
        return measure_sets(distance_matrices, choose_t_cut, **settings.as_dict(),
                            functions=functions, grid_beyond=GRID_BEYOND, progress=progress)


def _grid(t_cut: float, n_ts: int) -> np.ndarray:
    """The grid of :attr:`Comparison.functions`: ``linspace(0, t_cut, n_ts)`` continued by the
    same step up to ``(1 + GRID_BEYOND) t_cut``."""
    return grid(t_cut, n_ts, GRID_BEYOND)


def fallback_note(record: dict) -> str:
    solver = {"ldl": "a symmetric-indefinite LDLᵀ solve",
              "pinv": "a pseudo-inverse"}.get(record["solver"], record["solver"])
    count = record["count"]
    return (f"magnitude fell back to {solver} at {count} scale{'s' if count != 1 else ''} "
            f"t in [{record['t_min']:.4g}, {record['t_max']:.4g}] (similarity matrix not "
            f"numerically positive definite): |ΔMag(t)| ≤ {record['mag_error_bound']:.2g}, "
            f"|ΔMagArea| ≤ {record['area_error_bound']:.2g} on top of the integration "
            "tolerance")


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------


def _device_paths(names, arrays, metric: str, device) -> dict[str, str]:
    """On a torch device, the sets prepared there from their points, each ``"dense"`` or
    ``"large"`` (:func:`~diversity_core.magnitude.device_path`): those beyond the batch's
    sizes (10,000 points) and those the device does not hold dense. The device holds them
    together (the largest decided first, each against what the others leave); the others go
    through the batch, which checks its own memory. Refused in one line
    (:class:`~diversity_core.MemoryNeedError`) before anything is computed."""
    free = free_memory(device)
    left, chosen = free, {}
    for name, X in sorted(zip(names, arrays, strict=True), key=lambda item: -item[1].shape[0]):
        plan = magnitude_plan(*X.shape, metric=metric, device=device)
        where = plan.device_path(memory_limit=None if left == free else left)
        if where is not None:
            chosen[name] = where
            left -= plan.device_bytes(where)
    return chosen


def compare(sets, reference=None, t_cut: float | None = None, *, names=None,
            reference_name: str = "reference", metric: str = "cosine", k: int = 5,
            tau: float = 1.0, settings: MagnitudeSettings | None = None,
            progress: bool | None = None, memory_limit: int | None = None,
            measures=None, functions: bool = True) -> Comparison:
    """Compare embedding sets on one integration limit: MagArea, MagDiff between every pair,
    every baseline, and with a reference the reference-based measures.

    Parameters
    ----------
    sets : mapping name -> array (n_i, d), or sequence of arrays (n_i, d)
        The sets; sizes may differ, the dimension ``d`` may not.
    reference : array (n_ref, d), optional
        Reference set: then ``t_cut`` is its convergence scale (unless given), and each set is
        also measured against it.
    t_cut : float > 0, optional
        Integration limit of every MagArea and MagDiff (units: 1 / distance).
    names : sequence of str, optional
        Names of the sets (default: the mapping's keys, or "set 1", "set 2", ...).
    reference_name : str
        Name of the reference's row.
    metric : {"cosine", "euclidean", "cityblock"}
        Distance of magnitude. Vendi, AvgSim and DCScore are cosine by definition; PRDC and
        MMD Euclidean.
    k : int
        Neighbours of PRDC.
    tau : float
        DCScore's temperature.
    settings : MagnitudeSettings, optional
        Convergence target (0.95), tolerances, the integration rule of MagArea, and ``n_ts``:
        the scales on ``[0, t_cut]`` of the grid of :attr:`Comparison.functions` (30).
    progress : bool, optional
        Progress bars on stderr; default: from ``PROGRESS_MIN_SETS`` sets on, on a terminal.
    memory_limit : int, optional
        Bytes the comparison may use (default: the memory available now). Before anything is
        computed, :func:`required_memory` is checked against it; beyond it, ``MemoryError``
        with one line saying how much is needed.
    measures : sequence of str, optional
        Only these measures (names of :mod:`diversity_core.measures`) are computed and shown
        (default: all that apply). Without ``magarea`` and ``magdiff`` no magnitude is
        computed (``t_conv`` and ``t_cut`` are then NaN and None).
    functions : bool
        Evaluate every set's magnitude function on the shared grid (:attr:`Comparison.functions`,
        what :meth:`Comparison.plot` draws; default True). Off, ``functions`` has no columns and
        nothing else changes: on a large set the grid is most of the work (30,000 points on the
        large-n path: 43 more solves beside the 28 of t_conv and MagArea; ``score``, which
        returns no function, took 879 s on 2 cores with them and 388 s without).

    Returns
    -------
    Comparison
    """
    settings = settings or MagnitudeSettings()
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}.")
    if not (isinstance(k, (int, np.integer)) and k >= 1):
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be a finite number > 0; got {tau!r}.")
    if t_cut is not None and not (math.isfinite(t_cut) and t_cut > 0):
        raise ValueError(f"t_cut must be a finite number > 0; got {t_cut!r}.")
    wanted = _wanted_measures(measures, reference is not None)
    magnitude = any(MEASURES[name].multi_scale for name in wanted)
    set_names, arrays = _named_sets(sets, names)
    all_names = list(set_names)
    if reference is not None:
        if str(reference_name) in set_names:
            raise ValueError(f"the reference's name {reference_name!r} is also a set's name.")
        all_names.append(str(reference_name))
        arrays.append(reference)
    arrays = [check_embeddings(X, name=name) for name, X in zip(all_names, arrays, strict=True)]
    dims = {name: X.shape[1] for name, X in zip(all_names, arrays, strict=True)}
    if len(set(dims.values())) > 1:
        first = all_names[0]
        other = next(n for n in all_names if dims[n] != dims[first])
        raise ValueError(f"mismatched dimensions: {first} has {dims[first]} features, {other} "
                         f"has {dims[other]}; every set and the reference must live in one "
                         "embedding space.")
    m = len(all_names)
    ref_index = m - 1 if reference is not None else None
    if progress is None:
        progress = None if m >= PROGRESS_MIN_SETS else False  # None: tqdm shows it on a tty

    undefined: dict[str, dict[str, str]] = {name: {} for name in all_names}
    notes: dict[str, list[str]] = {name: [] for name in all_names}
    warned: dict[str, dict[str, list[str]]] = {name: {} for name in all_names}

    # Before anything is computed: does it fit in memory (the host's; on a torch device also
    # the device's, which decides where each set goes: device_path)?
    device = settings.device
    check_memory({name: X.shape[0] for name, X in zip(all_names, arrays, strict=True)},
                 arrays[0].shape[1], metric=metric,
                 reference=all_names[ref_index] if reference is not None else None,
                 memory_limit=memory_limit, magnitude=magnitude, device=device)
    on_device = _device_paths(all_names, arrays, metric, device) \
        if magnitude and device.engine == "torch" else {}
    # Magnitude: distances (or, for a large set, the engine's large-n path), then every set on
    # one integration limit. The large-n path threads its own products (each thread's BLAS on
    # one thread): it is given the threads BLAS may use here, counted before BLAS is limited to
    # one thread for the dense sets' batch (inside that limit it would count one).
    large_threads = allowed_threads()
    distances = []
    with _single_threaded_blas():
        for name, X in zip(all_names, arrays, strict=True):
            if not magnitude:
                distances.append(None)
                continue
            try:
                if name in on_device:  # beyond the batch's sizes, or beyond the device's
                    # dense memory: the set is prepared on the device from its points
                    distances.append(magnitude_space(X, metric, path=on_device[name],
                                                     device=device))
                elif magnitude_plan(*X.shape, metric=metric).path == "large":
                    distances.append(magnitude_space(X, metric, path="large",
                                                     threads=large_threads))
                else:
                    distances.append(pairwise_distances(X, metric))
            except ValueError as err:  # a zero vector under the cosine distance, say
                distances.append(None)
                undefined[name]["magarea"] = named_reason(err, {"X": name})
    source = "given" if t_cut is not None else "reference" if reference is not None else "median"
    rule = (GivenTCut(t_cut) if source == "given"
            else ReferenceTCut(ref_index, tuple(all_names)) if source == "reference"
            else MedianTCut(among=tuple(range(len(set_names))), names=tuple(all_names)))
    mag = (_magnitude_of_sets(distances, rule, settings=settings, functions=functions,
                              progress=progress)
           if magnitude else _no_magnitude(m))

    rows = {name: {"role": "reference" if i == ref_index else "set",
                   "n_points": arrays[i].shape[0], "n_distinct": int(mag.n_distinct[i]) or None,
                   "n_features": arrays[i].shape[1], "t_conv": mag.t_conv[i],
                   "magarea": mag.areas[i]}
            for i, name in enumerate(all_names)}
    fallbacks = {name: mag.fallbacks[i] for i, name in enumerate(all_names) if mag.fallbacks[i]}
    for i, name in enumerate(all_names):
        notes[name].extend(mag.warnings[i])
        notes[name].extend(fallback_note(record) for record in mag.fallbacks[i])
        gap = scale_gap_note(mag.t_conv[i], mag.t_cut, source)
        if gap:
            notes[name].append(gap)
        if mag.n_distinct[i]:  # warned by a batch of several sets, which named none of them
            notes[name].extend(f"a batch of sets warned, naming none: {text}"
                               for text in mag.unattributed_warnings)
        no_distances = undefined[name].get("magarea")
        if no_distances:
            undefined[name]["t_conv"] = no_distances
        elif mag.t_conv_failures[i]:
            undefined[name]["t_conv"] = named_reason(ValueError(mag.t_conv_failures[i]),
                                                     {"X": name})
        if not no_distances and mag.t_cut is None and magnitude:
            undefined[name]["magarea"] = mag.t_cut_rule
        elif mag.area_failures[i]:
            undefined[name]["magarea"] = named_reason(ValueError(mag.area_failures[i]),
                                                      {"X": name})

    # Reference-free baselines, each on its own: one undefined value stops nothing.
    # (MagArea and MagDiff are the protocol's own columns, with their reasons, below; any other
    # measure that needs a scale reads the set's ScaleView.)
    own = {"magarea", "magdiff"}
    free_names = get_measure_names(needs_reference=False, defaults=False)
    reference_names = get_measure_names(needs_reference=True, defaults=False)
    free = [MEASURES[m_] for m_ in free_names if m_ in wanted and m_ not in own]
    prdc_wanted = [m_ for m_ in reference_names if m_ in wanted and MEASURES[m_].group == "prdc"]
    against = [MEASURES[m_] for m_ in reference_names
               if m_ in wanted and m_ not in own and MEASURES[m_].group is None]

    def view(i: int) -> ScaleView | None:
        """The ScaleView of set ``i`` for the other measures that need a scale."""
        if not magnitude or mag.t_cut is None or distances[i] is None:
            return None
        ref = ref_index if ref_index is not None else i
        return ScaleView(mag.t_cut, area=mag.areas[i], diff=mag.areas[i] - mag.areas[ref],
                         magnitude=settings.space(distances[i]).magnitude,
                         reference_magnitude=settings.space(distances[ref]).magnitude)
    for i, name in progress_bar(list(enumerate(all_names)), "baselines", progress):
        X = arrays[i]
        with _single_threaded_blas():
            for measure in free:
                rows[name][measure.name] = _attempt(lambda f=measure, X=X, i=i: f(
                    X, tau=tau, engine=view(i) if f.multi_scale else None),
                                                    undefined[name], measure.name, {"X": name},
                                                    notes[name], warned[name])
        if reference is None or i == ref_index:
            continue
        # Against the reference (n x m products, blockwise): BLAS keeps its threads.
        R, ref = arrays[ref_index], all_names[ref_index]
        both = {"real": ref, "fake": name, "X": name, "Y": ref}
        if prdc_wanted:
            try:
                small = [f"{n} has {len(A)} point{'s' if len(A) != 1 else ''}"
                         for n, A in ((ref, R), (name, X)) if k >= len(A)]
                if small:
                    raise ValueError(f"k = {k} needs more than k points: {', '.join(small)}")
                with record_warnings(notes[name]):
                    values = prdc_values(X, R, k=k)
            except ValueError as err:
                for measure in prdc_wanted:
                    undefined[name][measure] = named_reason(err, both)
                    rows[name][measure] = np.nan
            else:
                rows[name].update({m_: values[m_] for m_ in prdc_wanted})
        for measure in against:
            rows[name][measure.name] = _attempt(lambda f=measure, X=X, R=R, i=i: f(
                X, R, engine=view(i) if f.multi_scale else None),
                                                undefined[name], measure.name, both,
                                                notes[name], warned[name])

    areas = mag.areas
    # The sets' names as plain Python strings (object dtype): a file name that is not UTF-8
    # (a surrogate escape, os.fsdecode's) is a valid name, which pandas' Arrow strings refuse.
    labels = pd.Index(all_names, dtype=object)
    diff = pd.DataFrame(areas[:, None] - areas[None, :], index=labels, columns=labels)
    if reference is not None and "magdiff" in wanted:
        for i, name in enumerate(all_names[:-1]):
            rows[name]["magdiff"] = diff.iloc[i, ref_index]
            why = undefined[name].get("magarea") or undefined[all_names[ref_index]].get("magarea")
            if why:
                undefined[name]["magdiff"] = why
    columns = ["role", "n_points", "n_distinct", "n_features", "t_conv",
               *(m_ for m_ in free_names if m_ in wanted)]
    if reference is not None:
        columns += [m_ for m_ in reference_names if m_ in wanted]
    table = pd.DataFrame([rows[name] for name in all_names], index=labels).reindex(
        columns=columns)
    table.index.name = "set"
    for column in columns[4:]:
        table[column] = table[column].astype(np.float64)
    table["n_distinct"] = table["n_distinct"].astype("Int64")
    table["note"] = pd.Series([_note(undefined[name]) for name in all_names], index=labels,
                              dtype=object)  # reasons name the files: plain strings, as above
    functions = pd.DataFrame(mag.functions, index=labels, columns=pd.Index(mag.ts, name="t"))
    functions.index.name = "set"
    options = {"metric": metric, "k": int(k), "tau": float(tau), **settings.as_dict()}
    options["device"] = settings.device.name  # a record: the name asked for
    return Comparison(table=table, mag_diff=diff, functions=functions, t_cut=mag.t_cut,
                      t_cut_source=source, t_cut_rule=mag.t_cut_rule,
                      reference=all_names[ref_index] if reference is not None else None,
                      options=options, undefined=undefined,
                      notes={k_: list(dict.fromkeys(v)) for k_, v in notes.items()},
                      fallbacks=fallbacks, warned=warned)


def _wanted_measures(measures, with_reference: bool) -> set[str]:
    """The names of ``measures`` (None: every measure), each checked against the registry; a
    reference-based one without a reference is refused."""
    if measures is None:
        return set(get_measure_names())
    if isinstance(measures, str):
        raise ValueError("measures is a sequence of names; got one string.")
    wanted = {get_measure(name).name for name in measures}
    if not wanted:
        raise ValueError("measures is empty.")
    needing = sorted(n for n in wanted if MEASURES[n].needs_reference)
    if needing and not with_reference:
        raise ValueError(f"{', '.join(needing)} compare{'s' if len(needing) == 1 else ''} with a "
                         "reference: give one.")
    return wanted


def _no_magnitude(m: int) -> SetMagnitudes:
    """What :func:`compare` holds of magnitude when no magnitude measure is asked for."""
    return SetMagnitudes(
        t_conv=np.full(m, np.nan), t_cut=None, t_cut_rule="no magnitude measure asked for",
        areas=np.full(m, np.nan), ts=np.zeros(0), functions=np.zeros((m, 0)),
        n_distinct=np.zeros(m, dtype=np.int64), t_conv_failures=[None] * m,
        area_failures=[None] * m, warnings=[[] for _ in range(m)],
        fallbacks=[[] for _ in range(m)])


def _note(undefined: dict) -> str:
    """The reasons of a row's undefined values, each once: ``MagArea, t_conv: why; ...``."""
    by_reason: dict[str, list[str]] = {}
    for measure, why in undefined.items():
        by_reason.setdefault(why, []).append(
                MEASURES[measure].label if measure in MEASURES else measure)
    return "; ".join(f"{', '.join(measures)}: {why}" for why, measures in by_reason.items())


def _named_sets(sets, names) -> tuple[list[str], list]:
    if isinstance(sets, np.ndarray) and sets.ndim == 2:
        raise ValueError("sets is one 2-D array; pass a list (or a dict) of arrays, one per set.")
    if isinstance(sets, Mapping):
        keys, arrays = [str(key) for key in sets], list(sets.values())
    else:
        arrays = list(sets)
        keys = [f"set {i + 1}" for i in range(len(arrays))]
    if names is not None:
        keys = [str(name) for name in names]
        if len(keys) != len(arrays):
            raise ValueError(f"{len(keys)} names for {len(arrays)} sets.")
    if not arrays:
        raise ValueError("no sets to compare.")
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"set names must be unique; repeated: {', '.join(repeated)}.")
    return keys, arrays


def _attempt(compute, undefined: dict, measure: str, names: dict, notes: list,
             warned: dict) -> float:
    """``compute()``, or NaN with the reason in ``undefined[measure]`` (a ValueError: the
    measure is undefined for this input, or its value leaves the float64 range); the messages
    of its warnings go to ``notes`` and to ``warned[measure]``."""
    messages: list[str] = []
    try:
        with record_warnings(messages):
            value = float(compute())
    except ValueError as err:
        undefined[measure] = named_reason(err, names)
        return np.nan
    finally:
        notes.extend(messages)
        if messages:
            warned.setdefault(measure, []).extend(messages)
    if not math.isfinite(value):
        undefined[measure] = f"the value is {value} (outside the float64 range)"
        return np.nan
    return value
