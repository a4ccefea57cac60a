"""The audit is linear in the length of a chain of records (each result the input of the next,
every one a final result: each chain reaches back through all the files before it). Counted,
not timed: the records it looks up and the paths it builds grow with the number of files, not
with the sum of the chains' lengths. ``benchmarks/bench_audit_chain.py`` times the same chain.
"""

import importlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from diversity_core.provenance import Roots, audit

audit_module = importlib.import_module("diversity_core.provenance.audit")


def _chain(root: Path, n_links: int) -> None:
    """The benchmark's chain: ``n_links`` recorded files, each the input of the next."""
    spec = importlib.util.spec_from_file_location(
        "bench_audit_chain", Path(__file__).resolve().parents[2] / "benchmarks" /
        "bench_audit_chain.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.build(root, n_links)


def _counted_audit(root: Path, monkeypatch) -> tuple[object, int]:
    """The audit of ``root``, and how many times it looked up a record or built a path."""
    calls = [0]
    record, path = audit_module._Auditor.record, Roots.path

    def counted_record(self, key):
        calls[0] += 1
        return record(self, key)

    def counted_path(self, root, relative):
        calls[0] += 1
        return path(self, root, relative)

    monkeypatch.setattr(audit_module._Auditor, "record", counted_record)
    monkeypatch.setattr(Roots, "path", counted_path)
    report = audit(root / "results", root / "resources", root, workers=1)
    return report, calls[0]


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    made = {}
    for n in (30, 90):
        root = tmp_path_factory.mktemp(f"chain{n}")
        _chain(root, n)
        made[n] = root
    return made


def test_a_chain_of_records_is_audited_in_work_linear_in_its_length(chains, monkeypatch):
    small, small_calls = _counted_audit(chains[30], monkeypatch)
    large, large_calls = _counted_audit(chains[90], monkeypatch)
    # Three times the files: about three times the work (a walk per final result: nine).
    assert large_calls <= 3.6 * small_calls, (small_calls, large_calls)
    assert large_calls <= 40 * 90
    assert not large.findings
    last = large.chains[("results", "chain/r00089.txt")]
    assert len(last.members) == 90  # the 89 links before it and the asset
    assert ("results", "chain/r00000.txt") in last.members
    assert ("results", "chain/r00089.txt") not in last.members
    assert last.pinned_assets == [("resources", "seed/seed.txt")]


def test_a_change_at_the_head_of_a_long_chain_reaches_every_result_after_it(chains,
                                                                            monkeypatch):
    head = chains[30] / "results" / "chain" / "r00000.txt"
    kept = head.read_bytes()
    head.write_text("edited\n")
    try:
        report, _ = _counted_audit(chains[30], monkeypatch)
    finally:
        head.write_bytes(kept)
    assert report.files[("results", "chain/r00000.txt")].status == "changed"
    assert report.files[("results", "chain/r00001.txt")].status == "stale"
    causes = [("results", "chain/r00000.txt"), ("results", "chain/r00001.txt")]
    for i in range(30):
        chain = report.chains[("results", f"chain/r{i:05d}.txt")]
        expected = [causes[1], causes[0]] if i == 1 else causes[:i + 1]  # itself first
        assert chain.findings == expected, i
        assert len(chain.members) == i + 1


def test_records_that_name_each_other_end_and_share_their_upstream(chains, tmp_path,
                                                                   monkeypatch):
    """A hand-edited record naming a later file as its input (a cycle) ends, and each file of
    the cycle reaches the others, never itself."""
    root = tmp_path / "cycle"
    shutil.copytree(chains[30], root)
    first = root / "results" / "chain" / "r00005.txt.provenance.json"
    last = json.loads((root / "results" / "chain" / "r00010.txt.provenance.json").read_text())
    record = json.loads(first.read_text())
    record["inputs"]["later"] = last["outputs"]["out"]
    first.write_text(json.dumps(record))
    report, _ = _counted_audit(root, monkeypatch)
    five = report.chains[("results", "chain/r00005.txt")]
    ten = report.chains[("results", "chain/r00010.txt")]
    assert ("results", "chain/r00010.txt") in five.members
    assert ("results", "chain/r00005.txt") in ten.members
    assert ("results", "chain/r00005.txt") not in five.members
    assert len(five.members) == len(ten.members) == 11  # r00000..r00010 but itself; the asset
