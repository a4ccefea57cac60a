"""Many sets side by side: :func:`compare` (one integration limit for every set, every measure
of the registry), :func:`score` (``compare`` of one set), the memory rule that decides the
engine's path before anything is computed (:mod:`.memory`) and the report of a comparison
(:mod:`.report`: text, figure, Markdown).
"""

from .memory import check_memory, required_memory
from .protocol import Comparison, compare
from .score import score

__all__ = ["Comparison", "check_memory", "compare", "required_memory", "score"]
