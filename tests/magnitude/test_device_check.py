"""benchmarks/device_check.py as CI runs it: ``--device cpu --tiny``, every check
(the language model's sampler, the sentence encoder, Inception, magnitude) within tolerance,
and its refusal of a device torch does not see."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rules import default_rule_solves

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
    assert "batch_mag_area_hermite_d2" in checks["magnitude"]["rel_errors"]
    assert "all checks within tolerance" in run.stdout


def test_a_device_torch_does_not_see_is_refused():
    import torch

    device = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    run = subprocess.run([sys.executable, str(SCRIPT), "--device", device, "--tiny",
                          "--only", "magnitude"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "requested but torch sees" in run.stderr


def test_bench_gpu_smoke_run_on_cpu_torch(tmp_path):
    # benchmarks/bench_gpu.py as gpu_checks.sh runs it, at small sizes on CPU torch: every job
    # gives a row, the torch path agrees with the NumPy engine, the device's large-n path with
    # this run's dense one (within its budget), and the per-core jobs run on the cores asked.
    out = tmp_path / "bench.json"
    script = SCRIPT.with_name("bench_gpu.py")
    run = subprocess.run([sys.executable, str(script), "--device", "torch:cpu", "--sizes",
                          "small", "--large", "600", "--numpy-cores", "1", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {row["job"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"single 600", "single 1,500", "batch 20 x 100", "batch 100 x 10",
                         "large 600", "numpy 600 on 1 cores"}
    assert all(rows[job]["rel_diff"] < 1e-9 for job in ("single 600", "single 1,500",
                                                         "batch 20 x 100", "batch 100 x 10"))
    # The dense path's factorisations by phase (the default rule is hermite_d2 on the torch
    # path, which factors every scale), its phases' seconds summing to the job's, and the
    # repeated job giving the same numbers.
    first = rows["single 600"]
    assert 2 <= first["evaluations"]["convergence_scale"] <= 12
    assert first["evaluations"]["mag_area"] in default_rule_solves(factored=True)
    assert first["evaluations"]["other"] == 0
    assert sum(first["phases_s"].values()) == pytest.approx(first["torch_s"], rel=0.1, abs=0.01)
    assert all(rows[job]["repeat_same"] for job in ("single 600", "single 1,500",
                                                    "batch 20 x 100", "batch 100 x 10"))
    large = rows["large 600"]
    assert large["reference"] == "dense torch path" and large["rel_diff"] < 1e-6
    assert large["evaluations"]["mag_area"] > 0 and large["cg_products"] > 0
    assert rows["numpy 600 on 1 cores"]["cores"] == 1
    # the NumPy engine on one core against the torch path's t_conv of the same points
    assert rows["numpy 600 on 1 cores"]["t_conv"] == pytest.approx(rows["single 600"]["t_conv"],
                                                                   rel=1e-9)


def test_bench_gpu_times_the_rule_it_is_given(tmp_path):
    """``--integration hermite_d2``, as gpu_checks.sh's bench_gpu_d2 step runs it: the torch
    path's single sets take 9 factorisations for MagArea where the first stage suffices (10
    where the search ended on a step it did not solve, 19 or 20 past it), and both engines
    integrate by the same rule (they agree as closely as under the default rule)."""
    out = tmp_path / "bench.json"
    script = SCRIPT.with_name("bench_gpu.py")
    run = subprocess.run([sys.executable, str(script), "--device", "torch:cpu", "--sizes",
                          "small", "--integration", "hermite_d2", "--numpy-max", "600",
                          "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "MagArea by hermite_d2" in run.stdout
    rows = {row["job"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"single 600", "single 1,500", "batch 20 x 100", "batch 100 x 10"}
    assert rows["single 600"]["evaluations"]["mag_area"] in (9, 10, 19, 20)
    assert "numpy_s" not in rows["single 1,500"]  # above --numpy-max
    assert all(rows[job]["rel_diff"] < 1e-9 for job in ("single 600", "batch 20 x 100",
                                                         "batch 100 x 10"))
