# Helpers shared by every workflow file: the configuration checked whole before any value is
# used (check_config_first, called below before RESULTS and RESOURCES are computed), its types
# and cross-key checks, paths, seeds and the per-experiment target list.

import importlib
import math
import os
import re
import reprlib
import sys
import unicodedata
from pathlib import Path

import jsonschema
import yaml
from snakemake.utils import validate

CONFIG_SCHEMA_FILE = "workflow/schemas/config.schema.yaml"
# A configuration whose YAML expands (through anchors and aliases) past this many times the
# bytes of its files and command line, plus CONFIG_EXPANSION_FLOOR, is refused before anything
# walks it: a "billion laughs" file of 420 bytes expands to 10^8 values, and every walk of it
# (validation, an error message quoting it) would take minutes and print megabytes.
CONFIG_EXPANSION_FACTOR = 10
CONFIG_EXPANSION_FLOOR = 64 * 1024
# Folders a run may not write into, nor below (resolved, links followed) ...
SYSTEM_FOLDERS = tuple(str(Path(os.sep, *name.split())) for name in (
    "proc", "sys", "dev", "run", "boot", "etc", "usr", "bin", "sbin", "lib", "lib32", "lib64",
    "libx32", "snap", "var lib", "var log", "var run", "var cache", "var spool", "var mail"))
# ... and folders a run may write below but that may not be results_dir or resources_dir
# themselves (the home folder and the working directory and their parents are added).
# (Built from names: `snakemake --lint` reads a literal absolute path as a non-portable input.)
SHARED_FOLDERS = tuple(str(Path(os.sep, *name.split())) for name in (
    "", "home", "root", "tmp", "var", "var tmp", "opt", "srv", "mnt", "media", "usr local"))


def check_config_first(config, schema_file=CONFIG_SCHEMA_FILE):
    """The configuration checked whole before any value of it is used, the results and
    resources folders included; each stage stops the run with one line per problem naming the
    key, the value and what is allowed (never the schema, never the expanded instance):

    1. its size once expanded (CONFIG_EXPANSION_FACTOR): Snakemake has parsed the YAML already
       (`--configfile` in its command line, `configfile:` in the Snakefile, `--config` values),
       with PyYAML, whose aliases share one object, so parsing a "billion laughs" is quick;
       what is slow is walking it, which starts here;
    2. the schema (types, ranges, patterns, unknown keys), then Snakemake's `validate`, which
       fills the defaults (and now passes); with it, every text of the configuration (keys
       included) free of control and invisible characters (text_problems);
    3. the folders (folder_problems) and the pins of text_assets (pin_problems).

    Snakemake parses the `--configfile` files before any of this runs: a file it cannot parse
    (bad UTF-8, a YAML error) stops the run with Snakemake's own message, and a FIFO given as
    a configuration file blocks it before the workflow starts; a key written twice in one
    mapping is refused here (duplicate_key_problems), since YAML keeps the last silently.
    """
    _refuse(_expansion_problems(config) + duplicate_key_problems())
    schema = read_yaml(schema_file)
    coerce_config_types(config, schema)
    invisible = text_problems(config)
    _refuse([line for _, line in invisible] + [
        line for line in schema_problems(config, schema)
        if not any(line.startswith(f"{key}:") for key, _ in invisible)])
    validate(config, str(Path(workflow.basedir) / schema_file))
    _refuse(folder_problems(config) + pin_problems(config))


def duplicate_key_problems(files=None):
    """One line per key written twice in one mapping of a `--configfile` file (YAML, and
    Snakemake, keep the last one silently), naming the file, the line and the key. Only regular
    files are read again (Snakemake has read them all already)."""
    problems = []
    for name in files if files is not None else getattr(workflow, "configfiles", []) or []:
        try:
            if not os.path.isfile(name):
                continue
            with open(name, "rb") as stream:
                root = yaml.compose(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            continue  # Snakemake has said so, or read it otherwise
        seen, todo = set(), [root]
        while todo:  # each node once: aliases share a node
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                keys = {}
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode) and key.value in keys and key.tag != \
                            "tag:yaml.org,2002:merge":
                        problems.append(
                            f"{name}, line {key.start_mark.line + 1}: the key {_short(key.value)}"
                            f" is written twice in one mapping (also line {keys[key.value]}; "
                            "the last would silently win); allowed: each key once")
                    elif isinstance(key, yaml.ScalarNode):
                        keys[key.value] = key.start_mark.line + 1
                    todo += [key, value]
            elif isinstance(node, yaml.SequenceNode):
                todo += node.value
    return problems


def _refuse(problems):
    """Stop the run with one line per problem (no traceback: the lines say all)."""
    if problems:
        print(f"invalid configuration ({len(problems)} problem{'s' * (len(problems) > 1)}):\n  "
              + "\n  ".join(problems), file=sys.stderr)
        sys.exit(1)


def _expansion_problems(config):
    """[the problem] when the configuration, written out, would exceed its limit (see
    CONFIG_EXPANSION_FACTOR); counted without building the text, and stopped at the limit."""
    source = sum(len(arg) for arg in sys.argv)
    for path in getattr(workflow, "configfiles", []) or []:
        try:
            source += os.path.getsize(path)
        except OSError:
            pass
    limit = CONFIG_EXPANSION_FACTOR * source + CONFIG_EXPANSION_FLOOR
    size, todo = 0, [config]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            size += 2 + sum(len(str(key)) + 4 for key in value)
            todo.extend(value.values())
        elif isinstance(value, (list, tuple)):
            size += 2 + 2 * len(value)
            todo.extend(value)
        else:
            size += len(value) if isinstance(value, (str, bytes)) else 8
        if size > limit:
            return [f"the configuration expands past {limit:,} bytes, {CONFIG_EXPANSION_FACTOR} "
                    f"times the {source:,} bytes of its files and command line (YAML aliases "
                    "repeating aliases: a \"billion laughs\"); allowed: a configuration that "
                    "writes out at most that large. Not read further."]
    return []


_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlevel = 60, 60, 2
_SHORT.maxdict, _SHORT.maxlist = 4, 4


def _short(value):
    """A value for a message: bounded whatever it holds (never the expanded instance)."""
    if isinstance(value, (bytes, bytearray)):
        return f"binary data ({len(value):,} bytes, a YAML !!binary)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    return _SHORT.repr(value)


def _json_type(value):
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            type(None): "null", dict: "a mapping", list: "a list", bytes: "binary data"}.get(
        type(value), type(value).__name__)


def _number(value):
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _allowed(node):
    """What a schema node allows, in words ("an integer from 0 to 10,000", "one of a, b")."""
    if "x-allowed" in node:
        return node["x-allowed"]
    if "enum" in node:
        return "one of " + ", ".join(_short(v) for v in node["enum"])
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    words = []
    if "integer" in types or "number" in types:
        kind = "an integer" if "integer" in types else "a number"
        low = [(">=", node["minimum"])] if "minimum" in node else (
            [(">", node["exclusiveMinimum"])] if "exclusiveMinimum" in node else [])
        high = [("<=", node["maximum"])] if "maximum" in node else (
            [("<", node["exclusiveMaximum"])] if "exclusiveMaximum" in node else [])
        if low and high and low[0][0] == ">=" and high[0][0] == "<=":
            words.append(f"{kind} from {_number(low[0][1])} to {_number(high[0][1])}")
        else:
            words.append(f"{kind} " + " and ".join(f"{op} {_number(v)}" for op, v in low + high))
    if "string" in types:
        words.append("text" + (f" matching {node['pattern']}" if "pattern" in node else ""))
    if "boolean" in types:
        words.append("true or false")
    if "array" in types:
        words.append("a list")
    if "object" in types:
        words.append("a mapping")
    if "null" in types:
        words.append("null")
    return " or ".join(words) or "see workflow/schemas/config.schema.yaml"


def _key(path):
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the configuration"


def schema_problems(config, schema):
    """One line per violation of the schema, each naming the key, the value and what is
    allowed (built here from jsonschema's errors: their own messages quote the whole instance
    and Snakemake's add the whole schema)."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    problems = []
    for error in sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in
                                                                      e.absolute_path]):
        key, node, value = _key(error.absolute_path), error.schema, error.instance
        kind = error.validator
        if "propertyNames" in error.schema_path:
            problems.append(f"{key}: the key {_short(value)} is not allowed; allowed: "
                            f"{_allowed(node)}")
        elif kind == "additionalProperties" and isinstance(value, dict):
            known = sorted(node.get("properties", {}))
            for extra in sorted(set(value) - set(known), key=str):
                problems.append(f"{_key([*error.absolute_path, extra])}: unknown key; "
                                f"allowed: {', '.join(known) if known else 'no key'}")
        elif kind == "required" and isinstance(value, dict):
            for missing in error.validator_value:
                if missing not in value:
                    problems.append(f"{_key([*error.absolute_path, missing])}: missing; "
                                    f"{key} needs it")
        elif kind == "type":
            problems.append(f"{key}: {_short(value)} is {_json_type(value)}; allowed: "
                            f"{_allowed(node)}")
        elif kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum",
                      "pattern", "minLength", "maxLength"):
            problems.append(f"{key}: {_short(value)} is not allowed; allowed: {_allowed(node)}")
        elif kind in ("minItems", "maxItems", "minProperties", "uniqueItems"):
            what = {"minItems": f"at least {error.validator_value} item(s)",
                    "maxItems": f"at most {error.validator_value} item(s)",
                    "minProperties": f"at least {error.validator_value} entry(ies)",
                    "uniqueItems": "no repeated item"}[kind]
            problems.append(f"{key}: {_short(value)} is not allowed; allowed: a list with "
                            f"{what}" if kind != "minProperties" else
                            f"{key}: {_short(value)} is not allowed; allowed: a mapping with "
                            f"{what}")
        else:
            problems.append(f"{key}: {_short(value)} is not allowed ({kind} "
                            f"{_short(error.validator_value)})")
    return problems


def text_problems(config):
    """``[(key, line)]``: one line for each text of the configuration, a key or a value, that
    holds a control or invisible character (``diversity_core.assets.verify.forbidden_character``,
    the one check of every name from outside; invisible or look-alike in a name, such a
    character makes a folder or a pin that reads as another, "results\u200b" beside
    "results"), naming it (``key``: the key it concerns, whose schema problems it replaces)."""
    from diversity_core.assets.verify import forbidden_character

    problems, todo = [], [((), config)]
    while todo:
        path, value = todo.pop()
        items = (value.items() if isinstance(value, dict) else
                 enumerate(value) if isinstance(value, list) else ())
        for name, item in items:
            todo.append(((*path, name), item))
            for text, what in ((name, "the key"), (item, "the value")):
                found = forbidden_character(text) if isinstance(text, str) else None
                if found:
                    key = _key((*path, name)) if what == "the value" else _key(path)
                    i, char = found
                    name_of = unicodedata.name(char, f"a {unicodedata.category(char)} character")
                    problems.append((_key((*path, name)), (
                        f"{key}: {what} {_short(text)} holds U+{ord(char):04X} ({name_of}) at "
                        f"position {i}, a control or invisible character; allowed: text "
                        "without one (retype it)")))
    return sorted(set(problems))


def folder_problems(config):
    """results_dir and resources_dir: each a folder (or one that can be made) in a writable
    place, not a system place (SYSTEM_FOLDERS, or one of SHARED_FOLDERS, the home folder, the
    working directory or a folder above it), and the two distinct, neither inside the other."""
    problems, real = [], {}
    home = os.path.realpath(os.path.expanduser("~"))
    here = os.path.realpath(os.getcwd())
    above_here = {here} | {str(p) for p in Path(here).parents}
    allowed = "a folder of your own, writable, distinct from the other (default results, "\
              "resources)"
    for key in ("results_dir", "resources_dir"):
        value = config[key]
        if value.startswith("~") or "$" in value:
            # Neither the shell (inside --config key=value) nor Snakemake expands them: a
            # folder named "~" or "$HOME" would be made in the working directory.
            written = os.path.expandvars(os.path.expanduser(value))
            problems.append(f"{key}: {_short(value)} "
                            f"{'starts with ~' if value.startswith('~') else 'holds $'}"
                            ", which is not expanded here (a folder of that name would be made); "
                            "allowed: the path written out"
                            + (f", such as {_short(written)}" if written != value else ""))
            real[key] = value
            continue
        path = os.path.realpath(value)
        real[key] = path
        shown = f"{key}: {_short(value)}" + (f" (that is {path})" if path != value else "")
        system = [f for f in SYSTEM_FOLDERS if Path(path).is_relative_to(f)]
        if system:
            problems.append(f"{shown} lies in {system[0]}, a system place; allowed: {allowed}")
            continue
        if path in SHARED_FOLDERS or path == home or path in above_here:
            what = ("the working directory" if path == here else
                    "a folder above the working directory" if path in above_here else
                    "your home folder" if path == home else "a shared system folder")
            problems.append(f"{shown} is {what} itself; allowed: {allowed}")
            continue
        existing = Path(path)
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            problems.append(f"{shown}: {existing} is a file, not a folder; allowed: {allowed}")
        elif not os.access(existing, os.W_OK | os.X_OK):
            problems.append(f"{shown}: {existing} cannot be written; allowed: {allowed}")
    results, resources = real["results_dir"], real["resources_dir"]
    if problems:
        return problems  # each folder said once: whether they overlap can wait
    if results == resources:
        problems.append(f"results_dir and resources_dir are the same folder ({results}); "
                        f"allowed: {allowed}")
    elif Path(resources).is_relative_to(results) or Path(results).is_relative_to(resources):
        inner, outer = (("resources_dir", "results_dir") if Path(resources).is_relative_to(
            results) else ("results_dir", "resources_dir"))
        problems.append(f"{inner} ({real[inner]}) lies inside {outer} ({real[outer]}); "
                        f"allowed: {allowed}")
    return problems


def pin_problems(config):
    """The shape of every pin that text_assets gives (a corpus's sources, a model's files,
    wheels and members), as its fetch will read it, with relative paths inside their folders:
    the package's own readers (diversity_core.data.text.corpus_pins,
    diversity_core.embed.text_models.text_model_pins) say what is wrong, before any download."""
    _package_importable()
    from diversity_core.data.text import corpus_pins
    from diversity_core.embed.text_models import text_model_pins

    problems = []
    for section, reader in (("corpora", corpus_pins), ("models", text_model_pins)):
        for name, pins in (config.get("text_assets", {}).get(section) or {}).items():
            try:
                read = reader(name, pins)
                if not isinstance(read.get("files", {}), dict):
                    raise ValueError("files must map each file to its SHA-256")
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                why = str(err).splitlines()[0][:300] if str(err) else type(err).__name__
                problems.append(f"text_assets.{section}.{name}: {why}")
    return problems


def read_yaml(name):
    """The YAML file ``name`` (relative to the workflow's folder), read by libyaml's safe loader
    where PyYAML has it (the same objects as PyYAML's pure-Python one, 8× faster: the schema
    alone took 0.08 CPU s of every Snakemake invocation's start)."""
    with open(Path(workflow.basedir) / name) as stream:
        return yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def coerce_config_types(config, schema):
    """Give nested command-line values the types the schema declares, in place.

    Snakemake parses a top-level `--config seed=3` as a number, but the values inside
    `--config 'curvature={"n_points": 60}'` arrive as strings ('60'), which `validate` rejects.
    A whole number written as a float (60.0, from YAML or `--config seed=3.0`) where the schema
    allows an integer and no other number is that integer, for every integer key alike: JSON
    Schema's "integer" accepts 60.0, and NumPy would refuse it in a job, naming no key.
    A YAML null literal becomes None wherever the schema allows null; every other string whose
    schema node allows no string (only integer / number / boolean) is converted to the first of
    those types it parses as; anything else is left for `validate` to report. Driven by the
    schema alone, so a new key needs no code here.
    """
    config.update(_coerced(dict(config), schema))


def _coerced(value, node):
    if isinstance(value, dict):
        extra = node.get("additionalProperties")
        children = node.get("properties", {})
        return {key: _coerced(item, children.get(key, extra if isinstance(extra, dict) else {}))
                for key, item in value.items()}
    if isinstance(value, list):
        return [_coerced(item, node.get("items", {})) for item in value]
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    if isinstance(value, float) and "integer" in types and "number" not in types:
        # The same for every integer key. A whole number written 60.0 is the integer
        # 60, as JSON Schema's "integer" has it; 60.5 stays a float, which the schema refuses.
        return int(value) if value.is_integer() else value
    if not isinstance(value, str):
        return value
    text = value.strip()
    if "null" in types and text in ("null", "Null", "NULL", "~"):  # YAML's null, even for
        return None  # [string, "null"]: no checksum or name is spelt "null"
    if not types or "string" in types:
        return value
    for kind in types:
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind == "integer" and re.fullmatch(r"[-+]?[0-9]+(\.0*)?", text):
            return int(text.split(".")[0])
        if kind == "number":
            try:
                number = float(text)
            except ValueError:
                continue
            if math.isfinite(number):
                return number
    return value


# Constraints between keys that the schema cannot express: each rule file registers, as it
# registers its targets, the protocol module that states its section's constraints
# (config_problems(section) -> sentences naming the keys): section name -> module.
CONFIG_CHECKS = {"magnitude": "diversity_core.magnitude.settings"}


# Sections that name their measures (section name -> key): each list is checked against the
# registry of measures and completed by the plugins that fit its experiment's protocol (the
# section's module's configured_measures(section)).
MEASURE_LISTS = {}


def check_measures(config):
    """The measure plugins (measures.plugins, and the installed packages' entry points) join
    the registry, one line if one cannot (it does not import, has the wrong signature, or takes
    a built-in name); then every section's list of measures is checked against the registry and
    completed by the plugins that fit."""
    _package_importable()
    registry = importlib.import_module("diversity_core.measures.registry")
    try:
        registry.register_plugins(config["measures"]["plugins"])
    except registry.PluginError as err:
        _refuse([f"measures.plugins: {err}"])
    problems = []
    for section, key in MEASURE_LISTS.items():
        protocol = importlib.import_module(CONFIG_CHECKS[section])
        try:
            # in place: the rules read the lists they were given when they were defined
            config[section][key][:] = protocol.configured_measures(config[section])
        except ValueError as err:
            problems.append(f"{section}.{key} {config[section][key]}: {err}")
    _refuse(problems)


def check_config(config):
    """Stop the run listing every violation of a registered section's constraints, one line
    each naming its key, before any job runs; a violation would otherwise fail a job
    mid-pipeline with a library message that names no key, or not at all."""
    check_measures(config)
    problems = [problem for section, module in CONFIG_CHECKS.items()
                for problem in importlib.import_module(module).config_problems(config[section])]
    device_problem = importlib.import_module("diversity_core.device").device_problem  # by name
    problems += [p for s, v in config.items() if isinstance(v, dict) and "device" in v
                 and (p := device_problem(v["device"], f"{s}.device"))]  # (the GPU: the job's)
    _refuse(problems)


def _package_importable():
    """diversity_core of this checkout, installed or not."""
    if workflow.basedir not in sys.path:
        sys.path.insert(0, workflow.basedir)


def check_assets(config):
    """strict_assets: true refuses, before any job runs, every asset the configuration selects
    that is not pinned, naming each with its configuration key and what is missing; the rule
    scripts inherit strict mode (DIVERSITY_CORE_STRICT_ASSETS) so that no fetch takes an
    unpinned file on trust either."""
    if not config.get("strict_assets"):
        return
    _package_importable()
    from diversity_core.assets.pins import STRICT_ENV
    from diversity_core.experiments.unpinned import unpinned_assets

    os.environ[STRICT_ENV] = "1"
    _refuse([f"{asset} ({key}): {problem}; strict_assets: true refuses it before fetching (pin "
             "it under that key, docs/assets.md, or run without strict_assets)"
             for asset, key, problem in unpinned_assets(config)])


# Before any value is used: the folders below included.
check_config_first(config)

RESULTS = Path(config["results_dir"])
RESOURCES = Path(config["resources_dir"])


def results(experiment, *parts):
    """A final artifact: committed for the default configuration."""
    return str(RESULTS.joinpath(experiment, *parts))


def interim(experiment, *parts):
    """An intermediate artifact: kept on disk for auditing, git-ignored."""
    return str(RESULTS.joinpath(experiment, "interim", *parts))


def logs(experiment, name):
    return str(RESULTS.joinpath(experiment, "logs", f"{name}.log"))


def bench(experiment, name):
    return str(RESULTS.joinpath(experiment, "benchmarks", f"{name}.tsv"))


def text_corpus_dir(name):
    """Folder of a text corpus (rule text_fetch_corpus, workflow/rules/text_assets.smk)."""
    return str(RESOURCES / "text" / "corpora" / name)


def text_model_dir(name):
    """Folder of a sentence embedding model (rule text_fetch_model)."""
    return str(RESOURCES / "text" / "models" / name)


def seed_for(experiment):
    """Each experiment gets its own seed, derived from the global one unless set explicitly."""
    explicit = config[experiment].get("seed")
    return int(explicit) if explicit is not None else int(config["seed"])


# Filled by each experiment's .smk file: experiment name -> its final files.
EXPERIMENT_TARGETS = {}


def experiment_targets():
    unknown = set(config["experiments"]) - set(EXPERIMENT_TARGETS)
    if unknown:
        raise ValueError(
            f"config 'experiments' names unknown experiments: {sorted(unknown)}; "
            f"known: {sorted(EXPERIMENT_TARGETS)}"
        )
    return [f for name in config["experiments"] for f in EXPERIMENT_TARGETS[name]]


def check_claims_against_targets(claims_file):
    """Every result file a claim reads must be a final file of its experiment (when the
    experiment exists in the workflow), so that a renamed output cannot silently turn a claim
    into "not run"."""
    claims = read_yaml(claims_file)
    for experiment in claims["experiments"]:
        targets = EXPERIMENT_TARGETS.get(experiment["id"])
        if targets is None:
            continue  # not implemented yet: its claims show as "not run"
        relative = {str(Path(t).relative_to(RESULTS)) for t in targets}
        for claim in experiment["claims"]:
            if claim["ours"]["file"] not in relative:
                raise ValueError(
                    f"{claims_file}: experiment {experiment['id']!r} reads "
                    f"{claim['ours']['file']!r}, which is not among its final files "
                    f"{sorted(relative)}."
                )


def experiment_folders():
    """Experiment -> its results folder (where its benchmarks/ lie), for the configured ones."""
    return {
        name: str(RESULTS / Path(EXPERIMENT_TARGETS[name][0]).relative_to(RESULTS).parts[0])
        for name in config["experiments"]
    }
