"""Moved to :mod:`diversity_core.assets.fetch` (the assets room shared by every stage).

This name stays so that imports written before the move keep working; new code imports from
:mod:`diversity_core.assets`.
"""

from ..assets.fetch import *  # noqa: F401,F403
from ..assets.fetch import __all__  # noqa: F401
