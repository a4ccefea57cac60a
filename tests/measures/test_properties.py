"""Property-based tests (Hypothesis) of the public measures and the command line.

Inputs: random shapes, integer-valued points (so duplicates and constant columns are common and
scaling is well conditioned) multiplied by 10^k for k from -300 to 300, and optionally one NaN or
inf. Invariants:

* a public function returns a finite float or raises ``ValueError``, nothing else;
* the scale-invariant measures (cosine ones, IsoScore, PRDC, MMD-RBF, MagArea on cosine
  distances) give the same value at every scale, and are defined at every scale or at none;
  GMStds scales with the data;
* ``python -m diversity_core score`` exits 0 only with finite numbers equal to the public
  functions' values, and otherwise exits 2 with one ``error:`` line naming the file; never a
  traceback;
* the CSV reader, on files written by ``numpy.savetxt`` and pandas ``to_csv`` with and without a
  header and an index column, a BOM, blank lines, CRLF and values that look like headers
  (whole numbers, ``1e5``) or are ``nan``, returns exactly the array written or refuses in one
  line naming the option that decides; a BOM, blank lines and CRLF change nothing.
"""

import contextlib
import io
import json
import math
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import diversity_core as dc
from diversity_core.cli.main import main

SETTINGS = settings(max_examples=int(__import__("os").environ.get("HYP_N", 60)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def embeddings(draw, min_points=1, max_points=14, n_features=None, exact=False):
    """(base, scale): small integers, so that base * scale is as well conditioned as base.
    ``exact``: the scale is a power of two from 2^-990 to 2^990 (1e-298 to 1e298), so that
    base * scale is exact: ties between distances stay ties (PRDC's balls are strict)."""
    n = draw(st.integers(min_points, max_points))
    d = n_features or draw(st.integers(1, 5))
    base = draw(hnp.arrays(np.float64, (n, d), elements=st.integers(-4, 4).map(float)))
    if draw(st.booleans()):  # duplicate rows
        rows = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n))
        base = np.vstack([base, base[rows]])
    if exact:
        return base, 2.0 ** draw(st.integers(-990, 990))
    return base, 10.0 ** draw(st.integers(-300, 300))


def _value_or_error(f, X):
    """f(X) as ("value", v) or ("error", message); any other exception fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # IsoScore's sample-size note
        try:
            value = f(X)
        except ValueError as err:
            return "error", str(err)
    assert isinstance(value, float) and math.isfinite(value), (f, value)
    return "value", value


def _magarea_cosine(X):
    D = dc.pairwise_distances(X, "cosine")
    return dc.mag_area(D, dc.convergence_scale(D))


SCALE_INVARIANT = {
    "vendi": (dc.vendi_score, 1e-9, 1e-12),
    "avgsim": (dc.avg_sim, 0.0, 1e-12),
    "dcscore": (dc.dc_score, 1e-9, 1e-12),
    "isoscore": (dc.iso_score, 1e-7, 1e-9),
    "magarea_cosine": (_magarea_cosine, 1e-6, 0.0),
}


@SETTINGS
@given(embeddings())
def test_scale_invariant_measures_do_not_see_the_scale(data):
    base, scale = data
    for name, (f, rtol, atol) in SCALE_INVARIANT.items():
        expected = _value_or_error(f, base)
        got = _value_or_error(f, base * scale)
        assert got[0] == expected[0], (name, scale, expected, got)
        if got[0] == "value":
            assert got[1] == pytest.approx(expected[1], rel=rtol, abs=atol), (name, scale)


@SETTINGS
@given(embeddings(min_points=2))
def test_gm_stds_scales_with_the_data(data):
    base, scale = data
    expected = _value_or_error(dc.gm_stds, base)
    got = _value_or_error(dc.gm_stds, base * scale)
    assert expected[0] == "value"
    if expected[1] == 0.0:  # a constant feature: 0 at every scale
        assert got == ("value", 0.0)
    elif got[0] == "value":
        assert got[1] == pytest.approx(expected[1] * scale, rel=1e-9)
    else:  # only when the value leaves the float64 range
        assert not 1e-307 < expected[1] * scale < 1e307, got


def _magarea_euclidean(X):
    D = dc.pairwise_distances(X)
    return dc.mag_area(D, dc.convergence_scale(D))


@SETTINGS
@given(embeddings(min_points=2))
def test_euclidean_magarea_scales_inversely(data):
    """Mag_{sX}(t) = Mag_X(st): with its own convergence scale, MagArea(sX) = MagArea(X) / s."""
    base, scale = data
    expected = _value_or_error(_magarea_euclidean, base)
    got = _value_or_error(_magarea_euclidean, base * scale)
    assert got[0] == expected[0], (scale, expected, got)
    if got[0] == "value":
        assert got[1] == pytest.approx(expected[1] / scale, rel=1e-6)


@SETTINGS
@given(embeddings(min_points=3, n_features=3, exact=True),
       embeddings(min_points=3, n_features=3), st.integers(1, 3))
def test_reference_based_measures_do_not_see_the_scale(data_x, data_y, k):
    (X, scale), (Y, _) = data_x, data_y
    for f, rtol in ((lambda A, B: dc.prdc(B, A, k), 0.0), (dc.mmd_rbf, 1e-9)):
        expected = _value_or_error(lambda A, f=f: _flat(f(A, Y)), X)
        got = _value_or_error(lambda A, f=f: _flat(f(A, Y * scale)), X * scale)
        assert got[0] == expected[0]
        if got[0] == "value":
            assert got[1] == pytest.approx(expected[1], rel=rtol, abs=1e-12)


def _flat(value):
    return float(sum(value.values())) if isinstance(value, dict) else value


@SETTINGS
@given(embeddings(min_points=2), st.sampled_from([np.nan, np.inf, -np.inf]), st.data())
def test_non_finite_input_is_a_named_error(data, bad, draw):
    X = data[0] * data[1]
    i = draw.draw(st.integers(0, X.shape[0] - 1))
    j = draw.draw(st.integers(0, X.shape[1] - 1))
    X[i, j] = bad
    for f in (dc.vendi_score, dc.avg_sim, dc.gm_stds, dc.iso_score, dc.dc_score,
              lambda A: dc.pairwise_distances(A, "cosine"), dc.pairwise_distances,
              lambda A: dc.mmd_linear(A, A), lambda A: dc.prdc(A, A, 1)):
        kind, message = _value_or_error(f, X)
        assert kind == "error" and "non-finite" in message


# --------------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------------

def _write(A: np.ndarray, folder: Path, name: str, fmt: str) -> Path:
    path = folder / f"{name}.{fmt}"
    if fmt == "npy":
        np.save(path, A)
    elif fmt == "npz":
        np.savez(path, emb=A)
    else:
        # A header of names: a first line of numbers could be a header too (see the CSV
        # properties below), which this test is not about.
        np.savetxt(path, A, delimiter=",", fmt="%.17g", comments="",
                   header=",".join(f"c{j}" for j in range(A.shape[1])))
    return path


def _library_values(X, R):
    """What the CLI must print: the public functions on the same arrays (None: undefined)."""
    def get(f, *args):
        kind, value = _value_or_error(lambda _: f(*args), None)
        return value if kind == "value" else None

    out = {"vendi": get(dc.vendi_score, X), "avgsim": get(dc.avg_sim, X),
           "gmstds": get(dc.gm_stds, X), "isoscore": get(dc.iso_score, X),
           "dcscore": get(dc.dc_score, X)}
    if R is not None:
        out["mmd_rbf"] = get(dc.mmd_rbf, X, R)
        out["mmd_linear"] = get(dc.mmd_linear, X, R)
    return out


@SETTINGS
@given(embeddings(n_features=3), st.one_of(st.none(), embeddings(n_features=3)),
       st.sampled_from(["npy", "npz", "csv"]),
       st.one_of(st.none(), st.sampled_from([np.nan, np.inf])), st.data())
def test_command_line_exits_0_with_correct_finite_numbers_or_2_naming_the_file(
        data_x, data_r, fmt, bad, draw):
    X = data_x[0] * data_x[1]
    R = None if data_r is None else data_r[0] * data_x[1]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        broken = None
        if bad is not None:  # one non-finite value, in the embeddings or the reference
            target = X if R is None or draw.draw(st.booleans()) else R
            target[draw.draw(st.integers(0, len(target) - 1)),
                   draw.draw(st.integers(0, target.shape[1] - 1))] = bad
            broken = "x" if target is X else "r"
        x_path = _write(X, folder, "x", fmt)
        argv = ["score", str(x_path), "--json"]
        if R is not None:
            argv += ["--reference", str(_write(R, folder, "r", fmt)),
                     "--metrics", "vendi,avgsim,gmstds,isoscore,dcscore,mmd,prdc,magdiff",
                     "--k", "2"]
        else:
            argv += ["--metrics", "vendi,avgsim,gmstds,isoscore,dcscore,magarea"]
        out_file, err_file = folder / "out.txt", folder / "err.txt"
        with open(out_file, "w") as out, open(err_file, "w") as err, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
        stdout, stderr = out_file.read_text(), err_file.read_text()
    assert rc in (0, 2)
    assert "Traceback" not in stderr
    if rc == 0:
        assert stderr == "", stderr  # no stray warnings either
    if broken is not None:
        assert rc == 2 and stderr.startswith("error: ") and stderr.count("\n") == 1
        assert f"{broken}.{fmt}" in stderr and "non-finite" in stderr
        return
    if rc == 2:
        assert stderr.startswith("error: no requested measure is defined"), stderr
        return
    result = json.loads(stdout, parse_constant=lambda c: pytest.fail(f"JSON holds {c}"))
    expected = _library_values(X, R)
    for name, value in expected.items():
        where = "embeddings" if name in result["scores"]["embeddings"] else "comparison"
        got = result["scores"][where][name]
        if value is None:
            assert got is None and name in result["undefined"][where]
        else:
            assert got == pytest.approx(value, rel=1e-12, abs=1e-15), name


# --------------------------------------------------------------------------------------------
# the CSV reader (diversity_core.files.embeddings): what was written, or a one-line refusal
# --------------------------------------------------------------------------------------------

# Values that look like other things: whole numbers (header-like), 1e5, tiny and huge ones.
CSV_VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-3, 12).map(float),
    st.sampled_from([1e5, -1e5, 1e-5, 0.5, 100.0, 5e-324, 1.7976931348623157e308]),
)
WRITERS = ("savetxt %.17g", "savetxt %.18e", "savetxt # header", "pandas")


@st.composite
def csv_files(draw):
    """(bytes, truth): a CSV as numpy.savetxt or pandas write it, with or without a header
    (names, or pandas' 0..d-1) and an index column, then maybe a UTF-8 BOM, CRLF line ends,
    blank lines, and one value replaced by NaN (``nan`` text, or an empty field from pandas).
    ``truth``: the array, whether a header / an index was written, and the NaN's line."""
    n = draw(st.integers(1, 8))
    d = draw(st.integers(1, 4))
    X = draw(hnp.arrays(np.float64, (n, d), elements=CSV_VALUES))
    writer = draw(st.sampled_from(WRITERS))
    header = draw(st.sampled_from([None, "names", "numbers"]))
    index = writer == "pandas" and draw(st.booleans())
    if index and header is None and n < 2:
        index = False  # one row cannot show an index (documented)
    nan_at = draw(st.one_of(st.none(), st.tuples(st.integers(0, n - 1), st.integers(0, d - 1))))
    written = X.copy()
    if nan_at is not None:
        written[nan_at] = np.nan
    names = ([f"dim_{j}" for j in range(d)] if header == "names" else
             [str(j) for j in range(d)] if header == "numbers" else None)
    if writer == "pandas":
        text = pd.DataFrame(written, columns=names).to_csv(index=index,
                                                           header=header is not None)
        lines = text.splitlines()
        kinds = (["header"] if header else []) + [f"row {i}" for i in range(n)]
    else:
        fmt = "%.17g" if writer == "savetxt %.17g" else "%.18e"
        buffer = io.StringIO()
        if writer == "savetxt # header":  # the header goes behind '# ': a comment
            np.savetxt(buffer, written, delimiter=",", fmt=fmt,
                       header=",".join(names or ["a"] * d))
            header = None
            kinds = ["comment"] + [f"row {i}" for i in range(n)]
        else:
            np.savetxt(buffer, written, delimiter=",", fmt=fmt, comments="",
                       header=",".join(names) if names else "")
            kinds = (["header"] if names else []) + [f"row {i}" for i in range(n)]
        lines = buffer.getvalue().splitlines()
    assert len(lines) == len(kinds), (lines, kinds)
    out, nan_line = [], None
    for line, kind in zip(lines, kinds, strict=True):
        for _ in range(draw(st.integers(0, 2))):  # blank lines, anywhere
            out.append(draw(st.sampled_from(["", "  ", "\t"])))
        out.append(line)
        if nan_at is not None and kind == f"row {nan_at[0]}":
            nan_line = len(out)
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    raw = (ending.join(out) + ending).encode()
    if draw(st.booleans()):
        raw = b"\xef\xbb\xbf" + raw
    truth = {"X": X, "header": header is not None, "index": index, "nan_line": nan_line}
    return raw, truth


def _read_with_retries(path, truth):
    """read_embeddings, answering each refusal about a header or an index with the truth (as a
    user would with --header/--no-header and --index-column) after checking that the refusal
    is one of the documented ones; returns the file read or the final InputError."""
    from diversity_core.files.embeddings import InputError, read_embeddings

    options = {}
    for _ in range(3):
        try:
            return read_embeddings(path, **options)
        except InputError as err:
            message = str(err)
            assert "\n" not in message and message.startswith(str(path)), message
            if "A header or a row of data?" in message and "header" not in options:
                options["header"] = truth["header"]
            elif "looks like an index" in message and "index_column" not in options:
                options["index_column"] = "drop" if truth["index"] else "keep"
            else:
                return err
    pytest.fail(f"still refused after answering: {options}")


@SETTINGS
@given(csv_files())
def test_csv_reader_reads_what_was_written_or_refuses_in_one_line(case):
    """Never a silently different array: without options the reader returns exactly what was
    written (header and index recognised), or refuses in one line saying which option decides;
    answered truthfully, it reads exactly what was written. A NaN is refused naming its line."""
    raw, truth = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.csv"
        path.write_bytes(raw)
        got = _read_with_retries(path, truth)
    if truth["nan_line"] is not None:
        assert isinstance(got, ValueError), "a NaN was read as a number"
        assert f"line {truth['nan_line']}" in str(got), (str(got), truth["nan_line"])
        assert "non-finite" in str(got) or "is empty" in str(got)
        return
    assert not isinstance(got, ValueError), str(got)
    assert got.data.shape == truth["X"].shape
    np.testing.assert_array_equal(got.data, truth["X"])
    assert (got.header is not None) == truth["header"]
    assert (got.index_dropped is not None) == truth["index"]
    assert got.encoding == ("UTF-8 with BOM" if raw.startswith(b"\xef\xbb\xbf") else "UTF-8")


@SETTINGS
@given(csv_files())
def test_csv_reader_decides_the_same_without_bom_blank_lines_or_crlf(case):
    """A BOM, blank lines and CRLF line ends change nothing but the line numbers."""
    from diversity_core.files.embeddings import InputError, read_embeddings

    raw, _ = case
    plain = raw.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n")
    plain = b"\n".join(line for line in plain.split(b"\n") if line.strip()) + b"\n"
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, content in enumerate((raw, plain)):
            path = Path(tmp) / f"{i}.csv"
            path.write_bytes(content)
            try:
                outcomes.append(read_embeddings(path).data)
            except InputError as err:
                outcomes.append(re.sub(r"line \d+|\S+\.csv", "", str(err)))
    if isinstance(outcomes[0], str) or isinstance(outcomes[1], str):
        assert outcomes[0] == outcomes[1]
    else:
        np.testing.assert_array_equal(outcomes[0], outcomes[1])
