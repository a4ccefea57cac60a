"""diversity_core.atomic: every write lands where it was asked, whole or not at all."""

import numpy as np
import pytest

from diversity_core.atomic import atomic_path, atomic_write


def _listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_a_write_replaces_the_file_whole_or_not_at_all(tmp_path):
    out = tmp_path / "new" / "table.csv"
    with atomic_write(out) as f:
        f.write("a,b\n1,2\n")
    assert out.read_text() == "a,b\n1,2\n" and oct(out.stat().st_mode)[-3:] == "644"
    with pytest.raises(RuntimeError), atomic_write(out) as f:
        f.write("half")
        raise RuntimeError("killed half way")
    assert out.read_text() == "a,b\n1,2\n"          # the old file, untouched
    assert _listing(out.parent) == ["table.csv"]    # no temporary file left
    with atomic_path(tmp_path / "x.npy") as tmp:
        np.save(tmp, np.arange(3))                  # a library writing by name keeps its suffix
    assert np.load(tmp_path / "x.npy").tolist() == [0, 1, 2]


def test_links_and_folders_are_refused_and_no_fixed_name_is_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out.png"
    link.symlink_to(victim)
    with pytest.raises(ValueError, match="is a symbolic link"), atomic_write(link) as f:
        f.write("x")
    (tmp_path / "dangling.png").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="is a symbolic link"), atomic_write(
            tmp_path / "dangling.png") as f:
        f.write("x")
    with pytest.raises(ValueError, match="is a folder"), atomic_write(tmp_path) as f:
        f.write("x")
    # A link planted at the old fixed temporary name (<file>.tmp) is not followed.
    (tmp_path / "report.html.tmp").symlink_to(victim)
    with atomic_write(tmp_path / "report.html") as f:
        f.write("<html/>")
    assert victim.read_text() == "precious"
    assert (tmp_path / "report.html").read_text() == "<html/>"
    assert not (tmp_path / "report.html").is_symlink()


def test_an_unwritable_place_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="cannot write output /proc/"), atomic_write(
            "/proc/diversity_core_output.txt") as f:
        f.write("x")
    with pytest.raises(ValueError, match="cannot create the folder"), atomic_write(
            "/proc/no/such/folder/a.txt") as f:
        f.write("x")
