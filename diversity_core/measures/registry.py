"""The registry of named measures: each measure written once, with what it needs, how it reads and
how it is computed.

As scikit-learn's ``get_scorer_names``: one table of names, from which the command line's
choices and help (:mod:`diversity_core.cli`), the columns of :func:`diversity_core.compare` and
its report (:mod:`diversity_core.comparison`), every experiment's measures
(:mod:`diversity_core.experiments`), the figures' labels and colours
(:mod:`diversity_core.reporting.figure_style`) and the workflow's configuration check take
their names, labels and order. A measure is named the same from the command line to the CSV and
JSON headers (a table that spells measures its own way, as the text experiment's
``mag_area``, reads the measure's ``column``).

Each :class:`Measure` says:

* ``name``: the one name (``magarea``, ``vendi``, ...);
* ``label``: how tables and figures show it (``MagArea``, ``Vendi``);
* ``description``: the command line's longer label, with the conventions that fix its value
  (``Vendi Score (cosine)``);
* ``needs_reference``: whether it compares a set with a reference (MagDiff, PRDC, MMD) or
  describes a set alone;
* ``higher_is_more_diverse``: True, False (a similarity: AvgSim), or None where the measure is
  not a diversity (precision, density: fidelity; MMD: a distance between sets);
* ``paper_label``: how the paper's figures and tables show it, where that differs from
  ``label`` (the Vendi Score is ``VS`` in its Figure 3 and Table 2); :attr:`Measure.in_paper`;
* ``needs``: what it reads besides the set's points (:data:`NEEDS`: a ``reference``, the set's
  ``distance``, a ``scale`` chosen across sets) and, with a scale, its ``scale`` rule
  (:data:`SCALE_RULES`);
* ``compute``, ``options``, ``group``: how one set's value is computed (a measure is a
  callable, ``measure(X, reference, **options)``, as scikit-learn's scorers are);
* ``column``: its name in tables that spell measures their own way (default: ``name``);
* ``default``: whether every experiment whose protocol fits takes it (False: a variant, taken
  where a configuration names it);
* ``scale_note``: what range of scales it summarises (the axioms' multi-scale check);
* ``higher_is_closer``, for a measure against a reference: True where its value rises as the
  set comes closer to the reference (precision, recall, density, coverage), False where it is a
  distance from it (MMD), None where it is neither (MagDiff: a signed change);
* ``from_paper``: one of the paper's measures and baselines. An experiment's configured list
  chooses among these; every other measure whose needs fit the experiment (a plugin, or a
  measure added to this table) joins it, after the list, unless it is not ``default``.

A measure that needs a scale is computed for many sets at once: the engine's protocol
(:func:`diversity_core.magnitude.measure_sets`) chooses the scale by the measure's rule from
every set of the batch, and the measure's ``compute`` reads what it found for one set from a
:class:`ScaleView` (``engine=``). The protocol runs in the wing above both the engine and this
one (:mod:`diversity_core.comparison`, :mod:`diversity_core.experiments`), so neither sibling
imports the other.

Measures from outside the package join the same table (:func:`register_plugins`): a
``"package.module:OBJECT"`` that names a :class:`Measure` or a plain function (wrapped by
:func:`measure_from_function`), and the entry points of the group :data:`PLUGIN_GROUP` of the
installed packages. A plugin takes part wherever its needs fit; a value it cannot give for a set
(an exception, NaN or inf) is a ``ValueError`` naming the measure, never a silent NaN.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import warnings
from collections.abc import Callable, Iterable

import numpy as np

from .baselines import avg_sim, dc_score, gm_stds, iso_score, vendi_score
from .reference_based import mmd_linear, mmd_rbf, prdc

__all__ = ["FREE_MEASURES", "LABELS", "MEASURES", "NEEDS", "PLUGIN_GROUP", "REFERENCE_MEASURES",
           "SCALE_RULES", "Measure", "PluginError", "ScaleView", "evaluate", "get_measure",
           "get_measure_names", "labels", "load_plugin", "measure_from_function", "measure_values",
           "plugin_files", "prdc_values", "register", "register_plugins", "select_measures"]


# What a measure needs besides the set's points: a reference set, the set's distances, and a
# scale (the integration limit t_cut, chosen across sets by a rule: the engine's protocol).
NEEDS = ("reference", "distance", "scale")
# How the engine's protocol chooses the scale of a measure that needs one.
SCALE_RULES = {
    "median": "t_cut, the median convergence scale of the sets measured together",
    "reference": "t_ref, the reference's convergence scale",
}
# The entry-point group of installed packages' measures.
PLUGIN_GROUP = "diversity_core.measures"


class PluginError(ValueError):
    """A measure from outside the package that cannot join the registry (one line: which, why)."""


@dataclasses.dataclass(frozen=True)
class ScaleView:
    """What the engine's protocol found for one set of a batch, as a measure that needs a scale
    reads it (its ``compute(X, [reference], *, engine)``).

    ``scale``: the batch's scale (by the measure's rule); ``area``: the set's MagArea on
    [0, ``scale``]; ``diff``: its MagDiff against the reference as the protocol normalises it;
    ``magnitude(t)`` and ``reference_magnitude(t)``: Mag(t) of the set and of the reference."""

    scale: float
    area: float = math.nan
    diff: float = math.nan
    magnitude: Callable[[float], float] | None = dataclasses.field(default=None, repr=False)
    reference_magnitude: Callable[[float], float] | None = dataclasses.field(default=None,
                                                                             repr=False)


@dataclasses.dataclass(frozen=True)
class Measure:
    """One named measure (see the module docstring): what it is called, how it reads, what it
    needs and how it is computed.

    ``compute`` is the measure of one set: ``compute(X, **options)`` for a measure of a set
    alone, ``compute(X, reference, **options)`` for one against a reference, taking only the
    ``options`` it names (``tau``: DCScore's temperature; ``k``: PRDC's neighbours); the four
    PRDC measures share one computation (``group="prdc"``: :func:`prdc_values`). A measure that
    needs a ``scale`` also takes ``engine``, the :class:`ScaleView` of the set in its batch.
    ``source``: where a plugin comes from (``package.module:OBJECT``; None: built in) and
    ``file``, its module's file (its digest goes into the provenance records of what it made).
    """

    name: str
    label: str
    description: str
    needs_reference: bool
    higher_is_more_diverse: bool | None
    paper_label: str | None = None
    needs: frozenset = frozenset()
    compute: Callable | None = dataclasses.field(default=None, repr=False, compare=False)
    options: tuple[str, ...] = ()
    group: str | None = None
    column: str | None = None
    scale: str | None = None
    default: bool = True
    scale_note: str = "one fixed resolution: no scale parameter is varied or integrated over"
    source: str | None = None
    file: str | None = None
    higher_is_closer: bool | None = None
    from_paper: bool = False

    def __post_init__(self):
        unknown = set(self.needs) - set(NEEDS)
        if unknown or ("reference" in self.needs) != self.needs_reference:
            raise ValueError(f"measure {self.name}: needs {sorted(self.needs)} (known: {NEEDS}; "
                             "'reference' exactly when needs_reference).")
        if ("scale" in self.needs) != (self.scale is not None) or (
                self.scale is not None and self.scale not in SCALE_RULES):
            raise ValueError(f"measure {self.name}: a measure that needs a scale names its rule "
                             f"(scale: one of {', '.join(SCALE_RULES)}), and only such a one.")
        if self.column is None:
            object.__setattr__(self, "column", self.name)

    @property
    def in_paper(self) -> str:
        """The label of the paper's figures and tables (``paper_label``, else ``label``)."""
        return self.paper_label or self.label

    @property
    def multi_scale(self) -> bool:
        """Whether it summarises diversity over a range of scales (it needs a scale)."""
        return "scale" in self.needs

    def __call__(self, X, reference=None, *, engine: ScaleView | None = None,
                 **options) -> float:
        """The measure of the set ``X`` (against ``reference`` where it needs one; ``engine``:
        the set's :class:`ScaleView` where it needs a scale); ``options`` it does not name are
        not passed. ``ValueError`` for a missing reference or view; a plugin's failure or
        non-finite value is a ``ValueError`` naming it."""
        chosen = {key: options[key] for key in self.options if key in options}
        if "scale" in self.needs:
            if engine is None:
                raise ValueError(f"{self.name} needs a scale chosen across sets: compute it with "
                                 "diversity_core.compare (or the engine's protocol, "
                                 "diversity_core.magnitude.measure_sets, and a ScaleView).")
            chosen["engine"] = engine
        args = (X,)
        if self.needs_reference:
            if reference is None:
                raise ValueError(f"{self.name} compares a set with a reference; none given.")
            args = (X, reference)
        if self.source is None:
            return self.compute(*args, **chosen)
        try:
            value = float(self.compute(*args, **chosen))
        except Exception as err:  # a plugin's own failure: named, never a silent NaN
            raise ValueError(f"measure {self.name} ({self.source}) failed: "
                             f"{type(err).__name__}: {err}") from err
        if not math.isfinite(value):
            raise ValueError(f"measure {self.name} ({self.source}) returned {value}.")
        return value


def evaluate(measure: Measure, X, reference=None, *, where: str, **options) -> float:
    """``measure(X, reference, **options)``; a plugin's ``ValueError`` names ``where`` (the
    set), so that a failed set is reported, never dropped."""
    if measure.source is None:
        return measure(X, reference, **options)
    try:
        return measure(X, reference, **options)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def measure_values(measures, X, reference=None, *, where: str, **options) -> dict[str, float]:
    """Each of ``measures`` of ``X`` (:func:`evaluate`), by name; the measures of one ``group``
    share one computation (PRDC: :func:`prdc_values`)."""
    values, shared = {}, {}
    for measure in measures:
        if measure.group is None:
            values[measure.name] = float(evaluate(measure, X, reference, where=where, **options))
            continue
        if measure.group not in shared:
            chosen = {key: options[key] for key in measure.options if key in options}
            shared[measure.group] = GROUPS[measure.group](X, reference, **chosen)
        values[measure.name] = float(shared[measure.group][measure.name])
    return values


def prdc_values(X, reference, *, k: int = 5) -> dict[str, float]:
    """The four PRDC measures of ``X`` against ``reference`` in one computation (the measures
    of ``group="prdc"``; Naeem et al.'s convention: real = the reference, fake = ``X``)."""
    return prdc(reference, X, k)


# The computations that several measures share (a measure's ``group``).
GROUPS = {"prdc": prdc_values}


def _prdc_measure(name: str):
    def compute(X, reference, *, k: int = 5) -> float:
        return prdc_values(X, reference, k=k)[name]
    return compute


def _vendi(X) -> float:
    return vendi_score(X, metric="cosine")


def _dc_score(X, *, tau: float = 1.0) -> float:
    return dc_score(X, tau=tau, kernel="cosine")


def _iso_score(X, *, constant: float | None = None) -> float:
    """IsoScore; ``constant``: the value of a set whose points are all equal (IsoScore is 0/0
    there; default: undefined, ``ValueError``)."""
    if constant is not None and np.all(X.max(axis=0) == X.min(axis=0)):  # exact, as iso_score
        return constant
    if constant is None:
        return iso_score(X)
    with warnings.catch_warnings():
        # A few points in many dimensions: always rank-limited, said once in the docs.
        warnings.filterwarnings("ignore", message="IsoScore on", category=UserWarning)
        return iso_score(X)


def _gm_stds_unit(X) -> float:
    """GMStds of the rows of ``X`` scaled to unit Euclidean norm."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("gm_stds_unit: an embedding of norm 0 has no direction.")
    return gm_stds(X / norms)


def _mag_area(X, *, engine: ScaleView) -> float:
    return engine.area


def _mag_diff(X, reference, *, engine: ScaleView) -> float:
    return engine.diff


def _mag_half(X, reference, *, engine: ScaleView) -> float:
    """The relative change of Mag(t_ref / 2): (Mag_X − Mag_R) / Mag_R at half the reference's
    convergence scale."""
    half = 0.5 * engine.scale
    mag_ref = engine.reference_magnitude(half)
    return (engine.magnitude(half) - mag_ref) / mag_ref


_SCALE = frozenset({"distance", "scale"})
_REFERENCE = frozenset({"reference"})
_INTEGRATES = "integrates Mag(t) over t in [0, t_cut]"
_FIXED = "one fixed resolution: no scale parameter is varied or integrated over"
_PAPER = (
    Measure("magarea", "MagArea", "MagArea", False, True, needs=_SCALE, compute=_mag_area,
            column="mag_area", scale="median", scale_note=_INTEGRATES),
    Measure("vendi", "Vendi", "Vendi Score (cosine)", False, True, paper_label="VS",
            compute=_vendi, scale_note=_FIXED + " (cosine kernel)"),
    Measure("avgsim", "AvgSim", "AvgSim (cosine)", False, False, compute=avg_sim,
            column="avg_sim"),
    Measure("gmstds", "GMStds", "GMStds", False, True, compute=gm_stds, column="gm_stds",
            scale_note=_FIXED + "; scales linearly with the data"),
    Measure("gmstds_unit", "GMStds (unit)", "GMStds of the unit-norm rows", False, True,
            compute=_gm_stds_unit, column="gm_stds_unit", default=False,
            scale_note=_FIXED + "; invariant to scaling"),
    Measure("isoscore", "IsoScore", "IsoScore", False, True, compute=_iso_score,
            options=("constant",), column="iso_score",
            scale_note=_FIXED + "; invariant to scaling"),
    Measure("dcscore", "DCScore", "DCScore (cosine, tau=1)", False, True, compute=_dc_score,
            options=("tau",), column="dc_score",
            scale_note=_FIXED + " (the temperature tau is fixed)"),
    Measure("magdiff", "MagDiff", "MagDiff", True, True, needs=_SCALE | _REFERENCE,
            compute=_mag_diff, scale="reference", scale_note=_INTEGRATES),
    Measure("mag_half_tconv", "Mag(½ t_ref)", "Mag(t_ref / 2), relative to the reference's",
            True, True, needs=_SCALE | _REFERENCE, compute=_mag_half, scale="reference",
            default=False, scale_note="one scale, half the reference's convergence scale"),
    *(Measure(name, name, name, True, more, needs=_REFERENCE, compute=_prdc_measure(name),
              options=("k",), group="prdc", higher_is_closer=True)
      for name, more in (("precision", None), ("recall", True), ("density", None),
                         ("coverage", True))),
    Measure("mmd_rbf", "MMD² (RBF)", "MMD² (RBF, GGM-metrics)", True, None, needs=_REFERENCE,
            compute=mmd_rbf, higher_is_closer=False),
    Measure("mmd_linear", "MMD² (linear)", "MMD² (linear)", True, None, needs=_REFERENCE,
            compute=mmd_linear, higher_is_closer=False),
)
# A built-in measure that is not the paper's goes here: it joins every experiment it fits, as a
# plugin does, with no configuration list to edit.
_BEYOND_PAPER: tuple[Measure, ...] = ()
_BUILT_IN = (*(dataclasses.replace(m, from_paper=True) for m in _PAPER), *_BEYOND_PAPER)
MEASURES: dict[str, Measure] = {m.name: m for m in _BUILT_IN}
BUILT_IN = frozenset(MEASURES)
# The plugins whose computation ran in this process (their files go into provenance records).
_USED: set[str] = set()


def get_measure_names(*, needs_reference: bool | None = None,
                      defaults: bool = True) -> list[str]:
    """The measures' names in table order (the built-in ones, then the plugins); only those
    that need (True) or do not need (False) a reference when ``needs_reference`` is given; only
    those every fitting experiment takes (``default``) unless ``defaults`` is False."""
    return [name for name, m in MEASURES.items()
            if (needs_reference is None or m.needs_reference == needs_reference)
            and (m.default or not defaults)]


def get_measure(name: str) -> Measure:
    """The measure called ``name`` (or spelt so in its ``column``); ``ValueError`` listing the
    names otherwise."""
    if name in MEASURES:
        return MEASURES[name]
    for measure in MEASURES.values():
        if measure.column == name:
            return measure
    raise ValueError(f"unknown measure {name!r}; known: {', '.join(MEASURES)}.")


def select_measures(*, reference: bool, scale_rules: Iterable[str] = tuple(SCALE_RULES),
                    named: Iterable[str] | None = None, free: bool = True) -> list[Measure]:
    """The measures an experiment's protocol takes: those whose needs fit it (``reference``:
    whether the protocol has a reference set; ``free``: whether it also takes measures of a set
    alone there; ``scale_rules``: the scale rules its engine call serves).

    ``named`` (a configuration's list of the paper's measures, in its order): those measures,
    each checked to fit, and after them every ``default`` measure that fits and is not the
    paper's (:attr:`Measure.from_paper`: plugins, measures added to the registry); None: every
    ``default`` measure that fits."""
    rules = set(scale_rules)

    def fits(m: Measure) -> bool:
        if m.needs_reference and not reference:
            return False
        if reference and not free and not m.needs_reference:
            return False
        return m.scale is None or m.scale in rules

    if named is None:
        return [m for m in MEASURES.values() if m.default and fits(m)]
    chosen = [get_measure(name) for name in named]
    unfit = [m.column for m in chosen if not fits(m)]
    if unfit:
        raise ValueError(f"measures {', '.join(unfit)} do not fit this experiment's protocol "
                         f"(a reference: {reference}; scales: {', '.join(sorted(rules))}).")
    return chosen + [m for m in MEASURES.values()
                     if m.default and not m.from_paper and fits(m) and m not in chosen]


def labels(names: Iterable[str], *, paper: bool = False) -> dict[str, str]:
    """Each measure's label (``paper``: as the paper shows it) by the name given (a name or a
    column)."""
    return {name: (get_measure(name).in_paper if paper else get_measure(name).label)
            for name in names}


# --- measures from outside the package ---------------------------------------------------------

def measure_from_function(function: Callable, *, name: str | None = None,
                          label: str | None = None, needs: Iterable[str] | None = None,
                          higher_is_more_diverse: bool | None = True,
                          source: str | None = None) -> Measure:
    """A plain function as a :class:`Measure`. Its name, label and needs come from the keywords,
    else from the function's attributes ``name``, ``label``, ``needs``,
    ``higher_is_more_diverse`` and ``higher_is_closer``, else from the function itself (its
    ``__name__``; a second positional parameter: it needs a reference)."""
    name = name or getattr(function, "name", None) or function.__name__
    label = label or getattr(function, "label", None) or name
    higher = getattr(function, "higher_is_more_diverse", higher_is_more_diverse)
    closer = getattr(function, "higher_is_closer", None)
    if needs is None:
        needs = getattr(function, "needs", None)
    if needs is None:
        positional = [p for p in _signature(function, name).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        needs = ("reference",) if len(positional) >= 2 else ()
    needs = frozenset(needs)
    return Measure(name, label, label, "reference" in needs, higher, needs=needs,
                   compute=function, scale="median" if "scale" in needs else None,
                   source=source, higher_is_closer=closer)


def _signature(function: Callable, name: str) -> inspect.Signature:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError) as err:
        raise PluginError(f"measure {name}: its compute has no signature to check ({err}).") \
            from None


def _check_signature(measure: Measure, spec: str) -> None:
    """Refuse a compute that cannot be called as the registry calls it."""
    if not callable(measure.compute):
        raise PluginError(f"measure plugin {spec}: {measure.name} has no callable compute.")
    args = ("X", "reference") if measure.needs_reference else ("X",)
    keywords = {"engine": None} if "scale" in measure.needs else {}
    keywords.update({option: None for option in measure.options})
    try:
        _signature(measure.compute, measure.name).bind(*args, **keywords)
    except TypeError as err:
        raise PluginError(f"measure plugin {spec}: {measure.name}'s compute cannot be called as "
                          f"compute({', '.join([*args, *keywords])}) ({err}).") from None


def load_plugin(spec: str) -> Measure:
    """The measure ``"package.module:OBJECT"`` names (a :class:`Measure`, or a function wrapped
    by :func:`measure_from_function`), not registered; :class:`PluginError` (one line) if it
    does not import, is not a measure or its compute has the wrong signature."""
    module_name, _, attribute = str(spec).partition(":")
    if not module_name or not attribute:
        raise PluginError(f"measure plugin {spec!r}: write it as package.module:OBJECT.")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:
        raise PluginError(f"measure plugin {spec}: module {module_name} does not import "
                          f"({type(err).__name__}: {err}).") from None
    obj = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise PluginError(f"measure plugin {spec}: {module_name} has no {attribute}.")
        obj = getattr(obj, part)
    file = getattr(module, "__file__", None)
    if isinstance(obj, Measure):
        measure = dataclasses.replace(obj, source=spec, file=file)
    elif callable(obj):
        measure = dataclasses.replace(measure_from_function(obj, source=spec), file=file)
    else:
        raise PluginError(f"measure plugin {spec}: {attribute} is a {type(obj).__name__}, not a "
                          "Measure or a function.")
    _check_signature(measure, spec)
    return measure


def register(measure: Measure) -> Measure:
    """Add ``measure`` to the registry (after the built-in ones); :class:`PluginError` if its
    name or column is taken by another measure. Registering the same plugin again is a no-op."""
    known = MEASURES.get(measure.name)
    if known is not None and known.source == measure.source and measure.source is not None:
        return known
    taken = [m for m in MEASURES.values() if {m.name, m.column} & {measure.name, measure.column}]
    if taken:
        other = taken[0]
        what = "a built-in measure" if other.source is None else f"the plugin {other.source}"
        raise PluginError(f"measure plugin {measure.source or measure.name}: the name "
                          f"{measure.name!r} is taken by {what}; rename it.")
    MEASURES[measure.name] = measure
    return measure


def register_plugins(specs: Iterable[str] = (), *, entry_points: bool = True) -> list[Measure]:
    """Load and register the plugins ``specs`` names and (``entry_points``) those of the
    installed packages' entry-point group :data:`PLUGIN_GROUP`; the measures, in that order."""
    from importlib.metadata import entry_points as installed

    found = [str(spec) for spec in specs]
    if entry_points:
        found += [point.value for point in installed(group=PLUGIN_GROUP)]
    return [register(_tracked(load_plugin(spec))) for spec in dict.fromkeys(found)]


def _tracked(measure: Measure) -> Measure:
    """``measure`` with a compute that notes, when it runs, that the plugin took part."""
    compute, name = measure.compute, measure.name

    def run(*args, **kwargs):
        _USED.add(name)
        return compute(*args, **kwargs)
    run.__signature__ = _signature(compute, name)
    return dataclasses.replace(measure, compute=run)


def plugin_files(*, used: bool = True) -> list[str]:
    """The module files of the registered plugins (``used``: only those whose computation ran
    in this process), for the provenance records of what they made."""
    return sorted({m.file for m in MEASURES.values()
                   if m.source and m.file and (m.name in _USED or not used)})


# The built-in measures that every fitting protocol takes (plugins join the live lists above).
FREE_MEASURES = tuple(get_measure_names(needs_reference=False))
REFERENCE_MEASURES = tuple(get_measure_names(needs_reference=True))
# Column labels of compare's tables: every measure, and the convergence scale beside them.
LABELS = {"t_conv": "t_conv", **{name: m.label for name, m in MEASURES.items()}}
