"""Figure: cross-validated MSE of curvature on MagArea against the integration limit, with the
paper's Table 1 values as bands and today's default limit marked; one panel per distance."""

import pandas as pd
from _contract import Input, Output
from _figures import PAIR, plt, save_figure
from _job import run

# Table 1 of the paper: mean ± sd over 5 folds.
PAPER = {"piecewise linear": (0.05, 0.03), "quantile": (0.10, 0.05)}
COLOURS = {"piecewise linear": PAIR[1], "quantile": PAIR[0]}
STYLES = {"MagArea": "-", "MagArea (log t)": ":"}
TITLES = {"true": "true hyperbolic distance (default)",
          "turkes": "Turkeš et al.'s distance (K < 0 halved)"}


def main(sensitivity: Input, figure: Output, figure_pdf: Output):
    """Write FIGURE (.png) and FIGURE_PDF from the SENSITIVITY table."""
    table = pd.read_csv(sensitivity)
    variants = list(dict.fromkeys(table["variant"]))
    fig, axes = plt.subplots(1, len(variants), figsize=(6.2 * len(variants), 4.6), sharey=True,
                             constrained_layout=True, squeeze=False)
    default = table[table["default"]]
    for ax, variant in zip(axes[0], variants, strict=True):
        part = table[table["variant"] == variant]
        for regression, (mean, sd) in PAPER.items():
            ax.axhspan(mean - sd, mean + sd, color=COLOURS[regression], alpha=0.10, lw=0)
            ax.axhline(mean, color=COLOURS[regression], lw=0.8, alpha=0.6)
            ax.text(part["t_cut"].min(), mean, f" paper, {regression}: {mean} ± {sd}",
                    color=COLOURS[regression], fontsize=7, va="bottom")
        for (feature, regression), rows in part.groupby(["feature", "regression"], sort=False):
            fixed = rows[rows["limit"] == "t_cut"].sort_values("t_cut")
            ax.plot(fixed["t_cut"], fixed["mse_mean"], STYLES[feature],
                    color=COLOURS[regression], lw=1.4, label=f"{feature}, {regression}")
            by_target = rows[rows["limit"] == "target"]
            ax.scatter(by_target["t_cut"], by_target["mse_mean"], s=14, marker="o",
                       color=COLOURS[regression], zorder=3,
                       facecolors="none" if feature != "MagArea" else COLOURS[regression])
            if feature == "MagArea" and regression == "piecewise linear":
                for _, row in by_target.iterrows():
                    ax.annotate(f"q={row['target']:g}", (row["t_cut"], row["mse_mean"]),
                                textcoords="offset points", xytext=(2, 5), fontsize=6)
        # The paper's rule (median convergence scale): today's default for the configured
        # distance, marked as the same rule for the other.
        if len(default):
            rule = part[part["target"] == default["target"].iloc[0]]
            t = rule["t_cut"].iloc[0]
            today = bool(rule["default"].iloc[0])
            ax.axvline(t, color="k", ls="--" if today else ":", lw=0.9)
            label = "today's default" if today else "same rule"
            ax.text(t, 0.02, f" {label}:\n median t_conv = {t:.1f}", fontsize=7, va="bottom",
                    transform=ax.get_xaxis_transform())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("integration limit t_cut (1 / geodesic distance; dots: median t with "
                      "Mag(t) = q·n)")
        ax.set_title(TITLES.get(variant, variant))
    axes[0, 0].set_ylabel("5-fold cross-validated MSE of K ((1 / radius²)²)")
    axes[0, 0].legend(loc="upper left", fontsize=7)
    save_figure(fig, figure, pdf=figure_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
