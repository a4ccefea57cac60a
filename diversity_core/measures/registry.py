"""The registry of named measures: each measure written once, with what it needs and how it reads.

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
  ``label`` (the Vendi Score is ``VS`` in its Figure 3 and Table 2); :attr:`Measure.in_paper`.

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

__all__ = ["FREE_MEASURES", "LABELS", "MEASURES", "REFERENCE_MEASURES", "Measure",
           "get_measure", "get_measure_names"]


@dataclasses.dataclass(frozen=True)
class Measure:
    """One named measure (see the module docstring)."""

    name: str
    label: str
    description: str
    needs_reference: bool
    higher_is_more_diverse: bool | None
    paper_label: str | None = None

    @property
    def in_paper(self) -> str:
        """The label of the paper's figures and tables (``paper_label``, else ``label``)."""
        return self.paper_label or self.label


MEASURES: dict[str, Measure] = {m.name: m for m in (
    Measure("magarea", "MagArea", "MagArea", False, True),
    Measure("vendi", "Vendi", "Vendi Score (cosine)", False, True, paper_label="VS"),
    Measure("avgsim", "AvgSim", "AvgSim (cosine)", False, False),
    Measure("gmstds", "GMStds", "GMStds", False, True),
    Measure("isoscore", "IsoScore", "IsoScore", False, True),
    Measure("dcscore", "DCScore", "DCScore (cosine, tau=1)", False, True),
    Measure("magdiff", "MagDiff", "MagDiff", True, True),
    Measure("precision", "precision", "precision", True, None),
    Measure("recall", "recall", "recall", True, True),
    Measure("density", "density", "density", True, None),
    Measure("coverage", "coverage", "coverage", True, True),
    Measure("mmd_rbf", "MMD² (RBF)", "MMD² (RBF, GGM-metrics)", True, None),
    Measure("mmd_linear", "MMD² (linear)", "MMD² (linear)", True, None),
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
