"""Hostile inputs to the readers and caches: sizes checked before bytes are
unpacked, no FIFO or device opened, caches checked against what they must hold, devices named.

One test per class of problem, each failing before its fix: a refusal in one line naming the
file (or option) and the problem, never a traceback, a hang or gigabytes allocated.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from diversity_core import device as devices
from diversity_core.embed import raw, sentences
from diversity_core.files import embeddings as embedding_files
from diversity_core.files import images as image_reader
from diversity_core.files import texts as text_reader
from diversity_core.files.embeddings import read_embeddings


def _refusal(call, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def _without_waiting(call, *args):
    """``call(*args)`` in a thread, so that a reader that blocks on a FIFO fails the test instead
    of hanging it; returns the message of the ValueError it raised."""
    result = {}

    def run():
        try:
            call(*args)
        except ValueError as err:
            result["message"] = str(err)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive(), f"{call.__name__} waited on a FIFO"
    assert "message" in result, f"{call.__name__} accepted it"
    return result["message"]


# --- 1. sizes before bytes: .npz members, images, JSON lines ----------------------------------

def _npz_member(path: Path, shape, data: bytes, compression=zipfile.ZIP_DEFLATED,
                dtype="<f8") -> None:
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    with zipfile.ZipFile(path, "w", compression=compression) as archive, \
            archive.open("x.npy", "w") as member:
        np.lib.format.write_array_header_1_0(member, header)
        member.write(data)


def _set_uncompressed_size(path: Path, size: int) -> None:
    """Rewrite the member's uncompressed size in the local header and the central directory,
    as a forged archive would have it."""
    data = bytearray(path.read_bytes())
    local = data.index(b"PK\x03\x04")
    central = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, size)
    struct.pack_into("<I", data, central + 24, size)
    path.write_bytes(bytes(data))


def test_npz_sizes_are_checked_before_anything_is_decompressed(tmp_path, monkeypatch):
    # The archive's directory says 3.2 GB, the file is a few hundred bytes: refused by the
    # directory alone (before: numpy allocated the 3.2 GB array, then found the stream short).
    forged = tmp_path / "forged.npz"
    _npz_member(forged, (20000, 20000), bytes(1000))
    _set_uncompressed_size(forged, 3_200_000_128)
    message = _refusal(read_embeddings, forged)
    assert message.startswith(f"{forged}: 'x' (uncompressed, by the archive's directory) would "
                              "take 3.0 GiB to read") and "more than 100 times" in message
    # A real deflated array of zeros, 250 times its size on disk (the floor lowered so that it
    # need not be gigabytes here): before, inflated in full and returned.
    monkeypatch.setattr(embedding_files, "INFLATION_FLOOR", 2**20)
    zeros = tmp_path / "zeros.npz"
    np.savez_compressed(zeros, x=np.zeros((2000, 1000)))
    assert os.path.getsize(zeros) * 100 < 2000 * 1000 * 8
    assert "more than 100 times its size" in _refusal(read_embeddings, zeros)
    # The header promises more than the directory gives: refused from the header.
    short = tmp_path / "short.npz"
    _npz_member(short, (1000, 1000), bytes(800), compression=zipfile.ZIP_STORED)
    assert "'x' is truncated: its header promises 8000000 bytes of float64 data" in _refusal(
        read_embeddings, short)
    # A forged shape whose byte count wraps around in 64 bits (before: promised 0 bytes).
    forged_shape = tmp_path / "wrap.npy"
    with open(forged_shape, "wb") as out:
        np.lib.format.write_array_header_1_0(
            out, {"descr": "<f8", "fortran_order": False, "shape": (2**62, 4)})
        out.write(bytes(64))
    assert f"{2**64 * 8} bytes of float64 data" in _refusal(read_embeddings, forged_shape)
    # zipfile inflates bzip2 and lzma a whole block per read, whatever the size asked.
    for method, name in ((zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "lzma")):
        packed = tmp_path / f"{name}.npz"
        _npz_member(packed, (2, 2), np.ones((2, 2)).tobytes(), compression=method)
        assert f"'x' is compressed with {name}" in _refusal(read_embeddings, packed)
    # A member that is not a NumPy array (numpy.load gives its bytes): before, a traceback.
    with zipfile.ZipFile(tmp_path / "bytes.npz", "w") as archive:
        archive.writestr("x.npy", b"just some bytes, no header")
    assert "'x' in the archive is not a NumPy array" in _refusal(read_embeddings,
                                                                 tmp_path / "bytes.npz")


def test_the_memory_available_is_checked_from_the_header(tmp_path, monkeypatch):
    np.save(tmp_path / "a.npy", np.ones((100, 100), dtype=np.float32))
    np.savez(tmp_path / "a.npz", x=np.ones((100, 100), dtype=np.float32))
    monkeypatch.setattr(embedding_files, "_available_memory", lambda: 100_000)
    for name in ("a.npy", "a.npz"):
        message = _refusal(read_embeddings, tmp_path / name)
        assert "(100, 100) float32" in message and "would take 117.2 KiB to read; 97.7 KiB of " \
            "memory is available" in message, message


def test_valid_npz_files_read_as_numpy_loads_them(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"f32": rng.normal(size=(30, 4)).astype(np.float32),
              "i8": rng.integers(-5, 5, size=(7, 3), dtype=np.int8),
              "big_endian": rng.normal(size=(5, 2)).astype(">f8"),
              "fortran": np.asfortranarray(rng.normal(size=(6, 5)))}
    for save in (np.savez, np.savez_compressed):
        path = tmp_path / f"{save.__name__}.npz"
        save(path, **arrays)
        with np.load(path) as loaded:
            for key in arrays:
                read = read_embeddings(path, key=key)
                assert read.key == key and read.data.dtype == np.float64
                np.testing.assert_array_equal(read.data, loaded[key].astype(np.float64))


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header says width x height RGB and whose data are a few bytes of zeros."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(bytes(3 * width + 1))) + chunk(b"IEND", b""))


@pytest.mark.parametrize("side", [12_000, 20_000])  # Pillow warns for the first, raises beyond
def test_an_image_of_too_many_pixels_is_refused_before_it_is_decoded(tmp_path, monkeypatch,
                                                                       side):
    from PIL import ImageFile

    def no_decoding(self):
        raise AssertionError("the pixels were decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    path = tmp_path / "bomb.png"
    path.write_bytes(_png_header(side, side))
    assert path.stat().st_size < 100_000
    message = _refusal(image_reader.read_image, path)
    assert message == (f"{path}: an image of {side * side:,} pixels, more than "
                       "PIL.Image.MAX_IMAGE_PIXELS (89,478,485); refused before it is decoded.")


def _jsonl(tmp_path, line: str) -> Path:
    path = tmp_path / "texts.jsonl"
    path.write_text('{"text": "a fine first line"}\n' + line + "\n", encoding="utf-8")
    return path


def test_jsonl_lines_are_bounded_before_they_are_parsed(tmp_path):
    deep = _jsonl(tmp_path, '{"text": "x", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert _refusal(text_reader.read_texts, deep, "text") == (
        f"{deep}, line 2: JSON nested more than {text_reader.MAX_JSON_DEPTH} levels deep.")
    # Brackets inside strings are text, not nesting.
    inside = '\\"' + "[" * 5000 + '\\\\'  # escaped quotes and backslashes end no string
    brackets = _jsonl(tmp_path, json.dumps({"text": inside, "list": [[["deep enough"]]]}))
    assert text_reader.read_texts(brackets, "text")[1] == inside
    long_number = _jsonl(tmp_path, '{"text": "x", "n": ' + "7" * 5000 + "}")
    assert _refusal(text_reader.read_texts, long_number, "text") == (
        f"{long_number}, line 2: not JSON that can be read (a number of 5000 digits (at most "
        "4300 are read)).")
    surrogate = _jsonl(tmp_path, '{"text": ["fine", "lone \\ud800 surrogate"]}')
    message = _refusal(text_reader.read_texts, surrogate, "text")
    assert message.startswith(f"{surrogate}, line 2: field 'text' holds a lone surrogate "
                              "(U+D800) at character 6")
    # A surrogate pair is one character; U+2028 inside a string does not end the line.
    fine = _jsonl(tmp_path, '{"text": "pair \\ud83d\\ude00 and \u2028 within"}')
    assert text_reader.read_texts(fine, "text") == ["a fine first line",
                                            "pair \U0001F600 and \u2028 within"]


def test_texts_keep_what_they_read_before(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("\ufeffone\r\n\r\ntwo  \nthree".encode())
    assert text_reader.read_texts(path) == ["one", "two  ", "three"]  # the BOM is not part of "one"
    records = tmp_path / "r.jsonl"
    records.write_text('{"r": ["a", "b"], "n": 12345678901234567890}\n\n{"r": "c"}\r\n')
    assert text_reader.read_texts(records, "r") == ["a", "b", "c"]
    for content, message in ((b'{"r": "a"}\n{"x": 1}\n', "line 2: no field 'r'"),
                             (b'{"r": 5}\n', "line 1: field 'r' is not a string"),
                             (b"{oops\n", "line 1: not JSON"),
                             (b"\n \n", "no text in it (field 'r')"),
                             (b'{"r": "\xff"}\n', "not UTF-8 text")):
        records.write_bytes(content)
        assert message in _refusal(text_reader.read_texts, records, "r")


# --- 2. an image folder's FIFO, device or socket is refused, never opened ---------------------

def test_an_image_folder_refuses_what_is_not_a_regular_file(tmp_path, monkeypatch):
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(folder / "fine.png")
    (folder / "sub.png").mkdir()  # a subfolder is not read
    assert image_reader.image_files(folder) == [folder / "fine.png"]
    fifo = folder / "pipe.png"
    os.mkfifo(fifo)
    assert _without_waiting(image_reader.image_files, folder) == (
        f"{fifo} is a FIFO (named pipe), not an image file; an image folder holds PNG and JPEG "
        "files.")
    # Given by name, a FIFO is refused by every reader, without waiting for a writer.
    assert "is a FIFO (named pipe), not a regular file" in _without_waiting(
        image_reader.read_image, fifo)
    assert "is a FIFO (named pipe), not an image file" in _without_waiting(raw.embed_images,
                                                                           [fifo])
    text_fifo = tmp_path / "texts.jsonl"
    os.mkfifo(text_fifo)
    assert "is a FIFO (named pipe), not a regular file" in _without_waiting(
        lambda p: text_reader.read_texts(p, "text"), text_fifo)
    fifo.unlink()
    if os.path.exists("/dev/zero"):
        (folder / "zero.png").symlink_to("/dev/zero")
        assert "zero.png is a character device, not an image file" in _refusal(
            image_reader.image_files, folder)
        (folder / "zero.png").unlink()
    (folder / "gone.jpg").symlink_to(folder / "nowhere.jpg")
    assert "gone.jpg is a symbolic link to a missing file" in _refusal(
        image_reader.image_files, folder)
    (folder / "gone.jpg").unlink()
    monkeypatch.chdir(folder)  # a socket's path must be short
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind("sock.png")
        assert "sock.png is a socket, not an image file" in _refusal(image_reader.image_files,
                                                                     folder)
    finally:
        server.close()


# --- 3. caches checked against what they must hold ----------------------------------------------

class _Model:
    """A stand-in text model of 8 dimensions that counts what it embeds."""

    name, dimension, normalised = "stand-in", 8, False

    def __init__(self):
        self.seen: list[str] = []

    def encode(self, texts, batch_size=32, progress=True):
        self.seen.extend(texts)
        return np.array([[len(t) + k for k in range(8)] for t in texts], dtype=np.float32)


@pytest.fixture
def model(monkeypatch):
    stand_in = _Model()
    raw._LOADED.clear()
    monkeypatch.setattr(sentences.TEXT_MODELS["all-MiniLM-L6-v2"], "dimension", 8)
    monkeypatch.setattr(sentences, "fetch_text_model", lambda name, folder, pins=None: folder)
    monkeypatch.setattr(sentences, "load_text_model",
                        lambda name, folder, device="auto": stand_in)
    yield stand_in
    raw._LOADED.clear()


def _rewrite_cache(path: Path, change) -> None:
    with np.load(path) as stored:
        content = {k: stored[k] for k in stored.files}
    content["embeddings"] = change(content["embeddings"])
    np.savez(path, **content)


@pytest.mark.parametrize("damage, said", [
    (lambda v: v[:, :5], "its vectors have 5 dimensions, the model gives 8"),
    (lambda v: v.astype(np.float64), "its vectors are float64 of shape (3, 8), not (n, d) "
                                     "float32"),
    (lambda v: np.where(np.arange(8) == 2, np.nan, v).astype(np.float32),
     "3 non-finite value(s) in its vectors, the first in row 0"),
])
def test_a_cache_that_is_not_the_models_output_is_named_and_rebuilt(tmp_path, model, caplog,
                                                                     damage, said):
    texts = ["one", "three", "seven"]
    cache = tmp_path / "cache"
    first = raw.embed_texts(texts, "all-MiniLM-L6-v2", cache=cache)
    (path,) = (cache / "texts").glob("*.npz")
    _rewrite_cache(path, damage)
    model.seen.clear()
    with caplog.at_level("WARNING"):
        again = raw.embed_texts(texts, "all-MiniLM-L6-v2", cache=cache)
    # Before: the cut vectors came back as 5-dimensional embeddings, the NaN as the input's.
    assert f"the cache {path} does not hold what it must ({said}); it is rebuilt" in caplog.text
    assert model.seen == texts
    np.testing.assert_array_equal(again, first)
    model.seen.clear()
    assert np.array_equal(raw.embed_texts(texts, "all-MiniLM-L6-v2", cache=cache), first)
    assert model.seen == []  # rebuilt: the next run reads it


def test_a_cache_of_another_width_is_rebuilt_when_only_the_model_knows_its_width(tmp_path,
                                                                                  caplog):
    cache = tmp_path / "c.npz"
    wide = _Model()
    sentences.embed_with_cache(wide, ["a", "bb"], cache, fingerprint="fake@1", progress=False)
    _rewrite_cache(cache, lambda v: v[:, :3])

    def loaded():  # no dimension known before the model is loaded
        return wide

    with caplog.at_level("WARNING"):
        X, n = sentences.embed_with_cache(loaded, ["a", "bb", "ccc"], cache,
                                          fingerprint="fake@1", progress=False)
    assert X.shape == (3, 8) and n == 3
    assert "holds vectors of 3 dimensions, the model gives 8; it is rebuilt" in caplog.text


def test_an_image_feature_cache_is_checked_against_the_networks_output(tmp_path, caplog):
    torch = pytest.importorskip("torch")
    from diversity_core.embed import inception

    calls = []

    def network(x):
        calls.append(len(x))
        return torch.ones(len(x), inception.INCEPTION_DIM)

    images = np.zeros((4, 8, 8, 3), dtype=np.uint8)
    cache = tmp_path / "features.npz"
    original = inception.load_inception
    inception.load_inception = lambda path, device="cpu": network
    try:
        inception.embed_with_cache(images, [0, 1], "net", cache, size=80, device="cpu",
                                   progress=False)
        with np.load(cache) as stored:
            content = {k: stored[k] for k in stored.files}
        content["features"] = content["features"][:, :100]
        np.savez(cache, **content)
        with caplog.at_level("WARNING"):
            X, n = inception.embed_with_cache(images, [0, 1], "net", cache, size=80,
                                              device="cpu", progress=False)
    finally:
        inception.load_inception = original
    assert n == 2 and X.shape == (2, 2048) and calls == [2, 2]
    assert "its vectors have 100 dimensions, the model gives 2048" in caplog.text


def test_a_cache_in_the_form_of_a_fifo_is_not_opened(tmp_path, caplog):
    cache = tmp_path / "c.npz"
    os.mkfifo(cache)
    result = {}

    def run():
        result["X"] = sentences.embed_with_cache(_Model(), ["a"], cache, fingerprint="fake@1",
                                                 progress=False)[0]

    with caplog.at_level("WARNING"):
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(timeout=20)
    assert not worker.is_alive(), "the cache's FIFO was opened"
    assert result["X"].shape == (1, 8) and "is not a regular file; it is rebuilt" in caplog.text
    assert cache.is_file()  # replaced by the rebuilt cache


def test_a_folder_in_a_caches_place_is_one_line(tmp_path):
    cache = tmp_path / "c.npz"
    cache.mkdir()
    message = _refusal(sentences.embed_with_cache, _Model(), ["a"], cache, fingerprint="fake@1",
                       progress=False)
    assert message == (f"embedding cache of fake@1: the cache {cache} is a folder; remove it or "
                       "choose another cache folder.")


# --- 4. devices: a name that is not a device is refused, for every encoder ---------------------

@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu", "CPU", " cpu", "cuda:", "mps"])
def test_an_unknown_device_is_refused_in_one_line(tmp_path, device):
    expected = (f"device: unknown device {device!r}; the devices are cpu, auto, cuda, cuda:N, "
                "torch:cpu (N = 0, 1, ...).")
    assert _refusal(devices.parse_device, device) == expected
    assert _refusal(devices.parse_device, device, check=False) == expected
    # The ONNX model (which never asks torch) and the CPU-only ones: before, accepted silently.
    for name in ("paraphrase-MiniLM-L3-v2-onnx", "glove-6B-50d-mean"):
        assert _refusal(sentences.load_text_model, name, tmp_path, device) == expected
        assert _refusal(sentences.model_fingerprint, name, device=device) == expected
        assert _refusal(raw.embed_texts, ["a"], name, device=device) == expected
    # The image model: refused before a file is read.
    assert _refusal(raw.embed_images, [tmp_path / "none.png"], device=device) == expected


def test_valid_device_names_pass_the_check():
    for device in ("cpu", "cuda", "cuda:0", "cuda:12", "auto", "torch:cpu"):
        assert devices.parse_device(device, check=False).name == device
        assert devices.device_problem(device, "text.device") is None
    assert devices.parse_device("cpu") == devices.Device("cpu", "numpy")
    assert devices.parse_device("cpu").torch == "cpu"



# --- the command line: one line, exit 2 ---------------------------------------------------------

def test_the_command_line_says_each_in_one_line_and_exits_2(tmp_path, capsys, model):
    from PIL import Image

    from diversity_core.cli.main import main

    folders = {}
    for name in ("plain", "plain2", "bomb", "fifo"):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        Image.new("RGB", (8, 8), (len(name), 0, 0)).save(folders[name] / "x.png")
    (folders["bomb"] / "bomb.png").write_bytes(_png_header(12_000, 12_000))
    os.mkfifo(folders["fifo"] / "pipe.png")
    texts = []
    for name in ("a", "b"):
        texts.append(tmp_path / f"{name}.txt")
        texts[-1].write_text(f"one {name}\ntwo {name}\nthree {name}\n")
    cases = [
        ([folders["plain"], folders["bomb"], "--embed", "inception"],
         f"{folders['bomb'] / 'bomb.png'}: an image of 144,000,000 pixels"),
        ([folders["plain"], folders["fifo"], "--embed", "inception"],
         f"{folders['fifo'] / 'pipe.png'} is a FIFO (named pipe)"),
        ([folders["plain"], folders["plain2"], "--embed", "inception", "--device", "cuda:x"],
         "unknown device 'cuda:x'"),
        ([*texts, "--embed", "paraphrase-MiniLM-L3-v2-onnx", "--device", "tpu"],
         "unknown device 'tpu'"),
        ([*texts, "--embed", "all-MiniLM-L6-v2", "--device", "gpu"], "unknown device 'gpu'"),
    ]
    for argv, said in cases:
        rc = main(["compare", *(str(a) for a in argv)])
        out = capsys.readouterr()
        assert rc == 2 and out.out == "" and out.err.count("\n") == 1, (argv, out.err)
        assert said in out.err, out.err
    assert model.seen == []  # refused before anything was embedded


def test_a_cuda_device_torch_does_not_see_is_refused(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert devices.parse_device("cuda:0").torch == "cuda:0"
    assert _refusal(devices.parse_device, "cuda:1", key="text.device") == (
        "text.device: device 'cuda:1' requested but torch sees 1 CUDA GPU (cuda:0).")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert _refusal(devices.parse_device, "cuda:7") == (
        "device: device 'cuda:7' requested but torch sees 2 CUDA GPUs (cuda:0 to cuda:1).")
    assert devices.parse_device("auto").torch == "cuda"  # auto: the GPU torch sees
