"""One style for every figure: fonts, grid, a colour-blind-safe palette, and writing figures
without timestamps.

The pipeline's figure scripts use it through ``scripts/_figures.py`` (which applies :data:`STYLE`
to pyplot globally); the package's own figures (``compare --plot``) apply it only while they draw,
with ``matplotlib.rc_context(STYLE)``, and never touch the caller's pyplot state.

Colours are the Okabe–Ito palette (Okabe & Ito 2008; Wong, Nature Methods 8:441, 2011), which
stays distinguishable under the common colour-vision deficiencies; each measure keeps its colour
in every figure. Continuous quantities use ``cividis``, a colour map designed to read the same
with and without colour-vision deficiency; signed ones (a difference, centred on 0) use
ColorBrewer's ``PuOr``, a diverging map that is safe for colour-vision deficiency. Files are
written without timestamps, so a rerun gives the same bytes.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from cycler import cycler

from ..atomic import atomic_path

__all__ = ["COLOUR_MAP", "DEFAULT_PALETTE", "DIVERGING_MAP", "MEASURE_COLOURS", "OKABE_ITO",
           "PAIR", "PALETTE", "STYLE", "MeasureColours", "save_figure", "write_figure"]

# Okabe–Ito (yellow, #F0E442, is left out: it is too light for lines on white).
OKABE_ITO = {
    "vermillion": "#D55E00",
    "blue": "#0072B2",
    "orange": "#E69F00",
    "bluish_green": "#009E73",
    "sky_blue": "#56B4E9",
    "reddish_purple": "#CC79A7",
    "black": "#000000",
    "grey": "#999999",
}
PALETTE = list(OKABE_ITO.values())

# Colours for measures the table below does not name (a user's): Paul Tol's muted scheme, also
# safe for colour-vision deficiency, one chosen from the measure's name (the same in every run).
DEFAULT_PALETTE = ("#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677",
                   "#882255", "#AA4499")


class MeasureColours(dict):
    """Measure name -> colour; a name it does not hold gets one of :data:`DEFAULT_PALETTE`,
    chosen from the name."""

    def __missing__(self, name: str) -> str:
        return DEFAULT_PALETTE[zlib.crc32(str(name).encode()) % len(DEFAULT_PALETTE)]


# One colour per measure across figures: magnitude in vermillion (the paper's measure), the
# reference-based baselines and the reference-free ones in the other colours.
MEASURE_COLOURS = MeasureColours({
    "magdiff": OKABE_ITO["vermillion"],
    "magarea": OKABE_ITO["vermillion"],
    "mag_half_tconv": OKABE_ITO["reddish_purple"],
    "recall": OKABE_ITO["blue"],
    "coverage": OKABE_ITO["orange"],
    "precision": OKABE_ITO["sky_blue"],
    "density": OKABE_ITO["bluish_green"],
    "vendi": OKABE_ITO["black"],
    "mmd_rbf": OKABE_ITO["black"],
    "mmd_linear": OKABE_ITO["grey"],
    "avgsim": OKABE_ITO["blue"],
    "gmstds": OKABE_ITO["bluish_green"],
    "gmstds_unit": OKABE_ITO["reddish_purple"],  # GMStds of L2-normalised vectors
    "isoscore": OKABE_ITO["sky_blue"],
    "dcscore": OKABE_ITO["orange"],
})
# Two conditions compared in one panel (e.g. sequential vs simultaneous mode dropping).
PAIR = (OKABE_ITO["vermillion"], OKABE_ITO["blue"])
# Continuous colour scale (e.g. curvature), and one for signed values centred on 0.
COLOUR_MAP = "cividis"
DIVERGING_MAP = "PuOr"

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": cycler(color=PALETTE),
    "image.cmap": COLOUR_MAP,
    "lines.linewidth": 1.5,
    "pdf.fonttype": 42,            # TrueType in the PDF: text stays text
    "svg.hashsalt": "diversity",   # no random ids
}

_FORMATS = {".png": "png", ".pdf": "pdf"}
# No creation date or producer: the same figure is the same bytes on every run.
_METADATA = {"png": {"Software": None}, "pdf": {"CreationDate": None, "ModDate": None,
                                                "Producer": None, "Creator": None}}


def write_figure(fig, path, dpi: int | None = None) -> Path:
    """Write ``fig`` to ``path`` as PNG or PDF (by the extension), atomically
    (:func:`diversity_core.atomic.atomic_path`: a link or folder at ``path`` is refused); returns
    the path."""
    path = Path(path)
    kind = _FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: a figure is written as .png or .pdf; got {path.suffix!r}.")
    with atomic_path(path, what="figure") as tmp:
        fig.savefig(tmp, format=kind, dpi=dpi or STYLE["savefig.dpi"], metadata=_METADATA[kind])
    return path


def save_figure(fig, path, pdf=None, dpi: int | None = None) -> tuple[Path, Path]:
    """Write ``fig`` to ``path`` (PNG) and to ``pdf`` (default: the same name with ``.pdf``);
    close it.

    Each file goes to a temporary name first and is renamed when complete. No creation date is
    stored, so the files are the same bytes on every run. Returns the two paths.
    """
    import matplotlib.pyplot as plt

    png = Path(path)
    pdf = Path(pdf) if pdf is not None else png.with_suffix(".pdf")
    if png.suffix != ".png" or pdf.suffix != ".pdf":
        raise ValueError(f"save_figure: {png} should end in .png and {pdf} in .pdf.")
    paths = (write_figure(fig, png, dpi), write_figure(fig, pdf, dpi))
    plt.close(fig)
    return paths
