"""End to end: the text-temperature experiment's grid design on the tiny configuration (every
prompt at every temperature, no pilot), and an enlarged grid that samples only the new sets; a
file of its own, so that its runs go beside the decTest runs of test_text_pipeline.py."""

from pathlib import Path

import pandas as pd
import pytest
from text_runs import TASKS, data_only, generated, overlay
from workflow_runner import run_tiny

from diversity_core.data import text_tasks

pytestmark = [pytest.mark.slow, pytest.mark.extended]

RESOURCES = Path(__file__).resolve().parents[2] / "resources"


def test_grid_design_and_its_enlarged_run(tmp_path):
    """text.design grid: every prompt at every temperature (3 x 3 sets, in one chunk), no pilot;
    an enlarged grid samples only the new temperature's sets (its run stops at the data files)."""
    out = tmp_path / "grid"

    def grid(section):
        section["design"] = "grid"
        section["generation"]["n_chunks"] = 1

    run_tiny("text_temperature", out, "--configfile", str(overlay(tmp_path, "grid", grid)),
             resources=RESOURCES)
    text = out / "results" / "text"
    assert not (text / "temperature_cap.csv").exists()
    before = {}
    for task in TASKS:
        before[task] = text_tasks.read_sets(text / "data" / f"{task}.jsonl")
        assert len(before[task]) == 9 and len({s["prompt_id"] for s in before[task]}) == 3
        assert {s["temperature"] for s in before[task]} == {0.3, 0.9, 1.5}
    assert set(pd.read_csv(text / "max_temperature.csv")["max_temperature"]) == {1.5}

    def enlarged(section):
        grid(section)
        section["generation"]["grid"]["temperatures"] = [0.3, 0.9, 1.5, 1.2]

    data_only(out, overlay(tmp_path, "enlarged", enlarged), RESOURCES)
    for task in TASKS:
        assert generated(text, task, 1) == 3  # one set per prompt: the new temperature's
        after = text_tasks.read_sets(text / "data" / f"{task}.jsonl")
        assert len(after) == 12
        assert [s for s in after if s["temperature"] != 1.2] == before[task]
