"""End to end: the text-temperature experiment on its tiny configuration (the decTest design;
SmolLM2, corpora and the embedding model come from the repository's resources/, fetched by the
pipeline's own rules when missing): the outputs exist with the promised columns, another batching
is served from the cache, and (extended tier) a rerun from an empty results folder agrees byte
for byte (the grid design's runs are in test_text_grid.py, a file of their own so that they run
beside these)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from text_runs import TASKS, data_only, generated, overlay
from workflow_runner import run_snakemake

from diversity_core.data import text_tasks
from diversity_core.experiments.text_temperature import MEASURES

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tiny_runs) -> Path:
    """The shared tiny run (read only)."""
    return tiny_runs("text_temperature")


def test_data_tables_and_figures(tiny_run):
    out = tiny_run / "results" / "text"
    caps = pd.read_csv(out / "temperature_cap.csv")
    assert list(caps.columns) == ["task", "cap", "level", "share_at_cap", "max_drop",
                                  "n_pilot_sets"]
    assert list(caps["task"]) == list(TASKS) and (caps["n_pilot_sets"] <= 6).all()
    assert (caps["share_at_cap"] >= caps["level"] - caps["max_drop"] - 1e-4).all()
    fluency = pd.read_csv(out / "fluency.csv")
    assert list(fluency.columns) == ["task", "prompt_id", "temperature", "dictionary_share",
                                     "fitted_share"]
    pilot_ids = set(fluency["prompt_id"])
    assert len(fluency) == 3 * 6 and fluency["temperature"].between(0.2, 1.5).all()
    for task in TASKS:
        sets = text_tasks.read_sets(out / "data" / f"{task}.jsonl")
        cap = float(caps.loc[caps["task"] == task, "cap"].iloc[0])
        # decTest: 8 sets, each its own prompt (none a pilot's), one temperature each.
        assert len(sets) == 8 and len({s["prompt_id"] for s in sets}) == 8
        assert not {s["prompt_id"] for s in sets} & pilot_ids
        temperatures = [s["temperature"] for s in sets]
        assert len(set(temperatures)) == 8
        assert min(temperatures) >= 0.2 and max(temperatures) <= cap
        assert all(len(s["responses"]) == 4 and s["task"] == task for s in sets)
        record = json.loads((out / "data" / f"{task}.jsonl.provenance.json").read_text())
        assert record["extra"]["n_sets"] == 8 and record["extra"]["n_prompts"] == 8
        assert record["config"]["text"]["generation"]["n_chunks"] == 1
    for figure in ("fluency.png", "fluency.pdf"):
        assert (out / figure).stat().st_size > 10_000
        assert (out / f"{figure}.provenance.json").exists()
    r2 = pd.read_csv(out / "r2_scores.csv")
    assert list(r2.columns) == ["task", "model", "measure", "r2_mean", "r2_std", "n_sets"]
    assert len(r2) == len(TASKS) * len(MEASURES)
    assert set(r2["model"]) == {"paraphrase-MiniLM-L3-v2-onnx"}
    assert r2["r2_mean"].notna().all() and (r2["r2_mean"] <= 1).all()
    # The stability check: every cell of r2_scores.csv, its printed value, one perturbed run (the
    # tiny configuration's), a spread that covers it.
    stable = pd.read_csv(out / "r2_stability.csv")
    assert stable[["task", "model", "measure"]].equals(r2[["task", "model", "measure"]])
    assert np.allclose(stable["r2_mean"], r2["r2_mean"], atol=1e-12)
    assert (stable["perturbations"] == 1).all() and (stable["spread"] >= 0).all()
    assert (stable["perturbed_max"] - stable["perturbed_min"] <= stable["spread"] + 1e-4).all()
    ranking = pd.read_csv(out / "ranking.csv")
    assert set(ranking["scope"]) == {"paper", "all"}
    for _, part in ranking.groupby("scope"):
        assert part["share_best"].sum() >= 1.0 - 1e-9  # ties may share first place
        assert (part["n_resamples"] == len(TASKS) * 2).all()
    gains = pd.read_csv(out / "gains.csv")
    assert list(gains["task"]) == list(TASKS)
    assert list(gains["paper_gain"]) == [0.12, 0.07, 0.07]
    rho = pd.read_csv(out / "spearman.csv")
    assert ((rho["ci_low"] <= rho["ci_high"]) & rho["rho"].between(-1, 1)).all()
    for figure in ("figure3.png", "figure4.png"):
        assert (out / figure).stat().st_size > 20_000
        assert (out / f"{figure}.provenance.json").exists()
    # The ranking per highest temperature: caps at multiples of 0.5 and the largest temperature;
    # at the largest the R² are those of r2_scores.csv.
    capped = pd.read_csv(out / "max_temperature.csv")
    assert list(capped.columns) == ["max_temperature", "task", "model", "measure", "r2_mean",
                                    "r2_std", "rank", "n_sets", "n_temperatures"]
    largest = max(s["temperature"] for task in TASKS
                  for s in text_tasks.read_sets(out / "data" / f"{task}.jsonl"))
    assert capped["max_temperature"].max() == pytest.approx(largest, abs=1e-4)
    capped = capped[capped["max_temperature"] == capped["max_temperature"].max()]
    assert (capped["n_sets"] == 8).all() and len(capped) == len(TASKS) * len(MEASURES)
    ranked = capped["measure"].isin(["mag_area", "vendi", "avg_sim", "gm_stds"])
    assert capped.loc[ranked, "rank"].between(1, 4).all()
    assert capped.loc[~ranked, "rank"].isna().all()
    merged = capped.merge(r2, on=["task", "model", "measure"], suffixes=("", "_all"))
    assert (merged["r2_mean"] - merged["r2_mean_all"]).abs().max() <= 1e-4
    assert (out / "max_temperature.png").stat().st_size > 10_000
    assert (out / "max_temperature.pdf.provenance.json").exists()
    scores = pd.read_csv(out / "interim" / "scores" / "paraphrase-MiniLM-L3-v2-onnx" / "resp.csv")
    assert set(MEASURES) <= set(scores.columns) and scores["t_cut"].nunique() == 1
    assert (out / "benchmarks" / "generate_story_chunk0.tsv").exists()
    assert (out / "logs" / "embed_paraphrase-MiniLM-L3-v2-onnx_prompt.log").exists()


@pytest.mark.extended
def test_reruns_are_identical(tiny_run, tiny_runs):
    first, second = (out / "results" / "text" for out in (
        tiny_run, tiny_runs.rerun("text_temperature")))
    names = ["r2_scores.csv", "ranking.csv", "gains.csv", "spearman.csv", "max_temperature.csv",
             "temperature_cap.csv", "fluency.csv"]
    names += [f"data/{task}.jsonl" for task in TASKS]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_another_batching_is_served_from_the_cache(tiny_run, tmp_path, tiny_runs):
    """decTest sets are cached per prompt: three chunks of batches of two sample nothing, and the
    data files are those of the first run. The run starts from a copy of the shared run's
    results without their generation chunks and data files, the cache kept (Snakemake keeps
    the parameters of a file's job by path, and the copy's paths have none)."""
    out = tmp_path / "run"
    shutil.copytree(tiny_run / "results", out / "results", symlinks=True)
    text = out / "results" / "text"
    before = {task: (text / "data" / f"{task}.jsonl").read_bytes() for task in TASKS}
    shutil.rmtree(text / "interim" / "generation")
    for task in TASKS:
        (text / "data" / f"{task}.jsonl").unlink()

    def rebatch(section):
        section["generation"]["n_chunks"] = 3
        section["generation"]["dectest"]["batch_sets"] = 2

    data_only(out, overlay(tmp_path, "rebatched", rebatch), tiny_runs.resources)
    for task in TASKS:
        assert generated(text, task, 3) == 0
        assert (text / "data" / f"{task}.jsonl").read_bytes() == before[task]


def test_paper_configuration_plans_the_papers_data_and_models(tmp_path):
    """configs/paper_text_temperature.yaml (network) is one switch away: it validates and plans
    the download of Tevet & Berant's release and the hub models."""
    done = run_snakemake("-n", "text_temperature", "--configfile",
                         str(REPO / "configs" / "paper_text_temperature.yaml"), "--config",
                         f"results_dir={tmp_path / 'results'}",
                         f"resources_dir={tmp_path / 'resources'}", "--nolock")
    planned = done.stdout
    assert "rule text_fetch_tevet_berant" in planned
    assert "text_generate" not in planned
    for model in ("bert-large-nli-stsb-mean-tokens", "roberta-base-nli-mean-tokens",
                  "all-distilroberta-v1", "all-MiniLM-L12-v2"):
        assert f"models/{model}" in planned


def compare_on_the_experiments_embeddings(text_dir: Path, model: str, task: str,
                                          settings) -> tuple:
    """``compare`` on the text experiment's cached embeddings of one (model, task), every set
    as the experiment scores it; returns (the comparison, the experiment's scores table)."""
    import numpy as np

    import diversity_core as dc

    records = text_tasks.read_sets(text_dir / "data" / f"{task}.jsonl")
    # The distinct responses in the order the experiment stored them, matched by position as
    # scripts/text_scores.py does (NumPy's fixed-width strings drop trailing NULs).
    texts = list(dict.fromkeys(t for r in records for t in r["responses"]))
    with np.load(text_dir / "interim" / "embeddings" / model / f"{task}.npz") as stored:
        assert len(stored["texts"]) == len(texts)
        vectors = stored["embeddings"].astype(np.float64)
    row = {text: i for i, text in enumerate(texts)}
    sets = {f"{r['prompt_id']} T={r['temperature']}": vectors[[row[t] for t in r["responses"]]]
            for r in records}
    scores = pd.read_csv(text_dir / "interim" / "scores" / model / f"{task}.csv")
    return dc.compare(sets, metric="cosine", settings=settings, progress=False), scores


def test_compare_reproduces_the_experiments_mag_areas(tiny_run):
    """``compare`` on the experiment's own cached embeddings: the same t_cut (the median
    protocol) and the same MagArea column (to the integration tolerance) for the same sets."""
    import numpy as np

    import diversity_core as dc

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    settings = dc.MagnitudeSettings.from_config(config["magnitude"])
    out = tiny_run / "results" / "text"
    for task in TASKS:
        result, scores = compare_on_the_experiments_embeddings(
            out, "paraphrase-MiniLM-L3-v2-onnx", task, settings)
        assert result.t_cut == pytest.approx(scores["t_cut"].iloc[0], rel=1e-9)
        np.testing.assert_allclose(result.table["magarea"], scores["mag_area"], rtol=1e-8)
