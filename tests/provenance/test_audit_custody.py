"""Custody without blind spots, one regression test per class of problem:

1. links: a file, a folder on the way, or a record that leaves ``results/`` through a link is a
   finding, never read and never copied into the crate (:func:`.paths.open_inside` refuses a
   path that leaves its root; a link that stays inside is read); a link inside a folder output
   that leaves the folder is set aside, not in its digest;
2. names: a file named with bytes that are not UTF-8, a newline or an escape sequence is a
   finding printed escaped: the text report never holds a forged line, the crate leaves it
   out; a record path longer than PATH_MAX is a finding naming the record and the field;
3. every claim of a record: another output it lists that is gone, or whose digest or size
   differs, is a finding; an interim output that is not on disk is not (a fresh clone);
4. the crate's folder may not lie inside the audited folder;
5. property: any value in any field of any kind of record (a file's, a folder's, an asset
   input's) and of a ``.pins.json`` manifest is read, refused with the documented error, or
   audited and exported without an exception.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_audit_hardening import _args, _command, _crate_files, _make_run, _one_error_line

from diversity_core.cli.main import main as cli_main
from diversity_core.provenance import Hasher, Roots, audit, write_records
from diversity_core.provenance.crate import write_crate
from diversity_core.provenance.digests import ManifestError, file_sha256, read_manifest
from diversity_core.provenance.paths import LeavesRoot, name_problem, open_inside, printable
from diversity_core.provenance.records import ROOTS, RecordError, parse_record

SETTINGS = settings(max_examples=int(os.environ.get("HYP_N", 60)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(tmp_path):
    return _make_run(tmp_path / "run")


def _files(done) -> dict:
    return {f["relative_path"]: f for f in json.loads(done.stdout)["files"]}


# --- 1. links leaving the root -----------------------------------------------------------------

def test_a_folder_link_out_of_results_is_a_finding_and_never_copied(run, tmp_path):
    """The issue's case: results/exp/evil -> a folder outside, and a record whose input is
    exp/evil/secret.txt with that file's very digest: exit 1, the reason names the link, and
    the crate holds no copy of it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours\n")
    os.symlink(outside, run / "results" / "exp" / "evil")
    record_file = run / "results" / "exp" / "table.csv.provenance.json"
    record = json.loads(record_file.read_text())
    record["inputs"]["evil"] = [{"root": "results", "path": "exp/evil/secret.txt",
                                 "sha256": file_sha256(outside / "secret.txt"), "size": 10}]
    record_file.write_text(json.dumps(record))
    crate = tmp_path / "crate"
    done = _command(*_args(run), "--json", "--ro-crate", crate)
    assert done.returncode == 1, done.stdout + done.stderr
    reasons = " ".join(_files(done)["exp/table.csv"]["reasons"])
    assert "exp/evil/secret.txt" in reasons and "leaves results/ through a link" in reasons
    assert f"exp/evil -> {outside}" in reasons
    graph, files = _crate_files(crate)
    assert not [name for name in files if "secret" in name or "evil" in name]
    assert "not copied: it leaves results/ through a link" in \
        graph["#results/exp/evil/secret.txt"]["description"]


def test_a_file_or_record_linked_out_of_results_is_a_finding_even_with_its_digest(run,
                                                                                 tmp_path):
    """table.csv replaced by a link to a file outside holding the very bytes its record
    names (so that a digest check alone would pass), and interim/a.json's record replaced by
    a link to a copy outside: both findings, neither copied; a link that stays inside the
    results folder is read as before."""
    exp = run / "results" / "exp"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "table.csv").write_bytes((exp / "table.csv").read_bytes())
    (exp / "table.csv").unlink()
    os.symlink(outside / "table.csv", exp / "table.csv")
    record = exp / "interim" / "a.json.provenance.json"
    (outside / "a.json.provenance.json").write_bytes(record.read_bytes())
    record.unlink()
    os.symlink(outside / "a.json.provenance.json", record)
    crate = tmp_path / "crate"
    done = _command(*_args(run), "--json", "--ro-crate", crate)
    assert done.returncode == 1, done.stdout + done.stderr
    files = _files(done)
    assert files["exp/table.csv"]["status"] == "changed"
    assert any("leaves results/ through a link (exp/table.csv ->" in r
               for r in files["exp/table.csv"]["reasons"])
    assert files["exp/interim/a.json"]["status"] == "unrecorded"
    assert any("a.json.provenance.json leaves results/ through a link" in r
               for r in files["exp/interim/a.json"]["reasons"])
    _, copied = _crate_files(crate)
    assert "results/exp/table.csv" not in copied
    assert "results/exp/interim/a.json.provenance.json" not in copied
    # A link inside the root stays readable.
    (exp / "table.csv").unlink()
    (exp / "interim" / "table_copy.csv").write_bytes((outside / "table.csv").read_bytes())
    os.symlink("interim/table_copy.csv", exp / "table.csv")
    report = audit(run / "results", run / "resources", run)
    assert report.files[("results", "exp/table.csv")].status == "ok"


def test_an_asset_linked_out_of_resources_is_a_finding(run, tmp_path):
    """The same for resources/: the pinned corpus folder moved outside and linked back, its
    bytes (and so its pinned digests) unchanged."""
    corpus = run / "resources" / "corpus"
    corpus.rename(tmp_path / "corpus")
    os.symlink(tmp_path / "corpus", corpus)
    report = audit(run / "results", run / "resources", run)
    asset = report.files[("resources", "corpus")]
    assert asset.status == "changed" and "leaves resources/ through a link (corpus ->" in \
        asset.reasons[0]
    consumer = report.files[("results", "exp/interim/a.json")]
    assert consumer.status == "stale" and any("leaves resources/" in r for r in consumer.reasons)


def test_open_inside_refuses_every_way_out_and_reads_the_ways_in(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "x").write_text("outside")
    (root / "sub" / "y").write_text("inside")
    os.symlink(outside, root / "out_dir")
    os.symlink(outside / "x", root / "out_file")
    os.symlink("sub/y", root / "in_file")
    os.symlink("../../outside/x", root / "sub" / "relative_out")
    for way_out in ("out_dir/x", "out_file", "sub/relative_out", "sub/../../outside/x"):
        with pytest.raises(LeavesRoot), open_inside(root, way_out):
            pass
    for way_in, data in (("in_file", b"inside"), ("sub/y", b"inside")):
        with open_inside(root, way_in) as (stream, size):
            assert stream.read() == data and size == len(data)
    os.symlink(root, tmp_path / "root_link")  # the root itself may be a link
    with open_inside(tmp_path / "root_link", "sub/y") as (stream, _):
        assert stream.read() == b"inside"


def test_a_link_out_of_a_folder_output_is_set_aside_not_in_its_digest(run, tmp_path):
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(b"outside")
    os.symlink(outside, run / "results" / "exp" / "interim" / "images" / "2.png")
    crate = tmp_path / "crate"
    done = _command(*_args(run), "--json", "--ro-crate", crate)
    assert done.returncode == 0, done.stdout + done.stderr
    notes = " ".join(json.loads(done.stdout)["notes"])
    assert "2.png (a link leaving the folder" in notes
    _, copied = _crate_files(crate)
    assert not [name for name in copied if name.endswith("2.png")]


# --- 2. names ----------------------------------------------------------------------------------

BAD_NAMES = {b"bad\xff.csv": "\\xff", b"evil\nok         fake.csv": "\\n",
             b"esc\x1b[31mred.csv": "\\x1b", b"tab\there.csv": "\\t"}


def test_names_that_are_not_utf8_or_hold_control_characters_are_escaped_findings(run,
                                                                                 tmp_path):
    """Each name is a finding on one line, escaped; the text report has no forged line; the
    crate is written (exit 1) without them and its metadata is valid JSON."""
    exp = os.fsencode(run / "results" / "exp")
    for name in BAD_NAMES:
        with open(os.path.join(exp, name), "wb") as out:
            out.write(b"x\n")
    os.mkdir(os.path.join(exp, b"dir\xfe"))
    with open(os.path.join(exp, b"dir\xfe", b"inside.csv"), "wb") as out:
        out.write(b"y\n")
    done = subprocess.run([sys.executable, "-m", "diversity_core", *_args(run)],
                          capture_output=True, timeout=120, cwd=REPO)
    assert done.returncode == 1, done.stdout + done.stderr
    text = done.stdout.decode("utf-8")  # valid UTF-8 whatever the names held
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith("ok") and "fake.csv" in line]
    for escaped in [*BAD_NAMES.values(), "dir\\xfe"]:
        assert any(line.startswith("unrecorded") and escaped in line for line in lines), \
            (escaped, text)
    assert not any(ch in text for ch in "\x1b\t")
    crate = tmp_path / "crate"
    assert cli_main([*_args(run), "--ro-crate", str(crate)]) == 1
    graph, copied = _crate_files(crate)
    assert not [name for name in copied if name_problem(name)]


def test_printable_escapes_what_would_break_a_line():
    assert printable("a\nb\x1b[0m\u2028c\udcffd") == "a\\nb\\x1b[0m\\u2028c\\xffd"
    assert printable("plain/név.csv") == "plain/név.csv"


def test_an_over_long_recorded_path_is_a_finding_naming_the_record_and_field(run, capsys):
    record_file = run / "results" / "exp" / "table.csv.provenance.json"
    record = json.loads(record_file.read_text())
    record["inputs"]["a"][0]["path"] = "x" * 5000
    record_file.write_text(json.dumps(record))
    assert cli_main(_args(run)) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "inputs.a[0].path" in line)
    assert "table.csv.provenance.json" in line and "longer than 4,096 bytes" in line
    assert max(len(line) for line in out.splitlines()) < 500


# --- 3. every claim of a record ----------------------------------------------------------------

@pytest.fixture
def two_outputs(tmp_path):
    """One rule (final) writing results/exp/table.csv and results/exp/summary.md, and an
    interim file: each output's record lists all three."""
    root = _make_run(tmp_path / "run")
    roots = Roots.of(root / "results", root / "resources", root)
    exp = root / "results" / "exp"
    (exp / "summary.md").write_text("# summary\n")
    (exp / "interim" / "log.json").write_text("{}")
    write_records({"table": [exp / "table.csv"], "summary": [exp / "summary.md"],
                   "log": [exp / "interim" / "log.json"]},
                  {"a": [exp / "interim" / "a.json"]}, roots=roots, hasher=Hasher(),
                  rule="final", script=root / "scripts" / "job.py")
    return root


def _edit(root: Path, change) -> None:
    path = root / "results" / "exp" / "table.csv.provenance.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("claim", ["gone", "digest", "size", "own size"])
def test_every_output_a_record_lists_is_checked(two_outputs, claim):
    def change(record):
        entry = record["outputs"]["summary"][0]
        if claim == "gone":
            entry["path"] = "exp/gone.md"
        elif claim == "digest":
            entry["sha256"] = "0" * 64
        elif claim == "size":
            entry["size"] += 1
        else:
            record["outputs"]["table"][0]["size"] += 1

    _edit(two_outputs, change)
    report = audit(two_outputs / "results", two_outputs / "resources", two_outputs)
    target, status = {"gone": ("exp/gone.md", "missing"), "digest": ("exp/summary.md", "changed"),
                      "size": ("exp/summary.md", "changed"),
                      "own size": ("exp/table.csv", "changed")}[claim]
    found = report.files[("results", target)]
    assert found.status == status, found
    assert any(("table.csv.provenance.json" in r and "outputs.summary[0]" in r)
               or "its size differs" in r for r in found.reasons), found.reasons


def test_an_interim_output_not_on_disk_is_not_a_finding(two_outputs):
    """A fresh clone holds no interim/: the record's interim output is 'not on disk'."""
    (two_outputs / "results" / "exp" / "interim" / "log.json").unlink()
    (two_outputs / "results" / "exp" / "interim" / "log.json.provenance.json").unlink()
    report = audit(two_outputs / "results", two_outputs / "resources", two_outputs)
    assert not [f for f in report.findings if f.path == "exp/interim/log.json"]
    assert ("results", "exp/interim/log.json") in report.not_on_disk
    report = audit(two_outputs / "results", two_outputs / "resources", two_outputs,
                   require_chain=True)
    assert report.files[("results", "exp/interim/log.json")].status == "missing"


# --- 4. the crate's folder ---------------------------------------------------------------------

@pytest.mark.parametrize("inside", ["results/crate", "results/exp/crate", "results_link/crate"])
def test_a_crate_inside_the_audited_folder_is_refused_before_the_audit(run, inside):
    os.symlink(run / "results", run / "results_link")
    before = sorted(p.as_posix() for p in (run / "results").rglob("*"))
    done = _command(*_args(run), "--ro-crate", run / inside)
    _one_error_line(done, "inside the audited folder")
    assert sorted(p.as_posix() for p in (run / "results").rglob("*")) == before


# --- 5. every field of every kind of record, and of a manifest ---------------------------------

def _written_records(root: Path) -> dict:
    """The writer's records of each kind: a file output, a folder output (its record lists the
    folder with its files) and a file whose input is a pinned asset (with manifest fields)."""
    results = root / "results"
    return {"file": json.loads((results / "exp" / "table.csv.provenance.json").read_text()),
            "folder": json.loads((results / "exp" / "interim" /
                                  "images.provenance.json").read_text()),
            "asset input": json.loads((results / "exp" / "interim" /
                                       "a.json.provenance.json").read_text())}


def _field_paths(value, prefix=()) -> list:
    """Every field of a JSON value (keys of objects, indices of lists), containers included."""
    out = []
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        out.append((*prefix, key))
        out += _field_paths(item, (*prefix, key))
    return out


with tempfile.TemporaryDirectory(prefix="record_kinds.") as _tmp:
    # The records name paths relative to their roots: nothing of the folder stays in them.
    _KINDS = _written_records(_make_run(Path(_tmp)))
_ALL_FIELDS = [(kind, path) for kind, record in sorted(_KINDS.items())
               for path in _field_paths(record)]
_HOSTILE_TEXT = ["../x", "/etc/passwd", "a\nok         fake", "\x1b[31m", "x" * 5000,
                 "a/" * 2100, "\udcff", "", ".", "exp/table.csv", "0" * 64, "-" * 64]


def _json_values():
    text = st.text(max_size=12) | st.sampled_from(_HOSTILE_TEXT)
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(text, inner, max_size=3), max_leaves=8)


def _set(record, path, value):
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return record


@st.composite
def _mutated(draw):
    kind, path = draw(st.sampled_from(_ALL_FIELDS))
    record = json.loads(json.dumps(_KINDS[kind]))
    if draw(st.booleans()):
        _set(record, path, draw(_json_values()))
    else:  # the key itself renamed (an unknown or missing field)
        parent = record
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict):
            parent[draw(st.sampled_from(_HOSTILE_TEXT))] = parent.pop(path[-1])
    return kind, path, record


def test_the_fuzzing_covers_every_field_of_every_kind():
    """The fields drawn from include those the issue's probe mutated (a folder's files, an
    asset's manifest fields, the other outputs of a record)."""
    fields = {(kind, path[:1] + tuple(k for k in path[1:] if not isinstance(k, int)))
              for kind, path in _ALL_FIELDS}
    assert ("folder", ("outputs", "images", "files")) in fields
    assert ("asset input", ("inputs", "corpus", "config_key")) in fields
    assert ("asset input", ("inputs", "corpus", "files")) in fields
    assert {path[0] for _, path in _ALL_FIELDS} >= {
        "format", "artifact", "rule", "script", "wildcards", "params", "config", "extra",
        "inputs", "outputs", "git", "python", "packages", "exponential"}
    assert len(_ALL_FIELDS) > 100


@SETTINGS
@given(_mutated())
def test_any_field_of_any_record_kind_is_read_or_refused_naming_it(case):
    kind, path, record = case
    try:
        parsed = parse_record(json.dumps(record), "x.csv.provenance.json")
    except RecordError as err:
        assert "x.csv.provenance.json" in str(err) and "\n" not in str(err)
        assert len(str(err)) < 600
        return
    for group in ("inputs", "outputs"):
        for entries in parsed[group].values():
            for entry in entries:
                assert entry["root"] in ROOTS and not name_problem(entry["path"])
                assert ".." not in Path(entry["path"]).parts


@settings(SETTINGS, max_examples=int(os.environ.get("HYP_N_AUDIT", 30)))
@given(_mutated())
def test_any_field_of_any_record_kind_is_audited_and_exported_without_error(
        tmp_path_factory, case):
    """The mutated record beside its file in a real run: the audit ends with statuses, its
    text is one printable line per item, and the crate is written."""
    kind, _, record = case
    root = _make_run(tmp_path_factory.mktemp("fuzz") / "run")
    where = {"file": "exp/table.csv", "folder": "exp/interim/images",
             "asset input": "exp/interim/a.json"}[kind]
    (root / "results" / f"{where}.provenance.json").write_text(json.dumps(record))
    report = audit(root / "results", root / "resources", root)
    text = report.to_text()
    assert not any(ch in text for ch in "\x1b\r\x00")
    json.dumps(report.to_json())
    write_crate(report, root.parent / "crate")
    assert json.loads((root.parent / "crate" / "ro-crate-metadata.json").read_text())


_MANIFEST = {"asset": "corpus", "config_key": "assets.corpus", "source": "test:local",
             "files": {"a.png": {"sha256": "1" * 64, "pinned": True}}}
_MANIFEST_FIELDS = _field_paths(_MANIFEST)


@SETTINGS
@given(st.sampled_from(_MANIFEST_FIELDS), _json_values())
def test_any_field_of_a_manifest_is_read_or_refused_naming_it(tmp_path_factory, path, value):
    manifest = json.loads(json.dumps(_MANIFEST))
    _set(manifest, path, value)
    target = tmp_path_factory.mktemp("manifest") / ".pins.json"
    target.write_text(json.dumps(manifest))
    try:
        data = read_manifest(target)
    except ManifestError as err:
        assert str(target) in str(err) and "\n" not in str(err)
        return
    for name, entry in data["files"].items():
        assert not name_problem(name) and ".." not in Path(name).parts
        assert len(entry["sha256"]) == 64
