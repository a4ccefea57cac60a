"""The package's architecture, as contracts a tool checks: import-linter's contracts in
pyproject.toml (the stages' layers, the leaves, the engine's private modules, no cycles), and
the one rule import-linter cannot see, no room importing another room's private name."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "diversity_core"


def test_import_contracts_are_kept():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint_imports), "--config", str(ROOT / "pyproject.toml")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _wing(module: str) -> str:
    """The room a module belongs to: its wing (``diversity_core.magnitude``), or the package
    itself for the shared leaves at the root, whose private names every wing may read."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else parts[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports_across_rooms(importer: str, source_text: str, *,
                                 is_package: bool = False) -> list[str]:
    """``line: name`` of every private name that the module ``importer`` (its source text)
    imports from another module, and of every private module it imports from another wing."""
    package = importer if is_package else importer.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source_text)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if not source.startswith("diversity_core"):
            continue
        for alias in node.names:
            target = f"{source}.{alias.name}"
            is_module = (PACKAGE.parent / Path(*target.split("."))).with_suffix(".py").exists()
            owner = target if is_module else source
            # A private module is its wing's (the root's leaves: everyone's); a private name is
            # its module's own, except among the private modules of one wing (the engine's
            # _space, _solver, _search, ...: the wing's internals, which share their helpers).
            private_module = (_wing(owner) not in (_wing(importer), "diversity_core")
                              and any(_private(p) for p in owner.split(".")[1:]))
            internals = (_wing(owner) == _wing(importer) and _private(owner.split(".")[-1])
                         and _private(importer.split(".")[-1]))
            if private_module or (not is_module and _private(alias.name) and not internals):
                found.append(f"{node.lineno}: {target}")
    return found


def test_no_room_imports_another_rooms_private_names():
    found = [f"{path.relative_to(ROOT)}:{hit}" for path in sorted(PACKAGE.rglob("*.py"))
             for hit in private_imports_across_rooms(
                 _module_name(path), path.read_text(encoding="utf-8"),
                 is_package=path.name == "__init__.py")]
    assert found == []


@pytest.mark.parametrize("source, expected", [
    ("from ..magnitude._space import MagnitudeSpace\n", 1),  # a private module of another wing
    ("from ..magnitude.sets import _bar\n", 1),              # a private name of another wing
    ("from ..magnitude import sets\n", 0),
    ("from ..magnitude import _batch\n", 1),
    ("from .._validation import check_embeddings\n", 0),     # the shared leaves are everyone's
    ("from .protocol import _fallback_note\n", 1),           # another module's private name
    ("from ..magnitude._common import MemberWarning\n", 1),  # another wing's private module
    ("from ._common import MemberWarning\n", 0),             # a private module of its own wing
])
def test_the_private_name_rule_sees_what_it_should(source, expected):
    found = private_imports_across_rooms("diversity_core.comparison.probe", source)
    assert len(found) == expected, found


def test_the_wings_are_reached_from_the_package_without_importing_torch():
    """``dc.embed.embed_texts`` and ``dc.files.read_texts`` work after ``import diversity_core``
    alone, and that import loads neither torch nor Snakemake."""
    code = ("import sys, diversity_core as dc; heavy = {'torch', 'snakemake'} & set(sys.modules); "
            "assert not heavy, heavy; "
            "assert callable(dc.embed.embed_texts) and callable(dc.files.read_texts); "
            "assert callable(dc.comparison.score) and dc.measures.MEASURES; "
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def _imported(code: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after running ``code``."""
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                           "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"],
                          capture_output=True, text=True, check=True)
    return set(done.stdout.split())


# What each import may not pull in: every rule script's job and every Snakemake invocation (its
# configuration check) pays for what these imports load (scikit-learn 1.5 CPU s, pandas 0.5,
# networkx 0.2, torch 2.6; the imports of a job using the engine took 1.15 CPU s while the
# package root imported the engine and pandas, 0.72 s since).
HEAVY = {"torch", "sklearn", "pandas", "networkx", "matplotlib", "snakemake"}


@pytest.mark.parametrize("code, allowed", [
    ("import diversity_core", set()),  # the root's names are imported when first asked for
    ("import diversity_core.provenance, diversity_core.atomic", set()),  # every job's records
    ("from diversity_core import reference_free_t_cut", set()),  # the engine alone
    # the configuration checks of the Snakefile (common.smk's CONFIG_CHECKS)
    ("import diversity_core.magnitude.settings, diversity_core.experiments.curvature, "
     "diversity_core.experiments.text_temperature, diversity_core.experiments.image_mode_dropping,"
     " diversity_core.experiments.graph_mode_collapse, "
     "diversity_core.experiments.model_distinguishing", {"pandas"}),
])
def test_imports_stay_light(code, allowed):
    assert _imported(code) & HEAVY <= allowed


def test_the_package_roots_names_are_there_when_asked_for():
    import diversity_core as dc

    assert set(dc.__all__) <= set(dir(dc))
    for name in dc.__all__:
        assert getattr(dc, name) is not None
    assert dc.compare is dc.comparison.compare and dc.vendi_score is dc.measures.vendi_score
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        dc.nonesuch  # noqa: B018


def test_the_private_modules_of_one_wing_share_their_internals():
    assert private_imports_across_rooms("diversity_core.magnitude._batch",
                                        "from ._search import _initial_scale\n") == []
    assert private_imports_across_rooms("diversity_core.magnitude.api",
                                        "from ._search import _initial_scale\n") == [
        "1: diversity_core.magnitude._search._initial_scale"]  # a public module: its own names
