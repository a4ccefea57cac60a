"""The registry of named measures: each measure written once, with what it needs, how it reads and
how it is computed.

As scikit-learn's ``get_scorer_names``: one table of names, from which the command line's
choices and help (:mod:`diversity_core.cli`), the columns of :func:`diversity_core.compare` and
its report (:mod:`diversity_core.comparison`), and the measure tables of the text and model
experiments (:mod:`.experiments.text_temperature`, :mod:`.experiments.model_distinguishing`)
take their names, labels and order. A measure is named the same from the command line to the CSV
and JSON headers.

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
  ``distance``, a ``scale`` chosen across sets);
* ``compute``, ``options``, ``group``: how one set's value is computed (a measure is a
  callable, ``measure(X, reference, **options)``, as scikit-learn's scorers are); the measures
  that need a scale (MagArea, MagDiff) are computed by the engine's protocol for many sets at
  once (:func:`diversity_core.magnitude.measure_sets`).

Every protocol computes through it: :func:`diversity_core.compare`, the text, model, image and
axioms experiments and the graph experiment's measures; no other table maps a name to a
function (an experiment's own variant, such as the text experiment's ``gm_stds_unit``, wraps
the registry's measure).

The experiments that reproduce a figure or table of the paper show its labels
(:attr:`Measure.in_paper`): the model experiment's ``results/models/table2.csv`` says ``VS``, as
Table 2 does. The text experiment keeps its own spelling of the names (``mag_area``,
``avg_sim``, ...; the configuration's ``text.measures`` and the committed
``results/text/*.csv`` use it), declared once as a map onto these names
(``text_temperature.REGISTRY_NAMES``), and adds one variant of its own (``gm_stds_unit``).

The graph experiment's measures and its figures' labels read it too
(:mod:`.experiments.graph_analysis`, ``scripts/graphs_figures.py``; the figures spell MMD
"MMD RBF" and "MMD linear", declared there), and so do the image experiment's tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .baselines import avg_sim, dc_score, gm_stds, iso_score, vendi_score
from .reference_based import mmd_linear, mmd_rbf, prdc

__all__ = ["FREE_MEASURES", "LABELS", "MEASURES", "NEEDS", "REFERENCE_MEASURES", "Measure",
           "get_measure", "get_measure_names", "prdc_values"]


# What a measure needs besides the set's points: a reference set, the set's distances, and a
# scale (the integration limit t_cut, chosen across sets by a rule: the engine's protocol).
NEEDS = ("reference", "distance", "scale")


@dataclasses.dataclass(frozen=True)
class Measure:
    """One named measure (see the module docstring): what it is called, how it reads, what it
    needs and how it is computed.

    ``compute`` is the measure of one set: ``compute(X, **options)`` for a measure of a set
    alone, ``compute(X, reference, **options)`` for one against a reference, taking only the
    ``options`` it names (``tau``: DCScore's temperature; ``k``: PRDC's neighbours); the four
    PRDC measures share one computation (``group="prdc"``: :func:`prdc_values`). The two
    magnitude measures need a ``scale`` chosen across sets, so they have no ``compute``: the
    engine's protocol, :func:`diversity_core.magnitude.measure_sets`, computes them for every
    set at once on one ``t_cut`` (the engine reads the distances this wing provides, so the
    registry does not import the engine).
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

    def __post_init__(self):
        unknown = set(self.needs) - set(NEEDS)
        if unknown or ("reference" in self.needs) != self.needs_reference:
            raise ValueError(f"measure {self.name}: needs {sorted(self.needs)} (known: {NEEDS}; "
                             "'reference' exactly when needs_reference).")

    @property
    def in_paper(self) -> str:
        """The label of the paper's figures and tables (``paper_label``, else ``label``)."""
        return self.paper_label or self.label

    def __call__(self, X, reference=None, **options) -> float:
        """The measure of the set ``X`` (against ``reference`` where it needs one); ``options``
        it does not name are not passed. ``ValueError`` for a measure the engine's protocol
        computes (it needs a scale) or a missing reference."""
        if self.compute is None:
            raise ValueError(f"{self.name} needs a scale chosen across sets: compute it with "
                             "diversity_core.magnitude.measure_sets (or diversity_core.compare).")
        chosen = {key: options[key] for key in self.options if key in options}
        if not self.needs_reference:
            return self.compute(X, **chosen)
        if reference is None:
            raise ValueError(f"{self.name} compares a set with a reference; none given.")
        return self.compute(X, reference, **chosen)


def prdc_values(X, reference, *, k: int = 5) -> dict[str, float]:
    """The four PRDC measures of ``X`` against ``reference`` in one computation (the measures
    of ``group="prdc"``; Naeem et al.'s convention: real = the reference, fake = ``X``)."""
    return prdc(reference, X, k)


def _prdc_measure(name: str):
    def compute(X, reference, *, k: int = 5) -> float:
        return prdc_values(X, reference, k=k)[name]
    return compute


def _vendi(X) -> float:
    return vendi_score(X, metric="cosine")


def _dc_score(X, *, tau: float = 1.0) -> float:
    return dc_score(X, tau=tau, kernel="cosine")


_SCALE = frozenset({"distance", "scale"})
_REFERENCE = frozenset({"reference"})
MEASURES: dict[str, Measure] = {m.name: m for m in (
    Measure("magarea", "MagArea", "MagArea", False, True, needs=_SCALE),
    Measure("vendi", "Vendi", "Vendi Score (cosine)", False, True, paper_label="VS",
            compute=_vendi),
    Measure("avgsim", "AvgSim", "AvgSim (cosine)", False, False, compute=avg_sim),
    Measure("gmstds", "GMStds", "GMStds", False, True, compute=gm_stds),
    Measure("isoscore", "IsoScore", "IsoScore", False, True, compute=iso_score),
    Measure("dcscore", "DCScore", "DCScore (cosine, tau=1)", False, True, compute=_dc_score,
            options=("tau",)),
    Measure("magdiff", "MagDiff", "MagDiff", True, True, needs=_SCALE | _REFERENCE),
    *(Measure(name, name, name, True, more, needs=_REFERENCE, compute=_prdc_measure(name),
              options=("k",), group="prdc")
      for name, more in (("precision", None), ("recall", True), ("density", None),
                         ("coverage", True))),
    Measure("mmd_rbf", "MMD² (RBF)", "MMD² (RBF, GGM-metrics)", True, None, needs=_REFERENCE,
            compute=mmd_rbf),
    Measure("mmd_linear", "MMD² (linear)", "MMD² (linear)", True, None, needs=_REFERENCE,
            compute=mmd_linear),
)}


def get_measure_names(*, needs_reference: bool | None = None) -> list[str]:
    """The measures' names in table order; only those that need (True) or do not need (False)
    a reference when ``needs_reference`` is given."""
    return [name for name, m in MEASURES.items()
            if needs_reference is None or m.needs_reference == needs_reference]


def get_measure(name: str) -> Measure:
    """The measure called ``name``; ``ValueError`` listing the names otherwise."""
    if name not in MEASURES:
        raise ValueError(f"unknown measure {name!r}; known: {', '.join(MEASURES)}.")
    return MEASURES[name]


FREE_MEASURES = tuple(get_measure_names(needs_reference=False))
REFERENCE_MEASURES = tuple(get_measure_names(needs_reference=True))
# Column labels of compare's tables: every measure, and the convergence scale beside them.
LABELS = {"t_conv": "t_conv", **{name: m.label for name, m in MEASURES.items()}}
