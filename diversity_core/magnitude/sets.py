"""Many sets on one integration limit: the reference-free protocol, written once.

>>> result = measure_sets([D_1, D_2, D_3])                    # t_cut: the median t_conv
>>> result.t_conv, result.t_cut, result.t_cut_rule, result.areas
>>> result = measure_sets(lazy_distances, chunk_size=64, functions=True,
...                       area_rule="grid_trapezoid")          # the model experiment's protocol

The protocol (paper §3.4): every set's convergence scale ``t_conv`` (``Mag(t_conv) = target ·
n_distinct``); one integration limit ``t_cut`` chosen from them by a rule (by default their
median, :class:`MedianTCut`; a given number, :class:`GivenTCut`; one set's own,
:class:`ReferenceTCut`, ``compare``'s reference rule; all of them :class:`TCutRule`); every
MagArea on ``[0, t_cut]``; optionally every magnitude function on one evenly spaced grid,
``linspace(0, t_cut, n_ts)`` (continued beyond ``t_cut`` by ``grid_beyond``). What goes
wrong for one set stays with that set, as data: its failure reasons (no convergence scale, no
area) and the warnings raised while it was measured, per member, never by parsing text (the
engine's batch re-raises each member's warnings as a ``MemberWarning`` naming it).

Callers: :func:`diversity_core.compare` (its ``_magnitude_of_sets``), the text experiment's
:func:`~diversity_core.experiments.text_temperature.score_sets` and the model experiment's
:func:`~diversity_core.experiments.model_distinguishing.summarise_sets`.

It is the engine's own protocol: it reads the engine's private modules (the batch, the spaces,
the quadrature's checks, the torch path) as the engine's other modules do, and never
:mod:`.settings` (which imports it): the conventions come as plain arguments, named as the
fields of ``MagnitudeSettings``, so ``measure_sets(D, **settings.as_dict())`` passes them all.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..device import Device, parse_device
from ._batch import MagnitudeBatchError
from ._common import MemberWarning, summarise_fallbacks
from ._large import LargeMagnitudeSpace
from ._quadrature import check_integration
from ._space import MagnitudeSpace
from ._torch import TorchMagnitudeSpace
from ._torch_batch import batch_on_device
from .api import (
    DEFAULT_INTEGRATION,
    DEFAULT_INTEGRATION_RTOL,
    DEFAULT_N_TS,
    DEFAULT_T_CONV_RTOL,
    DEFAULT_TARGET,
    convergence_scales,
    mag_areas,
    magnitude_functions,
    reference_free_t_cut,
)

__all__ = ["AREA_RULES", "GivenTCut", "MedianTCut", "ReferenceTCut", "SetMagnitudes", "TCutRule",
           "measure_sets", "progress_bar", "record_warnings", "trapezoid_weights"]

# How MagArea is taken: "integral" integrates each set's magnitude function to the settings'
# tolerance (``integration``, ``integration_rtol``); "grid_trapezoid" is the trapezoid rule on
# the stored grid linspace(0, t_cut, n_ts) (the model experiment: MagArea and MagDiff from one
# shared stored grid, as in the paper; ``integration`` is then not used).
AREA_RULES = ("integral", "grid_trapezoid")


@dataclasses.dataclass(frozen=True)
class SetMagnitudes:
    """What :func:`measure_sets` found for m sets (arrays and lists in the sets' order).

    Attributes
    ----------
    t_conv : array of shape (m,)
        Convergence scales (units: 1 / distance); NaN where a set has none.
    t_cut : float or None
        The one integration limit (None: the rule could choose none).
    t_cut_rule : str
        How ``t_cut`` was chosen, in words (or why there is none).
    areas : array of shape (m,)
        MagArea ``∫_0^t_cut Mag(t) dt`` (effective points × scale); NaN where undefined or
        not asked for.
    ts : array of shape (n_grid,)
        The scales of ``functions``: ``linspace(0, t_cut, n_ts)``, continued by the same step
        up to ``(1 + grid_beyond) t_cut``; empty without functions or without ``t_cut``.
    functions : array of shape (m, n_grid)
        ``Mag(t)`` of every set on ``ts``; NaN where undefined.
    n_distinct : array of shape (m,), int
        Distinct points of each set (twin property); 0 where it has no distances.
    t_conv_failures : list of m (str or None)
        Why a set has no convergence scale (a single distinct point, invalid distances, a
        search that did not converge); None where it has one or was not given distances.
    area_failures : list of m (str or None)
        Why a set has no MagArea or function (its distances are invalid); None otherwise.
    warnings : list of m lists of str
        The messages of the warnings raised while each set was measured, each once.
    fallbacks : list of m lists of dict
        Per set, the fallback solves by solver (``MagnitudeSpace.fallback_summary``: ``solver``,
        ``t_min``, ``t_max``, ``count``, ``relative_residual``, ``mag_error_bound``) with
        ``area_error_bound``: ``t_cut`` times the largest ``mag_error_bound`` of its scales in
        ``[0, t_cut]`` (on top of the integration tolerance); empty where none was needed. With
        ``chunk_size`` the two passes prepare each set afresh: the convergence pass's records
        (``area_error_bound`` 0) come first, then those of the areas and functions.
    unattributed_warnings : list of str
        Warnings of a batch of several sets that the engine raised without naming the set (a
        MagArea integral that kept its error after every bisection, say).
    """

    t_conv: np.ndarray
    t_cut: float | None
    t_cut_rule: str
    areas: np.ndarray
    ts: np.ndarray
    functions: np.ndarray
    n_distinct: np.ndarray
    t_conv_failures: list
    area_failures: list
    warnings: list
    fallbacks: list
    unattributed_warnings: list = dataclasses.field(default_factory=list)

    def warning_lines(self) -> list[str]:
        """Every warning once, for a log: ``set {i}: {message}`` per set (0-based), then those
        that name no set."""
        return [f"set {i}: {message}" for i, messages in enumerate(self.warnings)
                for message in messages] + list(self.unattributed_warnings)

    def failure(self, i: int) -> str | None:
        """Why set ``i`` has no convergence scale or no area (the first that applies), or
        None."""
        return self.t_conv_failures[i] or self.area_failures[i]


class TCutRule(abc.ABC):
    """How the integration limit ``t_cut`` is chosen from the sets' convergence scales: the one
    type of rule :func:`measure_sets` (and so :func:`diversity_core.compare`) takes.

    A rule says which sets' convergence scales it reads (:meth:`needs`, computed first, before
    any area) and, given every set's ``t_conv`` (NaN where a set has none) and the reasons of
    those without one, returns ``(t_cut or None, the rule in words)``; None with words that say
    why when it cannot choose. The rules here: :class:`MedianTCut` (the paper's, the default),
    :class:`GivenTCut` (a number) and :class:`ReferenceTCut` (one set's own scale); a rule of
    one's own subclasses this class.
    """

    @abc.abstractmethod
    def needs(self, m: int) -> tuple[int, ...]:
        """The indices, among ``m`` sets, of the sets whose convergence scale the rule reads."""

    @abc.abstractmethod
    def __call__(self, t_conv: np.ndarray, reasons: Sequence) -> tuple[float | None, str]:
        """``(t_cut or None, words)`` from every set's ``t_conv`` and failure reason."""


@dataclasses.dataclass(frozen=True)
class MedianTCut(TCutRule):
    """``t_cut`` = the median of the sets' convergence scales (paper §3.4).

    Parameters
    ----------
    among : sequence of int, optional
        The sets that enter the median (default: all); a set without a convergence scale is
        left out and named in the rule.
    names : sequence of str, optional
        The sets' names, for the rule in words (default: ``set 1``, ``set 2``, ...).
    """

    among: tuple[int, ...] | None = None
    names: tuple[str, ...] | None = None

    def needs(self, m: int) -> tuple[int, ...]:
        return tuple(range(m)) if self.among is None else tuple(self.among)

    def __call__(self, t_conv: np.ndarray, reasons: Sequence) -> tuple[float | None, str]:
        among = self.needs(len(t_conv))

        def name(i):
            return self.names[i] if self.names is not None else f"set {i + 1}"

        have = [i for i in among if not math.isnan(t_conv[i])]
        left_out = [name(i) for i in among if math.isnan(t_conv[i])]
        if not have:
            why = "; ".join(f"{name(i)}: {reasons[i]}" for i in among if reasons[i])
            return None, ("no t_cut: no set has a convergence scale"
                          + (f" ({why})" if why else "") + "; give t_cut")
        rule = (f"the median convergence scale of {len(have)} set{'s' if len(have) > 1 else ''}"
                + (f"; left out, without one: {', '.join(left_out)}" if left_out else ""))
        # The engine's own rule (the text experiment's arithmetic): np.median of the scales.
        return reference_free_t_cut(convergence_scales=t_conv[have]), rule


@dataclasses.dataclass(frozen=True)
class GivenTCut(TCutRule):
    """``t_cut`` given as a number: no convergence scale is read for it."""

    value: float

    def __post_init__(self):
        if not (isinstance(self.value, (int, float)) and math.isfinite(self.value)
                and self.value > 0):
            raise ValueError(f"t_cut must be a finite number > 0; got {self.value!r}.")

    def needs(self, m: int) -> tuple[int, ...]:
        return ()

    def __call__(self, t_conv: np.ndarray, reasons: Sequence) -> tuple[float | None, str]:
        return float(self.value), "given"


@dataclasses.dataclass(frozen=True)
class ReferenceTCut(TCutRule):
    """``t_cut`` = the convergence scale of one set, the reference (MagDiff against it)."""

    index: int
    names: tuple[str, ...]

    def needs(self, m: int) -> tuple[int, ...]:
        return (self.index,)

    def __call__(self, t_conv: np.ndarray, reasons: Sequence) -> tuple[float | None, str]:
        i = self.index
        if math.isnan(t_conv[i]):
            return None, (f"no t_cut: the reference {self.names[i]} has no convergence "
                          f"scale ({reasons[i]}); give t_cut")
        return float(t_conv[i]), f"the convergence scale of the reference, {self.names[i]}"


def trapezoid_weights(ts) -> np.ndarray:
    """Weights ``w`` with ``Σ w_k f(t_k) = trapezoid(f, ts)`` for increasing scales ``ts``.

    Parameters
    ----------
    ts : array of shape (n_ts,), increasing, n_ts >= 2

    Returns
    -------
    w : array of shape (n_ts,), non-negative, summing to ``ts[-1] - ts[0]``
    """
    ts = np.asarray(ts, dtype=np.float64)
    if ts.ndim != 1 or len(ts) < 2 or np.any(np.diff(ts) <= 0):
        raise ValueError("ts must be at least two increasing scales.")
    w = np.zeros_like(ts)
    steps = np.diff(ts)
    w[:-1] += steps / 2
    w[1:] += steps / 2
    return w


def grid(t_cut: float, n_ts: int, beyond: float = 0.0) -> np.ndarray:
    """``linspace(0, t_cut, n_ts)`` continued by the same step up to ``(1 + beyond) t_cut``
    (``beyond = 0``: exactly the linspace)."""
    inside = np.linspace(0.0, t_cut, n_ts)
    step = t_cut / (n_ts - 1)
    extra = t_cut + step * np.arange(1, int(math.ceil(beyond * (n_ts - 1))) + 1)
    return np.concatenate([inside, extra])


def measure_sets(spaces: Sequence, t_cut=None, *, target: float = DEFAULT_TARGET,
                 t_conv_rtol: float = DEFAULT_T_CONV_RTOL,
                 integration: str = DEFAULT_INTEGRATION,
                 integration_rtol: float = DEFAULT_INTEGRATION_RTOL, n_ts: int = DEFAULT_N_TS,
                 areas: bool = True, functions: bool = False, area_rule: str = "integral",
                 grid_beyond: float = 0.0, chunk_size: int | None = None,
                 device: Device | str = "cpu", progress: bool | None = False) -> SetMagnitudes:
    """Convergence scales, one integration limit, MagAreas (and the functions on one grid) of
    many sets: the reference-free protocol.

    Parameters
    ----------
    spaces : sequence of m members: arrays of shape (n_i, n_i) (distance matrices), prepared
        spaces (:class:`MagnitudeSpace`, :class:`LargeMagnitudeSpace`), or None (a set without
        distances: NaN everywhere, no failure). A lazy sequence is read member by member
        (``spaces[i]``), so with ``chunk_size`` its matrices may be formed on access.
    t_cut : None, float > 0 or TCutRule
        None: the median of the sets' convergence scales (:class:`MedianTCut`); a number: that
        limit (:class:`GivenTCut`, ``"given"``); any :class:`TCutRule` (its ``needs`` are
        computed first).
    target, t_conv_rtol, integration, integration_rtol, n_ts
        The conventions (``MagnitudeSettings``' fields: ``**settings.as_dict()``):
        ``Mag(t_conv) = target · n_distinct`` to ``t_conv_rtol``; MagArea by ``integration``
        to ``integration_rtol``; ``n_ts`` evenly spaced scales on ``[0, t_cut]``.
    areas : bool
        Compute MagArea (default True).
    functions : bool
        Compute every set's magnitude function on the grid (default False).
    area_rule : {"integral", "grid_trapezoid"}
        ``integral`` (default): each MagArea integrated by ``integration`` to
        ``integration_rtol``. ``grid_trapezoid``: ``functions[:, :n_ts] @ trapezoid_weights``
        on the stored grid (needs ``functions``; the model experiment's protocol, where MagArea
        and MagDiff come from one stored grid, as in the paper).
    grid_beyond : float >= 0
        The grid continues beyond ``t_cut`` by this share of ``t_cut`` (compare's plots: 0.5).
    device : Device or str
        Where the engine runs (a :class:`~diversity_core.device.Device`, as
        ``MagnitudeSettings.device`` carries it, or a name, parsed here): ``cpu`` (default) or
        ``auto``, the NumPy engine; ``cuda``/``cuda:N``, the sets' batches on the torch path
        (:class:`TorchMagnitudeBatch`; the same functions, agreeing to 1e-10 or better) — large
        prepared spaces stay on the CPU; ``torch:cpu``, the torch path on the CPU (to check it
        where there is no GPU).
    chunk_size : int, optional
        Measure the sets in chunks of this many, in two passes (convergence scales, then areas
        and functions), holding at most one chunk's members at once: each member is read twice
        and prepared afresh in each pass. Default: all at once (each member read once and
        prepared once, so its search, area and function share every evaluated scale).
    progress : bool or None
        Progress bars on stderr: always (True), on a terminal (None) or never (False).

    Returns
    -------
    SetMagnitudes

    Notes
    -----
    Members go through the engine's batch functions (:func:`convergence_scales`,
    :func:`mag_areas`, :func:`magnitude_functions`), which solve many small sets as stacks;
    each array is first made a :class:`MagnitudeSpace` (its failure and warnings caught on
    their own), so that its fallback records are its own. Prepared large spaces are measured
    one by one. Nothing here limits BLAS threads: the caller does (compare runs it on one).
    """
    rule = _rule(t_cut)
    _check_options(area_rule, n_ts, grid_beyond, chunk_size)
    if areas and area_rule == "integral":
        _check_integration(integration, integration_rtol, n_ts)
    m = len(spaces)
    if m == 0:
        raise ValueError("no sets to measure.")
    functions = functions or (areas and area_rule == "grid_trapezoid")
    state = _State(m, progress, parse_device(device))
    conventions = dict(target=target, t_conv_rtol=t_conv_rtol, integration=integration,
                       integration_rtol=integration_rtol, n_ts=n_ts)
    if chunk_size is None:
        chunks = [list(range(m))]
    else:
        chunks = [list(range(start, min(start + chunk_size, m)))
                  for start in range(0, m, chunk_size)]

    # Pass 1: convergence scales (all at once: the rule's sets first, then the rest).
    needs = [int(i) for i in rule.needs(m)]
    held: dict[int, object] = {}
    with state.stage("convergence scales", m) as bar:
        for chunk in chunks:
            members = state.prepare(spaces, chunk)
            if chunk_size is None:
                state.convergence([i for i in needs if i in members], members, conventions)
                first_t_cut, first_rule = rule(state.t_conv, state.t_conv_failures)
                held = members
            state.convergence(chunk, members, conventions)
            if chunk_size is not None:  # this pass's fallbacks; the next pass adds its own
                state.keep_fallbacks(members, None)
                members = None  # freed before the next chunk is formed
            bar(len(chunk))
    if chunk_size is None:
        value, words = first_t_cut, first_rule
    else:
        value, words = rule(state.t_conv, state.t_conv_failures)
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(f"the t_cut rule gave {value!r}; it must be a finite number > 0.")
    t_cut_value = None if value is None else float(value)

    # Pass 2: areas and functions on [0, t_cut].
    ts = grid(t_cut_value, n_ts, grid_beyond) if (functions and t_cut_value is not None) \
        else np.empty(0)
    out_areas = np.full(m, np.nan)
    out_functions = np.full((m, len(ts)), np.nan)
    if t_cut_value is not None and (areas or functions):
        integrate = areas and area_rule == "integral"
        with state.stage("magnitude functions", m) as bar:
            for chunk in chunks:
                members = held if chunk_size is None else state.prepare(spaces, chunk)
                state.areas_and_functions(chunk, members, t_cut_value, ts, conventions,
                                          out_areas if integrate else None,
                                          out_functions if functions else None)
                state.keep_fallbacks(members, t_cut_value, add=chunk_size is not None)
                members = None  # freed before the next chunk is formed
                bar(len(chunk))
        if areas and area_rule == "grid_trapezoid":
            # One product over all sets, as the model experiment has always formed it.
            out_areas = out_functions[:, :n_ts] @ trapezoid_weights(ts[:n_ts])
            out_areas[np.array([f is not None for f in state.area_failures])] = np.nan
    elif chunk_size is None:
        state.keep_fallbacks(held, t_cut_value)
    return SetMagnitudes(
        t_conv=state.t_conv, t_cut=t_cut_value, t_cut_rule=words, areas=out_areas, ts=ts,
        functions=out_functions, n_distinct=state.n_distinct,
        t_conv_failures=state.t_conv_failures, area_failures=state.area_failures,
        warnings=[list(dict.fromkeys(w)) for w in state.caught], fallbacks=state.fallbacks,
        unattributed_warnings=list(dict.fromkeys(state.unattributed)))


def _check_options(area_rule, n_ts, grid_beyond, chunk_size) -> None:
    if area_rule not in AREA_RULES:
        raise ValueError(f"area_rule must be one of {AREA_RULES}; got {area_rule!r}.")
    if int(n_ts) != n_ts or n_ts < 2:
        raise ValueError(f"n_ts must be an integer >= 2; got {n_ts!r}.")
    if not (math.isfinite(grid_beyond) and grid_beyond >= 0):
        raise ValueError(f"grid_beyond must be a finite number >= 0; got {grid_beyond!r}.")
    if chunk_size is not None and (isinstance(chunk_size, bool) or int(chunk_size) != chunk_size
                                   or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive integer; got {chunk_size!r}.")


def _check_integration(integration: str, integration_rtol: float, n_ts: int) -> None:
    """Refuse integration options before any work, with the engine's own check (a large space's
    refusal would otherwise read as that set's failure)."""
    try:
        check_integration(integration, integration_rtol, n_ts)
    except ValueError as err:
        raise ValueError(f"integration options refused: {err}") from None


def _rule(t_cut) -> TCutRule:
    if t_cut is None:
        return MedianTCut()
    if isinstance(t_cut, TCutRule):
        return t_cut
    if isinstance(t_cut, bool) or not isinstance(t_cut, (int, float, np.integer, np.floating)):
        raise ValueError(f"t_cut must be None, a number or a TCutRule; got {t_cut!r}.")
    return GivenTCut(float(t_cut))


class _State:
    """What :func:`measure_sets` accumulates per set while it goes through the members."""

    def __init__(self, m: int, progress, device: Device):
        self.m, self.progress = m, progress
        self.on_torch = device.engine == "torch"  # else the NumPy engine
        self.device = device
        self.device_records: list = [[] for _ in range(m)]  # fallback solves on the torch path
        self.n_distinct = np.zeros(m, dtype=np.int64)
        self.t_conv = np.full(m, np.nan)
        self.t_conv_failures: list = [None] * m
        self.area_failures: list = [None] * m
        self.caught: list = [[] for _ in range(m)]
        self.fallbacks: list = [[] for _ in range(m)]
        self.unattributed: list = []

    # -- members ----------------------------------------------------------------------------
    def prepare(self, spaces, indices) -> dict:
        """``{i: prepared space}`` for the members ``indices`` that have distances; an array
        becomes a :class:`MagnitudeSpace` (its ValueError is the set's failure)."""
        members = {}
        for i in indices:
            D = spaces[i]
            if D is None or self.area_failures[i] is not None:
                continue
            if isinstance(D, (MagnitudeSpace, LargeMagnitudeSpace, TorchMagnitudeSpace)):
                members[i] = D
            else:
                with record_warnings(self.caught[i]):
                    try:
                        members[i] = MagnitudeSpace(D)
                    except ValueError as err:
                        self.t_conv_failures[i] = self.area_failures[i] = str(err)
                        continue
            self.n_distinct[i] = members[i].n_unique
        return members

    # -- stages -----------------------------------------------------------------------------
    def convergence(self, indices, members: dict, c: dict) -> None:
        todo = [i for i in indices if i in members and math.isnan(self.t_conv[i])
                and self.t_conv_failures[i] is None]
        dense = [i for i in todo if isinstance(members[i], MagnitudeSpace)]
        if dense:
            self.t_conv[dense] = self._batched(
                dense, members, lambda S: convergence_scales(S, c["target"],
                                                             rtol=c["t_conv_rtol"]),
                self.t_conv_failures)
        large = [i for i in todo if not isinstance(members[i], MagnitudeSpace)]
        if large:
            self.t_conv[large] = self._one_by_one(
                large, members, lambda S: S.convergence_scale(c["target"], rtol=c["t_conv_rtol"]),
                self.t_conv_failures)

    def areas_and_functions(self, indices, members: dict, t_cut: float, ts, c: dict,
                            areas_out, functions_out) -> None:
        options = {"method": c["integration"], "rtol": c["integration_rtol"], "n_ts": c["n_ts"]}
        ok = [i for i in indices if i in members and self.area_failures[i] is None]
        dense = [i for i in ok if isinstance(members[i], MagnitudeSpace)]
        large = [i for i in ok if not isinstance(members[i], MagnitudeSpace)]
        if dense:
            if areas_out is not None:
                areas_out[dense] = self._batched(
                    dense, members, lambda S: mag_areas(S, t_cut, **options), self.area_failures)
            if functions_out is not None:
                functions_out[dense] = self._batched(
                    dense, members, lambda S: magnitude_functions(S, ts), self.area_failures)
        if large:
            if areas_out is not None:
                areas_out[large] = self._one_by_one(
                    large, members, lambda S: S.mag_area(t_cut, **options), self.area_failures)
            if functions_out is not None:
                for i in large:
                    if self.area_failures[i] is None:
                        with record_warnings(self.caught[i]):
                            functions_out[i] = members[i].magnitude_function(ts)

    def keep_fallbacks(self, members: dict, t_cut: float | None, add: bool = False) -> None:
        """The members' fallback records (``add``: after those of an earlier pass, whose
        spaces are gone; on a torch device every pass's records are kept per set, and
        summarised anew)."""
        for i, space in members.items():
            if isinstance(space, TorchMagnitudeSpace):  # a set put on the device whole
                self.fallbacks[i] = _fallback_records(space.fallbacks, t_cut)
                continue
            if not isinstance(space, MagnitudeSpace):
                continue
            if self.on_torch:
                self.fallbacks[i] = _fallback_records(self.device_records[i], t_cut)
                continue
            records = _fallback_records(space.fallbacks, t_cut)
            self.fallbacks[i] = (self.fallbacks[i] + records) if add else records

    # -- how a stage runs -------------------------------------------------------------------
    def _batched(self, indices, members, compute: Callable, failures: list) -> np.ndarray:
        """``compute(spaces)`` over the members ``indices`` as one batch: each failed member's
        reason in ``failures``, each warning on the member it names."""
        # The same batch functions; on the torch path its batch evaluates them.
        spaces = batch_on_device([members[i] for i in indices], self.device)
        on_device = spaces if self.on_torch else None
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("always")
            try:
                values = compute(spaces)
            except MagnitudeBatchError as err:
                values = err.values
                for k, why in err.failures.items():
                    failures[indices[k]] = why
        if on_device is not None:
            for k, records in on_device.fallbacks.items():
                self.device_records[indices[k]].extend(records)
        for w in log:
            k, text = _member_warning(w.message, len(indices))
            if k is not None:
                self.caught[indices[k]].append(text)
            else:
                self.unattributed.append(text)
        return values

    def _one_by_one(self, indices, members, compute: Callable, failures: list) -> np.ndarray:
        values = np.full(len(indices), np.nan)
        for k, i in enumerate(progress_bar(indices, "large sets", self.progress)):
            with record_warnings(self.caught[i]):
                try:
                    values[k] = compute(members[i])
                except (ValueError, RuntimeError) as err:
                    failures[i] = str(err)
        return values

    @contextlib.contextmanager
    def stage(self, desc: str, total: int):
        if self.progress is False:
            yield lambda n: None
            return
        with tqdm(total=total, desc=desc, unit="set", leave=False,
                  disable=None if self.progress is None else not self.progress) as bar:
            yield bar.update


def _member_warning(message, n_members: int) -> tuple[int | None, str]:
    """(index of the member a batch warning names, or None; the member's own text). The
    engine's batch re-raises a member's warnings as :class:`~._common.MemberWarning`
    (``member``, ``text``); a warning of a one-member call is that member's."""
    if isinstance(message, MemberWarning) and 0 <= message.member < n_members:
        return message.member, message.text
    if n_members == 1:
        return 0, str(message)
    return None, str(message)


def _fallback_records(fallbacks: list[dict], t_cut: float | None) -> list[dict]:
    """A set's fallback solves by solver (``_common.summarise_fallbacks``), each with
    ``area_error_bound``: ``t_cut`` times the largest ``mag_error_bound`` of its scales inside
    ``[0, t_cut]`` (the quadrature weights are positive and sum to ``t_cut``; on top of the
    integration tolerance), 0 where none lies inside."""
    records = []
    for summary in summarise_fallbacks(fallbacks):
        inside = [r["mag_error_bound"] for r in fallbacks
                  if r["solver"] == summary["solver"] and t_cut is not None and r["t"] <= t_cut]
        records.append({**{k: _plain(v) for k, v in summary.items()},
                        "area_error_bound": (float(t_cut * max(inside)) if inside else 0.0)})
    return records


def _plain(value):
    """A plain JSON value: floats finite or None, NumPy integers as int."""
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def progress_bar(items, desc: str, progress: bool | None):
    """``items`` with a progress bar on stderr: always (True), on a terminal (None), or not."""
    if progress is False:
        return items
    return tqdm(items, desc=desc, unit="set", leave=False,
                disable=None if progress is None else not progress)


@contextlib.contextmanager
def record_warnings(into: list):
    """Record the messages of the warnings raised inside into ``into`` instead of printing."""
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            into.extend(str(w.message) for w in log)
