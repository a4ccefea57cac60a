"""What ``compare`` shows: the result of :func:`diversity_core.compare` as aligned text, as
Markdown (a report with the exact command and the figure), and as a figure.

Sets are labelled ``[1]``, ``[2]``, ... in the order given and the reference ``[R]``, so that the
MagDiff matrix stays narrow however long the files' names are. The tables' columns are the
measures' names (``magarea``, ``vendi``, ...): the columns of :attr:`Comparison.table` and of
the CSV, the keys of the JSON and the names ``--metrics`` takes. Numbers have six significant
digits; an undefined value reads ``undefined`` and its reason is listed under the tables.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import atomic_write
from ..measures.registry import get_measure_names
from ..reporting.text import aligned

__all__ = ["heading", "labels", "plot_comparison", "render_markdown", "render_text",
           "write_report"]

# Annotate the heat map's cells with their values up to this many sets.
ANNOTATE_UP_TO = 12


def labels(result) -> dict[str, str]:
    """``[1]``, ``[2]``, ... for the sets, ``[R]`` for the reference."""
    out, i = {}, 0
    for name, role in result.table["role"].items():
        if role == "reference":
            out[name] = "[R]"
        else:
            i += 1
            out[name] = f"[{i}]"
    return out


def _number(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return "undefined"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{value:.6g}"


def _tables(result, normalise: str | None):
    """(title, header, rows) of each table: the sets, the MagDiff matrix, the reference's."""
    tags = labels(result)
    T = result.table
    free = ["t_conv", *(m for m in get_measure_names(needs_reference=False, defaults=False)
                        if m in T.columns)]
    rows = [[f"{tags[name]} {name}", _number(row["n_points"]), _number(row["n_distinct"]),
             *(_number(row[m]) for m in free)] for name, row in T.iterrows()]
    tables = [("", ["set", "points", "distinct", *free], rows)]
    M = result.mag_diff_matrix(normalise)
    matrix_rows = [[tags[name], *(_number(v) for v in M.loc[name])] for name in M.index]
    tables.append((_magdiff_title(result, normalise), ["", *(tags[n] for n in M.columns)],
                   matrix_rows))
    if result.reference is not None:
        against = ["magdiff", *(m for m in get_measure_names(needs_reference=True, defaults=False)
                                if m != "magdiff" and m in T.columns)]
        magdiff = result.mag_diff_matrix(normalise)[result.reference]
        ref_rows = [[f"{tags[name]} {name}", _number(magdiff[name]),
                     *(_number(T.loc[name, m]) for m in against[1:])]
                    for name in result.sets]
        k = result.options["k"]
        tables.append((f"against the reference {tags[result.reference]} {result.reference} "
                       f"(MagDiff = set − reference; PRDC: reference = real, set = fake, "
                       f"k = {k}; MMD² Euclidean):",
                       ["set", *against], ref_rows))
    return tables


def _magdiff_title(result, normalise: str | None) -> str:
    how = {None: "", "t_cut": ", divided by t_cut",
           "reference_area": ", divided by the column's MagArea"}[normalise]
    return (f"MagDiff = ∫_0^t_cut (Mag_row − Mag_column) dt{how} (signed; |MagDiff| is its "
            "absolute value):")


def _reasons(result) -> list[str]:
    """One line per set with undefined values: the measures that share a reason, the reason
    (without the set's name, which starts the line)."""
    tags = labels(result)
    lines = []
    for name, undefined in result.undefined.items():
        by_reason: dict[str, list[str]] = {}
        for measure, why in undefined.items():
            why = why[len(name) + 2:] if why.startswith(f"{name}: ") else why
            by_reason.setdefault(why, []).append(measure)
        if by_reason:
            lines.append(f"{tags[name]} {name}: " + "; ".join(
                f"{', '.join(measures)}: {why.rstrip('.')}" for why, measures in by_reason.items()))
    return lines


def _warnings(result) -> list[str]:
    tags = labels(result)
    return [f"{tags[name]} {name}: {message}" for name, messages in result.notes.items()
            for message in messages]


def heading(result) -> str:
    """One line: how many sets, the distance, t_cut and how it was chosen."""
    n = len(result.sets)
    t_cut = "none" if result.t_cut is None else f"{result.t_cut:.6g}"
    return (f"compare: {n} set{'s' if n != 1 else ''}"
            + (" and a reference" if result.reference is not None else "")
            + f"; {result.options['metric']} distance; t_cut = {t_cut} ({result.t_cut_rule})")


def render_text(result, *, files: list[str], options: str, command: str,
                normalise: str | None = None) -> str:
    """The result as aligned text: the heading, what was read, the options and the command,
    then the tables and the reasons of undefined values."""
    lines = [heading(result), *(f"  {line}" for line in files), f"options: {options}",
             f"command: {command}"]
    for title, header, rows in _tables(result, normalise):
        lines += ["", *([title] if title else []), *aligned(header, rows)]
    for title, items in (("undefined:", _reasons(result)), ("notes:", _warnings(result))):
        if items:
            lines += ["", title, *(f"  {item}" for item in items)]
    return "\n".join(lines)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    return ["| " + " | ".join(cell(h) or " " for h in header) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
            *("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)]


def render_markdown(result, *, files: list[str], options: str, command: str,
                    figure: str | None, normalise: str | None = None) -> str:
    """A short Markdown report: the exact command, what was read, the tables, the reasons of
    undefined values, and the figure."""
    n = len(result.sets)
    lines = [f"# Comparison of {n} set{'s' if n != 1 else ''}", "", "```", command, "```", "",
             _sentence(heading(result).replace("compare: ", "")), "",
             f"Options: `{options}`", "", "Read:", "", *(f"- `{f}`" for f in files)]
    for title, header, rows in _tables(result, normalise):
        heading_ = title.rstrip(":") or "Diversity of each set"
        lines += ["", f"## {heading_[:1].upper()}{heading_[1:]}", "",
                  *_markdown_table(header, rows)]
    for title, items in (("Undefined values", _reasons(result)), ("Notes", _warnings(result))):
        if items:
            lines += ["", f"## {title}", "", *(f"- {item}" for item in items)]
    if figure:
        lines += ["", "## Figure", "",
                  "Left: the magnitude functions on the shared scale, the integration interval "
                  "[0, t_cut] shaded. Right: MagDiff between every pair (row − column).", "",
                  f"![magnitude functions and MagDiff]({figure})"]
    return "\n".join(lines) + "\n"


# The colour bar's label, in matplotlib's mathtext, for each normalisation of MagDiff.
_INTEGRAL = (r"\int_0^{t_\mathrm{cut}} (\mathrm{Mag}_\mathrm{row} - \mathrm{Mag}_\mathrm{column})"
             r"\,dt")
_COLOURBAR = {None: f"MagDiff ${_INTEGRAL}$",
              "t_cut": rf"MagDiff $(1/t_\mathrm{{cut}}) {_INTEGRAL}$",
              "reference_area": rf"MagDiff ${_INTEGRAL}$ / MagArea$_\mathrm{{column}}$"}


def _cell(value: float) -> str:
    """A heat map cell: whole numbers from 100 on, three significant digits below."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def plot_comparison(result, path, *, normalise: str | None = None,
                    title: str | None = None) -> Path:
    """Magnitude functions of all sets on the shared scale with t_cut marked (left) and the
    MagDiff matrix as a heat map (right), in the project's figure style; PNG or PDF by the
    extension of ``path``. Uses matplotlib without pyplot: the caller's state is untouched."""
    import matplotlib
    from matplotlib.figure import Figure

    # matplotlib (the "pipeline" extra) only where a figure is drawn: the tables need none.
    from ..reporting.figure_style import (
        COLOUR_MAP,
        DIVERGING_MAP,
        OKABE_ITO,
        PALETTE,
        STYLE,
        write_figure,
    )

    tags = labels(result)
    names = list(result.table.index)
    m = len(names)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(11.5, 4.6), layout="constrained")
        ax, heat = fig.subplots(1, 2, width_ratios=[1.3, 1])
        colours = (PALETTE if m <= len(PALETTE)
                   else matplotlib.colormaps[COLOUR_MAP](np.linspace(0, 0.95, m)))
        ts = result.ts
        for i, name in enumerate(names):
            is_ref = name == result.reference
            ax.plot(ts, result.functions.loc[name].to_numpy(), color=colours[i % len(colours)],
                    ls="--" if is_ref else "-", label=f"{tags[name]} {name}")
        if result.t_cut is not None:
            ax.axvspan(0, result.t_cut, color=OKABE_ITO["grey"], alpha=0.12, lw=0)
            ax.axvline(result.t_cut, color=OKABE_ITO["black"], lw=1, ls=":")
            ax.annotate(f"t_cut = {result.t_cut:.4g}", (result.t_cut, 0), xytext=(4, 4),
                        textcoords="offset points", fontsize=8,
                        xycoords=("data", "axes fraction"), va="bottom")
        ax.set_xlabel(f"scale t (1 / {result.options['metric']} distance)")
        ax.set_ylabel("magnitude (effective number of points)")
        ax.set_title("magnitude functions; t_cut: " + result.t_cut_rule.split(";")[0])
        ax.legend(fontsize=7 if m > 8 else 8, loc="upper left", ncol=2 if m > 10 else 1)

        M = result.mag_diff_matrix(normalise).to_numpy(dtype=float)
        finite = M[np.isfinite(M)]
        bound = float(np.abs(finite).max()) if finite.size and np.abs(finite).max() > 0 else 1.0
        cmap = matplotlib.colormaps[DIVERGING_MAP].with_extremes(bad=OKABE_ITO["grey"])
        image = heat.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=-bound, vmax=bound)
        heat.grid(False)
        ticks = [tags[n] for n in names]
        heat.set_xticks(range(m), ticks, fontsize=8, rotation=90 if m > 12 else 0)
        heat.set_yticks(range(m), ticks, fontsize=8)
        if m <= ANNOTATE_UP_TO:
            for i in range(m):
                for j in range(m):
                    if np.isfinite(M[i, j]):
                        heat.text(j, i, _cell(M[i, j]), ha="center", va="center", fontsize=7,
                                  color="white" if abs(M[i, j]) > 0.6 * bound else "black")
        fig.colorbar(image, ax=heat, shrink=0.85, label=_COLOURBAR[normalise])
        heat.set_title("MagDiff (row − column)")
        if title:
            fig.suptitle(title)
        return write_figure(fig, path)


# The figure of a report, beside report.md.
REPORT_FIGURE = "comparison.png"


def write_report(result, folder, *, files: list[str], options: str, command: str,
                 normalise: str | None = None, data: dict[str, str] | None = None) -> Path:
    """Write ``folder/report.md`` with its figure ``folder/comparison.png`` and the files of
    ``data`` (name -> text, e.g. the JSON and CSV of the results), each atomically
    (:mod:`diversity_core.atomic`: a link or folder in the place of one is refused). Files of
    the folder with other names are left alone; :func:`report_files` names those replaced.
    Returns the report's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figure = plot_comparison(result, folder / REPORT_FIGURE, normalise=normalise)
    texts = dict(data or {})
    texts["report.md"] = render_markdown(result, files=files, options=options, command=command,
                                         figure=figure.name, normalise=normalise)
    for name, text in texts.items():
        with atomic_write(folder / name, what="--report file") as out:
            out.write(text)
    return folder / "report.md"


def report_files(folder, data_names=()) -> list[Path]:
    """The files :func:`write_report` writes into ``folder`` (with ``data_names``) that are
    there already, and so would be replaced."""
    folder = Path(folder)
    return [folder / name for name in ("report.md", REPORT_FIGURE, *data_names)
            if (folder / name).exists() or (folder / name).is_symlink()]
