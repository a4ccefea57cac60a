"""One style for every figure of the pipeline: fonts, grid, a colour-blind-safe palette, and
``save_figure`` writing each figure as PNG and PDF.

Every figure script does::

    from _figures import MEASURE_COLOURS, plt, save_figure   # plt with the style applied
    ...
    save_figure(fig, figure)          # figure.png and figure.pdf beside it

The style itself (the Okabe–Ito palette, ``cividis``, fonts, files without timestamps) lives in
the package, :mod:`diversity_core.reporting.figure_style`, which the command line's figures
(``compare --plot``) use as well; this module applies it to pyplot for the rule scripts.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from diversity_core.reporting.figure_style import (  # noqa: E402, F401  (re-exported)
    COLOUR_MAP,
    DIVERGING_MAP,
    MEASURE_COLOURS,
    OKABE_ITO,
    PAIR,
    PALETTE,
    STYLE,
    save_figure,
)

plt.rcParams.update(STYLE)
