"""The decTest design's temperature cap, drawn: every pilot set's dictionary share against its
temperature, one panel per task, with the isotonic fit, the plateau's level (the mean share of the
lowest third of the pilot range), the level less the allowed drop and the cap (a vertical line)
that these give."""

import numpy as np
import pandas as pd
from _contract import Input, Output
from _figures import PALETTE, plt, save_figure
from _job import run


def draw(fluency: pd.DataFrame, caps: pd.DataFrame, path, pdf=None) -> tuple:
    tasks = list(caps["task"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.8 * len(tasks), 3.4), sharey=True,
                             squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        sets = fluency[fluency["task"] == task].sort_values("temperature")
        cap = caps[caps["task"] == task].iloc[0]
        ax.scatter(sets["temperature"], sets["dictionary_share"], s=10, alpha=0.6,
                   color=PALETTE[0], label="pilot set")
        ax.step(sets["temperature"], sets["fitted_share"], where="mid", color=PALETTE[1], lw=1.4,
                label="isotonic fit")
        ax.axhline(cap["level"], color="grey", lw=0.7, ls=":", label="plateau level")
        ax.axhline(cap["level"] - cap["max_drop"], color="grey", lw=0.7, ls="--",
                   label=f"level − {cap['max_drop']:g}")
        ax.axvline(cap["cap"], color=PALETTE[2], lw=1.2, label=f"cap τ = {cap['cap']:.2f}")
        ax.set_title(f"{task} ({int(cap['n_pilot_sets'])} pilot sets)", fontsize=9)
        ax.set_xlabel("softmax temperature τ")
        ax.legend(fontsize=7, loc="lower left")
    axes[0][0].set_ylabel("share of words in the dictionary")
    low = np.nanmin(fluency["dictionary_share"])
    axes[0][0].set_ylim(max(0.0, low - 0.02), 1.005)
    fig.suptitle("Where the language model stops writing words: the decTest design's "
                 "temperature cap per task", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, pdf=pdf)


def main(fluency: Input, caps: Input, figure: Output, figure_pdf: Output):
    """Draw FIGURE (PNG) and FIGURE_PDF from FLUENCY and CAPS (.csv)."""
    draw(pd.read_csv(fluency), pd.read_csv(caps), figure, figure_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
