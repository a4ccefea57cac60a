"""Figures: the magnitude functions of each model (mean ± sd over the subsamples) for one
collection, and the confusion matrices of the MagDiff k-NN classifier."""

import numpy as np
import pandas as pd
from _contract import Input, Inputs, Output
from _figures import COLOUR_MAP, plt, save_figure
from _job import run

from diversity_core.embed.sentences import TEXT_MODELS

# Short names for the confusion matrices' axes.
SHORT = {"all-mpnet-base-v2": "mpnet-base", "all-MiniLM-L6-v2": "MiniLM-L6",
         "paraphrase-MiniLM-L3-v2-onnx": "MiniLM-L3 (ONNX)",
         "multilingual-e5-small-q4": "e5-small (4-bit)", "sre-MiniLM": "SRE MiniLM",
         "glove-6B-50d-mean": "GloVe mean", "all-distilroberta-v1": "DistilRoBERTa",
         "multi-qa-distilbert-cos-v1": "multi-qa DistilBERT"}


# Panel titles of the preprocessings (model_distinguishing.preprocess).
PREPROCESSING_LABELS = {"raw": "raw", "pca": "PCA + normalisation",
                        "pca_uncentred": "uncentred projection + normalisation",
                        "presto": "Presto: diameter + PCA"}


def _label(model: str) -> str:
    info = TEXT_MODELS.get(model)
    return info.label if info else model


def main(scores: Inputs, confusion: Input, functions: Output, functions_pdf: Output,
         confusion_figure: Output, confusion_figure_pdf: Output, collection: str, variants: list,
         k: int):
    """Write ``functions`` (one panel per preprocessing) and the confusion figure, each as PNG
    and as PDF."""
    fig, axes = plt.subplots(1, len(scores), figsize=(5.2 * len(scores), 4.2), squeeze=False)
    for ax, path in zip(axes[0], scores, strict=True):
        with np.load(path) as stored:
            ts, F, labels = stored["ts"], stored["functions"], stored["labels"]
            models, preprocessing = stored["models"].tolist(), str(stored["preprocessing"])
            metric = str(stored["metric"])
        for i, model in enumerate(models):
            mean, sd = F[labels == i].mean(axis=0), F[labels == i].std(axis=0)
            line, = ax.plot(ts, mean, label=_label(model), lw=1.6)
            ax.fill_between(ts, mean - sd, mean + sd, color=line.get_color(), alpha=0.25, lw=0)
        ax.set_xlabel(f"scale t (1 / {metric} distance)")
        ax.set_ylabel("magnitude (effective number of documents)")
        ax.set_title(f"{collection}: {PREPROCESSING_LABELS.get(preprocessing, preprocessing)}\n"
                     f"{metric} distance, {len(F) // len(models)} subsamples per model",
                     fontsize=10)
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    save_figure(fig, functions, pdf=functions_pdf)

    counts = pd.read_csv(confusion)
    panels = counts[["dataset", "preprocessing", "distance"]].drop_duplicates().values.tolist()
    n_cols = len(variants)
    n_rows = int(np.ceil(len(panels) / n_cols))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(5.0 * n_cols, 4.6 * n_rows),
                             squeeze=False)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    for ax, (dataset, preprocessing, distance) in zip(axes.ravel(), panels, strict=False):
        part = counts[(counts.dataset == dataset) & (counts.preprocessing == preprocessing)
                      & (counts.distance == distance)]
        order = list(dict.fromkeys(part.true_model))
        M = part.pivot(index="true_model", columns="predicted_model", values="count")
        M = M.loc[order, order].to_numpy(dtype=float)
        share = M / M.sum(axis=1, keepdims=True)
        ax.imshow(share, vmin=0, vmax=1, cmap=COLOUR_MAP)
        for i in range(len(order)):
            for j in range(len(order)):
                ax.text(j, i, f"{share[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if share[i, j] > 0.6 else "white")
        short = [SHORT.get(m, m) for m in order]
        ax.set_xticks(range(len(order)), short, rotation=40, ha="right", fontsize=7)
        ax.set_yticks(range(len(order)), short, fontsize=7)
        ax.set_xlabel("predicted model")
        ax.set_ylabel("true model")
        ax.set_title(f"{dataset}, {preprocessing}, {distance}: MagDiff {k}-NN", fontsize=9)
    fig.tight_layout()
    save_figure(fig, confusion_figure, pdf=confusion_figure_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
