"""Figure 2: magnitude functions coloured by curvature (left); MagArea against curvature (right)."""

import matplotlib
import numpy as np
import pandas as pd
from _contract import Input, Inputs, Output
from _figures import COLOUR_MAP, plt, save_figure
from _job import run


def main(features: Input, functions: Inputs, figure: Output, figure_pdf: Output):
    """Write FIGURE (.png) and FIGURE_PDF from the FEATURES table and the FUNCTIONS chunk
    files (magnitude functions)."""
    frame = pd.read_csv(features).set_index("cloud")
    parts = [np.load(p) for p in functions]
    ts = parts[0]["ts"]
    index = np.concatenate([p["index"] for p in parts])
    values = np.concatenate([p["magnitude"] for p in parts])
    # One cloud per training curvature keeps the left panel readable.
    train = frame[frame["split"] == "train"]
    first = train.reset_index().groupby("curvature")["cloud"].min()
    row_of = {cloud: row for row, cloud in enumerate(index)}

    norm = matplotlib.colors.Normalize(frame["curvature"].min(), frame["curvature"].max())
    cmap = matplotlib.colormaps[COLOUR_MAP]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for curvature, cloud in first.items():
        left.plot(ts, values[row_of[cloud]], color=cmap(norm(curvature)), lw=0.8)
    left.set_xlabel("scale t (1 / geodesic distance; the disks have radius 1)")
    left.set_ylabel("magnitude Mag(t) (effective number of points)")
    left.set_title("Magnitude functions of unit disks")
    fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=left,
                 label="curvature K (1 / radius²)")
    for split, marker in (("train", "o"), ("test", "^")):
        part = frame[frame["split"] == split]
        right.scatter(part["curvature"], part["mag_area"], s=6 if split == "train" else 14,
                      marker=marker, c=part["curvature"], cmap=cmap, norm=norm,
                      alpha=0.6, label=f"{split} ({len(part)} clouds)")
    right.set_xlabel("curvature K (1 / radius²)")
    right.set_ylabel("MagArea = ∫ Mag(t) dt on [0, t_cut] (points × scale)")
    right.set_title("MagArea against curvature")
    right.legend(loc="best")
    save_figure(fig, figure, pdf=figure_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
