"""results/summary.md: the paper's claims beside ours (diversity_core.reporting.claims), and
results/timings.md from benchmark files (diversity_core.reporting.timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_runner import REPO

from diversity_core.measures.registry import MEASURES
from diversity_core.reporting import claims as C
from diversity_core.reporting import timings as T

CLAIMS_FILE = REPO / "workflow" / "paper_claims.yaml"


@pytest.fixture(scope="module")
def spec():
    with open(CLAIMS_FILE) as stream:
        return yaml.safe_load(stream)


def _rows(spec, results_dir, experiment):
    return [r for r in C.evaluate_claims(spec, results_dir, MEASURES)
            if r["experiment"] == experiment]


# --- the claims file -----------------------------------------------------------------------------

def test_claims_file_covers_the_five_experiments(spec):
    C.validate_claims(spec)
    ids = [e["id"] for e in spec["experiments"]]
    assert {"curvature", "text_temperature", "model_distinguishing", "image_mode_dropping",
            "graph_mode_collapse"} <= set(ids)
    files = C.experiment_files(spec)
    assert files["text_temperature"] == ["text/r2_scores.csv"]
    assert files["model_distinguishing"] == ["models/table2.csv"]


def test_malformed_claims_file_is_rejected(spec):
    broken = {"experiments": [{"id": "x", "title": "X", "claims": [
        {"claim": "c", "source": "s", "paper": {"value": 1},
         "ours": {"read": "nonsense", "file": "x.csv"}, "verdict": {"rule": "at_least"}}]}]}
    with pytest.raises(ValueError, match=r"experiments\[0\] \(x\), claims\[0\]: ours.read"):
        C.validate_claims(broken)
    broken["experiments"][0]["claims"][0]["ours"]["read"] = "value"
    with pytest.raises(ValueError, match="needs verdict.threshold"):
        C.validate_claims(broken)


# --- readers ------------------------------------------------------------------------------------

TABLE = pd.DataFrame({
    "group": ["a", "a", "a", "b", "b", "b"],
    "measure": ["MagArea", "vendi", "avg_sim"] * 2,
    "score": [0.9, 0.8, 0.5, 0.6, 0.7, np.nan],
    "other": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
})
ALIASES = {"VS": ["vendi"], "AvgSim": ["avg_sim"]}


def read(**ours):
    return C.read_claim_value(TABLE, ours, ALIASES)


def test_value_reader_with_aliases_minus_and_spread():
    got = read(read="value", where={"group": "a", "measure": "VS"}, column="score",
               minus_column="other", spread_column="other")
    assert got.value == pytest.approx(0.6) and got.spread == pytest.approx(0.2)
    with pytest.raises(ValueError, match="2 rows match"):
        read(read="value", where={"measure": "MagArea"}, column="score")
    with pytest.raises(ValueError, match="no row matches"):
        read(read="value", where={"measure": "GMStds"}, column="score")
    with pytest.raises(ValueError, match=r"no column\(s\) \['nope'\]"):
        read(read="value", where={"group": "a", "measure": "VS"}, column="nope")


def test_statistic_and_share_readers():
    assert read(read="statistic", where={"measure": "MagArea"}, column="score",
                statistic="median").value == pytest.approx(0.75)
    assert read(read="statistic", column="score", statistic="range").value == (0.5, 0.9)
    share = read(read="share", column="score", at_least=0.7)
    assert share.value == pytest.approx(3 / 6) and share.percent
    grouped = read(read="share", column="score", at_least=0.85, group_by=["group"],
                   per_group="any")
    assert grouped.value == pytest.approx(0.5) and grouped.detail == "1 of 2 groups"


def test_rank_reader_skips_undefined_scores_and_counts_ties_as_best():
    ranks = read(read="rank", group_by=["group"], item_column="measure", score_column="score",
                 subject="VS", statistic="median_rank")
    assert ranks.value == pytest.approx(1.5)  # 2nd in a, 1st in b
    best = read(read="rank", group_by=["group"], item_column="measure", score_column="score",
                subject="MagArea", statistic="share_best")
    assert best.value == pytest.approx(0.5)
    undefined = read(read="rank", group_by=["group"], item_column="measure",
                     score_column="score", subject="AvgSim", statistic="median_rank")
    assert undefined.value == 3 and "1 with an undefined score left out" in undefined.detail
    tie = pd.DataFrame({"measure": ["x", "y"], "score": [1.0, 1.0]})
    assert C.read_claim_value(tie, {"read": "rank", "item_column": "measure",
                                    "score_column": "score", "subject": "y",
                                    "statistic": "share_best"}).value == 1.0


def test_margin_reader_both_directions():
    higher = read(read="margin", group_by=["group"], item_column="measure", score_column="score",
                  subject="MagArea", others=["VS", "AvgSim"])
    assert higher.value == pytest.approx(np.mean([0.9 - 0.8, 0.6 - 0.7]))
    lower = read(read="margin", where={"group": "a"}, item_column="measure",
                 score_column="score", subject="MagArea", others=["VS"], higher_is_better=False)
    assert lower.value == pytest.approx(0.8 - 0.9)
    ahead = read(read="margin", group_by=["group"], item_column="measure", score_column="score",
                 subject="MagArea", others=["VS"], statistic="share_ahead")
    assert ahead.value == pytest.approx(0.5)


# --- verdict rules ------------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "paper", "value", "expected"), [
    ({"rule": "within_spread"}, {"value": 0.05, "spread": 0.03}, 0.07, "reproduced"),
    ({"rule": "within_spread"}, {"value": 0.05, "spread": 0.03}, 0.10, "partly"),
    ({"rule": "within_spread"}, {"value": 0.05, "spread": 0.03}, 0.12, "not reproduced"),
    ({"rule": "close", "tolerance": 0.1, "partly_tolerance": 0.2}, {"value": 0.7}, 0.55, "partly"),
    ({"rule": "close", "tolerance": 0.1}, {"value": 0.7}, 0.45, "not reproduced"),
    ({"rule": "at_least", "threshold": 0.9, "partly": 0.8}, {"value": 0.9}, 0.95, "reproduced"),
    ({"rule": "at_least", "threshold": 0.9, "partly": 0.8}, {"value": 0.9}, 0.85, "partly"),
    ({"rule": "at_most", "threshold": 1, "partly": 2}, {"value": 1}, 3, "not reproduced"),
    ({"rule": "at_least", "threshold": 0.9}, {"value": 0.9}, float("nan"), "not reproduced"),
])
def test_verdict_rules(rule, paper, value, expected):
    verdict, _, text = C.judge(rule, paper, C.Reading(value))
    assert verdict == expected and text.startswith("reproduced if")


def test_range_rule():
    paper = {"range": [0.73, 0.92]}
    rule = {"rule": "range", "tolerance": 0.05}
    assert C.judge(rule, paper, C.Reading((0.70, 0.95)))[0] == "reproduced"
    assert C.judge(rule, paper, C.Reading((0.50, 0.80)))[0] == "partly"
    verdict, gap, _ = C.judge(rule, paper, C.Reading((0.30, 0.50)))
    assert verdict == "not reproduced" and gap == "low −0.43, high −0.42"


# --- the two experiments that are being built: their documented file formats -----------------

def _write(path, frame):
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def _text_scores(gain_story: float, magarea_best: bool):
    rows = []
    for task in ("story", "resp", "prompt"):
        for i, model in enumerate(("all-mpnet-base-v2", "all-MiniLM-L6-v2")):
            avgsim = 0.5 + 0.01 * i
            magarea = avgsim + (gain_story if task == "story" else 0.08)
            vs = magarea - 0.05 if magarea_best else magarea + 0.05
            for measure, r2 in (("MagArea", magarea), ("VS", vs), ("AvgSim", avgsim),
                                ("GMStds", -0.2), ("IsoScore", 0.99)):
                rows.append({"task": task, "model": model, "measure": measure, "r2_mean": r2,
                             "r2_std": 0.02})
    return pd.DataFrame(rows, columns=["task", "model", "measure", "r2_mean", "r2_std"])


def test_text_temperature_not_run_then_read(spec, tmp_path):
    before = _rows(spec, tmp_path, "text_temperature")
    assert before and {r["verdict"] for r in before} == {"not run"}
    assert all("no `text/r2_scores.csv`" in r["ours"] for r in before)

    _write(tmp_path / "text" / "r2_scores.csv", _text_scores(gain_story=0.12, magarea_best=True))
    after = {r["claim"]: r for r in _rows(spec, tmp_path, "text_temperature")}
    assert {r["verdict"] for r in after.values()} == {"reproduced"}, after
    # IsoScore is not one of the paper's four measures: it does not take MagArea's rank.
    rank = next(r for c, r in after.items() if "median rank" in c)
    assert rank["ours"].startswith("1 (6 groups")
    story = next(r for c, r in after.items() if "on story" in c)
    assert story["ours"].startswith("0.12")

    _write(tmp_path / "text" / "r2_scores.csv", _text_scores(gain_story=0.03, magarea_best=False))
    worse = {r["claim"]: r["verdict"] for r in _rows(spec, tmp_path, "text_temperature")}
    assert worse[next(c for c in worse if "median rank" in c)] == "partly"      # rank 2
    assert worse[next(c for c in worse if "most settings" in c)] == "not reproduced"
    assert worse[next(c for c in worse if "on story" in c)] == "partly"         # +0.03


def _table2(magdiff: float, avgsim=(0.74, 0.90)):
    rows = []
    for d, dataset in enumerate(("fortunes", "wordnet", "debian", "gensim")):
        for preprocessing, distance in (("raw", "cosine"), ("pca", "cosine"),
                                        ("presto", "euclidean")):
            for measure, acc in (("MagDiff", magdiff), ("AvgSim", avgsim[d % 2]),
                                 ("VS", 0.7), ("GMStds", 0.66), ("DCScore", 0.99)):
                if preprocessing == "presto":
                    acc = 0.1      # outside the paper's blocks: must not enter any verdict
                rows.append({"dataset": dataset, "preprocessing": preprocessing,
                             "distance": distance, "measure": measure, "accuracy_mean": acc,
                             "accuracy_std": 0.01})
    return pd.DataFrame(rows, columns=["dataset", "preprocessing", "distance", "measure",
                                       "accuracy_mean", "accuracy_std"])


def test_model_distinguishing_not_run_then_read(spec, tmp_path):
    assert {r["verdict"] for r in _rows(spec, tmp_path, "model_distinguishing")} == {"not run"}
    _write(tmp_path / "models" / "table2.csv", _table2(magdiff=0.95))
    got = {r["claim"]: r for r in _rows(spec, tmp_path, "model_distinguishing")}
    verdicts = {c: r["verdict"] for c, r in got.items()}
    assert verdicts[next(c for c in got if "median 5-NN" in c)] == "reproduced"
    assert verdicts[next(c for c in got if "every data set" in c)] == "reproduced"
    assert verdicts["AvgSim accuracy range"] == "reproduced"
    assert got["AvgSim accuracy range"]["ours"].startswith("0.74–0.9")
    assert verdicts["VS accuracy range"] == "partly"           # 0.7 only: inside, not spanning
    assert verdicts["GMStds accuracy"] == "reproduced"

    _write(tmp_path / "models" / "table2.csv", _table2(magdiff=0.72))
    low = {r["claim"]: r["verdict"] for r in _rows(spec, tmp_path, "model_distinguishing")}
    assert low[next(c for c in low if "median 5-NN" in c)] == "not reproduced"
    assert low[next(c for c in low if "every data set" in c)] == "not reproduced"


def test_a_renamed_column_is_an_error_not_a_silent_not_run(spec, tmp_path):
    _write(tmp_path / "models" / "table2.csv",
           _table2(0.95).rename(columns={"accuracy_mean": "acc"}))
    with pytest.raises(ValueError, match=r"models/table2.csv .*no column\(s\) \['accuracy_mean'\]"):
        C.evaluate_claims(spec, tmp_path, MEASURES)


# --- the committed summary ----------------------------------------------------------------------

def test_committed_summary_matches_committed_results(spec):
    """results/summary.md is what the generator makes of the committed result files."""
    rows = C.evaluate_claims(spec, REPO / "results", MEASURES)
    assert (REPO / "results" / "summary.md").read_text() == C.render_summary(rows, spec)
    verdicts = {r["experiment"]: set() for r in rows}
    for r in rows:
        verdicts[r["experiment"]].add(r["verdict"])
    # Every experiment shows, run or not.
    assert set(verdicts) == {e["id"] for e in spec["experiments"]}


def test_measures_are_matched_by_the_registry_spellings_and_the_others_named(spec, tmp_path):
    """A table that spells a measure as the registry does (its description, its paper label)
    is read with no alias in the claims file; the measures beyond the paper's are named."""
    table = _table2(magdiff=0.95)
    table["measure"] = table["measure"].replace({"VS": "Vendi Score (cosine)",
                                                 "AvgSim": "avg_sim"})
    _write(tmp_path / "models" / "table2.csv", table)
    got = {r["claim"]: r for r in _rows(spec, tmp_path, "model_distinguishing")}
    assert got["AvgSim accuracy range"]["verdict"] == "reproduced"
    assert got["VS accuracy range"]["verdict"] == "partly"
    with pytest.raises(ValueError, match="no row matches"):  # without the registry's spellings
        C.evaluate_claims(spec, tmp_path)
    text = C.render_summary(list(got.values()), spec, ["Mean NN distance"])
    assert "Measures beyond the paper's: Mean NN distance." in text
    assert "beyond the paper" not in C.render_summary(list(got.values()), spec)


def test_readme_and_manual_show_the_committed_summary():
    """The README points to results/summary.md and quotes its line of counts (the counts
    themselves: tests/docs/test_docs_site.py); the manual's Getting started page includes the
    file whole, so that its table is never retyped."""
    summary = (REPO / "results" / "summary.md").read_text().splitlines()
    counts = next(line for line in summary if " claims: " in line)
    readme = (REPO / "README.md").read_text()
    assert "results/summary.md" in readme and counts in readme
    assert 'include-markdown "../results/summary.md"' in (REPO / "docs" / "index.md").read_text()


def test_summary_script_runs_alone(tmp_path):
    out = tmp_path / "summary.md"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "summary.py"), "--claims", str(CLAIMS_FILE),
         "--results", "--summary", str(out), "--results-dir", str(tmp_path)],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    assert "| **not run** |" in text and "| **reproduced** |" not in text
    assert (tmp_path / "summary.md.provenance.json").exists()


# --- timings ------------------------------------------------------------------------------------

def _benchmark(path, seconds, cpu, rss, end):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\t"
                    f"cpu_time\n{seconds}\t0:00:00\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")
    os.utime(path, (end, end))


def test_timings_from_benchmark_files(tmp_path):
    _benchmark(tmp_path / "a" / "benchmarks" / "one.tsv", 10.0, 8.0, 100.0, end=1_000)
    _benchmark(tmp_path / "a" / "benchmarks" / "two.tsv", 30.0, 29.0, 300.0, end=1_050)
    _benchmark(tmp_path / "b" / "benchmarks" / "three.tsv", 5.0, 4.0, 50.0, end=1_100)
    table = T.experiment_timings({"A": tmp_path / "a" / "benchmarks",
                                  "B": tmp_path / "b" / "benchmarks",
                                  "C": tmp_path / "c" / "benchmarks"})  # C has none: left out
    a = table.set_index("experiment").loc["A"]
    assert a["jobs"] == 2 and a["wall_s"] == 40 and a["cpu_s"] == 37
    assert a["span_s"] == pytest.approx(1_050 - (1_000 - 10))   # first start to last end
    assert a["longest_job"] == "two" and a["peak_rss_mb"] == 300
    assert list(table["experiment"]) == ["A", "B", "all"]
    assert table.set_index("experiment").loc["all", "span_s"] == pytest.approx(1_100 - 990)
    text = T.render_timings(table, cores=2, load_average=(1.0, 2.0, 3.0))
    assert "| A | 2 | 1 min 00 s | 40 s | 37 s | two (30 s) | 300 MB |" in text
    assert "No benchmark files" in T.render_timings(T.experiment_timings({}))


def test_timings_script_runs_alone(tmp_path):
    _benchmark(tmp_path / "curvature" / "benchmarks" / "x.tsv", 3.0, 2.0, 10.0, end=2_000)
    out = tmp_path / "timings.md"
    folders = json.dumps({"curvature": str(tmp_path / "curvature" / "benchmarks")})
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "timings.py"), "--results",
                           "--timings", str(out), "--folders", folders], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| curvature | 1 | 3 s |" in out.read_text()
