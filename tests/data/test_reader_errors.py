"""A data file that cannot be decoded is one line naming the file (the archive and its member),
what is wrong and what to do, whichever reader meets it: a bad CRC or deflate stream in a zip
member, a truncated pickle, a zeroed CIFAR batch, an HTML page where numbers belong, a broken
dictzip, bytes that are not UTF-8 (with their line), a first row longer than the header's
bound. One helper turns them into that line (diversity_core.data.reading.decoding)."""

import io
import pickle
import zipfile
from pathlib import Path

import pytest

from diversity_core.data import corpus_formats, images, text_tasks
from diversity_core.data import graphs as data_graphs

STORY = "data/raw/dec_test/storyGen_temp.csv"


def _one_line(err: Exception, *words: str) -> str:
    text = str(err)
    assert isinstance(err, ValueError), type(err)
    assert "\n" not in text and text, text
    for word in words:
        assert word in text, (word, text)
    return text


def _release(path: Path, body: bytes, compression=zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        archive.writestr(STORY, body)
    return path


def _rows(n: int) -> bytes:
    lines = ["sample_id,context,resp_0,resp_1,label_name,label_value"]
    lines += [f"{i},context {i},a {i},b {i},temp,0.{i + 2}" for i in range(n)]
    return ("\n".join(lines) + "\n").encode()


def _corrupt(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) >= 1
    path.write_bytes(data.replace(old, new, 1))


@pytest.mark.parametrize("how", ["bad CRC", "bad deflate stream"])
def test_a_corrupted_release_member_names_the_archive_and_the_member(tmp_path, how):
    if how == "bad CRC":
        archive = _release(tmp_path / "data.zip", _rows(4))
        _corrupt(archive, b"context 2", b"context 9")  # stored: the CRC no longer matches
    else:
        archive = _release(tmp_path / "data.zip", _rows(400), zipfile.ZIP_DEFLATED)
        data = bytearray(archive.read_bytes())
        start = data.index(STORY.encode()) + len(STORY) + 40
        data[start:start + 64] = b"\xff" * 64
        archive.write_bytes(bytes(data))
    for read in (lambda: text_tasks.load_tevet_berant(archive, "story", STORY, verify=False),
                 lambda: text_tasks.tevet_berant_members(archive, {"resp": STORY,
                                                                   "prompt": STORY},
                                                         verify=False)):
        with pytest.raises(ValueError) as caught:
            read()
        _one_line(caught.value, str(archive), f"(member {STORY})", "delete it to fetch it "
                  "again (text.tevet_berant.url)")


def test_bad_utf8_names_its_line_and_a_long_first_row_names_its_member(tmp_path):
    body = _rows(4).replace(b"context 2", b"context \xff2")
    archive = _release(tmp_path / "data.zip", body)
    with pytest.raises(ValueError) as caught:
        text_tasks.load_tevet_berant(archive, "story", STORY, verify=False)
    _one_line(caught.value, f"{archive}:{STORY}:4: not UTF-8 text")
    long_row = _rows(0) + b"0,context," + b"x" * 70_000 + b",b,temp,0.5\n"
    archive = _release(tmp_path / "long.zip", long_row)
    with pytest.raises(ValueError) as caught:
        text_tasks.tevet_berant_members(archive, verify=False)
    _one_line(caught.value, f"{archive} (member {STORY})", "longer than 65,536 bytes",
              "text.tevet_berant.members.story")


def test_a_truncated_citeseer_pickle_is_one_line(tmp_path):
    path = tmp_path / "ind.citeseer.graph"
    path.write_bytes(pickle.dumps({0: [1], 1: [0]}, protocol=2)[:-5])
    with pytest.raises(ValueError) as caught:
        data_graphs.citeseer_ego_graphs(path)
    _one_line(caught.value, str(path), "Planetoid graph pickle", "EOFError",
              "delete it to fetch it again", "graphs.ego.url")


def test_a_zeroed_cifar_batch_is_one_line(tmp_path):
    for name in [f"data_batch_{i}" for i in range(1, 6)]:
        (tmp_path / name).write_bytes(b"\0" * 64)
    with pytest.raises(ValueError) as caught:
        images.load_cifar10(tmp_path)
    _one_line(caught.value, str(tmp_path / "data_batch_1"), "CIFAR-10 batch",
              "delete the folder")


def test_an_html_page_where_tu_numbers_belong_is_one_line(tmp_path):
    (tmp_path / "DD_A.txt").write_text("<html><body>Not found</body></html>\n")
    (tmp_path / "DD_graph_indicator.txt").write_text("1\n1\n")
    with pytest.raises(ValueError) as caught:
        data_graphs.read_tu_graphs(tmp_path, "DD", remedy="delete the folder to unpack it.")
    _one_line(caught.value, str(tmp_path / "DD_A.txt"), "TU adjacency file", "<html>",
              "delete the folder to unpack it.")


def test_a_bad_crc_in_dd_zip_names_the_archive_and_member(tmp_path, monkeypatch):
    archive = tmp_path / "DD.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("DD/DD_A.txt", "1, 2\n2, 1\n")
        zf.writestr("DD/DD_graph_indicator.txt", "1\n1\n")
    _corrupt(archive, b"1, 2", b"1, 3")
    monkeypatch.setattr(data_graphs, "download", lambda *a, **k: "0" * 64)
    with pytest.raises(ValueError) as caught:
        data_graphs.fetch_dd(tmp_path, url="https://example.org/DD.zip", sha256=None)
    _one_line(caught.value, str(archive), "(member DD/DD_A.txt)", "Bad CRC-32",
              "delete it to fetch it again")
    assert not (tmp_path / "DD").exists()


def test_a_broken_dictzip_and_bad_utf8_corpus_text_are_one_line(tmp_path):
    (tmp_path / "jargon.index").write_text("word\tA\tB\n")
    (tmp_path / "jargon.dict.dz").write_bytes(b"\x1f\x8b\x08\x00" + b"\0" * 20)
    with pytest.raises(ValueError) as caught:
        corpus_formats.load_dictd(tmp_path, "jargon")
    _one_line(caught.value, str(tmp_path / "jargon.dict.dz"), "dictzip",
              "fetch it again")
    bad = tmp_path / "corpus.txt"
    bad.write_bytes(io.BytesIO(b"fine\n\xff\xfe broken\n").getvalue())
    with pytest.raises(ValueError) as caught:
        corpus_formats.read_lines(bad)
    _one_line(caught.value, str(bad), "utf-8 text file", "UnicodeDecodeError")
