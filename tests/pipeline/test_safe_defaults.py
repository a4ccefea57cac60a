"""The README's tiny command is safe: run as written in a fresh clone, it writes to .test/ and
leaves the committed results/ as they are."""

from __future__ import annotations

import glob

import pytest
import yaml
from workflow_runner import REPO, clean_copy, git, run_snakemake

pytestmark = pytest.mark.slow


def test_tiny_configurations_write_to_their_own_folders():
    """Every tiny configuration (and each overlay of a paper configuration for the rehearsal)
    names its own results and resources folders under .test/, both git-ignored."""
    for path in sorted(glob.glob(str(REPO / ".test" / "*.yaml"))):
        config = yaml.safe_load(open(path, encoding="utf-8"))
        assert config.get("results_dir") == ".test/results", path
        assert config.get("resources_dir") == ".test/resources", path
    ignored = git("check-ignore", ".test/results/x", ".test/resources/x", "results_paper/x",
                  cwd=REPO).split()
    assert ignored == [".test/results/x", ".test/resources/x", "results_paper/x"]


def test_paper_configurations_keep_the_committed_results():
    """A paper configuration writes beside results/ (which holds the default configuration's)."""
    for path in sorted(glob.glob(str(REPO / "configs" / "*.yaml"))):
        config = yaml.safe_load(open(path, encoding="utf-8"))
        assert config.get("results_dir") == "results_paper", path


def test_readme_tiny_command_leaves_results_untouched(tmp_path):
    clone = clean_copy(tmp_path / "clone")
    # As written in the README (through this interpreter's Snakemake, on 2 cores).
    run_snakemake("curvature", "--configfile", ".test/config_curvature.yaml", cwd=clone)
    assert git("status", "--porcelain", "--ignored", "results/", cwd=clone) == ""
    outputs = clone / ".test" / "results" / "curvature"
    assert (outputs / "table1.csv").stat().st_size > 0
    assert (outputs / "figure2.png").stat().st_size > 0
    # Everything the run wrote lies in git-ignored folders: the clone's tree is unchanged.
    assert git("status", "--porcelain", cwd=clone) == ""
