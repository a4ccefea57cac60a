"""Figure 3 (cross-validated R² of temperature predicted from each measure, per task and
embedding model) and Figure 4 (MagArea of every set against its temperature, one task and model,
with Spearman's rho and its 95% bootstrap interval)."""

import numpy as np
import pandas as pd
from _contract import Input, Output
from _figures import MEASURE_COLOURS, plt, save_figure
from _job import run

from diversity_core.measures.registry import get_measure, labels


def colour(measure: str) -> str:
    """The pipeline's colour of the measure a column names (mag_area: "magarea")."""
    return MEASURE_COLOURS[get_measure(measure).name]


DATA_LABELS = {"generated": "SmolLM2-135M-Instruct, regenerated tasks",
               "tevet_berant": "Tevet & Berant's decoding sets"}


def draw_figure3(r2: pd.DataFrame, measures, data: str, path, pdf=None) -> tuple:
    tasks = list(dict.fromkeys(r2["task"]))
    models = list(dict.fromkeys(r2["model"]))
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 4.2), sharey=True,
                             squeeze=False)
    offsets = np.linspace(-0.3, 0.3, len(measures))
    shown = labels(measures, paper=True)
    for ax, task in zip(axes[0], tasks, strict=True):
        for offset, measure in zip(offsets, measures, strict=True):
            part = r2[(r2["task"] == task) & (r2["measure"] == measure)].set_index("model")
            part = part.reindex(models)
            ax.errorbar(np.arange(len(models)) + offset, part["r2_mean"], part["r2_std"],
                        fmt="o", ms=5, capsize=2, color=colour(measure),
                        label=shown[measure])
        ax.axhline(0.0, color="grey", lw=0.6, ls=":")
        ax.set_xticks(np.arange(len(models)), models, rotation=25, ha="right", fontsize=8)
        ax.set_title(task)
    axes[0][0].set_ylabel("R² (isotonic regression of temperature)")
    # The legend sits right of the last panel, outside every axes: inside one it covered that
    # panel's points (wherever the R² of a task happen to lie), and no corner is always free.
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, title="measure", title_fontsize=8)
    fig.suptitle(f"Predicting the softmax temperature from each diversity measure "
                 f"({DATA_LABELS.get(data, data)}; mean ± sd over CV folds)", fontsize=10)
    fig.tight_layout()  # makes room for the legend outside the axes
    return save_figure(fig, path, pdf=pdf)


def draw_figure4(scores: pd.DataFrame, rho: pd.Series, task: str, model: str, path,
                 pdf=None) -> tuple:
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    temperatures = np.sort(scores["temperature"].unique())
    # A grid of temperatures: medians per temperature, points jittered apart; continuous
    # temperatures (decTest design, as many as sets): medians per 0.1-wide bin, no jitter.
    on_grid = len(temperatures) <= 30
    step = np.min(np.diff(temperatures)) if len(temperatures) > 1 else 0.1
    jitter = (np.random.default_rng(0).uniform(-0.2, 0.2, len(scores)) * step if on_grid
              else np.zeros(len(scores)))
    ax.scatter(scores["temperature"] + jitter, scores["mag_area"], s=9, alpha=0.45,
               color=colour("mag_area"), lw=0)
    if on_grid:
        medians = scores.groupby("temperature")["mag_area"].median()
        label = "median per temperature"
    else:
        # Each bin's median at its sets' mean temperature: the last bin is cut by the cap.
        by_bin = scores.groupby(np.floor(scores["temperature"] / 0.1 + 1e-9))
        medians = pd.Series(by_bin["mag_area"].median().to_numpy(),
                            index=by_bin["temperature"].mean().to_numpy())
        label = "median per 0.1 of τ"
    ax.plot(medians.index, medians.to_numpy(), color="black", lw=1.2, marker="o", ms=3,
            label=label)
    ax.set_xlabel("softmax temperature τ")
    ax.set_ylabel(f"MagArea (cosine, t_cut = {scores['t_cut'].iloc[0]:.3g})")
    ax.set_title(f"{task}, {model}: ρ = {rho['rho']:.2f} "
                 f"[{rho['ci_low']:.2f}, {rho['ci_high']:.2f}] (95% bootstrap)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return save_figure(fig, path, pdf=pdf)


def main(r2: Input, spearman: Input, scores: Input, figure3: Output, figure3_pdf: Output,
         figure4: Output, figure4_pdf: Output, measures: list, figure_task: str,
         figure_model: str, data: str):
    """Draw FIGURE3 from R2 (.csv) and FIGURE4 from SCORES (.csv) and SPEARMAN (.csv), each as
    PNG and as PDF."""
    draw_figure3(pd.read_csv(r2), measures, data, figure3, figure3_pdf)
    rho = pd.read_csv(spearman)
    row = rho[(rho["task"] == figure_task) & (rho["model"] == figure_model)
              & (rho["measure"] == "mag_area")].iloc[0]
    draw_figure4(pd.read_csv(scores), row, figure_task, figure_model, figure4, figure4_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
