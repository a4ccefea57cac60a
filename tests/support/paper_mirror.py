"""A local mirror of what the paper configurations download, laid out as the real servers lay it
out, built from code (tiny, synthetic: no real data), served on 127.0.0.1 for the dress
rehearsal (tests/pipeline/test_paper_rehearsal.py).

The layouts follow public evidence (docs/*.md, "The paper's configuration"):

* Tevet & Berant's ``data.zip``: per task ``dec_test_1000_no_hds_<task>_gen.csv`` (the paper's
  sets) and ``dec_test_200_with_hds_<task>_gen.csv`` under ``data/raw/decTest/`` and again, with
  metric columns, under ``data/with_metrics/decTest/``; ``conTest/``, ``McDiv/`` and
  ``McDiv_nuggets/`` beside them (labelled by content, not temperature). Columns ``sample_id``,
  ``context``, ``resp_0`` … ``resp_9``, ``label_name``, ``label_value``.
* The Hugging Face hub: datasets at ``/datasets/<repo>/resolve/<revision>/<path>`` (big_patent's
  main branch holds its loading script only; its parquet files are on ``refs/convert/parquet``,
  config a's train split as ``a/partial-train/NNNN.parquet``, the layout of a config over the
  converter's size limit, the first shard holding fewer rows than asked for), models at
  ``/<repo>/resolve/<revision>/<path>``, and every revision's tree listing at
  ``/api/{datasets,models}/<repo>/tree/<revision>`` (JSON: ``type``, ``path``, ``oid``,
  ``size``, ``lfs``), paginated with ``Link: <...>; rel="next"`` as the hub pages it. A model
  repository holds, as the real ones do, its weights several times over (PyTorch pickle, ONNX
  and OpenVINO exports, TensorFlow, Rust): the copies that must never be fetched are stand-in bytes.
* CIFAR-10's ``cifar-10-python.tar.gz`` (``cifar-10-batches-py/data_batch_1`` … ``_5``,
  ``test_batch``, ``batches.meta``, ``readme.html``), TU's ``DD.zip`` (``DD/DD_A.txt``,
  ``DD_graph_indicator.txt``, ``DD_graph_labels.txt``, ``DD_node_labels.txt``, ``README.txt``)
  and Planetoid's ``ind.citeseer.graph`` (a pickled adjacency dict).

The sentence models are real sentence-transformers models of the real architectures, file lists
and output dimensions, with random weights and a tiny vocabulary: they exercise the download and
loading code, and mean nothing as embeddings.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import http.server
import io
import json
import pickle
import tarfile
import threading
import urllib.parse
import zipfile
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np

TASKS = ("story", "resp", "prompt")
_WORDS = ("the a an one two red blue green small large quick slow happy sad old new bright dark "
          "cat dog bird fish tree river house road city garden ship train book letter song story "
          "runs walks sings reads writes jumps sleeps eats opens closes finds loses builds paints "
          "and or but then after before under over near far inside outside because while").split()


# -- Tevet & Berant's release ------------------------------------------------------------------

def _responses(rng, temperature: float, n: int, length: int = 8) -> list[str]:
    """``n`` word sequences sampled from one fixed Zipf-like distribution at ``temperature``:
    the higher the temperature, the more distinct words a set holds."""
    logits = -np.log(np.arange(1, len(_WORDS) + 1))
    p = np.exp(logits / temperature)
    p /= p.sum()
    return [" ".join(rng.choice(_WORDS, size=length, p=p)) for _ in range(n)]


def _csv_text(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def tevet_berant_release(path: Path, *, n_sets: int = 36, n_responses: int = 10,
                         seed: int = 0) -> Path:
    """Write a ``data.zip`` laid out as Tevet & Berant's release; return its path."""
    rng = np.random.default_rng(seed)

    def dec_rows(task, count, hds=False, metrics=False):
        rows = []
        for i in range(count):
            temperature = round(float(rng.uniform(0.2, 1.5)), 3)
            row = {"sample_id": i, "context": f"{task} context {i}: " + " ".join(
                rng.choice(_WORDS, size=6)),
                   **dict(zip([f"resp_{k}" for k in range(n_responses)],
                              _responses(rng, temperature, n_responses), strict=True)),
                   "label_name": "temp", "label_value": temperature}
            if hds:
                row["hds_mean"] = round(float(rng.uniform(1, 5)), 2)
            if metrics:
                row["metric_distinct_ngrams"] = round(float(rng.uniform(0, 1)), 3)
            rows.append(row)
        return rows

    members = {}
    for task in TASKS:
        paper = dec_rows(task, n_sets)
        with_hds = dec_rows(task, 6, hds=True)
        content = [dict(row, label_name="content", label_value=i % 2)
                   for i, row in enumerate(dec_rows(task, 4))]
        for kind in ("raw", "with_metrics"):
            extra = {"metric_distinct_ngrams": 0.5} if kind == "with_metrics" else {}
            base = f"data/{kind}"
            members[f"{base}/decTest/dec_test_1000_no_hds_{task}_gen.csv"] = [
                dict(row, **extra) for row in paper]
            members[f"{base}/decTest/dec_test_200_with_hds_{task}_gen.csv"] = [
                dict(row, **extra) for row in with_hds]
            members[f"{base}/conTest/con_test_200_with_hds_{task}_gen.csv"] = content
            members[f"{base}/McDiv/mcdiv_all_no_hds_{task}_gen.csv"] = content
            members[f"{base}/McDiv_nuggets/mcdiv_nuggets_no_hds_{task}_gen.csv"] = content
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, rows in sorted(members.items()):
            archive.writestr(name, _csv_text(rows))
    return path


# -- Hugging Face datasets -----------------------------------------------------------------------

# repository -> revision -> {path: (columns, text column) or None for a non-data file}: the
# paths public references name, at the revisions they name. Each revision's
# tree listing is served too, paginated (the hub's tree API).
HF_DATASETS = {
    "abisee/cnn_dailymail": {"96df5e686bee6baa90b8bee7c28b81fa3fa6223d": {
        "3.0.0/train-00000-of-00003.parquet": (("article", "highlights", "id"), "highlights")}},
    # big_patent: the main branch holds its loading script only (the data set's page: viewer
    # disabled, a loading script); the parquet conversion on refs/convert/parquet lays config a's
    # train split out as partial-train (over the converter's 5 GB limit: huggingface/
    # dataset-viewer, parquet_and_info.py), its first shard holding fewer rows than asked for
    # (as ~500 MB of 32.6 KB rows is fewer than Presto's 16,384); other configs and splits beside.
    "NortheasternUniversity/big_patent": {
        "refs/convert/parquet": {
            **{f"a/partial-train/{i:04d}.parquet": (("description", "abstract"), "abstract")
               for i in range(3)},
            "a/partial-validation/0000.parquet": (("description", "abstract"), "abstract"),
            "g/partial-train/0000.parquet": (("description", "abstract"), "abstract")},
        "main": {"big_patent.py": None, "README.md": None}},
    "gfissore/arxiv-abstracts-2021": {"e4c5fbd4dec8e46a5dc869216fe1c94cc585757a": {
        "arxiv-abstracts.jsonl.gz": (("id", "submitter", "authors", "title", "comments",
                                      "journal-ref", "doi", "abstract", "report-no",
                                      "categories", "versions"), "abstract")}},
    "EdinburghNLP/xsum": {"7d4d486c2f8ef850b1a11aead99b894ff3dd7da9": {
        "data/train-00000-of-00001.parquet": (("document", "summary", "id"), "summary")}},
}
# Rows per parquet shard of a partial-<split> layout: fewer than the rehearsal's 60 documents.
PARTIAL_SHARD_ROWS = 40


def _documents(rng, n: int, topic: str) -> list[str]:
    """``n`` synthetic documents; a few are repeats, one is a single word, one keeps runs of
    whitespace and a newline, one is empty (as in real data)."""
    docs = [f"{topic} " + " ".join(rng.choice(_WORDS, size=int(rng.integers(6, 30))))
            for _ in range(n)]
    docs[3] = docs[1]          # a repeat
    docs[5] = topic            # a one-word document
    docs[7] = f"  {topic}  with\n runs  of whitespace "
    docs[8] = ""               # an empty row (Presto embeds it as it is)
    return docs


def hf_dataset_files(root: Path, *, n_rows: int = 90, seed: int = 0) -> None:
    """Every paper dataset's files under ``root`` where the hub serves them, and each
    revision's tree listing where the hub's API serves it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    for repo, revisions in HF_DATASETS.items():
        for revision, files in revisions.items():
            texts, current, offset = None, None, 0
            # The server decodes the URL: refs%2Fconvert%2Fparquet is a folder path.
            folder = root / "datasets" / repo / "resolve" / revision
            for rel, layout in files.items():
                path = folder / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                if layout is None:
                    path.write_text("# a loading script (no data files on this branch)\n")
                    continue
                columns, text = layout
                if "/partial-" in rel:  # consecutive rows of one split over its shards
                    if current != rel.rsplit("/", 1)[0]:
                        current, offset = rel.rsplit("/", 1)[0], 0
                        texts = _documents(rng, 3 * PARTIAL_SHARD_ROWS, repo.split("/")[1])
                    shard = texts[offset:offset + PARTIAL_SHARD_ROWS]
                    offset += PARTIAL_SHARD_ROWS
                else:
                    shard = _documents(rng, n_rows, repo.split("/")[1])
                records = [{c: (shard[i] if c == text else f"{c} {i}") for c in columns}
                           for i in range(len(shard))]
                if rel.endswith(".parquet"):
                    pq.write_table(pa.Table.from_pylist(records), path)
                else:
                    with gzip.open(path, "wt", encoding="utf-8") as out:
                        out.writelines(json.dumps(r) + "\n" for r in records)
            listing = root / "api" / "datasets" / repo / "tree" / revision
            listing.parent.mkdir(parents=True, exist_ok=True)
            listing.write_text(json.dumps(_tree_listing(folder)))


# -- Hugging Face models -------------------------------------------------------------------------

# The paper's hub models: repository, revision (the package's pins), architecture, output
# dimension, whether modules.json ends in Normalize, and whether the repository has safetensors
# (the two older NLI models are served with the PyTorch pickle only, the fallback).
HF_MODELS = {
    "bert-large-nli-stsb-mean-tokens": ("main", "bert", 1024, False, False),
    "roberta-base-nli-mean-tokens": ("main", "roberta", 768, False, False),
    "all-distilroberta-v1": ("main", "roberta", 768, True, True),
    "multi-qa-distilbert-cos-v1": ("main", "distilbert", 768, True, True),
    "all-MiniLM-L12-v2": ("364dd28d28dcd3359b537f3cf1f5348ba679da62", "bert", 384, True, True),
}
# Files of the real repositories that sentence-transformers does not load (stand-in bytes here:
# fetching any of them is a failure of the rehearsal).
_NOT_LOADED = ("README.md", ".gitattributes", "data_config.json", "train_script.py",
               "tf_model.h5", "rust_model.ot", "onnx/model.onnx", "onnx/model_O4.onnx",
               "onnx/model_qint8_avx512.onnx", "openvino/openvino_model.bin",
               "openvino/openvino_model.xml")
NOT_LOADED_MARK = b"stand-in bytes of a file that must not be fetched\n"


def _tiny_transformer(folder: Path, arch: str, dim: int, seed: int) -> None:
    """A one-layer transformer of architecture ``arch`` and hidden size ``dim`` with random
    weights and a tiny vocabulary (its tokenizer's real file types), saved to ``folder``."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    folder.mkdir(parents=True)
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    if arch == "roberta":
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator([" ".join(_WORDS)] * 4, vocab_size=400, min_frequency=1,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        bpe.save_model(str(folder))
        tokenizer = tf.RobertaTokenizerFast.from_pretrained(str(folder))
        config = tf.RobertaConfig(vocab_size=len(tokenizer), hidden_size=dim,
                                  num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=130,
                                  pad_token_id=tokenizer.pad_token_id)
        model = tf.RobertaModel(config, add_pooling_layer=False)
    else:
        (folder / "vocab.txt").write_text("\n".join(special + sorted(set(_WORDS))) + "\n")
        tokenizer = tf.BertTokenizerFast.from_pretrained(str(folder))
        if arch == "distilbert":
            config = tf.DistilBertConfig(vocab_size=len(tokenizer), dim=dim, n_layers=1,
                                         n_heads=2, hidden_dim=64, max_position_embeddings=130)
            model = tf.DistilBertModel(config)
        else:
            config = tf.BertConfig(vocab_size=len(tokenizer), hidden_size=dim,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=64, max_position_embeddings=130)
            model = tf.BertModel(config, add_pooling_layer=False)
    tokenizer.save_pretrained(str(folder))
    model.save_pretrained(str(folder))


def _sentence_model(folder: Path, arch: str, dim: int, normalise: bool, safetensors: bool,
                    seed: int) -> None:
    """A sentence-transformers model folder (modules.json, sentence_bert_config.json,
    1_Pooling/, the transformer's files) with the real repositories' extra files beside it."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    work = folder.parent / f".{folder.name}.transformer"
    _tiny_transformer(work, arch, dim, seed)
    modules = [Transformer(str(work), max_seq_length=128), Pooling(dim, pooling_mode="mean")]
    if normalise:
        modules.append(Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    if not safetensors:  # the older repositories: the PyTorch pickle of the same weights
        import torch
        from safetensors.torch import load_file

        torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    else:
        (folder / "pytorch_model.bin").write_bytes(NOT_LOADED_MARK)
    for rel in _NOT_LOADED:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(NOT_LOADED_MARK)


def _tree_listing(folder: Path) -> list[dict]:
    """The hub's tree listing of a folder (what ``HfApi.list_repo_tree`` parses): git blob ids,
    sizes, and for large files (LFS) their SHA-256."""
    entries, folders = [], set()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        data = path.read_bytes()
        entry = {"type": "file", "path": rel, "size": len(data),
                 "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
        if rel.endswith((".safetensors", ".bin", ".onnx", ".h5", ".ot", ".parquet", ".gz")):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "pointerSize": 134}
        entries.append(entry)
        folders.update(p.as_posix() for p in Path(rel).parents if p.as_posix() != ".")
    return [{"type": "directory", "path": f, "oid": "0" * 40, "size": 0}
            for f in sorted(folders)] + entries


def hf_model_files(root: Path, names=tuple(HF_MODELS)) -> None:
    """The paper's hub models under ``root``: files where the hub resolves them, listings where
    its API serves them."""
    for seed, name in enumerate(names):
        revision, arch, dim, normalise, safetensors = HF_MODELS[name]
        repo = f"sentence-transformers/{name}"
        folder = root / repo / "resolve" / revision
        _sentence_model(folder, arch, dim, normalise, safetensors, seed)
        listing = root / "api" / "models" / repo / "tree" / revision
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text(json.dumps(_tree_listing(folder)))


# -- images and graphs ---------------------------------------------------------------------------

def cifar10_tarball(path: Path, *, per_class: int = 12, seed: int = 0) -> Path:
    """``cifar-10-python.tar.gz``: five training batches and a test batch of 32 x 32 RGB images,
    each class a colour of its own plus noise, pickled as the dataset's python version."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(10), per_class)
    rng.shuffle(labels)
    colours = rng.integers(0, 256, size=(10, 3, 1, 1))
    images = np.clip(colours[labels] + rng.normal(0, 40, (len(labels), 3, 32, 32)), 0, 255)
    images = images.astype(np.uint8).reshape(len(labels), -1)

    def batch(index, name):
        return pickle.dumps({b"batch_label": name.encode(), b"labels": labels[index].tolist(),
                             b"data": images[index],
                             b"filenames": [f"img_{i}.png".encode() for i in index]}, protocol=2)

    members = {f"data_batch_{b + 1}": batch(np.arange(b, len(labels), 5), f"training batch {b}")
               for b in range(5)}
    members["test_batch"] = batch(np.arange(0, 20), "testing batch 1 of 1")
    members["batches.meta"] = pickle.dumps({b"label_names": [
        b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse",
        b"ship", b"truck"], b"num_cases_per_batch": 10000, b"num_vis": 3072}, protocol=2)
    members["readme.html"] = b"<html>CIFAR-10 layout stand-in</html>\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def tu_dd_zip(path: Path, *, n_graphs: int = 48, seed: int = 0) -> Path:
    """``DD.zip`` in the TU layout: graphs of 20 to 60 nodes (random trees plus chords), 1-based
    node ids, both directions of every edge."""
    import networkx as nx

    rng = np.random.default_rng(seed)
    adjacency, indicator, graph_labels, node_labels, offset = [], [], [], [], 0
    for gid in range(1, n_graphs + 1):
        n = int(rng.integers(20, 61))
        g = nx.random_labeled_tree(n, seed=int(rng.integers(1 << 30)))
        for _ in range(n // 4):
            u, v = map(int, rng.integers(0, n, 2))
            if u != v:
                g.add_edge(u, v)
        for u, v in sorted(g.edges()):
            a, b = u + offset + 1, v + offset + 1
            adjacency += [f"{a}, {b}", f"{b}, {a}"]
        indicator += [str(gid)] * n
        node_labels += [str(int(rng.integers(1, 20))) for _ in range(n)]
        graph_labels.append(str(1 + gid % 2))
        offset += n
    files = {"DD_A.txt": adjacency, "DD_graph_indicator.txt": indicator,
             "DD_graph_labels.txt": graph_labels, "DD_node_labels.txt": node_labels}
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, lines in files.items():
            archive.writestr(f"DD/{name}", "\n".join(lines) + "\n")
        archive.writestr("DD/README.txt", "TU layout stand-in\n")
    return path


def citeseer_graph(path: Path, *, n_nodes: int = 120, seed: int = 0) -> Path:
    """``ind.citeseer.graph``: a pickled adjacency dict (a sparse random graph with a few
    isolated pieces, as Citeseer has)."""
    import networkx as nx

    g = nx.powerlaw_cluster_graph(n_nodes, 1, 0.1, seed=seed)
    adjacency = defaultdict(list)
    for u, v in g.edges():
        adjacency[u].append(v)
        adjacency[v].append(u)
    adjacency[n_nodes].append(n_nodes + 1)  # a component of its own
    adjacency[n_nodes + 1].append(n_nodes)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(adjacency, protocol=2))
    return path


# -- the server ----------------------------------------------------------------------------------

class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files; every path that was asked for is recorded. A tree listing (``/api/...``,
    a JSON list on disk) is served as the hub serves it: pages of ``page_size`` entries, each
    with a ``Link: <...?cursor=N>; rel="next"`` header to the next."""

    requested: list[str]
    page_size = 4

    def log_message(self, *args):
        pass

    def translate_path(self, path):
        self.requested.append(urllib.parse.unquote(path.split("?", 1)[0]))
        return super().translate_path(path)

    def do_GET(self):
        if not self.path.startswith("/api/"):
            return super().do_GET()
        path, _, query = self.path.partition("?")
        local = Path(self.translate_path(path))
        if not local.is_file():
            return self.send_error(404)
        entries = json.loads(local.read_text())
        cursor = int(urllib.parse.parse_qs(query).get("cursor", ["0"])[0])
        body = json.dumps(entries[cursor:cursor + self.page_size]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if cursor + self.page_size < len(entries):
            following = urllib.parse.urlencode(
                dict(urllib.parse.parse_qsl(query), cursor=cursor + self.page_size))
            self.send_header("Link", f'<http://{self.headers["Host"]}{path}?{following}>; '
                                     'rel="next"')
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serve(root: Path):
    """Serve ``root`` on 127.0.0.1; yields ``(base URL, requested paths)``."""
    requested: list[str] = []
    handler = type("Handler", (_Handler,), {"requested": requested})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a, **k: handler(*a, directory=str(root), **k))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()
