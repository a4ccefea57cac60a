"""The rule-script helper (scripts/_helpers.py): corrupt inputs are reported with their path, and
a provenance record exists only beside an output that was written."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _helpers  # noqa: E402

sys.path.pop(0)


class _Files(list):
    """Snakemake's named file lists: iterable, with .items()."""

    def __init__(self, **named):
        super().__init__(str(v) for v in named.values())
        self._named = {k: str(v) for k, v in named.items()}

    def items(self):
        return self._named.items()


class _FakeSnakemake:
    def __init__(self, input, output, log):
        self.input = _Files(**input)
        self.output = _Files(**output)
        self.params = _Files()
        self.log = [str(log)]
        self.threads = 1


def _copy_script(data, table):
    with np.load(data) as archive:
        np.savetxt(table, archive["x"])
    _helpers.write_provenance(table, config={"k": 1})


@pytest.fixture
def files(tmp_path):
    data = tmp_path / "interim" / "data.npz"
    data.parent.mkdir()
    np.savez(data, x=np.arange(2000.0))
    table = tmp_path / "table.csv"
    return data, table, tmp_path / "rule.log"


def test_a_good_run_writes_the_output_then_its_record(files):
    data, table, log = files
    _helpers.run(_copy_script, _FakeSnakemake({"data": data}, {"table": table}, log))
    record = json.loads(Path(str(table) + ".provenance.json").read_text())
    assert record["artifact"] == "table.csv" and record["config"] == {"k": 1}


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_corrupt_input_is_named_and_no_stale_record_stays(files, damage):
    data, table, log = files
    _helpers.run(_copy_script, _FakeSnakemake({"data": data}, {"table": table}, log))
    stale = Path(str(table) + ".provenance.json")
    assert stale.exists()
    raw = data.read_bytes()
    data.write_bytes(raw[: len(raw) // 2] if damage == "truncate" else b"not a zip" * 100)
    table.unlink()  # as Snakemake does before it reruns the job
    with pytest.raises(ValueError, match="truncated or corrupt") as err:
        _helpers.run(_copy_script, _FakeSnakemake({"data": data}, {"table": table}, log))
    assert str(data) in str(err.value)
    assert not stale.exists()  # no record for an output that was not written
    assert str(data) in log.read_text()


@pytest.mark.parametrize("suffix, content", [(".npy", b"\x93NUMPY garbage"),
                                             (".json", b'{"t_cut": 1.5')])
def test_other_corrupt_inputs_are_named(tmp_path, suffix, content):
    bad = tmp_path / f"input{suffix}"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match="truncated or corrupt") as err:
        _helpers.check_inputs([bad])
    assert str(bad) in str(err.value)


def test_a_failing_rule_leaves_no_record(files):
    data, table, log = files

    def fails_after_writing(data, table):
        Path(table).write_text("half")
        _helpers.write_provenance(table)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _helpers.run(fails_after_writing, _FakeSnakemake({"data": data}, {"table": table}, log))
    assert not Path(str(table) + ".provenance.json").exists()


def test_no_record_for_a_file_that_does_not_exist(tmp_path):
    with pytest.raises(FileNotFoundError, match="not written"):
        _helpers.write_provenance(tmp_path / "missing.csv")
    assert list(tmp_path.iterdir()) == []
