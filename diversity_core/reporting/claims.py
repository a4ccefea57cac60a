"""The paper's claims beside our results: read a number from a result table, give a verdict.

The claims live in a data file (``workflow/paper_claims.yaml``, loaded by the caller and passed
here as a dict): for each experiment the result files it writes and, for each claim, the paper's
value, a *reader* (how our value is read from a result table) and a *verdict rule* (how the two
are compared). :func:`evaluate_claims` returns one row per claim; :func:`render_summary` turns
the rows into Markdown (``results/summary.md``).

Verdicts: ``reproduced``, ``partly``, ``not reproduced``, and ``not run`` where the result file of
a claim does not exist (an experiment that is not implemented, not configured or not run yet).
A claim whose value is undefined in our results (NaN) is ``not reproduced``.

Readers (``ours: {read: <name>, file: <path relative to the results folder>, ...}``), each on the
rows selected by ``where`` (``{column: value or [values]}``; names compare without case,
spaces or punctuation, and through the ``names`` aliases of the claims file):

``value``      one row's ``column`` (``minus_column``: minus another column; ``spread_column``:
               its spread, e.g. a standard deviation);
``statistic``  ``median``, ``mean``, ``min``, ``max`` or ``range`` of ``column`` over the rows;
``share``      the share of rows (or, with ``group_by``, of groups: ``per_group: any | all``)
               whose ``column`` ``equals`` a value or is ``at_least`` / ``at_most`` a number;
``rank``       within each ``group_by`` group, the rank of the ``subject`` item (``item_column``)
               by ``score_column`` (1 = best; ties share the better rank), then ``median_rank``
               or ``share_best`` over the groups;
``margin``     within each group, the ``subject``'s score minus the best score of ``others``
               (signs flipped when lower is better), then the ``mean`` or the ``min`` over groups
               or ``share_ahead`` (share of groups with a margin >= 0).

Verdict rules (``verdict: {rule: <name>, ...}``):

``within_spread``  reproduced if |ours - paper| <= the paper's spread + ours; partly if <= twice
                   that; otherwise not reproduced;
``close``          reproduced if |ours - paper| <= ``tolerance``; partly if <= ``partly_tolerance``;
``at_least``       reproduced if ours >= ``threshold``; partly if ours >= ``partly``;
``at_most``        reproduced if ours <= ``threshold``; partly if ours <= ``partly``;
``range``          reproduced if both ends of our range are within ``tolerance`` of the paper's;
                   partly if the two ranges overlap; otherwise not reproduced.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .names import measure_spellings

VERDICTS = ("reproduced", "partly", "not reproduced", "not run")


@dataclass(frozen=True)
class Reading:
    """Our value of one claim: a number or a (low, high) range, with an optional spread."""

    value: float | tuple[float, float]
    spread: float | None = None
    percent: bool = False          # a share: shown as a percentage
    detail: str = ""               # e.g. "8 of 9 panels"


# ----------------------------------------------------------------------------------------------
# Names: result tables and the claims file may spell a measure differently (VS, vendi, Vendi Score)


def _key(name) -> str:
    return re.sub(r"[^0-9a-z]+", "", str(name).lower())


class _Names:
    """Case- and punctuation-blind name matching with aliases (``names`` in the claims file)."""

    def __init__(self, aliases: dict | None):
        self._groups = {}
        for canonical, others in (aliases or {}).items():
            group = {_key(canonical), *(_key(o) for o in others)}
            for member in group:
                self._groups.setdefault(member, set()).update(group)

    def matches(self, wanted, value) -> bool:
        wanted, value = _key(wanted), _key(value)
        return value == wanted or value in self._groups.get(wanted, ())

    def mask(self, column: pd.Series, wanted) -> np.ndarray:
        options = wanted if isinstance(wanted, list) else [wanted]
        keys = column.map(_key)
        hits = np.zeros(len(column), dtype=bool)
        for option in options:
            allowed = {_key(option), *self._groups.get(_key(option), ())}
            hits |= keys.isin(allowed).to_numpy()
        return hits


# ----------------------------------------------------------------------------------------------
# Readers


def _require_columns(table: pd.DataFrame, columns, where: str) -> None:
    missing = [c for c in columns if c is not None and c not in table.columns]
    if missing:
        raise ValueError(f"{where}: no column(s) {missing}; the table has {list(table.columns)}.")


def _select(table: pd.DataFrame, spec: dict, names: _Names, where: str) -> pd.DataFrame:
    conditions = spec.get("where") or {}
    _require_columns(table, conditions, where)
    mask = np.ones(len(table), dtype=bool)
    for column, wanted in conditions.items():
        mask &= names.mask(table[column].astype(str), wanted)
    rows = table[mask]
    if rows.empty:
        raise ValueError(f"{where}: no row matches {conditions}.")
    return rows


def _numbers(series: pd.Series, where: str) -> pd.Series:
    values = pd.to_numeric(series, errors="coerce")
    bad = series.notna() & values.isna()
    if bad.any():
        raise ValueError(f"{where}: non-numeric values {series[bad].unique()[:3].tolist()}.")
    return values


def _read_value(rows, spec, names, where):
    if len(rows) != 1:
        raise ValueError(f"{where}: {len(rows)} rows match {spec.get('where')}, expected one.")
    column, minus, spread = spec["column"], spec.get("minus_column"), spec.get("spread_column")
    _require_columns(rows, [column, minus, spread], where)
    value = float(_numbers(rows[column], where).iloc[0])
    if minus is not None:
        value -= float(_numbers(rows[minus], where).iloc[0])
    spread_value = float(_numbers(rows[spread], where).iloc[0]) if spread else None
    return Reading(value, spread_value)


def _read_statistic(rows, spec, names, where):
    column, statistic = spec["column"], spec["statistic"]
    _require_columns(rows, [column], where)
    values = _numbers(rows[column], where).dropna()
    if values.empty:
        return Reading(math.nan)
    functions = {"median": np.median, "mean": np.mean, "min": np.min, "max": np.max}
    if statistic == "range":
        return Reading((float(values.min()), float(values.max())), detail=f"{len(values)} rows")
    if statistic not in functions:
        raise ValueError(f"{where}: unknown statistic {statistic!r}; "
                         f"one of {sorted(functions) + ['range']}.")
    return Reading(float(functions[statistic](values.to_numpy())), detail=f"{len(values)} rows")


def _condition(series: pd.Series, spec, names, where) -> np.ndarray:
    if "equals" in spec:
        return names.mask(series.astype(str), spec["equals"])
    values = _numbers(series, where).to_numpy()
    with np.errstate(invalid="ignore"):
        if "at_least" in spec:
            return values >= float(spec["at_least"])
        if "at_most" in spec:
            return values <= float(spec["at_most"])
    raise ValueError(f"{where}: a 'share' reader needs one of equals, at_least, at_most.")


def _read_share(rows, spec, names, where):
    column = spec["column"]
    group_by = spec.get("group_by")
    _require_columns(rows, [column, *(group_by or [])], where)
    hits = pd.Series(_condition(rows[column], spec, names, where), index=rows.index)
    if group_by:
        how = spec.get("per_group", "any")
        if how not in ("any", "all"):
            raise ValueError(f"{where}: per_group must be 'any' or 'all', not {how!r}.")
        hits = hits.groupby([rows[g] for g in group_by]).agg(how)
        unit = "groups"
    else:
        unit = "rows"
    return Reading(float(hits.mean()), percent=True,
                   detail=f"{int(hits.sum())} of {len(hits)} {unit}")


def _per_group(rows, spec, where):
    group_by = spec.get("group_by") or []
    _require_columns(rows, [spec["item_column"], spec["score_column"], *group_by], where)
    if not group_by:
        return [((), rows)]
    return list(rows.groupby(group_by, sort=True))


def _subject_and_scores(group, spec, names, where):
    items = group[spec["item_column"]].astype(str)
    scores = _numbers(group[spec["score_column"]], where)
    subject = names.mask(items, spec["subject"])
    if subject.sum() != 1:
        raise ValueError(f"{where}: {int(subject.sum())} rows name {spec['subject']!r} in "
                         f"{spec['item_column']!r} (values: {sorted(set(items))}); expected one.")
    return subject, scores


def _read_rank(rows, spec, names, where):
    higher = spec.get("higher_is_better", True)
    ranks, undefined = [], 0
    for _, group in _per_group(rows, spec, where):
        subject, scores = _subject_and_scores(group, spec, names, where)
        if not np.isfinite(scores[subject].iloc[0]):
            undefined += 1
            continue
        order = scores.rank(ascending=not higher, method="min")
        ranks.append(float(order[subject].iloc[0]))
    note = f", {undefined} with an undefined score left out" if undefined else ""
    if not ranks:
        return Reading(math.nan, detail=f"no group with a defined score{note}")
    ranks = np.array(ranks)
    statistic = spec.get("statistic", "median_rank")
    if statistic == "median_rank":
        return Reading(float(np.median(ranks)), detail=f"{len(ranks)} groups{note}")
    if statistic == "share_best":
        best = int((ranks == 1).sum())
        return Reading(best / len(ranks), percent=True,
                       detail=f"best in {best} of {len(ranks)} groups{note}")
    raise ValueError(f"{where}: unknown rank statistic {statistic!r} "
                     "(median_rank or share_best).")


def _read_margin(rows, spec, names, where):
    higher = spec.get("higher_is_better", True)
    others = spec["others"] if isinstance(spec["others"], list) else [spec["others"]]
    margins, undefined = [], 0
    for _, group in _per_group(rows, spec, where):
        subject, scores = _subject_and_scores(group, spec, names, where)
        rivals = names.mask(group[spec["item_column"]].astype(str), others)
        if not rivals.any():
            raise ValueError(f"{where}: none of {others} in {spec['item_column']!r}.")
        own, best_rival = scores[subject].iloc[0], (
            scores[rivals].max() if higher else scores[rivals].min())
        if not (np.isfinite(own) and np.isfinite(best_rival)):
            undefined += 1
            continue
        margins.append(own - best_rival if higher else best_rival - own)
    note = f", {undefined} with an undefined score left out" if undefined else ""
    if not margins:
        return Reading(math.nan, detail=f"no group with defined scores{note}")
    margins = np.array(margins, dtype=float)
    statistic = spec.get("statistic", "mean")
    if statistic == "mean":
        detail = f"mean over {len(margins)} groups{note}" if len(margins) > 1 else note[2:]
        return Reading(float(np.mean(margins)), detail=detail)
    if statistic == "min":
        return Reading(float(np.min(margins)), detail=f"smallest of {len(margins)} groups{note}")
    if statistic == "share_ahead":
        ahead = int((margins >= 0).sum())
        return Reading(ahead / len(margins), percent=True,
                       detail=f"ahead or level in {ahead} of {len(margins)} groups{note}")
    raise ValueError(f"{where}: unknown margin statistic {statistic!r} "
                     "(mean, min or share_ahead).")


READERS = {
    "value": _read_value,
    "statistic": _read_statistic,
    "share": _read_share,
    "rank": _read_rank,
    "margin": _read_margin,
}


def read_claim_value(table: pd.DataFrame, ours: dict, aliases: dict | None = None,
                     where: str = "claim") -> Reading:
    """Our value of one claim from ``table`` as the ``ours`` block of the claims file says."""
    reader = ours.get("read")
    if reader not in READERS:
        raise ValueError(f"{where}: unknown reader {reader!r}; one of {sorted(READERS)}.")
    names = _Names(aliases)
    rows = _select(table, ours, names, where)
    return READERS[reader](rows, ours, names, where)


def describe_reader(ours: dict) -> str:
    """One sentence saying how our value is read (for the summary)."""
    reader, file = ours.get("read"), ours.get("file")
    rows = _where_text(ours.get("where"))
    if reader == "value":
        column = f"`{ours['column']}`"
        if ours.get("minus_column"):
            column += f" − `{ours['minus_column']}`"
        spread = f" (± `{ours['spread_column']}`)" if ours.get("spread_column") else ""
        return f"{column}{spread} of the row {rows} of `{file}`"
    if reader == "statistic":
        return f"{ours['statistic']} of `{ours['column']}` over the rows {rows} of `{file}`"
    if reader == "share":
        test = next(f"{ {'equals': '=', 'at_least': '≥', 'at_most': '≤'}[k]} {ours[k]}"
                    for k in ("equals", "at_least", "at_most") if k in ours)
        if ours.get("group_by"):
            every = "every" if ours.get("per_group", "any") == "all" else "some"
            return (f"share of the {' × '.join(ours['group_by'])} groups of the rows {rows} of "
                    f"`{file}` in which {every} row has `{ours['column']}` {test}")
        return f"share of the rows {rows} of `{file}` whose `{ours['column']}` {test}"
    if reader in ("rank", "margin"):
        groups = (f"each {' × '.join(ours['group_by'])}" if ours.get("group_by")
                  else "the selected rows")
        direction = "higher" if ours.get("higher_is_better", True) else "lower"
        table = f"rows {rows} of `{file}`"
        if reader == "rank":
            if ours.get("statistic", "median_rank") == "median_rank":
                what = f"median over {groups} of the rank of {ours['subject']}"
            else:
                what = f"share of {groups} in which {ours['subject']} ranks first"
            return (f"{what} among `{ours['item_column']}` by `{ours['score_column']}` "
                    f"({direction} is better), {table}")
        others = ours["others"] if isinstance(ours["others"], list) else [ours["others"]]
        margin = (f"`{ours['score_column']}` of {ours['subject']} minus the best of "
                  f"{', '.join(others)} ({direction} is better; signed so that > 0 means "
                  f"{ours['subject']} is better)")
        statistic = ours.get("statistic", "mean")
        if not ours.get("group_by"):
            return f"{margin}, {table}"
        if statistic == "share_ahead":
            return f"share of {groups} in which {margin} is ≥ 0, {table}"
        word = {"mean": "mean", "min": "smallest"}.get(statistic, statistic)
        return f"{word} over {groups} of {margin}, {table}"
    return f"`{file}`"


def _where_text(where: dict | None) -> str:
    if not where:
        return "(all)"
    parts = []
    for column, value in where.items():
        shown = " or ".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"{column} = {shown}")
    return "with " + ", ".join(parts)


# ----------------------------------------------------------------------------------------------
# Verdict rules


def judge(rule: dict, paper: dict, ours: Reading) -> tuple[str, str, str]:
    """The verdict, the measured gap (text) and the rule (text) for one claim."""
    name = rule.get("rule")
    value = ours.value
    if name == "range":
        low, high = paper["range"]
        tolerance = float(rule.get("tolerance", 0.05))
        text = (f"reproduced if both ends of our range are within {_number(tolerance)} "
                f"of the paper's; partly if the ranges overlap; otherwise not reproduced")
        if not isinstance(value, tuple):
            value = (value, value)
        if not all(np.isfinite(value)):
            return "not reproduced", "undefined", text
        gap = f"low {_signed(value[0] - low)}, high {_signed(value[1] - high)}"
        if abs(value[0] - low) <= tolerance and abs(value[1] - high) <= tolerance:
            return "reproduced", gap, text
        overlap = value[0] <= high and value[1] >= low
        return ("partly" if overlap else "not reproduced"), gap, text
    if isinstance(value, tuple):
        raise ValueError(f"rule {name!r} needs one number, the reader gave a range.")
    reference = paper.get("value")
    gap = _signed(value - reference, ours.percent) if reference is not None else "—"
    if not np.isfinite(value):
        return "not reproduced", "undefined", _rule_text(name, rule, paper, ours)
    text = _rule_text(name, rule, paper, ours)
    if name == "within_spread":
        tolerance = float(paper.get("spread", 0.0)) + float(ours.spread or 0.0)
        distance = abs(value - reference)
        verdict = ("reproduced" if distance <= tolerance else
                   "partly" if distance <= 2 * tolerance else "not reproduced")
    elif name == "close":
        distance = abs(value - reference)
        verdict = ("reproduced" if distance <= float(rule["tolerance"]) else
                   "partly" if distance <= float(rule.get("partly_tolerance", -1)) else
                   "not reproduced")
    elif name == "at_least":
        verdict = ("reproduced" if value >= float(rule["threshold"]) else
                   "partly" if "partly" in rule and value >= float(rule["partly"]) else
                   "not reproduced")
    elif name == "at_most":
        verdict = ("reproduced" if value <= float(rule["threshold"]) else
                   "partly" if "partly" in rule and value <= float(rule["partly"]) else
                   "not reproduced")
    else:
        raise ValueError(f"unknown verdict rule {name!r}; one of within_spread, close, "
                         "at_least, at_most, range.")
    return verdict, gap, text


def _rule_text(name: str, rule: dict, paper: dict, ours: Reading) -> str:
    fmt = (lambda x: _number(x, ours.percent))  # noqa: E731
    if name == "within_spread":
        spread = float(paper.get("spread", 0.0))
        own = f" + ours ({_number(ours.spread)})" if ours.spread else ""
        return (f"reproduced if |ours − paper| ≤ the paper's spread ({_number(spread)}){own}; "
                f"partly if ≤ twice that; otherwise not reproduced")
    if name == "close":
        partly = (f"; partly if ≤ {fmt(rule['partly_tolerance'])}"
                  if "partly_tolerance" in rule else "")
        return (f"reproduced if |ours − paper| ≤ {fmt(rule['tolerance'])}{partly}; "
                f"otherwise not reproduced")
    if name in ("at_least", "at_most"):
        sign = "≥" if name == "at_least" else "≤"
        partly = f"; partly if {sign} {fmt(rule['partly'])}" if "partly" in rule else ""
        return (f"reproduced if ours {sign} {fmt(rule['threshold'])}{partly}; "
                "otherwise not reproduced")
    return ""


# ----------------------------------------------------------------------------------------------
# Formatting


def _number(x, percent: bool = False) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "undefined"
    x = float(x)
    if percent:
        return f"{100 * x:.0f}%"
    if x == 0:
        return "0"
    sign, x = ("−" if x < 0 else ""), abs(x)
    if x >= 100:
        return f"{sign}{x:.0f}"
    if x >= 1:
        return f"{sign}{x:.3g}"
    return sign + (f"{x:.3f}".rstrip("0").rstrip(".") if x >= 0.01 else f"{x:.2g}")


def _signed(x, percent: bool = False) -> str:
    if not np.isfinite(x):
        return "undefined"
    if x == 0:
        return "0"
    if percent:
        return f"{'+' if x > 0 else '−'}{abs(100 * x):.0f} pp"
    return ("+" if x > 0 else "−") + _number(abs(x))


def format_paper(paper: dict) -> str:
    """The paper's value as the summary shows it."""
    if "text" in paper:
        return str(paper["text"])
    if "range" in paper:
        low, high = paper["range"]
        return _number(low) if low == high else f"{_number(low)}–{_number(high)}"
    percent = bool(paper.get("percent"))
    text = _number(paper["value"], percent)
    if paper.get("spread") is not None:
        text += f" ± {_number(paper['spread'])}"
    return text


def format_reading(reading: Reading) -> str:
    value = reading.value
    if isinstance(value, tuple):
        text = (_number(value[0]) if value[0] == value[1]
                else f"{_number(value[0])}–{_number(value[1])}")
    else:
        text = _number(value, reading.percent)
        if reading.spread is not None:
            text += f" ± {_number(reading.spread)}"
    return text + (f" ({reading.detail})" if reading.detail else "")


# ----------------------------------------------------------------------------------------------
# The claims file


def validate_claims(spec: dict) -> None:
    """Raise ``ValueError`` naming the entry when the claims file is malformed."""
    if not isinstance(spec, dict) or not isinstance(spec.get("experiments"), list):
        raise ValueError("claims file: expected a mapping with a list 'experiments'.")
    for i, experiment in enumerate(spec["experiments"]):
        where = f"claims file, experiments[{i}]"
        for key in ("id", "title", "claims"):
            if key not in experiment:
                raise ValueError(f"{where}: missing '{key}'.")
        for j, claim in enumerate(experiment["claims"]):
            here = f"{where} ({experiment['id']}), claims[{j}]"
            for key in ("claim", "source", "paper", "ours", "verdict"):
                if key not in claim:
                    raise ValueError(f"{here}: missing '{key}'.")
            if claim["ours"].get("read") not in READERS:
                raise ValueError(f"{here}: ours.read must be one of {sorted(READERS)}.")
            if "file" not in claim["ours"]:
                raise ValueError(f"{here}: ours.file (relative to the results folder) is missing.")
            paper = claim["paper"]
            rule = claim["verdict"].get("rule")
            if rule == "range" and "range" not in paper:
                raise ValueError(f"{here}: the 'range' rule needs paper.range: [low, high].")
            if rule in ("within_spread", "close") and "value" not in paper:
                raise ValueError(f"{here}: rule {rule!r} needs paper.value.")
            if rule in ("at_least", "at_most") and "threshold" not in claim["verdict"]:
                raise ValueError(f"{here}: rule {rule!r} needs verdict.threshold.")


def experiment_files(spec: dict) -> dict[str, list[str]]:
    """Experiment id -> the result files (relative to the results folder) its claims read."""
    return {e["id"]: sorted({c["ours"]["file"] for c in e["claims"]})
            for e in spec["experiments"]}


def evaluate_claims(spec: dict, results_dir, measures=None) -> list[dict]:
    """One row per claim: experiment, claim, source, paper, ours, gap, verdict, how, rule, note.

    Measures are matched by every spelling of ``measures`` (the registry: see
    :func:`~diversity_core.reporting.names.measure_spellings`) and of the claims file's
    ``names``. A claim whose result file is missing is ``not run``; a malformed file raises
    ``ValueError`` naming the file and the claim.
    """
    validate_claims(spec)
    results_dir = Path(results_dir)
    aliases = measure_spellings(measures or {})
    for canonical, others in (spec.get("names") or {}).items():
        aliases[canonical] = [*aliases.get(canonical, ()), *others]
    tables: dict[Path, pd.DataFrame] = {}
    rows = []
    for experiment in spec["experiments"]:
        for claim in experiment["claims"]:
            ours_spec = claim["ours"]
            path = results_dir / ours_spec["file"]
            row = {
                "experiment": experiment["id"],
                "title": experiment["title"],
                "claim": claim["claim"],
                "source": claim["source"],
                "paper": format_paper(claim["paper"]),
                "how": describe_reader(ours_spec),
                "note": experiment.get("note", ""),
            }
            if not path.is_file():
                rule_text = _rule_text_without_reading(claim)
                rows.append({**row, "ours": f"— (no `{ours_spec['file']}`)", "gap": "—",
                             "verdict": "not run", "rule": rule_text})
                continue
            if path not in tables:
                tables[path] = pd.read_csv(path)
            where = f"{path} ({experiment['id']}: {claim['claim']})"
            reading = read_claim_value(tables[path], ours_spec, aliases, where)
            paper = dict(claim["paper"])
            paper.setdefault("percent", reading.percent)
            verdict, gap, rule_text = judge(claim["verdict"], paper, reading)
            rows.append({**row, "ours": format_reading(reading), "gap": gap,
                         "verdict": verdict, "rule": rule_text})
    return rows


def _rule_text_without_reading(claim: dict) -> str:
    rule = claim["verdict"]
    percent = bool(claim["paper"].get("percent"))
    if rule.get("rule") == "range":
        return judge(rule, claim["paper"], Reading((math.nan, math.nan)))[2]
    return judge(rule, {**claim["paper"], "percent": percent},
                 Reading(math.nan, percent=percent))[2]


def render_summary(rows: list[dict], spec: dict, beyond_paper=()) -> str:
    """Markdown: one table of every claim, then how each value is read and judged;
    ``beyond_paper``: the labels of the measures the run adds to the paper's (the paper makes
    no claim about them; the leaderboard ranks them)."""
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    lines = [
        "# The paper's claims and our results",
        "",
        "Generated by the workflow (rule `summary`: `scripts/summary.py` reads "
        "`workflow/paper_claims.yaml` and the result files); do not edit by hand.",
        "",
        f"{len(rows)} claims: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS) + ".",
        "",
    ]
    if beyond_paper:
        lines += [f"Measures beyond the paper's: {', '.join(beyond_paper)}. The paper makes no "
                  "claim about them; `leaderboard.md` ranks them beside the paper's in every "
                  "test.", ""]
    lines += [
        "| experiment | claim | source | paper | ours | gap | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['title']} | {r['claim']} | {r['source']} | {r['paper']} | "
                     f"{r['ours']} | {r['gap']} | **{r['verdict']}** |")
    lines += ["", "## How each value is read and judged", ""]
    notes = {e["id"]: e.get("note", "") for e in spec["experiments"]}
    for experiment in spec["experiments"]:
        lines.append(f"### {experiment['title']}")
        lines.append("")
        if notes[experiment["id"]]:
            lines += [notes[experiment["id"]].strip(), ""]
        for r in (r for r in rows if r["experiment"] == experiment["id"]):
            lines.append(f"- **{r['claim']}** ({r['source']}). Ours: {r['how']}. "
                         f"Verdict: {r['rule']}.")
        lines.append("")
    lines += [
        "A claim is **not run** when its result file does not exist (the experiment is not "
        "implemented, not in `experiments:` of the configuration, or has not run yet); a value "
        "that is undefined in our results counts as **not reproduced**. Gaps are ours minus "
        "the paper's (pp: percentage points).",
        "",
    ]
    return "\n".join(lines)
