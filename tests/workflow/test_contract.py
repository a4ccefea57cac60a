"""The strict contract between every rule and its script (scripts/_contract.py): every named input,
output and param of every rule of every experiment is a parameter of the script's ``main`` with
the matching role and no default, and ``main`` needs nothing the rule does not give.

The workflow is parsed with Snakemake's own API, once per configuration that defines other rules
(the default one, the paper's text configuration whose ``text.data: tevet_berant`` swaps the
generation rules for the download of Tevet & Berant's release, and one whose Table 1 has a
measure besides MagArea)."""

import importlib.util
import sys
from pathlib import Path

import pytest
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from workflow_runner import REPO

sys.path.insert(0, str(REPO / "scripts"))
import _contract  # noqa: E402

sys.path.pop(0)

# Configurations that between them define every rule (tests/workflow/test_contract.py checks that
# none is left out: every script in scripts/ is some rule's).
CONFIGURATIONS = {"default": [], "paper text": [REPO / "configs" / "paper_text_temperature.yaml"],
                  "curvature measures": [REPO / ".test" / "curvature_measures.yaml"]}


def _rules(configfiles):
    """(rule name, script path, {group: [names]}, {group: unnamed count}) of every rule that
    runs a script."""
    settings = ConfigSettings(configfiles=configfiles)
    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        workflow = api.workflow(resource_settings=ResourceSettings(), config_settings=settings,
                                snakefile=REPO / "Snakefile", workdir=REPO)._workflow
        out = []
        for rule in workflow.rules:
            if not rule.script:
                continue
            named, unnamed = {}, {}
            for group, items in (("input", rule.input), ("output", rule.output),
                                 ("params", rule.params)):
                named[group] = list(items._names)
                covered = set()
                for start, end in items._names.values():
                    covered.update(range(start, end if end is not None else start + 1))
                unnamed[group] = len(items) - len(covered)
            script = (Path(rule.snakefile).parent / rule.script).resolve()
            out.append((rule.name, script, named, unnamed))
    return out


@pytest.fixture(scope="module")
def every_rule():
    rules = {}
    for configfiles in CONFIGURATIONS.values():
        for name, script, named, unnamed in _rules(configfiles):
            rules[(name, script.name)] = (script, named, unnamed)
    return rules


def _main_of(script: Path):
    sys.path.insert(0, str(script.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"_contract_{script.stem}", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module.main


def test_every_rule_matches_its_script(every_rule):
    problems = []
    for (rule, _), (script, named, unnamed) in sorted(every_rule.items()):
        found = _contract.contract_problems(_main_of(script), named, unnamed)
        problems += [f"rule {rule} ({script.name}): {p}" for p in found]
    assert not problems, "\n".join(problems)
    # Every rule script is some rule's, so none escapes the check.
    scripts = {script.name for script, _, _ in every_rule.values()}
    assert scripts == {p.name for p in (REPO / "scripts").glob("[!_]*.py")}
