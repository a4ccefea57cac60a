"""benchmarks/device_check.py (issue 36) as CI runs it: ``--device cpu --tiny``, every check
(the language model's sampler, the sentence encoder, Inception, magnitude) within tolerance,
and its refusal of a device torch does not see."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentence_transformers")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "device_check.py"


def test_tiny_cpu_run_passes_every_check(tmp_path):
    out = tmp_path / "check.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--tiny",
                          "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["tiny"]
    checks = {r["check"]: r for r in report["results"]}
    assert set(checks) == {"magnitude", "lm", "sentences", "inception"}
    assert all(r["ok"] for r in checks.values())
    # CPU against CPU: the same computation, so the same numbers and the same tokens.
    assert checks["lm"]["noise_identical"] and checks["lm"]["tokens_agree"] == 1.0
    assert checks["lm"]["rows"] == 6
    assert checks["sentences"]["shape"] == [48, 64] and checks["sentences"]["max_abs_diff"] == 0
    assert checks["inception"]["shape"] == [8, 2048]
    assert max(checks["magnitude"]["rel_errors"].values()) <= 1e-9
    assert "all checks within tolerance" in run.stdout


def test_a_device_torch_does_not_see_is_refused():
    import torch

    device = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    run = subprocess.run([sys.executable, str(SCRIPT), "--device", device, "--tiny",
                          "--only", "magnitude"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "requested but torch sees" in run.stderr
