"""``score``: the measures of one set of embeddings, optionally against a reference.

:func:`score` is :func:`~diversity_core.compare` of one set (and its reference), its values and
reasons re-shaped per set; the command line's ``score`` (:mod:`diversity_core.cli.score`) prints
it.
"""

from __future__ import annotations

import numpy as np

from ..device import Device
from ..magnitude.settings import DEFAULT_INTEGRATION, MagnitudeSettings
from ..measures.registry import MEASURES, get_measure_names
from .protocol import compare, fallback_note

__all__ = ["score"]


class _Results:
    """Score's values and reasons, taken from compare's table: one undefined value never hides
    the others."""

    def __init__(self, sets):
        self.scores = {name: {} for name in (*sets, "comparison")}
        self.undefined = {name: {} for name in self.scores}

    def take(self, where: str, metric: str, value, why: str | None) -> None:
        """One of compare's values: NaN is undefined, with compare's reason."""
        if why is not None or not np.isfinite(value):
            self.scores[where][metric] = None
            self.undefined[where][metric] = why or f"the value is {value}"
        else:
            self.scores[where][metric] = float(value)


def score(X, reference=None, metrics=None, *, metric_space: str = "cosine", k: int = 5,
          tau: float = 1.0, magdiff_normalise: str | None = None,
          labels: dict[str, str] | None = None, memory_limit: int | None = None,
          device: Device | str = "cpu", integration: str = DEFAULT_INTEGRATION) -> dict:
    """Compute the requested metrics; returns ``{"scores": ..., "undefined": ..., "notes": ...,
    "t_cut": ...}``.

    ``score`` is :func:`~diversity_core.compare` of one set (and its reference): the same
    engine, the same memory rule (large sets on the engine's large-n path) and the same numbers
    at the same ``t_cut`` (this set's own convergence scale, or the reference's), without the
    magnitude functions on compare's grid (``functions=False``: score returns none).
    ``scores["embeddings"]`` / ``scores["reference"]`` hold the reference-free metrics of each
    set, ``scores["comparison"]`` the reference-based ones. A metric undefined for its input has
    the value ``None``, and its reason in ``undefined[<set>][<metric>]`` and in its note;
    ``labels`` names the sets in those reasons (default: "embeddings", "reference"). Before
    anything is computed the memory it needs is checked (``MemoryError``, one line, beyond
    ``memory_limit``, default the memory available); ``fallbacks`` lists, per set, the scales
    where magnitude needed a fallback solver, with error bounds (also in the MagArea note).
    ``device``: where the engine runs (``MagnitudeSettings.device``: a
    :class:`~diversity_core.device.Device` or its name, ``cpu``, ``cuda``...);
    ``integration``: MagArea's quadrature rule (``MagnitudeSettings.integration``).
    """
    metrics = list(metrics or get_measure_names(
        needs_reference=None if reference is not None else False))
    sets = {"embeddings": X} if reference is None else {"embeddings": X, "reference": reference}
    labels = {name: name for name in sets} | dict(labels or {})
    # The sets' names inside compare: the files' (so that every reason names the file), unless
    # the same file is given twice.
    keys = {name: str(labels[name]) for name in sets}
    if len(set(keys.values())) < len(keys):
        keys = {name: name for name in sets}
    result = compare({keys["embeddings"]: X}, reference, metric=metric_space, k=k, tau=tau,
                     reference_name=keys.get("reference", "reference"), measures=metrics,
                     memory_limit=memory_limit, progress=False, functions=False,
                     settings=MagnitudeSettings(device=device, integration=integration))
    out = _Results(sets)
    table = result.table
    for name in sets:
        row, why = table.loc[keys[name]], result.undefined[keys[name]]
        for m in metrics:
            if not MEASURES[m].needs_reference:
                out.take(name, m, row[m], why.get(m))
    if reference is not None:
        row, why = table.loc[keys["embeddings"]], result.undefined[keys["embeddings"]]
        for m in metrics:
            if MEASURES[m].needs_reference:
                value = row[m]
                if m == "magdiff" and magdiff_normalise and np.isfinite(value):
                    value = value / (result.t_cut if magdiff_normalise == "t_cut"
                                     else table.loc[keys["reference"], "magarea"])
                out.take("comparison", m, value, why.get(m))
    notes = {
        "avgsim": "mean cosine similarity of pairs i != j: higher = LESS diverse",
        "dcscore": f"tau = {tau}",
        "isoscore": "isotropy of the variance, in [0, 1]",
    }
    t_cut = result.t_cut
    if t_cut is not None:
        source = ("the reference's convergence scale" if reference is not None
                  else "this space's own convergence scale")
        notes["magarea"] = (f"{metric_space} distance, ∫_0^t_cut Mag(t) dt, "
                            f"t_cut = {t_cut:.6g} ({source})")
        notes["magdiff"] = (
            f"∫_0^t_cut (Mag_X − Mag_ref) dt, {metric_space} distance, "
            f"t_cut = {t_cut:.6g} (reference's convergence scale)"
            + (f", divided by the {magdiff_normalise.replace('_', ' ')}"
               if magdiff_normalise else "")
            + "; < 0: less diverse than the reference")
    for m in ("precision", "recall", "density", "coverage"):
        notes[m] = f"k = {k}, reference = real, embeddings = fake"
    notes["mmd_rbf"] = "Euclidean, max over 10 bandwidths"
    notes["mmd_linear"] = "‖mean X − mean ref‖²"
    for by_measure in result.warned.values():  # a baseline's own warning says more
        for m, messages in by_measure.items():
            notes[m] = messages[-1]
    names = {v: k_ for k_, v in keys.items()}
    fallbacks = {labels[names[key]]: records for key, records in result.fallbacks.items()}
    said = [fallback_note(r) + f" ({where})" for where, records in fallbacks.items()
            for r in records]
    for m in ("magarea", "magdiff"):
        if said and m in notes:
            notes[m] += "; " + "; ".join(said)
    # A row's note is its reason wherever it is undefined, else what the number means.
    for m in metrics:
        reasons = list(dict.fromkeys(why for where in out.undefined.values()
                                     if (why := where.get(m))))
        if reasons:
            notes[m] = "undefined: " + "; ".join(reasons)
    out.scores["comparison"] = {m: out.scores["comparison"][m] for m in metrics
                                if m in out.scores["comparison"]}
    return {"scores": out.scores,
            "undefined": {where: why for where, why in out.undefined.items() if why},
            "notes": {m: notes[m] for m in metrics if m in notes},
            "t_cut": t_cut, "metric_space": metric_space, "fallbacks": fallbacks}
