"""Downloads and hub listings against a hostile local server (tests/support/hostile_server.py), one
regression test per class of problem: every transfer ends, nothing bad is kept or pinned, every
failure is one line naming what failed. The limits are short (:func:`diversity_core.assets.http.
limits`), so that each test takes well under a second or two; no test measures time."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from hostile_server import hostile_server

from diversity_core.assets import download, fetch, formats, http, pins
from diversity_core.assets.hub import (
    HubFile,
    _git_blob_sha1,
    fetch_hub_files,
    list_repo_files,
    split_shards,
)
from diversity_core.data import corpus_formats, images, text, text_tasks


@pytest.fixture
def hostile(monkeypatch):
    """The hostile server with short limits: 1 s per read, 0.5 s rate windows at 2 kB/s, a 3 s
    deadline, 3 redirects, 5 pages. A user with a network: the HF_HUB_OFFLINE that loading a
    packaged model sets in this test process is not theirs."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with hostile_server() as server, http.limits(
            connect_timeout=2.0, read_timeout=1.0, rate_window=0.5, min_rate=2000.0,
            deadline=3.0, max_redirects=3, max_pages=5):
        yield server


def _left(folder: Path) -> list[str]:
    """What a fetch left in ``folder``: everything but the assets' own ``.<name>.lock`` files."""
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _one_line(exc) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    return message


# -- every download ends ---------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/stall-headers", "/stall-body"])
def test_a_stalled_server_times_out(hostile, tmp_path, path):
    dest = tmp_path / "data" / "file.bin"
    with pytest.raises(OSError, match="timed out") as err:
        download(hostile.url + path, dest, checksum="0" * 64, progress=False, asset="the file",
                 config_key="some.key")
    assert "the file" in _one_line(err) and "some.key" in str(err.value)
    assert not dest.exists() and not [n for n in _left(dest.parent) if n.endswith(".part")]


def test_a_trickle_is_stopped_by_the_minimum_rate(hostile, tmp_path):
    dest = tmp_path / "file.bin"
    with pytest.raises(OSError, match=r"bytes/s over the last .* under the minimum"):
        download(hostile.url + "/trickle", dest, checksum=None, progress=False)
    assert not dest.exists()


def test_a_trickle_is_stopped_by_the_deadline(hostile, tmp_path):
    # Fast enough for the rate, too slow for the deadline.
    with http.limits(min_rate=1.0, deadline=1.0):
        with pytest.raises(OSError, match="past the deadline of 1 s"):
            download(hostile.url + "/trickle", tmp_path / "file.bin", checksum=None,
                     progress=False)


def test_a_stalled_listing_times_out(hostile):
    with pytest.raises(OSError, match="timed out"):
        list(http.get_json_pages(hostile.url + "/stall-headers", what="a listing"))


def test_a_listing_that_links_to_itself_is_stopped(hostile):
    with pytest.raises(OSError, match="pagination loop") as err:
        list_repo_files("o/r", "self-link", dataset=True, endpoint=hostile.url,
                        what="corpus x")
    assert _one_line(err).startswith("corpus x: cannot list the files of o/r@self-link")
    assert hostile.requested.count("/api/datasets/o/r/tree/self-link") == 1


def test_a_listing_without_end_is_bounded(hostile):
    with pytest.raises(OSError, match="more than 5 pages"):
        list_repo_files("o/r", "endless", dataset=True, endpoint=hostile.url)
    assert len(hostile.requested) == 5


def test_a_listing_page_that_is_not_json_is_named(hostile):
    with pytest.raises(ValueError, match=r"the listing page .*not-json.* is not JSON"):
        list_repo_files("o/r", "not-json", dataset=True, endpoint=hostile.url)


def test_a_paginated_listing_is_read_whole(hostile):
    entries = [{"type": "file", "path": f"f{i}.txt", "size": 1, "oid": f"{i:040x}"}
               for i in range(5)]
    hostile.set(listings={"main": entries})
    assert sorted(list_repo_files("o/r", "main", dataset=False, endpoint=hostile.url)) == [
        f"f{i}.txt" for i in range(5)]
    assert hostile.requested.count("/api/models/o/r/tree/main") == 3  # pages of 2


# -- sizes and digests while streaming -------------------------------------------------------

def test_the_declared_size_stops_the_stream(hostile, tmp_path):
    dest = tmp_path / "shard.parquet"
    with pytest.raises(OSError, match=r"more than 10 bytes \(the size the listing declares\); "
                                      "stopped there"):
        download(hostile.url + "/endless", dest, checksum="0" * 64, size=10, progress=False)
    assert _left(tmp_path) == [".shard.parquet.lock"] or _left(tmp_path) == []


def test_an_announced_size_above_the_listing_is_refused_unread(hostile, tmp_path):
    with pytest.raises(OSError, match=r"announces 1073741824 bytes, more than 100 bytes \(the "
                                      r"size the listing declares\); nothing was read"):
        download(hostile.url + "/announce-big", tmp_path / "a.zip", checksum="0" * 64,
                 size=100, progress=False)


def test_fewer_bytes_than_listed_are_an_error(hostile, tmp_path):
    hostile.files["short.bin"] = b"abc"
    with pytest.raises(OSError, match="3 bytes arrived, the listing declares 5"):
        download(hostile.url + "/file/short.bin", tmp_path / "short.bin", checksum=None,
                 size=5, progress=False)


def test_git_blob_digest_is_streamed(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a": 1}\n' * 1000)
    expected = hashlib.sha1(b"blob %d\0" % path.stat().st_size + path.read_bytes()).hexdigest()
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read whole"))
    assert _git_blob_sha1(path, chunk_size=100) == expected


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_destination_that_is_not_a_regular_file_is_refused_unread(tmp_path, kind):
    dest = tmp_path / "data.zip"
    if kind == "fifo":
        os.mkfifo(dest)
    else:
        dest.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="is not a regular file"):
        download("http://127.0.0.1:9/none", dest, checksum=None, progress=False)


# -- nothing bad is kept or pinned -----------------------------------------------------------

@pytest.mark.parametrize("name", ["data.zip", "shard.parquet", "archive.tar.gz"])
def test_an_html_page_with_status_200_is_not_kept(hostile, tmp_path, capsys, name):
    dest = tmp_path / name
    with pytest.raises(ValueError, match="sent an HTML page") as err:
        download(hostile.url + "/html", dest, checksum=None, progress=False, asset="the data")
    assert "nothing was kept or pinned" in _one_line(err)
    assert not dest.exists() and not [n for n in _left(tmp_path) if n.endswith(".part")]
    assert "sha256 of" not in capsys.readouterr().out  # no digest offered for pinning


def test_the_release_as_html_is_neither_kept_nor_pinned(hostile, tmp_path):
    dest = tmp_path / "tevet_berant" / "data.zip"
    with pytest.raises(ValueError, match="HTML page"):
        text_tasks.fetch_tevet_berant(hostile.url + "/html", dest, sha256=None)
    assert not dest.exists() and not (dest.parent / ".pins.json").exists()


def test_a_bad_unpinned_file_in_place_is_fetched_again(hostile, tmp_path):
    good = _zip({"a.csv": "x\n1\n"})
    hostile.files["data.zip"] = good
    dest = tmp_path / "data.zip"
    dest.write_bytes(b"<html><body>503</body></html>")  # what an earlier run kept
    digest = download(hostile.url + "/file/data.zip", dest, checksum=None, progress=False)
    assert dest.read_bytes() == good and digest == hashlib.sha256(good).hexdigest()


def test_a_pinned_file_that_is_not_its_format_names_the_pin(tmp_path):
    dest = tmp_path / "data.zip"
    dest.write_bytes(b"<html>error</html>")
    with pytest.raises(ValueError,
                       match=r"matches its pin .* yet is an HTML page .*: the pin is wrong"):
        download("http://127.0.0.1:9/none", dest,
                 checksum=hashlib.sha256(dest.read_bytes()).hexdigest(), progress=False)


def test_a_broken_release_in_place_names_its_path(tmp_path):
    release = tmp_path / "data.zip"
    release.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match=rf"{release}: Tevet & Berant's release is not a "
                                         r"readable zip archive .* delete it") as err:
        text_tasks.tevet_berant_members(release, verify=False)
    _one_line(err)


def test_a_zip_bomb_member_is_refused_from_the_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(formats, "_INFLATION_FLOOR", 1 << 20)
    release = tmp_path / "data.zip"
    with zipfile.ZipFile(release, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/raw/decTest/dec_test_1000_no_hds_story_gen.csv", "," * (8 << 20))
    read = []
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda *a, **k: read.append(a) or 1 / 0)
    with pytest.raises(ValueError,
                       match=r"declares 8388608 bytes from \d+ compressed \(a zip bomb") as err:
        text_tasks.tevet_berant_members(release, verify=False)
    assert "dec_test_1000_no_hds_story_gen.csv" in _one_line(err) and not read


def test_a_dd_archive_bomb_is_refused_from_the_directory(tmp_path, monkeypatch):
    from diversity_core.data.graphs import fetch_dd

    monkeypatch.setattr(formats, "_INFLATION_FLOOR", 1 << 20)
    data = _zip({"DD/DD_A.txt": "1, 2\n" * (2 << 20), "DD/DD_graph_indicator.txt": "1\n1\n"})
    (tmp_path / "DD.zip").write_bytes(data)
    with pytest.raises(ValueError, match=r"member 'DD/DD_A.txt' declares .* \(a zip bomb") as err:
        fetch_dd(tmp_path, url="https://example.org/DD.zip",
                 sha256=hashlib.sha256(data).hexdigest())
    assert "graphs.proteins.url" in _one_line(err) and not (tmp_path / "DD").exists()


def test_a_tar_bomb_is_refused_from_the_headers(tmp_path):
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
        info.size = 4 << 20
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    with pytest.raises(ValueError, match="past 1048576 bytes unpacked"):
        fetch.extract_tar(archive, tmp_path / "out", what="a.tar.gz", max_total=1 << 20)
    assert not list((tmp_path / "out").rglob("data_batch_1"))


def test_a_cifar_archive_without_its_folder_names_the_archive(hostile, tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("other/readme.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    hostile.files["cifar.tar.gz"] = buffer.getvalue()
    folder = tmp_path / "cifar10" / "cifar-10-batches-py"
    with pytest.raises(ValueError, match="sent an archive without cifar-10-batches-py/data_batch_1"
                       ) as err:
        images.fetch_cifar10(folder, url=hostile.url + "/file/cifar.tar.gz",
                             md5=hashlib.md5(buffer.getvalue()).hexdigest())
    message = _one_line(err)
    assert "nothing was kept or pinned at " + str(tmp_path / "cifar10" / "cifar-10-python.tar.gz") \
        in message
    assert "images.cifar10.url" in message and ".part" not in message
    assert not folder.exists()


# -- redirects -------------------------------------------------------------------------------

def test_a_redirect_loop_is_one_line(hostile, tmp_path):
    dest = tmp_path / "data.zip"
    with pytest.raises(OSError, match="more than 3 redirects: a redirect loop") as err:
        download(hostile.url + "/redirect-loop", dest, checksum="0" * 64, progress=False,
                 asset="the release", config_key="text.tevet_berant.url")
    assert f"Place the file at {dest} by hand" in _one_line(err)
    assert hostile.requested.count("/redirect-loop") == 4


def test_strict_mode_refuses_a_redirect_to_plain_http(hostile, tmp_path):
    with pytest.raises(OSError, match="redirects to http://example.invalid/data.zip, plain "
                                      "HTTP outside the loopback: strict_assets refuses it"):
        download(hostile.url + "/redirect-http", tmp_path / "data.zip", checksum="0" * 64,
                 progress=False, strict=True)


def test_a_hub_file_error_points_at_no_temporary_folder(hostile, tmp_path):
    scratch = tmp_path / ".x.abcd1234.part"
    scratch.mkdir()
    with pytest.raises(OSError, match="HTTP 404") as err:
        fetch_hub_files("o/r", "main", {"gone.parquet": "0" * 64}, tmp_path / "staging",
                        scratch=scratch, dataset=True, endpoint=hostile.url, asset="corpus x",
                        config_key="text_assets.corpora.x", offline_default="the default")
    message = _one_line(err)
    assert str(scratch) not in message and "Place the file" not in message
    assert sorted(p.name for p in scratch.iterdir()) == []  # no lock, no partial file


# -- listings: names, layouts, the client's own caches ---------------------------------------

def test_an_over_long_name_in_a_listing_is_one_line(hostile):
    hostile.set(listings={"main": [{"type": "file", "path": "a" * 5000 + ".parquet",
                                    "size": 1, "oid": "0" * 40}]})
    with pytest.raises(ValueError, match=r"corpus x: the listing of o/r@main, entry 0: the name "
                                         r".* longer than a file system allows") as err:
        list_repo_files("o/r", "main", dataset=True, endpoint=hostile.url, what="corpus x")
    assert len(_one_line(err)) < 400


def test_the_hub_calls_do_not_use_the_clients_telemetry(hostile, tmp_path, monkeypatch,
                                                        caplog):
    """huggingface_hub asks an endpoint for /api/agent-harnesses and caches the answer in the
    user's folder; the pipeline's listing never asks, works beside a broken cache file (a JSON
    list, as a mirror answered) and names that file."""
    import huggingface_hub.constants

    cached = tmp_path / "hf" / ".agent_harnesses.json"
    cached.parent.mkdir()
    cached.write_text("[]")
    monkeypatch.setattr(huggingface_hub.constants, "AGENT_HARNESSES_PATH", str(cached))
    hostile.set(listings={"main": [{"type": "file", "path": "a.txt", "size": 1,
                                    "oid": "1" * 40}]})
    with caplog.at_level("WARNING"):
        assert list(list_repo_files("o/r", "main", dataset=False, endpoint=hostile.url)) == [
            "a.txt"]
    assert "/api/agent-harnesses" not in hostile.requested
    assert f"huggingface_hub's cache file {cached} holds a JSON list" in caplog.text


def test_split_layouts_of_the_hub():
    def listing(*paths):
        return {p: HubFile(p, 1) for p in paths}

    name, shards = split_shards(listing("a/partial-train/0001.parquet",
                                        "a/partial-train/0000.parquet",
                                        "a/partial-validation/0000.parquet",
                                        "g/partial-train/0000.parquet"), "a", "train", what="x")
    assert name == "<config>/partial-<split>/NNNN.parquet"
    assert [s.path for s in shards] == ["a/partial-train/0000.parquet",
                                        "a/partial-train/0001.parquet"]
    assert split_shards(listing("a/train/0000.parquet"), "a", "train", what="x")[0] == (
        "<config>/<split>/NNNN.parquet")
    assert [s.path for s in split_shards(listing("g/train-00001-of-00002.parquet",
                                                 "g/train-00000-of-00002.parquet"),
                                         "g", "train", what="x")[1]] == [
        "g/train-00000-of-00002.parquet", "g/train-00001-of-00002.parquet"]
    assert split_shards(listing("data/train-00000-of-00001.parquet"), "default", "train",
                        what="x")[0] == "data/<split>-NNNNN-of-NNNNN.parquet"
    with pytest.raises(ValueError, match="no parquet shards of config 'a', split 'train'"):
        split_shards(listing("big_patent.py", "README.md"), "a", "train", what="x")
    with pytest.raises(ValueError, match="not numbered 0, 1, 2"):
        split_shards(listing("g/train-00001-of-00018.parquet"), "g", "train", what="x")
    with pytest.raises(ValueError, match="several layouts"):
        split_shards(listing("a/train/0000.parquet", "a/partial-train/0000.parquet"), "a",
                     "train", what="x")


def _parquet(rows: list[str]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table({"abstract": rows}), out)
    return out.getvalue()


def _tree_entry(path: str, data: bytes) -> dict:
    return {"type": "file", "path": path, "size": len(data),
            "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
            "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                    "pointerSize": 134}}


def _listed_source(url, max_rows):
    return {"sources": [{"kind": "hf", "repo": "o/big",
                         "revision": ["main", "refs/convert/parquet"], "config": "a",
                         "split": "train", "files": {}, "column": "abstract",
                         "max_rows": max_rows, "endpoint": url}]}


def test_a_split_found_in_the_listing_is_read_shard_by_shard(hostile, tmp_path):
    shards = {f"a/partial-train/{i:04d}.parquet":
              _parquet([f"row {3 * i + j}" for j in range(3)]) for i in range(3)}
    hostile.files.update(shards)
    hostile.set(listings={
        "main": [{"type": "file", "path": "big.py", "size": 1, "oid": "2" * 40}],
        "refs/convert/parquet": [{"type": "directory", "path": "a", "oid": "0" * 40, "size": 0}]
        + [_tree_entry(p, d) for p, d in shards.items()]})
    dest = tmp_path / "res" / "big_patent"
    text.fetch_corpus("big_patent", dest, _listed_source(hostile.url, 5))
    fetched = [p for p in hostile.requested if "/resolve/" in p]
    assert [p.rsplit("/", 1)[1] for p in fetched] == ["0000.parquet", "0001.parquet"]
    assert text.load_corpus("big_patent", dest, _listed_source(hostile.url, 5),
                            as_stored=True) == [f"row {i}" for i in range(5)]
    record = json.loads((dest / ".pins.json").read_text())
    assert set(record["files"]) == set(list(shards)[:2])
    assert not any(e["pinned"] for e in record["files"].values())  # from the listing: unpinned
    # No lock or partial file left anywhere but the asset's own lock beside its folder.
    leftovers = [p.name for p in (tmp_path / "res").rglob(".*") if p.name != ".pins.json"]
    assert leftovers == [".big_patent.lock"]


def test_a_shard_that_is_not_the_listed_one_is_not_kept(hostile, tmp_path):
    data = _parquet(["a", "b"])
    hostile.files["a/partial-train/0000.parquet"] = _parquet(["x", "y"])  # not what is listed
    hostile.set(listings={"main": [_tree_entry("a/partial-train/0000.parquet", data)]})
    dest = tmp_path / "big_patent"
    with pytest.raises(ValueError, match="checksum mismatch") as err:  # the listed digest
        text.fetch_corpus("big_patent", dest, _listed_source(hostile.url, 5))
    assert ".part" not in _one_line(err)  # no temporary folder named
    assert not dest.exists() and _left(tmp_path) == [".big_patent.lock"]


def test_strict_mode_refuses_a_split_without_pins(hostile, tmp_path):
    """A split found in the listing, its revision a branch and no shard pinned: refused before
    the listing is asked for."""
    with pytest.raises(pins.UnpinnedAssetError, match="have no pinned sha256") as err:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(pins.STRICT_ENV, "1")
            text.fetch_corpus("big_patent", tmp_path / "bp", _listed_source(hostile.url, 5))
    assert "is not a commit" in str(err.value) and hostile.requested == []


# -- readers of downloaded text name what failed ---------------------------------------------

def _zip(members: dict[str, str | bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


MEMBER = "data/raw/decTest/dec_test_1000_no_hds_story_gen.csv"


def _release(tmp_path, rows, header=("sample_id", "context", "resp_0", "resp_1", "label_name",
                                     "label_value"), raw: bytes | None = None) -> Path:
    if raw is None:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(rows)
        raw = out.getvalue().encode()
    path = tmp_path / "data.zip"
    path.write_bytes(_zip({MEMBER: raw}))
    return path


@pytest.mark.parametrize(("row", "problem"), [
    ([0, "c", "a", "b", "temp", "nan"], "label_value 'nan' is not a temperature"),
    ([0, "c", "a", "b", "temp", "1e999"], "label_value '1e999' is not a temperature"),
    ([0, "c", "a", "b", "temp", "-5"], "label_value '-5' is not a temperature"),
    ([0, "c", "a", "b", "temp", "hot"], "label_value 'hot' is not a number"),
    ([0, "c", "a", "b", "content", "0.5"], "label_name is 'content', not a temperature"),
    ([0, "c", "a"], "the row has too few fields (no resp_1)"),
])
def test_tevet_berant_rows_are_checked(tmp_path, row, problem):
    release = _release(tmp_path, [[1, "c", "a", "b", "temp", "0.7"], row])
    with pytest.raises(ValueError) as err:
        text_tasks.load_tevet_berant(release, "story", MEMBER, verify=False)
    assert _one_line(err) == f"{release}:{MEMBER}:3: {problem}" + (
        " in (0, 2]." if "not a temperature" in problem and "label_name" not in problem
        else "." if "label_name" in problem or "too few" in problem else ".")


def test_a_csv_field_past_the_limit_names_member_and_line(tmp_path):
    release = _release(tmp_path, [[1, "c", "a" * (1 << 18), "b", "temp", "0.7"]])
    with pytest.raises(ValueError, match=rf"{MEMBER}:\d+: not readable as CSV \(field larger"):
        text_tasks.load_tevet_berant(release, "story", MEMBER, verify=False)


def test_a_csv_that_is_not_utf8_names_the_member(tmp_path):
    raw = b"sample_id,context,resp_0,label_name,label_value\n1,\xff\xfe,a,temp,0.5\n"
    release = _release(tmp_path, [], raw=raw)
    with pytest.raises(ValueError, match=rf"{MEMBER}:\d+: not UTF-8 text"):
        text_tasks.load_tevet_berant(release, "story", MEMBER, verify=False)


@pytest.mark.parametrize(("content", "problem"), [
    (b'{"abstract": "a"}\n{"abstract": \n', r"arxiv.jsonl:2:\d+: not JSON"),
    (b'{"abstract": "a"}\n' + b"[" * 100000 + b"\n", r"arxiv.jsonl:2: JSON nested too deeply"),
    (b'{"abstract": "\xff"}\n', r"arxiv.jsonl:1: not UTF-8 text"),
    (b'["a list"]\n', r"arxiv.jsonl:1: not a JSON object"),
])
def test_json_lines_readers_name_file_and_line(tmp_path, content, problem):
    path = tmp_path / "arxiv.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=problem) as err:
        corpus_formats.read_column(path, "abstract", None)
    _one_line(err)


@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_a_broken_gzip_names_the_file(tmp_path, damage):
    data = gzip.compress(b'{"abstract": "a"}\n' * 1000)
    path = tmp_path / "arxiv.jsonl.gz"
    path.write_bytes(data[:len(data) // 2] if damage == "truncated" else b"plain text\n")
    with pytest.raises(ValueError, match=rf"{path}: not a whole gzip file"):
        corpus_formats.read_column(path, "abstract", None)


def test_a_broken_parquet_names_the_file(tmp_path):
    path = tmp_path / "shard.parquet"
    path.write_bytes(b"PAR1 this is no parquet footer PAR1")
    with pytest.raises(ValueError, match=rf"{path}: not a readable parquet file") as err:
        corpus_formats.read_column(path, "abstract", None)
    _one_line(err)


def test_presto_rows_as_stored(tmp_path):
    """models.documents: presto takes the rows as Presto does: whitespace untouched, an empty
    row kept as an empty document; a null is an error naming the file and row."""
    (tmp_path / "x.parquet").write_bytes(_parquet([" a  b\n", "", "c"]))
    source = {"kind": "hf", "repo": "o/r", "revision": "main", "column": "abstract",
              "files": {"x.parquet": None}}
    assert text.load_hf_source(source, tmp_path, as_stored=True) == [" a  b\n", "", "c"]
    assert text.load_hf_source(source, tmp_path) == ["a b", "c"]  # documents: drawn
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"abstract": ["a", None]}), tmp_path / "x.parquet")
    with pytest.raises(ValueError, match=r"x.parquet: row 2 of column 'abstract' is None"):
        text.load_hf_source(source, tmp_path, as_stored=True)


def test_format_checks_by_name(tmp_path):
    """What each name promises, by magic bytes; an HTML page is refused under any data name."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as archive:
        archive.addfile(tarfile.TarInfo("empty"), io.BytesIO(b""))
    good = {"a.zip": _zip({"x": "1"}), "a.tar.gz": gzip.compress(b"x"),
            "a.jsonl.gz": gzip.compress(b"{}\n"), "a.tar": tar.getvalue(),
            "a.parquet": _parquet(["x"]), "a.graph": b"\x80\x02}q\x00.", "a.xml": b"<?xml?>"}
    for name, data in good.items():
        (tmp_path / name).write_bytes(data)
        assert formats.format_problem(tmp_path / name) is None, name
    for name in good:
        if name == "a.xml":
            continue
        (tmp_path / name).write_bytes(b"\n <!DOCTYPE html><html>404</html>")
        assert formats.format_problem(tmp_path / name).startswith("an HTML page"), name
    for name, problem in (("a.zip", "not a zip"), ("a.tar.gz", "not gzip"),
                          ("a.tar", "not a tar"), ("a.parquet", "not a parquet")):
        (tmp_path / name).write_bytes(b"\0" * 600)
        assert formats.format_problem(tmp_path / name).startswith(problem), name
    (tmp_path / "a.parquet").write_bytes(_parquet(["x"])[:-1])  # truncated: no closing PAR1
    assert formats.format_problem(tmp_path / "a.parquet").startswith("not a parquet")


# -- nothing grows without bound -------------------------------------------------------------

def test_a_download_without_a_declared_size_stops_at_its_ceiling(hostile, tmp_path):
    """A pinned download has a cap before it starts: the asset's ceiling, else the global one."""
    hostile.set(endless_bytes=4 << 20)
    dest = tmp_path / "data.zip"
    with pytest.raises(OSError, match=r"more than 1048576 bytes \(the ceiling for this file\); "
                                      r"stopped there") as err:
        download(hostile.url + "/endless", dest, checksum="0" * 64, max_bytes=1 << 20,
                 progress=False, asset="the data")
    assert "the data" in _one_line(err)
    assert not dest.exists() and not [n for n in _left(tmp_path) if n.endswith(".part")]
    with http.limits(max_file_bytes=1 << 19), pytest.raises(OSError, match="more than 524288"):
        download(hostile.url + "/endless", dest, checksum="0" * 64, max_bytes=1 << 20,
                 progress=False)


def test_a_compressed_response_is_counted_as_written(hostile, tmp_path):
    """8 MiB of zeros sent gzip-encoded (8 KB on the wire) stop at a 1 MiB ceiling: the count is
    what reaches the disk, after decoding."""
    dest = tmp_path / "data.zip"
    with pytest.raises(OSError, match=r"more than 1048576 bytes \(the ceiling"):
        download(hostile.url + "/gzip", dest, checksum="0" * 64, max_bytes=1 << 20,
                 progress=False)
    assert not dest.exists() and not [n for n in _left(tmp_path) if n.endswith(".part")]


def test_an_announced_size_above_the_ceiling_is_refused_unread(hostile, tmp_path):
    with pytest.raises(OSError, match=r"announces 1073741824 bytes, more than 1048576 bytes "
                                      r"\(the ceiling for this file\); nothing was read"):
        download(hostile.url + "/announce-big", tmp_path / "a.zip", checksum="0" * 64,
                 max_bytes=1 << 20, progress=False)


def test_a_listing_with_a_new_cursor_on_every_page_is_bounded_in_entries(hostile):
    with http.limits(max_pages=10_000, max_listing_entries=45), pytest.raises(
            OSError, match="the listing holds more than 45 entries; stopped") as err:
        list_repo_files("o/r", "new-cursor", dataset=True, endpoint=hostile.url, what="x")
    assert _one_line(err).startswith("x: cannot list the files of o/r@new-cursor")
    assert len(hostile.requested) == 5  # 10 entries a page: stopped at the fifth


def test_a_listing_is_bounded_in_bytes_in_all(hostile):
    with http.limits(max_pages=10_000, max_listing_bytes=3000), pytest.raises(
            OSError, match=r"what is left of the listing's limit of 3000 bytes in all"):
        list_repo_files("o/r", "new-cursor", dataset=True, endpoint=hostile.url)
    assert len(hostile.requested) < 10  # pages of about 800 bytes


# -- only the file is a body -----------------------------------------------------------------

@pytest.mark.parametrize(("code", "reason"), [("206", "Partial Content"),
                                              ("300", "Multiple Choices"), ("204", "No Content")])
def test_a_response_that_is_not_the_file_is_not_kept(hostile, tmp_path, capsys, code, reason):
    hostile.files["data.zip"] = _zip({"a.csv": "x\n1\n" * 100})
    dest = tmp_path / "data.zip"
    with pytest.raises(OSError, match=rf"answered HTTP {code} {reason}, not 200 OK: not the "
                                      "file asked for") as err:
        download(f"{hostile.url}/status/{code}/data.zip", dest, checksum=None, progress=False,
                 asset="the release")
    assert "the release" in _one_line(err)
    # The server answered: a network would not help.
    assert "or check the address and rerun" in str(err.value) and "network" not in str(err.value)
    assert not dest.exists() and not [n for n in _left(tmp_path) if n.endswith(".part")]
    assert "sha256 of" not in capsys.readouterr().out  # no digest offered for pinning


def test_a_listing_page_that_is_not_a_200_is_refused(hostile):
    with pytest.raises(OSError, match="answered HTTP 206"):
        list(http.get_json_pages(hostile.url + "/status/206/none", what="a listing"))


# -- what a file is, not what it is not ------------------------------------------------------

HTML_IN_DISGUISE = {
    "comment first": b"<!-- x --><html><body>503</body></html>",
    "utf-16 with a mark": "\ufeff<!DOCTYPE html><html>503</html>".encode("utf-16-le"),
    "utf-16 without a mark": "<html><body>503</body></html>".encode("utf-16-le"),
    "utf-16 big-endian": "<html><body>503</body></html>".encode("utf-16-be"),
}


@pytest.mark.parametrize("body", HTML_IN_DISGUISE.values(), ids=HTML_IN_DISGUISE.keys())
def test_html_in_disguise_is_not_kept_as_the_citeseer_graph(hostile, tmp_path, body):
    from diversity_core.data.graphs import fetch_citeseer_graph

    hostile.files["ind.citeseer.graph"] = body
    folder = tmp_path / "citeseer"
    with pytest.raises(ValueError, match=r"sent (an HTML page|not a pickle)") as err:
        fetch_citeseer_graph(folder, url=hostile.url + "/file/ind.citeseer.graph", sha256=None)
    assert "nothing was kept or pinned" in _one_line(err)
    assert not (folder / "ind.citeseer.graph").exists()
    assert not (folder / ".pins.json").exists()


def test_formats_by_what_a_file_is(tmp_path):
    import struct

    header = b'{"__metadata__": {}}'
    good = {"config.json": b'{"a": 1}', "model.safetensors": struct.pack("<Q", len(header))
            + header, "vocab.txt": "[PAD]\nwörd\n".encode(), "a.pkl": b"\x80\x04K\x01.",
            "b.pt": _zip({"archive/data.pkl": b"\x80\x02."})}
    for name, data in good.items():
        (tmp_path / name).write_bytes(data)
        assert formats.format_problem(tmp_path / name) is None, name
    bad = {"config.json": (b'{"a": ', "not JSON"), "model.safetensors": (b"\0" * 16, "not a "
           "safetensors"), "vocab.txt": (b"\xff\xfe\0\0", "not UTF-8"), "a.pkl": (
           b"(dp0\n.", "not a pickle"), "b.pt": (b"GIF89a", "not PyTorch")}
    for name, (data, problem) in bad.items():
        (tmp_path / name).write_bytes(data)
        assert formats.format_problem(tmp_path / name).startswith(problem), name
    for name, data in HTML_IN_DISGUISE.items():
        (tmp_path / "x.graph").write_bytes(data)
        assert formats.format_problem(tmp_path / "x.graph", None).startswith("an HTML"), name


# -- one rule for every name; one check for every address ------------------------------------

@pytest.mark.parametrize("name", ["1_Pooling/a\nb.json", "1_Pooling/a\x1b[2Jb.json",
                                  "1_Pooling/con\u200bfig.json", "1_Pooling/a\x85b.json"])
def test_a_listing_name_with_a_control_or_invisible_character_is_refused(hostile, tmp_path,
                                                                         name):
    hostile.set(listings={"main": [{"type": "file", "path": name, "size": 1, "oid": "0" * 40}]})
    with pytest.raises(ValueError, match=r"entry 0: the name .* holds the (control|invisible) "
                                         "character") as err:
        list_repo_files("o/r", "main", dataset=False, endpoint=hostile.url, what="model m")
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)
    # The configuration's pins go through the same rule.
    from diversity_core.assets import relative_name

    with pytest.raises(ValueError, match="holds the (control|invisible) character"):
        relative_name(name, what="text_assets.models.m.files")
    assert not list(tmp_path.rglob("*"))


def test_strict_mode_follows_no_plain_http_next_page_off_the_loopback(hostile):
    hostile.set(next_url="http://example.invalid/api/models/o/r/tree/main?cursor=1")
    with pytest.raises(OSError, match=r"links its next page to http://example.invalid/.*, "
                                      "plain HTTP outside the loopback: strict_assets refuses"):
        list_repo_files("o/r", "next-to", dataset=False, endpoint=hostile.url, strict=True)
    assert hostile.requested == ["/api/models/o/r/tree/next-to"]
    with pytest.raises(OSError, match=r"http://example.invalid/api/models/o/r/tree/main.*, "
                                      "plain HTTP outside the loopback: strict_assets"):
        list_repo_files("o/r", "main", dataset=False, endpoint="http://example.invalid",
                        strict=True)  # the first address goes through the same check
    hostile.set(next_url="file:///etc/passwd")  # not HTTP(S): refused, strict or not
    with pytest.raises(OSError, match="file:///etc/passwd, not an HTTP"):
        list_repo_files("o/r", "next-to", dataset=False, endpoint=hostile.url, strict=False)


def test_one_definition_of_the_loopback():
    """The loopback is 127.0.0.0/8, ::1 and localhost, for strict mode, the redirect and
    next-page checks and the configuration's check alike (its schema admits http://127.x)."""
    for url in ("http://127.0.0.1:8000/x", "http://127.0.0.2/x", "http://localhost/x",
                "http://[::1]:80/x", "https://example.org/x"):
        assert pins.url_problems(url) == [], url
        assert http.follow_problem("https://example.org/", url, strict=True) is None, url
    for url in ("http://128.0.0.1/x", "http://example.org/x", "http://127.0.0.1.nip.io/x",
                "ftp://127.0.0.1/x"):
        assert pins.url_problems(url) == [f"{url} is not HTTPS"], url
        assert http.follow_problem("https://example.org/", url, strict=True), url


# -- archives are checked for what they must hold, once, at fetch ----------------------------

@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_an_archive_with_a_member_twice_is_refused_at_fetch(hostile, tmp_path):
    from diversity_core.data.graphs import fetch_dd

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("DD/DD_A.txt", "1, 2\n2, 1\n")
        archive.writestr("DD/DD_graph_indicator.txt", "1\n1\n")
        archive.writestr("DD/DD_A.txt", "1, 1\n")  # the same name again: which one is meant?
    hostile.files["DD.zip"] = out.getvalue()
    with pytest.raises(ValueError, match=r"sent an archive that holds DD_A.txt 2 times "
                                         r"\(DD/DD_A.txt, DD/DD_A.txt\)") as err:
        fetch_dd(tmp_path, url=hostile.url + "/file/DD.zip", sha256=None)
    assert "graphs.proteins.url" in _one_line(err)
    assert _left(tmp_path) == [".DD.lock"]  # no archive, no folder


def test_an_archive_member_check_reads_tar_and_zip(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("b/x.txt", "b/y.txt", "c/y.txt"):
            info = tarfile.TarInfo(name)
            tar.addfile(info, io.BytesIO(b""))
    (tmp_path / "a.tar.gz").write_bytes(buffer.getvalue())
    assert formats.archive_members(tmp_path / "a.tar.gz", "gzip", ["x.txt", "b/y.txt"]) == {
        "x.txt": "b/x.txt", "b/y.txt": "b/y.txt"}
    with pytest.raises(ValueError, match="holds y.txt 2 times"):
        formats.archive_members(tmp_path / "a.tar.gz", "gzip", ["y.txt"])
    with pytest.raises(ValueError, match="an archive without z.txt"):
        formats.archive_members(tmp_path / "a.tar.gz", "gzip", ["z.txt"])
    (tmp_path / "a.zip").write_bytes(b"PK\x03\x04 broken")
    assert formats.format_problem(tmp_path / "a.zip", members=["x"]).startswith(
        "not a readable zip archive")


# -- trust on first use means the first ------------------------------------------------------

def test_an_altered_unpinned_file_is_never_recorded_by_a_later_fetch(hostile, tmp_path):
    release = _zip({MEMBER: "sample_id,context\n1,a\n"})
    hostile.files["data.zip"] = release
    dest = tmp_path / "tevet_berant" / "data.zip"
    url = hostile.url + "/file/data.zip"
    text_tasks.fetch_tevet_berant(url, dest, sha256=None)
    manifest = dest.parent / ".pins.json"
    first = json.loads(manifest.read_text())["files"]["data.zip"]
    assert first == {"sha256": hashlib.sha256(release).hexdigest(), "pinned": False}
    dest.write_bytes(_zip({MEMBER: "sample_id,context\n1,edited\n"}))  # still a zip archive
    with pytest.raises(ValueError, match=r"data.zip changed since it was first fetched: sha256 "
                                         rf"is [0-9a-f]{{64}}, .pins.json records {first['sha256']}"
                       ) as err:
        text_tasks.fetch_tevet_berant(url, dest, sha256=None)
    assert f"delete {dest.parent} to fetch it again" in _one_line(err)
    assert json.loads(manifest.read_text())["files"]["data.zip"] == first  # not re-blessed
    # Gone from the folder, it is fetched again against the first digest: another file is not
    # taken in its place.
    dest.unlink()
    hostile.files["data.zip"] = _zip({MEMBER: "sample_id,context\n1,changed upstream\n"})
    with pytest.raises(ValueError, match=r"recorded in .pins.json by its first fetch"):
        text_tasks.fetch_tevet_berant(url, dest, sha256=None)
    assert not dest.exists() and json.loads(manifest.read_text())["files"]["data.zip"] == first


# -- a full disk -----------------------------------------------------------------------------

def test_a_full_disk_says_free_space(hostile, tmp_path):
    """Under a file size limit of 1 MiB (``ulimit -f``: EFBIG, as ENOSPC on a full disk), a 3 MiB
    download fails with one line naming the file and saying to free space; nothing is left."""
    import subprocess
    import sys

    hostile.files["big.bin"] = b"x" * (3 << 20)
    dest = tmp_path / "big.bin"
    script = (
        "import resource, sys\n"
        "from diversity_core.assets import download\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
        "try:\n"
        f"    download({hostile.url + '/file/big.bin'!r}, {str(dest)!r}, checksum=None,\n"
        "             progress=False, asset='the big file', config_key='some.key')\n"
        "except OSError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 3, done.stderr[-2000:]
    message = done.stdout.strip()
    assert "\n" not in message
    assert message.startswith(f"the big file: could not write {dest} after ")
    assert "(File too large); nothing was kept. Free space on the disk that holds " \
           f"{tmp_path}" in message and "some.key" in message
    assert "by hand" not in message and "network" not in message
    assert not [n for n in _left(tmp_path) if n.endswith(".part")] and not dest.exists()


# -- two processes, one fetch ----------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def test_two_processes_fetching_one_model_download_it_once(hostile, tmp_path):
    """The second process waits for the first one's lock and takes its verified folder: no raw
    OSError, nothing downloaded twice."""
    import struct
    import subprocess
    import sys
    import threading

    header = b'{"__metadata__": {}}'
    files = {"modules.json": b"[]", "config.json": b"{}",
             "model.safetensors": struct.pack("<Q", len(header)) + header}
    hostile.files.update(files)
    hostile.set(listings={"main": [_tree_entry(p, d) for p, d in files.items()]},
                hold=threading.Event())
    dest = tmp_path / "models" / "m"
    pins = {"hub": {"repo_id": "o/m", "revision": "main", "endpoint": hostile.url}, "files": {}}
    script = (
        "import sys\n"
        "from diversity_core.embed.text_model_fetch import fetch_text_model\n"
        "print('ready', flush=True)\n"
        f"fetch_text_model('m', {str(dest)!r}, {pins!r})\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "0"}

    def start():
        return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)

    processes = [start()]
    try:
        first = processes[0]
        assert first.stdout.readline().strip() == "ready"
        for _ in range(300):  # the first is inside its download, held by the server
            if any("/resolve/" in p for p in hostile.requested):
                break
            assert first.poll() is None, first.stderr.read()
            threading.Event().wait(0.05)
        processes.append(start())
        second = processes[1]
        assert second.stdout.readline().strip() == "ready"
        threading.Event().wait(0.5)  # the second is at the lock now
        hostile.hold.set()
        outs = [p.communicate(timeout=60) for p in processes]
    finally:
        hostile.hold.set()
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert first.returncode == 0 and second.returncode == 0, [o[1][-1500:] for o in outs]
    assert sorted(p.rsplit("/", 1)[1] for p in hostile.requested if "/resolve/" in p) == sorted(
        files)  # each file once
    assert sorted(p.name for p in dest.iterdir()) == sorted([".pins.json", *files])


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_release_with_a_member_twice_is_refused_at_fetch(hostile, tmp_path):
    """A zip archive that holds a name twice is refused whatever it is for (the reader would
    take the last one silently)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(MEMBER, "sample_id,context\n1,a\n")
        archive.writestr(MEMBER, "sample_id,context\n1,b\n")
    hostile.files["data.zip"] = out.getvalue()
    dest = tmp_path / "tevet_berant" / "data.zip"
    with pytest.raises(ValueError, match=r"sent an archive that holds data/raw/.*\.csv more "
                                         "than once"):
        text_tasks.fetch_tevet_berant(hostile.url + "/file/data.zip", dest, sha256=None)
    assert not dest.exists() and not (dest.parent / ".pins.json").exists()


def test_the_schema_and_strict_mode_agree_on_the_loopback():
    """The configuration's address pattern and strict mode's check agree: plain HTTP to the
    loopback (127.0.0.0/8, localhost, ::1) is admitted by both, elsewhere by neither."""
    import re

    import yaml

    schema = (REPO / "workflow" / "schemas" / "config.schema.yaml").read_text()
    patterns = set(re.findall(r"pattern: '(\^\(https://[^']*)'", schema))
    assert patterns
    for pattern in patterns:
        compiled = re.compile(yaml.safe_load(f"p: '{pattern}'")["p"])
        for url in ("http://127.0.0.2/x", "http://127.1.2.3:8/d.zip", "http://localhost/x",
                    "http://[::1]/x"):
            assert compiled.search(url) and pins.url_problems(url) == [], url
        for url in ("http://128.0.0.1/x", "http://example.org/x"):
            assert not compiled.search(url) and pins.url_problems(url), url
