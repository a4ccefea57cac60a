"""The audit and its RO-Crate against hostile or careless input, one test per class
of problem:

1. every audit ends: FIFOs, devices, sockets and links to them are never opened (set aside
   with a note inside a folder input, a finding where a file should be), reads are bounded by
   the file's size, ``--workers`` is 1..32, the hashing threads stop with the audit (Ctrl-C),
   a folder that is not a results folder (``/``) is one line, exit 2;
2. the crate agrees with itself: every file in it carries the digest of its own bytes (records
   included), a script changed since its results were made is copied at the recorded commit
   (or labelled as the current version, the mismatch reported); a wrong ``--ro-crate`` is one
   line, exit 2, before the audit; a failed crate leaves nothing behind;
3. records: a path outside its root, an unknown root, malformed ``inputs``, JSON nested
   100,000 deep, non-JSON... make their file ``unrecorded`` with a reason naming the record and
   the field (never a traceback, never skipped); a link to a folder in results/ gets a note;
4. exit codes: 0 clean, 1 findings and nothing else, 2 usage and input errors; a Hypothesis
   property: the record reader raises nothing but :class:`RecordError` (a ``ValueError``).

The hang cases run the command in a subprocess with a timeout, so that a regression fails
instead of hanging the suite.
"""

import hashlib
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diversity_core.cli.main import main as cli_main
from diversity_core.provenance import Hasher, Roots, audit, digests, write_records
from diversity_core.provenance import crate as crate_module
from diversity_core.provenance.digests import NotRegularFile, file_sha256, tree_sha256
from diversity_core.provenance.records import ROOTS, RecordError, parse_record

SETTINGS = settings(max_examples=int(os.environ.get("HYP_N", 60)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120  # far beyond the second each command takes; a hang fails instead of waiting
V1, V2 = "print('version 1')\n", "print('version 2')\n"


def _manifest(folder: Path) -> None:
    files = {p.relative_to(folder).as_posix(): {"sha256": file_sha256(p), "pinned": True}
             for p in sorted(folder.rglob("*")) if p.is_file()}
    (folder / ".pins.json").write_text(json.dumps({
        "asset": folder.name, "config_key": f"assets.{folder.name}", "source": "test:local",
        "files": files}))


def _make_run(root: Path, *, git: bool = False) -> Path:
    """resources/corpus/ (a pinned folder) -> results/exp/interim/{a.json, images/} (rule make)
    -> results/exp/table.csv (rule final); the script scripts/job.py lies in the workdir (a
    git repository with ``git``, committed before the records were written)."""
    results, resources = root / "results", root / "resources"
    roots = Roots.of(results, resources, root)
    script = root / "scripts" / "job.py"
    script.parent.mkdir(parents=True)
    script.write_text(V1)
    (root / "Snakefile").write_text("rule all:\n    input: []\n")
    if git:
        _git(root, "init", "-q")
        _git(root, "add", "scripts/job.py", "Snakefile")
        _git(root, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q",
             "-m", "v1")
    corpus = resources / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "a.png").write_bytes(b"png" * 100)
    _manifest(corpus)
    interim = results / "exp" / "interim"
    (interim / "images").mkdir(parents=True)
    (interim / "a.json").write_text('{"t_cut": 1.0}')
    (interim / "images" / "0.png").write_bytes(b"zero")
    (interim / "images" / "1.png").write_bytes(b"one")
    write_records({"a": [interim / "a.json"], "images": [interim / "images"]},
                  {"corpus": [corpus]}, roots=roots, hasher=Hasher(), rule="make",
                  script=script, params={"seed": 1})
    table = results / "exp" / "table.csv"
    table.write_text("method,mse\nm,0.1\n")
    write_records({"table": [table]}, {"a": [interim / "a.json"],
                                       "images": [interim / "images"]},
                  roots=roots, hasher=Hasher(), rule="final", script=script)
    return root


def _git(root: Path, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True)


@pytest.fixture
def run(tmp_path):
    return _make_run(tmp_path)


def _args(root: Path) -> list[str]:
    return ["audit", str(root / "results"), "--resources", str(root / "resources"),
            "--workdir", str(root)]


def _command(*args, cwd=None) -> subprocess.CompletedProcess:
    """``python -m diversity_core ...`` in a subprocess, with a timeout (a hang fails)."""
    return subprocess.run([sys.executable, "-m", "diversity_core", *map(str, args)],
                          capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd or REPO)


def _one_error_line(done: subprocess.CompletedProcess, *words: str) -> None:
    """Exit 2, stderr one ``error:`` line holding ``words``, nothing audited on stdout."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and not done.stdout.strip()
    for word in words:
        assert word in lines[0], lines[0]


def _status(report) -> dict:
    return {f.path: f.status for f in report.files.values()}


# --- 1. every audit ends ---------------------------------------------------------------------

def _plant_special_files(folder: Path) -> dict[str, str]:
    """A link to a character device, a FIFO, a socket, a link to a FIFO, a dangling link and
    a link to a folder, each named like the folder's data; {name: what the note says}."""
    os.symlink("/dev/zero", folder / "zero.png")
    os.mkfifo(folder / "pipe.png")
    os.symlink(folder / "pipe.png", folder / "to_pipe.png")
    os.symlink(folder / "gone", folder / "dangling.png")
    os.symlink("/", folder / "root_link")
    planted = {"zero.png": "a link to a character device", "pipe.png": "a FIFO",
               "to_pipe.png": "a link to a FIFO", "dangling.png": "a dangling link",
               "root_link": "a link to a folder"}
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(folder / "sock.png"))
        planted["sock.png"] = "a socket"
    except OSError:  # a path longer than a socket's 108 bytes: the other cases still count
        pass
    finally:
        server.close()
    return planted


def test_special_files_in_a_folder_input_are_set_aside_with_a_note_never_read(run):
    """The hang of the issue: a record's input folder holding a link to a device file. Nothing
    of it is opened; the audit ends at once, names each in a note, and the run is still ok."""
    planted = {}
    for folder in (run / "resources" / "corpus", run / "results" / "exp" / "interim" /
                   "images"):
        planted[folder] = _plant_special_files(folder)
    done = _command(*_args(run), "--json")  # a hang fails at TIMEOUT_S
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["findings"] == 0
    notes = "\n".join(report["notes"])
    for folder, names in planted.items():
        assert folder.name in notes
        for name, kind in names.items():
            assert f"{name} ({kind})" in notes, notes


@pytest.mark.parametrize("special", ["fifo", "device_link", "dangling_link", "socket"])
def test_special_files_where_a_file_should_be_are_findings_never_read(run, special):
    """A final result, an interim input, a stray file and a record each replaced by a special
    file: each is a finding saying what it is, within seconds."""
    exp = run / "results" / "exp"

    def replace(path: Path) -> None:
        path.unlink()
        if special == "fifo":
            os.mkfifo(path)
        elif special == "device_link":
            os.symlink("/dev/zero", path)
        elif special == "dangling_link":
            os.symlink(path.parent / "nowhere", path)
        else:
            # Bound by its name from inside its folder: a socket's path is limited to 107
            # bytes, which a test worker's temporary folder can exceed.
            server, here = socket.socket(socket.AF_UNIX), os.getcwd()
            try:
                os.chdir(path.parent)
                server.bind(path.name)
            finally:
                os.chdir(here)
                server.close()

    (exp / "stray.csv").write_text("x")
    (exp / "other.csv").write_text("y")
    (exp / "other.csv.provenance.json").write_text("{}")
    for path in (exp / "table.csv", exp / "interim" / "a.json", exp / "stray.csv",
                 exp / "other.csv.provenance.json"):
        replace(path)
    done = _command(*_args(run), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    files = {f["relative_path"]: f for f in json.loads(done.stdout)["files"]}
    what = {"fifo": "FIFO", "device_link": "character device", "dangling_link": "dangling link",
            "socket": "socket"}[special]
    # (a dangling link is also "missing": its record is there, its file is not)
    assert files["exp/table.csv"]["status"] in ("changed", "missing")
    assert any(what in r and "not a regular file" in r for r in files["exp/table.csv"]["reasons"])
    assert files["exp/stray.csv"]["status"] == "unrecorded"
    assert any(what in r for r in files["exp/stray.csv"]["reasons"])
    assert files["exp/other.csv"]["status"] == "unrecorded"
    assert any("other.csv.provenance.json" in r and what in r
               for r in files["exp/other.csv"]["reasons"])
    if special != "dangling_link":  # a dangling input is "not on disk", as a deleted one
        assert any("interim/a.json" in r and what in r for r in
                   files["exp/table.csv"]["reasons"] + files["exp/interim/a.json"]["reasons"])


def test_reads_are_bounded_and_special_files_never_opened(tmp_path):
    """In a subprocess (a regression would read /dev/zero forever): special files are refused
    before they are opened, a file that grows while read (a /proc file's size says 0) is an
    error, a regular file is hashed as sha256sum would."""
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    (tmp_path / "plain").write_bytes(b"plain bytes")
    code = f"""
import hashlib
from diversity_core.provenance.digests import NotRegularFile, file_sha256
for name in ("fifo", "zero", "/dev/zero", "/dev/null"):
    try:
        file_sha256(name if name.startswith("/") else {str(tmp_path)!r} + "/" + name)
    except NotRegularFile as err:
        print("refused", name, err.kind)
try:
    file_sha256("/proc/self/status")
except ValueError as err:
    print("bounded", "grew while it was read" in str(err))
digest = file_sha256({str(tmp_path / 'plain')!r})
print("plain", digest == hashlib.sha256(b"plain bytes").hexdigest())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[:4] == ["refused fifo a FIFO", "refused zero a link to a character device",
                       "refused /dev/zero a character device",
                       "refused /dev/null a character device"]
    if Path("/proc/self/status").exists():
        assert "bounded True" in out
    assert out[-1] == "plain True"


@pytest.mark.parametrize("workers", ["0", "-1", "33", "1000000", "two", "1.5", ""])
def test_workers_out_of_range_is_a_usage_error_before_any_work(run, workers, capsys):
    assert cli_main([*_args(run), "--workers", workers]) == 2
    err = capsys.readouterr()
    assert "--workers" in err.err and "1 to 32" in err.err and not err.out
    with pytest.raises(ValueError, match="1 to 32"):
        audit(run / "results", run / "resources", run, workers=int(workers)
              if workers.lstrip("-").isdigit() else workers)


@pytest.mark.parametrize("workers", ["1", "32"])
def test_workers_at_the_bounds_are_accepted(run, workers, capsys):
    assert cli_main([*_args(run), "--workers", workers]) == 0


class _Interrupt(Exception):
    """What SIGINT raises in this test (KeyboardInterrupt would stop pytest itself)."""


def test_ctrl_c_stops_the_hashing_threads_with_the_audit(tmp_path, monkeypatch):
    """Hashing four 64 MB files (sparse: no disk used) one byte per read takes minutes; a
    SIGINT 0.3 s in must end the call and its threads (they stop at their next block and the
    queued files are dropped), not after every file was read."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    files = []
    for i in range(4):
        path = tmp_path / f"big{i}.bin"
        with open(path, "wb") as out:
            out.truncate(64 << 20)
        files.append(path)
    monkeypatch.setattr(digests, "_BLOCK", 1)

    def interrupt(signum, frame):
        raise _Interrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    hasher = Hasher()
    try:
        timer.start()
        with pytest.raises(_Interrupt):
            hasher.prefetch(files, workers=2)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    # Stopped, not read to the end: no file's hash finished (each takes minutes at a byte a
    # read), and no hashing thread outlives the call.
    assert hasher.files == 0 and hasher.bytes == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("audit-hash")]
    # The hasher still works afterwards (its stop flag was cleared).
    monkeypatch.setattr(digests, "_BLOCK", 1 << 20)
    assert hasher.file(files[0])[0] == hashlib.sha256(bytes(64 << 20)).hexdigest()


@pytest.mark.parametrize("where", ["/", "home", "a_file", "/dev/null", "empty", "missing"])
def test_a_folder_that_is_not_a_results_folder_is_one_line_exit_2(tmp_path, where):
    """``audit /`` used to walk the whole disk."""
    target = {"/": Path("/"), "home": Path.home(), "a_file": tmp_path / "file.csv",
              "/dev/null": Path("/dev/null"), "empty": tmp_path / "empty",
              "missing": tmp_path / "missing"}[where]
    (tmp_path / "file.csv").write_text("a\n")
    (tmp_path / "empty").mkdir()
    done = _command("audit", target)  # a hang (a walk of the disk) fails at TIMEOUT_S
    _one_error_line(done, str(target))


def test_a_walk_past_its_entry_limit_stops_with_an_error(tmp_path, monkeypatch):
    """A folder input's walk and the results tree's walk stop once they have visited more
    entries than their limit (a link to / would otherwise walk the disk); at the limit, not."""
    audit_module = importlib.import_module("diversity_core.provenance.audit")
    for i in range(3):
        (tmp_path / "sub" / f"f{i}").parent.mkdir(exist_ok=True)
        (tmp_path / "sub" / f"f{i}").write_text(str(i))
    # 4 entries: the folder sub/, then its 3 files.
    monkeypatch.setattr(digests, "MAX_FOLDER_ENTRIES", 4)
    assert digests.scan_folder(tmp_path)[0] == ["sub/f0", "sub/f1", "sub/f2"]
    monkeypatch.setattr(digests, "MAX_FOLDER_ENTRIES", 3)
    with pytest.raises(ValueError, match="holds more than 3 entries: not a folder the pipeline"):
        digests.scan_folder(tmp_path)
    monkeypatch.setattr(audit_module, "MAX_TREE_ENTRIES", 4)
    assert audit_module._walk(tmp_path)[0] == ["sub/f0", "sub/f1", "sub/f2"]
    monkeypatch.setattr(audit_module, "MAX_TREE_ENTRIES", 3)
    with pytest.raises(ValueError, match="holds more than 3 entries: not a results folder"):
        audit_module._walk(tmp_path)


# --- 2. the crate agrees with itself ---------------------------------------------------------

def _crate_files(crate: Path) -> tuple[dict, list[str]]:
    graph = {e["@id"]: e for e in json.loads((crate / "ro-crate-metadata.json").read_text())[
        "@graph"]}
    files = sorted(p.relative_to(crate).as_posix() for p in crate.rglob("*") if p.is_file())
    return graph, files


def _assert_self_consistent(crate: Path) -> dict:
    """Every file in the crate (but its metadata) is an entity carrying the SHA-256 and size
    of its own bytes; every folder (Dataset) the listing digest of its parts."""
    graph, files = _crate_files(crate)
    for name in files:
        if name == "ro-crate-metadata.json":
            continue
        assert name in graph, f"{name} is in the crate without an entity"
        data = (crate / name).read_bytes()
        assert graph[name].get("sha256") == hashlib.sha256(data).hexdigest(), name
        assert graph[name].get("contentSize") == str(len(data)), name
    for entity in graph.values():
        if entity.get("@type") == "Dataset" and entity["@id"] not in ("./",):
            parts = {p["@id"][len(entity["@id"]):]: graph[p["@id"]]["sha256"]
                     for p in entity.get("hasPart", [])}
            assert entity["sha256"] == tree_sha256(parts)
    return graph


def test_every_file_in_the_crate_carries_the_digest_of_its_bytes(run, tmp_path):
    """A final result changed after it was made, and the script changed since (no git): the
    crate holds the changed bytes under their own digest (the recorded one named beside it),
    the current script labelled as the current version (the mismatch said on stderr), and
    every record with its digest."""
    table = run / "results" / "exp" / "table.csv"
    recorded = file_sha256(table)
    table.write_text("method,mse\nm,0.2\n")
    (run / "scripts" / "job.py").write_text(V2)
    crate = tmp_path / "crate"
    done = _command(*_args(run), "--ro-crate", crate)
    assert done.returncode == 1, done.stdout + done.stderr  # the changed table is a finding
    graph = _assert_self_consistent(crate)
    assert graph["results/exp/table.csv"]["sha256"] == file_sha256(table)
    assert recorded in graph["results/exp/table.csv"]["description"]
    script = graph["scripts/job.py"]
    assert script["sha256"] == hashlib.sha256(V2.encode()).hexdigest()
    assert "the current version" in script["description"]
    assert hashlib.sha256(V1.encode()).hexdigest() in script["description"]
    assert "note: scripts/job.py" in done.stderr and "current version" in done.stderr
    records = [name for name in graph if name.endswith(".provenance.json")]
    assert len(records) == 3 and all(graph[name].get("sha256") for name in records)
    images = graph["results/exp/interim/images/"]
    assert images["@type"] == "Dataset" and len(images["hasPart"]) == 2


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_changed_script_is_copied_at_its_recorded_commit(tmp_path):
    root = _make_run(tmp_path / "run", git=True)
    commit = _git(root, "rev-parse", "HEAD").stdout.strip()
    (root / "scripts" / "job.py").write_text(V2)
    crate = tmp_path / "crate"
    done = _command(*_args(root), "--ro-crate", crate)
    assert done.returncode == 0, done.stdout + done.stderr
    graph = _assert_self_consistent(crate)
    old = f"history/{commit}/scripts/job.py"
    assert (crate / old).read_text() == V1
    assert graph[old]["sha256"] == hashlib.sha256(V1.encode()).hexdigest()
    jobs = [e for e in graph.values() if e.get("@type") == "CreateAction" and
            e["@id"] != "#run"]
    assert jobs and all(j["instrument"]["@id"] == old for j in jobs)
    assert "scripts/job.py" not in graph  # no job names the current version: not copied
    assert f"copied as of commit {commit[:12]}" in done.stderr


@pytest.mark.parametrize("dest", ["non_empty", "previous_crate", "a_file", "under_a_file",
                                  "a_link", "/proc/x", "/proc/self/status"])
def test_a_wrong_ro_crate_destination_is_one_line_exit_2_before_the_audit(run, tmp_path, dest):
    (tmp_path / "non_empty").mkdir()
    (tmp_path / "non_empty" / "keep.txt").write_text("mine")
    (tmp_path / "a_file").write_text("mine")
    (tmp_path / "empty").mkdir()
    os.symlink(tmp_path / "empty", tmp_path / "a_link")
    if dest == "previous_crate":
        assert cli_main([*_args(run), "--ro-crate", str(tmp_path / "previous_crate")]) == 0
    target = {"under_a_file": tmp_path / "a_file" / "crate"}.get(dest, tmp_path / dest) \
        if not dest.startswith("/") else Path(dest)
    if dest.startswith("/proc") and not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    before = sorted(p.name for p in tmp_path.iterdir())
    done = _command(*_args(run), "--ro-crate", target)
    _one_error_line(done, str(target))
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no leftover
    assert (tmp_path / "non_empty" / "keep.txt").read_text() == "mine"


def test_an_empty_folder_takes_the_crate(run, tmp_path):
    (tmp_path / "empty").mkdir()
    assert cli_main([*_args(run), "--ro-crate", str(tmp_path / "empty")]) == 0
    _assert_self_consistent(tmp_path / "empty")


def test_a_crate_that_fails_half_way_leaves_nothing(run, tmp_path, monkeypatch):
    build = crate_module._Builder.build

    def failing(self):
        build(self)  # every file copied, the metadata written: then a failure
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(crate_module._Builder, "build", failing)
    report = audit(run / "results", run / "resources", run)
    with pytest.raises(OSError):
        crate_module.write_crate(report, tmp_path / "crate")
    assert not (tmp_path / "crate").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".crate.")]


def _file_size_limit(limit: int):
    """For a child process: files it writes may not grow past ``limit`` bytes (EFBIG, as on a
    full disk; Python ignores SIGXFSZ, so the write fails instead of killing it)."""
    import resource

    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("limit", [1024, 64 * 1024])
def test_a_crate_cut_short_by_the_disk_is_not_made_and_says_so(run, tmp_path, limit):
    """A file that does not fit (here: a 200 kB output under a file size limit, or the first
    record under 1 KiB) ends the crate: exit 2, one line naming the file, no crate, no
    staging folder left, never "wrote the Workflow Run RO-Crate"."""
    big = run / "results" / "exp" / "interim" / "images" / "2.png"
    big.write_bytes(os.urandom(200_000))
    crate = tmp_path / "crate"
    done = subprocess.run([sys.executable, "-m", "diversity_core", *_args(run), "--ro-crate",
                           str(crate)], capture_output=True, text=True, timeout=TIMEOUT_S,
                          cwd=REPO, preexec_fn=_file_size_limit(limit))
    _one_error_line(done, "cannot write the crate", str(crate), "File too large",
                    "no crate was made")
    if limit > 4096:
        assert "2.png" in done.stderr
    assert "wrote the Workflow Run RO-Crate" not in done.stderr
    assert not crate.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".crate.")]


def test_a_full_disk_while_writing_the_metadata_is_no_crate(run, tmp_path, monkeypatch,
                                                            capsys):
    from rocrate.rocrate import ROCrate

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ROCrate, "write", full)
    assert cli_main([*_args(run), "--ro-crate", str(tmp_path / "crate")]) == 2
    err = capsys.readouterr().err
    assert "ro-crate-metadata.json" in err and "No space left on device" in err
    assert "wrote the" not in err and not (tmp_path / "crate").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".crate.")]


def test_a_record_is_written_atomically_never_through_a_planted_link(run, tmp_path):
    """The record writer used a fixed <record>.tmp name and followed a link planted there (its
    target overwritten, the record itself becoming the link): now a fresh exclusive name."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    table = run / "results" / "exp" / "table.csv"
    record = Path(str(table) + ".provenance.json")
    os.symlink(victim, str(record) + ".tmp")
    roots = Roots.of(run / "results", run / "resources", run)
    write_records({"table": [table]}, {}, roots=roots, hasher=Hasher(), rule="final",
                  script=run / "scripts" / "job.py")
    assert victim.read_text() == "precious"
    assert not record.is_symlink() and json.loads(record.read_text())["rule"] == "final"
    assert not [p for p in record.parent.iterdir() if p.name.startswith(".table.csv")]
    os.unlink(record)
    os.symlink(victim, record)  # a link where the record goes: refused, the target untouched
    with pytest.raises(ValueError, match="symbolic link"):
        write_records({"table": [table]}, {}, roots=roots, hasher=Hasher(), rule="final",
                      script=run / "scripts" / "job.py")
    assert victim.read_text() == "precious"


# --- 3. records --------------------------------------------------------------------------------

def _table_record(run: Path) -> Path:
    return run / "results" / "exp" / "table.csv.provenance.json"


def _mutate(field_path: list, value):
    def change(record):
        target = record
        for key in field_path[:-1]:
            target = target[key]
        target[field_path[-1]] = value
        return record
    return change


def _extra_output(record):
    """The issue's case: an output outside results/ (../../x) with a wrong digest, beside the
    file's own output."""
    record["outputs"]["table"].append({"root": "results", "path": "../../x",
                                       "sha256": "0" * 64, "size": 1})
    return record


HOSTILE_RECORDS = {
    # name: (a function of the record, or the record's raw bytes; what the reason names)
    "output outside its root": (_extra_output, "outputs.table[1].path"),
    "input climbing out": (_mutate(["inputs", "a", 0, "path"], "../../../etc/passwd"),
                           "inputs.a[0].path"),
    "input absolute": (_mutate(["inputs", "a", 0, "path"], "/etc/passwd"), "inputs.a[0].path"),
    "input folder member climbing out": (
        _mutate(["inputs", "images", 0, "files"], {"../x": "0" * 64}), "inputs.images[0].files"),
    "unknown root": (_mutate(["inputs", "a", 0, "root"], "elsewhere"), "inputs.a[0].root"),
    "null root": (_mutate(["inputs", "a", 0, "root"], None), "inputs.a[0].root"),
    "inputs a list": (_mutate(["inputs"], [{"root": "results", "path": "x"}]), "field inputs"),
    "inputs a string": (_mutate(["inputs"], "a.json"), "field inputs"),
    "input group not a list": (_mutate(["inputs", "a"], {"root": "results"}), "inputs.a "),
    "input entry a string": (_mutate(["inputs", "a", 0], "exp/interim/a.json"),
                             "inputs.a[0] "),
    "input without a path": (_mutate(["inputs", "a", 0, "path"], None), "inputs.a[0].path"),
    "digest not hex": (_mutate(["inputs", "a", 0, "sha256"], "xyz"), "inputs.a[0].sha256"),
    "size negative": (_mutate(["inputs", "a", 0, "size"], -1), "inputs.a[0].size"),
    "outputs null": (_mutate(["outputs"], None), "field outputs"),
    "script a list": (_mutate(["script"], ["scripts/job.py"]), "field script"),
    "script root unknown": (_mutate(["script", "root"], "nowhere"), "script.root"),
    "format a string": (_mutate(["format"], "2"), "field format"),
    "format from the future": (_mutate(["format"], 99), "field format"),
    "commit an option": (_mutate(["git", "commit"], "--output=/tmp/x"), "git.commit"),
    "params a list": (_mutate(["params"], [1, 2]), "field params"),
    "lone surrogate": (_mutate(["params", "name"], "\ud800"), "params.name"),
    "nested 100,000 deep": (b'{"format": 2, "params": ' + b"[" * 100_000 + b"]" * 100_000
                            + b"}", "nests deeper than 64"),
    "not JSON": (b"this is not json", "is not JSON"),
    "not UTF-8": (b'{"format": 2, "rule": "\xff\xfe"}', "is not JSON"),
    "a 5,000-digit number": (b'{"format": ' + b"9" * 5000 + b"}", "is not JSON"),
    "empty": (b"", "is not JSON"),
    "a JSON array": (b"[1, 2]", "is a JSON array"),
    "a JSON string": (b'"record"', "is a JSON string"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_RECORDS))
def test_a_malformed_record_is_a_finding_naming_the_file_and_the_field(run, case, capsys):
    change, field = HOSTILE_RECORDS[case]
    path = _table_record(run)
    if isinstance(change, bytes):
        path.write_bytes(change)
    else:
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    report = audit(run / "results", run / "resources", run)
    table = report.files[("results", "exp/table.csv")]
    assert table.status == "unrecorded", table
    assert any("table.csv.provenance.json" in r and field in r for r in table.reasons), \
        table.reasons
    # The command: exit 1 (a finding), the reason on one line, never a traceback.
    assert cli_main(_args(run)) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert any("table.csv.provenance.json" in line and field in line
               for line in out.out.splitlines())


def test_a_link_to_a_folder_in_results_gets_a_note(run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "table.csv").write_text("a\n")
    os.symlink(elsewhere, run / "results" / "exp" / "linked")
    report = audit(run / "results", run / "resources", run)
    assert not report.findings
    assert any("exp/linked" in note and "a link to a folder" in note and "not followed" in note
               for note in report.notes)
    assert "exp/linked" in report.to_text() and report.to_json()["notes"] == report.notes


# --- 4. exit codes, and the record reader as a property --------------------------------------

def test_exit_codes_0_clean_1_findings_2_errors(run, capsys):
    assert cli_main(_args(run)) == 0
    (run / "results" / "exp" / "table.csv").write_text("edited\n")
    assert cli_main(_args(run)) == 1
    assert cli_main(["audit", str(run / "results" / "exp" / "table.csv")]) == 2
    assert cli_main([*_args(run), "--ro-crate", str(run / "results")]) == 2


def _json_values():
    # Text includes lone surrogates (json.dumps escapes them; json.loads gives them back).
    text = st.text(max_size=12) | st.text(st.characters(min_codepoint=0xD800,
                                                        max_codepoint=0xDFFF), max_size=2)
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(text, inner, max_size=4), max_leaves=12)


_BASE = {"format": 2, "rule": "final", "artifact": "table.csv",
         "script": {"root": "workdir", "path": "scripts/job.py", "sha256": "1" * 64},
         "params": {}, "config": {}, "wildcards": {}, "extra": {},
         "inputs": {"a": [{"root": "results", "path": "exp/interim/a.json", "sha256": "2" * 64,
                           "size": 3}]},
         "outputs": {"table": [{"root": "results", "path": "exp/table.csv", "sha256": "3" * 64,
                                "size": 4}]},
         "git": {"commit": "a" * 40, "dirty": False}}
_FIELDS = [["format"], ["rule"], ["script"], ["script", "root"], ["script", "path"],
           ["script", "sha256"], ["inputs"], ["inputs", "a"], ["inputs", "a", 0],
           ["inputs", "a", 0, "root"], ["inputs", "a", 0, "path"], ["inputs", "a", 0, "sha256"],
           ["inputs", "a", 0, "size"], ["inputs", "a", 0, "files"], ["inputs", "a", 0, "kind"],
           ["outputs"], ["outputs", "table", 0, "path"], ["git"], ["git", "commit"],
           ["params"], ["extra"]]


@st.composite
def _records(draw):
    """Raw bytes, random JSON, or the writer's record with one field replaced by random JSON
    (or a path climbing out of its root)."""
    kind = draw(st.sampled_from(["bytes", "json", "field", "field", "path"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
    if kind == "json":
        return json.dumps(draw(_json_values())).encode()
    record = json.loads(json.dumps(_BASE))
    field_path = draw(st.sampled_from(_FIELDS))
    value = draw(_json_values()) if kind == "field" else draw(st.sampled_from(
        ["../x", "a/../../x", "/etc/passwd", "~/x", "", ".", "a\x00b", "ok/inside.csv"]))
    return json.dumps(_mutate(field_path, value)(record)).encode()


@SETTINGS
@given(_records())
def test_the_record_reader_raises_only_its_documented_error(data):
    """Whatever the bytes, the reader returns a record the audit can use or raises
    RecordError (a ValueError) naming the file in one line; nothing else."""
    try:
        record = parse_record(data, "x.csv.provenance.json")
    except RecordError as err:
        message = str(err)
        assert "x.csv.provenance.json" in message and "\n" not in message
        return
    # Accepted: every entry the audit and the crate read is well-formed and stays inside.
    for group in ("inputs", "outputs"):
        assert isinstance(record[group], dict)
        for entries in record[group].values():
            for entry in entries:
                assert entry["root"] in ROOTS and isinstance(entry["path"], str)
                parts = Path(entry["path"]).parts
                assert ".." not in parts and not Path(entry["path"]).is_absolute()
                assert len(entry["sha256"]) == 64


@SETTINGS
@given(_records())
def test_the_audit_reads_any_record_beside_a_file_without_raising(tmp_path_factory, data):
    """The same records, beside a real file: the audit ends with a status, never raises."""
    root = tmp_path_factory.mktemp("property")
    (root / "results" / "exp").mkdir(parents=True)
    (root / "results" / "exp" / "table.csv").write_text("t\n")
    (root / "results" / "exp" / "table.csv.provenance.json").write_bytes(data)
    report = audit(root / "results", root / "resources", root)
    status = _status(report)["exp/table.csv"]
    assert status in ("unrecorded", "changed", "stale")  # the digests here are made up
    report.to_text()
    json.dumps(report.to_json())


def test_a_record_with_a_script_outside_every_root_is_still_read(tmp_path):
    """Records written by a script outside the workflow's folders (root null, absolute path:
    tests/provenance/test_audit.py's own) stay valid; only the script may be named so."""
    record = json.loads(json.dumps(_BASE))
    record["script"] = {"root": None, "path": "/opt/elsewhere/job.py", "sha256": "1" * 64}
    assert parse_record(json.dumps(record), "x")["script"]["root"] is None
    record["script"]["path"] = "relative/job.py"
    with pytest.raises(RecordError, match="script.root"):
        parse_record(json.dumps(record), "x")


def test_not_regular_file_is_a_value_error():
    """The documented error path: NotRegularFile is a ValueError (the CLI's exit 2)."""
    assert issubclass(NotRegularFile, ValueError) and issubclass(RecordError, ValueError)
