"""diversity_core: metric space magnitude and baseline diversity measures for embeddings.

The top level is the public face: the measures and :func:`compare`, imported from their wings.
The wings, in the order of the pipeline's stages (``pyproject.toml``'s import-linter contracts
say which may import which): :mod:`.assets` (pinned fetching and caches), :mod:`.data`
(datasets), :mod:`.embed` (embedding models), :mod:`.files` (the user's files),
:mod:`.magnitude` (the engine) and :mod:`.measures` (the registry and the baselines),
:mod:`.comparison` (many sets on one integration limit), :mod:`.experiments` (the paper's
protocols), :mod:`.reporting` (tables, figures, the claims), :mod:`.provenance` (records, audit,
RO-Crate) and :mod:`.cli` (the command line). Shared leaves beside this file: :mod:`.atomic`,
:mod:`.device`, ``_memory`` and ``_validation``.

NumPy in, NumPy out. Every function takes embeddings of shape (n_points, n_features) or a distance
matrix of shape (n_points, n_points) and raises ``ValueError`` naming the problem on bad input.
:func:`compare` puts many sets side by side on one integration limit (:mod:`.comparison`).
"""

__version__ = "0.1.0"

from ._threads import quiet_blas_workers  # noqa: E402  (a leaf: loads no NumPy)

quiet_blas_workers()  # before NumPy loads OpenBLAS, in this process and those it starts

# The public names and the wing each comes from. Each is imported when first asked for (PEP 562),
# as are the wings themselves (``dc.embed.embed_texts``, ``dc.files.read_texts``): ``import
# diversity_core`` costs nothing beyond Python, so that a rule script importing one leaf
# (``diversity_core.atomic``, ``diversity_core.provenance``) does not pay for SciPy, pandas and
# the engine (a job using the engine alone imported in 1.15 CPU s before, 0.72 s now; the default
# pipeline runs 231 jobs).
_PUBLIC = {
    "MemoryNeedError": "._memory",
    **dict.fromkeys(("MagnitudeSpace", "MagnitudeWarning", "convergence_scale", "mag_area",
                     "mag_diff", "magnitude_derivative", "magnitude_function",
                     "magnitude_weights", "reference_based_t_cut", "reference_free_t_cut"),
                    ".magnitude"),
    "MagnitudeSettings": ".magnitude.settings",
    **dict.fromkeys(("METRICS", "pairwise_distances", "avg_sim", "dc_score", "gm_stds",
                     "iso_score", "mmd_linear", "mmd_rbf", "prdc", "vendi_score"), ".measures"),
    **dict.fromkeys(("Comparison", "compare"), ".comparison"),
}
_WINGS = ("assets", "cli", "comparison", "data", "embed", "experiments", "files",
          "language_model", "magnitude", "measures", "provenance", "reporting")


def __getattr__(name: str):
    import importlib

    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
        globals()[name] = value  # asked once
        return value
    if name in _WINGS:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_PUBLIC, *_WINGS})


__all__ = list(_PUBLIC)
