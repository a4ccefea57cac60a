"""The one reader of embedding files (diversity_core.files.embeddings), and the command line's
promise around it: each input reads as the user meant, or ends in one line ``error: ...`` and
exit 2 — never a traceback, never a wait, never a file mis-read
without a word. The CSV reader's Hypothesis properties: tests/measures/test_properties.py.
"""

import codecs
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest

from diversity_core.cli.main import main
from diversity_core.files.embeddings import InputError, read_embeddings

X = np.array([[0.5, -1.25, 3.0], [2.0, 0.125, -7.5], [1e5, 4.0, 0.0], [-0.75, 1e-5, 2.5]])


def _error(path, **options) -> str:
    with pytest.raises(InputError) as info:
        read_embeddings(path, **options)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- what is read, and said ---------------------------------------------------------------

@pytest.mark.parametrize("write, header, index_note", [
    (lambda p: np.savetxt(p, X, delimiter=","), None, None),
    (lambda p: np.savetxt(p, X, delimiter=",", header="a,b,c", comments=""), ("a", "b", "c"),
     None),
    (lambda p: np.savetxt(p, X, delimiter=",", header="a,b,c"), None, None),  # '# a,b,c'
    (lambda p: pd.DataFrame(X, columns=["a", "b", "c"]).to_csv(p, index=False),
     ("a", "b", "c"), None),
], ids=["savetxt", "savetxt header", "savetxt comment header", "pandas names"])
def test_csv_writers_read_back_exactly(tmp_path, write, header, index_note):
    path = tmp_path / "x.csv"
    write(path)
    read = read_embeddings(path)
    np.testing.assert_array_equal(read.data, X)
    assert read.header == header and read.index_dropped is None
    assert read.describe().startswith(f"{path}: 4 points x 3 dims (CSV; ")
    assert ("no header" in read.describe()) == (header is None)


def test_pandas_index_is_refused_then_dropped_or_kept(tmp_path):
    path = tmp_path / "x.csv"
    pd.DataFrame(X, columns=["a", "b", "c"]).to_csv(path)  # index=True: ",a,b,c" / "0,..."
    message = _error(path)
    assert "column 1 looks like an index" in message and "its header is ''" in message
    assert "--index-column drop" in message and "--index-column keep" in message
    read = read_embeddings(path, index_column="drop")
    np.testing.assert_array_equal(read.data, X)
    assert read.header == ("a", "b", "c") and read.first_column == 2
    assert "columns 2-4; column 1 dropped as an index" in read.describe()
    kept = read_embeddings(path, index_column="keep")
    np.testing.assert_array_equal(kept.data[:, 0], np.arange(4))
    assert kept.shape == (4, 4)


def test_headerless_pandas_index_is_recognised_by_its_count(tmp_path):
    path = tmp_path / "x.csv"
    pd.DataFrame(X).to_csv(path, header=False)  # "0,0.5,-1.25,3.0" ...
    assert "its values count 0 to 3 in whole numbers, beside columns of decimals" in _error(path)
    np.testing.assert_array_equal(read_embeddings(path, index_column="drop").data, X)
    # Points on an integer grid whose first coordinate counts 0, 1, 2 are data, not an index.
    grid = tmp_path / "grid.csv"
    grid.write_text("0,0\n1,0\n2,0\n")
    assert read_embeddings(grid).shape == (3, 2)


def test_numeric_header_is_never_a_point(tmp_path):
    """pandas' header of unnamed columns (0..d-1) and numeric names above decimals are refused
    until --header / --no-header says which; a first line of numbers is otherwise data."""
    path = tmp_path / "x.csv"
    pd.DataFrame(X).to_csv(path, index=False)  # header "0,1,2"
    message = _error(path)
    assert "line 1 holds '0', '1', '2': the column numbers pandas writes as a header" in message
    assert "Say --header or --no-header" in message
    with_header = read_embeddings(path, header=True)
    np.testing.assert_array_equal(with_header.data, X)
    assert with_header.header == ("0", "1", "2")
    as_data = read_embeddings(path, header=False)
    assert as_data.shape == (5, 3) and as_data.header is None
    wavelengths = tmp_path / "w.csv"
    wavelengths.write_text("400,410,420\n0.5,0.25,1.5\n0.1,0.2,0.3\n")
    assert "whole numbers above rows of decimals" in _error(wavelengths)
    first_row_data = tmp_path / "d.csv"
    first_row_data.write_text("1,2\n3,4\n")
    assert read_embeddings(first_row_data).shape == (2, 2)


def test_a_data_row_is_never_a_header(tmp_path):
    """Before, any first line that failed to parse became the header: one point lost."""
    for content, message in (("1,x,3\n4,5,6\n", "line 1 mixes numbers and text"),
                             ("1_0,2\n3,4\n", "line 1 mixes numbers and text"),
                             ("\u0661,2\n3,4\n", "line 1 mixes numbers and text"),
                             (",1.5,2.5\n1,2,3\n", "line 1 is not a row of numbers: column 1 "
                                                   "is empty"),
                             # A missing value in a file of one column (as pandas writes NaN,
                             # quoted): empty fields name nothing, so not a header either.
                             ('""\n0.5\n', "line 1 is not a row of numbers: column 1 is empty"),
                             (",\n1,2\n", "line 1 is not a row of numbers: column 1 is empty")):
        path = tmp_path / "x.csv"
        path.write_text(content, encoding="utf-8")
        assert message in _error(path), content


def test_bom_crlf_blank_and_comment_lines(tmp_path):
    path = tmp_path / "x.csv"
    text = "# made by hand\r\n\r\na,b,c\r\n" + "".join(
        ",".join(repr(float(v)) for v in row) + "\r\n\r\n" for row in X)
    path.write_bytes(codecs.BOM_UTF8 + text.encode())
    read = read_embeddings(path)
    np.testing.assert_array_equal(read.data, X)
    assert read.header == ("a", "b", "c") and read.header_line == 3
    assert read.encoding == "UTF-8 with BOM" and read.comment_lines == 1
    assert read.blank_lines == 5
    assert "UTF-8 with BOM; header on line 3: a, b, c" in read.describe()
    utf16 = tmp_path / "u.csv"
    utf16.write_bytes(("a,b,c\n" + "1,2,3\n").encode("utf-16"))
    assert read_embeddings(utf16).encoding == "UTF-16"


def test_quoted_fields_as_r_writes_them(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text('"","V1","V2"\n"1",0.5,0.25\n"2",1.5,2.5\n')  # write.csv(df)
    assert "its header is ''" in _error(path)
    read = read_embeddings(path, index_column="drop")
    np.testing.assert_array_equal(read.data, [[0.5, 0.25], [1.5, 2.5]])
    assert read.header == ("V1", "V2")


@pytest.mark.parametrize("content, message", [
    (b"1;2\n3;4\n", "the fields of a .csv here are separated by commas"),
    (b"a,b\n1,2\n3\n", "rows have different numbers of columns: line 3 has 1"),
    (b"a,b,c\n1,2\n", "the header on line 1 names 3 columns, the rows have 2"),
    (b"a,b\n", "a header on line 1 and no rows of numbers"),
    (b"\n\n# only a comment\n", "no rows of numbers, only blank or comment lines"),
    (b"1,2\n\xff\xfe3,4\n", "not UTF-8 text (byte 0xff at offset 4)"),
    (b"1,2\n3,4\n5\x00,6\n", "binary data (NUL bytes), not text"),
    (b"1\x00\x00\x00", "named .csv but holds binary data of an unknown format"),
    (b"a,b\n1,nan\n", "1 non-finite value(s) (1 NaN, 0 inf), the first at line 2, column 2"),
], ids=["semicolons", "ragged", "header width", "header only", "comments only", "latin-1",
        "NUL", "binary", "nan text"])
def test_malformed_csv_is_named(tmp_path, content, message):
    path = tmp_path / "x.csv"
    path.write_bytes(content)
    assert message in _error(path)


def test_non_finite_value_is_located_in_the_file_when_an_index_is_dropped(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text(",a,b\n0,1.5,2.5\n1,0.5,inf\n")
    message = _error(path, index_column="drop")
    assert "the first at line 3, column 3 (inf)" in message


# --- regular files only; the content must be what the name says ------------------------------

def test_a_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "x.csv"
    os.mkfifo(fifo)
    result = {}
    reader = threading.Thread(target=lambda: result.update(message=_error(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading a FIFO waited for a writer"
    assert "is a FIFO (named pipe), not a regular file" in result["message"]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
@pytest.mark.parametrize("name", ["x.npy", "x.csv", "x.npz"])
def test_a_device_behind_a_link_is_refused(tmp_path, device, name):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    link = tmp_path / name
    link.symlink_to(device)
    assert f"{link} is a character device, not a regular file" in _error(link)


def test_a_directory_and_a_broken_link(tmp_path):
    (tmp_path / "d.npy").mkdir()
    assert "is a directory, not a regular file" in _error(tmp_path / "d.npy")
    (tmp_path / "gone.npy").symlink_to(tmp_path / "nowhere.npy")
    assert "no such file (a symbolic link to a missing file)" in _error(tmp_path / "gone.npy")


def test_content_must_match_the_extension(tmp_path):
    np.save(tmp_path / "a.npy", X)
    np.savez(tmp_path / "b.npz", x=X)
    (tmp_path / "npy_as.csv").write_bytes((tmp_path / "a.npy").read_bytes())
    (tmp_path / "npy_as.npz").write_bytes((tmp_path / "a.npy").read_bytes())
    (tmp_path / "npz_as.npy").write_bytes((tmp_path / "b.npz").read_bytes())
    (tmp_path / "csv_as.npy").write_text("1,2\n3,4\n")
    import pickle

    (tmp_path / "pickle.npy").write_bytes(pickle.dumps(X))
    (tmp_path / "empty.npy").write_bytes(b"")
    cases = {
        "npy_as.csv": "named .csv but holds a NumPy .npy array; rename it to .npy",
        "npy_as.npz": "named .npz but holds a NumPy .npy array; rename it to .npy",
        "npz_as.npy": "named .npy but holds a .npz (zip) archive; rename it to .npz",
        "csv_as.npy": "named .npy but holds text",
        "pickle.npy": "holds a Python pickle (never loaded",
        "empty.npy": "the file is empty",
    }
    for name, message in cases.items():
        assert message in _error(tmp_path / name), name


def test_npy_header_is_checked_before_the_data(tmp_path):
    np.save(tmp_path / "x.npy", X)
    whole = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(whole[:-8])
    assert "truncated: its header promises 96 bytes of float64 data (shape (4, 3)), the file " \
           "holds 88" in _error(tmp_path / "cut.npy")
    np.save(tmp_path / "obj.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    assert "expected numbers, found dtype object" in _error(tmp_path / "obj.npy")
    np.save(tmp_path / "rec.npy", np.zeros(3, dtype=[("a", "f8"), ("b", "f8")]))
    assert "expected numbers" in _error(tmp_path / "rec.npy")
    np.save(tmp_path / "3d.npy", np.zeros((2, 2, 2)))
    assert "expected a 2-D array" in _error(tmp_path / "3d.npy")


# --- the command line: one line, exit 2, or a correct value; never a traceback -----------------

def _cli(*argv, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "diversity_core", *argv], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_cli_states_what_it_read(tmp_path, capsys):
    path = tmp_path / "x.csv"
    pd.DataFrame(X, columns=["a", "b", "c"]).to_csv(path)
    assert main(["score", str(path), "--metrics", "vendi"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["score", str(path), "--metrics", "vendi", "--index-column", "drop"]) == 0
    out = capsys.readouterr().out
    assert (f"{path} (4 points x 3 dims; CSV; header on line 1: a, b, c; columns 2-4; column 1 "
            "dropped as an index (--index-column drop))") in out
    assert main(["score", str(path), "--metrics", "vendi", "--index-column", "drop",
                 "--json"]) == 0
    read = json.loads(capsys.readouterr().out)["embeddings"]["read"]
    assert read["header"] == ["a", "b", "c"] and read["columns"] == [2, 4]
    assert read["index_dropped"] == "--index-column drop"


def test_cli_csv_options_need_a_csv(tmp_path, capsys):
    np.save(tmp_path / "x.npy", X)
    assert main(["score", str(tmp_path / "x.npy"), "--no-header"]) == 2
    assert "--no-header applies to .csv files, and none is given" in capsys.readouterr().err


def test_cli_prints_on_an_ascii_terminal(tmp_path):
    """'∫' and a file name that is not UTF-8 on a stdout that only takes ASCII: before, a
    UnicodeEncodeError traceback."""
    name = os.fsdecode(b"na\xffme.npy")
    np.save(tmp_path / "ref.npy", X + 1)
    np.save(os.path.join(tmp_path, name), X)
    env = dict(os.environ, PYTHONIOENCODING="ascii", LANG="C", LC_ALL="C")
    proc = subprocess.run([sys.executable, "-m", "diversity_core", "score",
                           os.fsencode(os.path.join(tmp_path, name)),
                           "--reference", str(tmp_path / "ref.npy")],
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode("ascii")  # only ASCII came out
    assert "integral_0^t_cut (Mag_X - Mag_ref) dt" in out and "na\\udcffme.npy" in out
    proc = subprocess.run([sys.executable, "-m", "diversity_core", "compare",
                           str(tmp_path / "ref.npy"), os.fsencode(os.path.join(tmp_path, name)),
                           "--no-such-option"], capture_output=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.decode("ascii").startswith("error: unrecognized arguments")


def test_cli_device_and_fifo_end_in_one_line(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    (tmp_path / "zero.npy").symlink_to("/dev/zero")
    np.save(tmp_path / "x.npy", X)
    for bad in ("pipe.csv", "zero.npy"):
        proc = _cli("compare", str(tmp_path / "x.npy"), str(tmp_path / bad), timeout=30)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
