"""benchmarks/gpu_carry.py: files too large for one transfer to a remote GPU machine, carried in
parts and joined there only after every part and the whole are checked; and the CUDA variants
of benchmarks/embedding_portability.py, refused in one line where torch sees no GPU."""

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
CARRY = BENCHMARKS / "gpu_carry.py"


def _carry(*args, cwd):
    return subprocess.run([sys.executable, str(CARRY), *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.fixture
def sources(tmp_path):
    model = tmp_path / "resources" / "text" / "models" / "m"
    (model / "pooling").mkdir(parents=True)
    (model / "weights.bin").write_bytes(bytes(range(256)) * 997)
    (model / "pooling" / "config.json").write_text('{"dim": 4}\n')
    (tmp_path / "documents.json").write_text('{"texts": ["a", "b"]}\n')
    return tmp_path


def test_split_then_join_gives_the_same_files_and_split_is_deterministic(sources, tmp_path):
    done = _carry("split", "carry", "resources/text/models/m", "documents.json", "--parts", "3",
                  cwd=sources)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((sources / "carry" / "manifest.json").read_text())
    assert [p["name"] for p in manifest["parts"]] == ["part-0", "part-1", "part-2"]
    assert sum(p["size"] for p in manifest["parts"]) == manifest["size"]
    assert max(p["size"] for p in manifest["parts"]) - min(
        p["size"] for p in manifest["parts"]) <= 1
    again = _carry("split", "carry2", "documents.json", "resources/text/models/m", "--parts",
                   "3", cwd=sources)
    assert again.returncode == 0, again.stderr
    assert json.loads((sources / "carry2" / "manifest.json").read_text())["sha256"] == \
        manifest["sha256"]
    there = tmp_path / "there"
    there.mkdir()
    joined = _carry("join", sources / "carry", "--to", there, cwd=sources)
    assert joined.returncode == 0, joined.stderr
    for name in ("resources/text/models/m/weights.bin",
                 "resources/text/models/m/pooling/config.json", "documents.json"):
        assert (there / name).read_bytes() == (sources / name).read_bytes()


@pytest.mark.parametrize("damage", ["missing", "one byte", "another split"])
def test_a_part_that_is_missing_or_differs_is_named_and_nothing_is_unpacked(sources, tmp_path,
                                                                              damage):
    assert _carry("split", "carry", "resources", "--parts", "2", cwd=sources).returncode == 0
    part = sources / "carry" / "part-1"
    if damage == "missing":
        part.unlink()
    elif damage == "one byte":
        data = bytearray(part.read_bytes())
        data[len(data) // 2] ^= 1
        part.write_bytes(bytes(data))
    else:
        (sources / "documents.json").write_text('{"texts": ["c"]}\n')
        assert _carry("split", "other", "documents.json", "--parts", "2",
                      cwd=sources).returncode == 0
        part.write_bytes((sources / "other" / "part-1").read_bytes())
    there = tmp_path / "there"
    there.mkdir()
    done = _carry("join", sources / "carry", "--to", there, cwd=sources)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "part-1" in done.stderr, done.stderr
    assert not list(there.iterdir())


@pytest.mark.parametrize("source", ["/etc", "../x", "link", "absent"])
def test_split_takes_only_regular_files_and_folders_inside_the_current_folder(sources, source):
    (sources / "link").symlink_to(sources / "documents.json")
    done = _carry("split", "carry", source, "--parts", "1", cwd=sources)
    assert done.returncode == 1 and done.stderr.startswith("gpu_carry: "), done.stderr
    assert not (sources / "carry" / "manifest.json").exists()


def test_join_refuses_an_archive_that_writes_outside_its_folder(tmp_path):
    # Parts and a manifest that agree with each other, made by hand, not by split: the data
    # filter still refuses a member that leaves the destination.
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    data = buffer.getvalue()
    carry = tmp_path / "carry"
    carry.mkdir()
    (carry / "part-0").write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    (carry / "manifest.json").write_text(json.dumps({
        "format": 1, "sources": ["x"], "size": len(data), "sha256": digest,
        "parts": [{"name": "part-0", "size": len(data), "sha256": digest}]}))
    there = tmp_path / "there"
    there.mkdir()
    done = _carry("join", carry, "--to", there, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "escaped.txt").exists()


def test_the_cuda_variants_are_refused_where_torch_sees_no_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is there: the variants would run")
    done = subprocess.run([sys.executable, str(BENCHMARKS / "embedding_portability.py"),
                           "all-MiniLM-L6-v2", "folder", "documents.json", "--variants",
                           "native,cuda"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert "torch sees no CUDA GPU" in done.stderr.splitlines()[-1]
