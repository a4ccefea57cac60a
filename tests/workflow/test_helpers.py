"""The rule scripts' shared modules (scripts/_contract.py, _job.py, _command_line.py): the
strict contract between a rule and its script, corrupt inputs reported with their path, and
provenance records (with the SHA-256 of every input, output and of the script) that exist only
beside an output that was written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import _command_line  # noqa: E402
import _contract  # noqa: E402
import _job  # noqa: E402
from _contract import Input, Inputs, Output  # noqa: E402

sys.path.pop(0)

from diversity_core.provenance.digests import file_sha256  # noqa: E402
from diversity_core.provenance.intact import check_intact  # noqa: E402


class _Files(list):
    """Snakemake's named lists: iterable over every path, with .items() for the named ones."""

    def __init__(self, *unnamed, **named):
        flat = [str(v) for v in unnamed]
        for value in named.values():
            flat += [str(v) for v in value] if isinstance(value, list) else [str(value)]
        super().__init__(flat)
        self._named = {k: ([str(x) for x in v] if isinstance(v, list) else
                           v if not isinstance(v, Path) else str(v)) for k, v in named.items()}

    def items(self):
        return self._named.items()


class _FakeSnakemake:
    def __init__(self, tmp_path, input, output, params=None, unnamed_input=(), rule="copy"):
        self.input = _Files(*unnamed_input, **input)
        self.output = _Files(**output)
        self.params = _Files(**(params or {}))
        self.wildcards = _Files()
        self.log = [str(tmp_path / "rule.log")]
        self.threads = 1
        self.rule = rule
        self.config = {"results_dir": str(tmp_path), "resources_dir": str(tmp_path / "res")}


def _copy(data: Input, table: Output, scale: float):
    """Write the array of DATA times SCALE to TABLE."""
    with np.load(data) as archive:
        np.savetxt(table, archive["x"] * scale)
    return {"n_rows": 2000}


@pytest.fixture
def files(tmp_path):
    data = tmp_path / "interim" / "data.npz"
    data.parent.mkdir()
    np.savez(data, x=np.arange(2000.0))
    return data, tmp_path / "table.csv"


def _record(path) -> dict:
    return json.loads(Path(str(path) + ".provenance.json").read_text())


def test_a_good_run_writes_the_output_then_its_record_with_digests(files, tmp_path):
    data, table = files
    smk = _FakeSnakemake(tmp_path, {"data": data}, {"table": table}, {"scale": 2.0,
                                                                     "config": {"k": 1}})
    _job.run(_copy, smk)
    record = _record(table)
    assert record["artifact"] == "table.csv" and record["rule"] == "copy"
    assert record["config"] == {"k": 1} and record["params"] == {"scale": 2.0}
    assert record["extra"] == {"n_rows": 2000} and record["format"] == 2
    assert record["inputs"]["data"] == [{"root": "results", "path": "interim/data.npz",
                                         "sha256": file_sha256(data),
                                         "size": data.stat().st_size}]
    assert record["outputs"]["table"][0]["sha256"] == file_sha256(table)
    assert record["script"]["sha256"] == file_sha256(__file__)
    assert "timestamp" not in json.dumps(record)
    # A rerun reproduces the record byte for byte.
    first = Path(str(table) + ".provenance.json").read_bytes()
    _job.run(_copy, smk)
    assert Path(str(table) + ".provenance.json").read_bytes() == first
    assert "provenance: 1 record(s)" in (tmp_path / "rule.log").read_text()


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_corrupt_input_is_named_and_no_stale_record_stays(files, tmp_path, damage):
    data, table = files
    smk = _FakeSnakemake(tmp_path, {"data": data}, {"table": table}, {"scale": 1.0})
    _job.run(_copy, smk)
    stale = Path(str(table) + ".provenance.json")
    assert stale.exists()
    raw = data.read_bytes()
    data.write_bytes(raw[: len(raw) // 2] if damage == "truncate" else b"not a zip" * 100)
    table.unlink()  # as Snakemake does before it reruns the job
    with pytest.raises(ValueError, match="truncated or corrupt") as err:
        _job.run(_copy, smk)
    assert str(data) in str(err.value)
    assert not stale.exists()  # no record for an output that was not written
    assert str(data) in (tmp_path / "rule.log").read_text()


@pytest.mark.parametrize("suffix, content", [(".npy", b"\x93NUMPY garbage"),
                                             (".json", b'{"t_cut": 1.5')])
def test_other_corrupt_inputs_are_named(tmp_path, suffix, content):
    bad = tmp_path / f"input{suffix}"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match="truncated or corrupt") as err:
        check_intact([bad])
    assert str(bad) in str(err.value)


def test_a_failing_rule_leaves_no_record(files, tmp_path):
    data, table = files

    def fails_after_writing(data: Input, table: Output):
        Path(table).write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _job.run(fails_after_writing, _FakeSnakemake(tmp_path, {"data": data},
                                                         {"table": table}))
    assert not Path(str(table) + ".provenance.json").exists()


def test_an_output_that_was_not_written_gets_no_record(files, tmp_path):
    data, table = files

    def writes_nothing(data: Input, table: Output):
        pass

    with pytest.raises(FileNotFoundError, match="not written"):
        _job.run(writes_nothing, _FakeSnakemake(tmp_path, {"data": data},
                                                    {"table": table}))
    assert not Path(str(table) + ".provenance.json").exists()


# --- the contract ----------------------------------------------------------------------------

@pytest.mark.parametrize("params, unnamed, message", [
    ({"scael": 2.0}, (), "params 'scael' is not a parameter of main"),   # misspelt
    ({}, (), "main's param 'scale' is missing from the rule"),
    ({"scale": 1.0}, ("extra.npz",), "its input has 1 unnamed path"),
])
def test_a_rule_that_breaks_the_contract_stops_naming_rule_script_and_name(
        files, tmp_path, params, unnamed, message):
    data, table = files
    smk = _FakeSnakemake(tmp_path, {"data": data}, {"table": table}, params,
                         unnamed_input=unnamed, rule="curvature_table")
    with pytest.raises(_contract.ContractError) as err:
        _job.run(_copy, smk)
    text = str(err.value)
    assert message in text and "rule curvature_table" in text and Path(__file__).name in text
    assert not table.exists()  # main never ran
    assert message in (tmp_path / "rule.log").read_text()


def test_defaults_and_roles_are_part_of_the_contract():
    def main(data: Input, table: Output, k: int = 5, paths: Inputs = None, unannotated=1):
        pass

    problems = "\n".join(_contract.contract_problems(
        main, {"input": ["data"], "output": ["table"], "params": ["k", "paths"]},
        {"input": 0, "output": 0}))
    assert "params 'k' has a default in main (5)" in problems
    assert "params 'paths': main's parameter is annotated inputs" in problems
    assert "'unannotated' has no annotation" in problems


def test_a_list_input_arrives_as_a_list_and_a_single_one_as_a_path(tmp_path):
    seen = {}

    def main(one: Input, many: Inputs, none: Inputs, out: Output):
        seen.update(one=one, many=many, none=none)
        Path(out).write_text("x")

    for name in ("a", "b"):
        (tmp_path / name).write_text(name)
    smk = _FakeSnakemake(tmp_path, {"one": tmp_path / "a", "many": tmp_path / "b", "none": []},
                         {"out": tmp_path / "out.txt"})
    _job.run(main, smk)
    assert seen == {"one": str(tmp_path / "a"), "many": [str(tmp_path / "b")], "none": []}


def test_the_job_hashes_each_input_once_and_shares_the_digest(tmp_path):
    """A big model file is read once per job: the script gets its digest from the helper."""
    model = tmp_path / "model.bin"
    model.write_bytes(os.urandom(1 << 16))
    seen = {}

    def main(model: Input, again: Input, out: Output):
        seen["digest"] = _job.input_sha256(model)
        Path(out).write_text("x")

    smk = _FakeSnakemake(tmp_path, {"model": model, "again": model},
                         {"out": tmp_path / "out.txt"})
    _job.run(main, smk)
    assert seen["digest"] == file_sha256(model)
    log = (tmp_path / "rule.log").read_text()
    assert "hashed 3 file(s)" in log  # model once, the output, the script


# --- a script run alone --------------------------------------------------------------------

@pytest.mark.parametrize("hint, text, value", [
    (dict, '{"target": 0.95, "n_ts": 30}', {"target": 0.95, "n_ts": 30}),
    (list, "[0.2, 1.0]", [0.2, 1.0]),
    (bool | str, "true", True), (bool | str, "turkes", "turkes"),
    (str | None, "null", None), (str | None, "abc", "abc"),
    (dict | None, "null", None), (int, "7", 7), (float, "0.5", 0.5),
])
def test_command_line_values_parse_by_annotation(hint, text, value):
    assert _command_line.cli_value(hint)(text) == value


def test_a_script_runs_alone_with_a_json_dict_and_records_its_output(tmp_path):
    """curvature_convergence.py takes the `magnitude` section: as JSON on its command line."""
    clouds = tmp_path / "clouds.npz"
    rng = np.random.default_rng(0)
    np.savez(clouds, curvature=np.array([0.0, 1.0]), split=np.array(["train", "test"]),
             polar=np.stack([np.column_stack([rng.uniform(0, 1, 12),
                                              rng.uniform(0, 2 * np.pi, 12)])] * 2))
    scales = tmp_path / "scales.npz"
    magnitude = json.dumps({"target": 0.95, "t_conv_rtol": 1e-9, "integration": "chebyshev",
                            "integration_rtol": 1e-8, "n_ts": 30})
    command = [sys.executable, str(REPO / "scripts" / "curvature_convergence.py"),
               "--clouds", str(clouds), "--scales", str(scales), "--magnitude", magnitude,
               "--chunk", "0", "--n-chunks", "1", "--n-quantiles", "4",
               "--hyperbolic-distance", "true"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert np.load(scales)["t_conv"].shape == (2,)
    record = _record(scales)
    assert record["rule"] is None and record["params"]["magnitude"]["target"] == 0.95
    assert record["inputs"]["clouds"][0]["sha256"] == file_sha256(clouds)
    # A parameter left out is named; so is a value that is not JSON.
    done = subprocess.run(command[:-2], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "--hyperbolic-distance" in done.stderr
    broken = [*command[:7], "{target: 0.95", *command[8:]]
    done = subprocess.run(broken, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "--magnitude" in done.stderr and "JSON" in done.stderr


def test_chunks_are_contiguous_balanced_and_cover_every_item():
    from diversity_core.experiments.chunks import chunk_indices

    shares = [chunk_indices(10, 3, c).tolist() for c in range(3)]
    assert shares == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert chunk_indices(2, 3, 2).tolist() == []  # more jobs than items: an empty share
    with pytest.raises(ValueError, match="chunk 3 is outside 0..2"):
        chunk_indices(10, 3, 3)
