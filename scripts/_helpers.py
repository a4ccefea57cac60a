"""What every rule script shares: its contract with the rule, logging, threads, provenance, CLI.

A rule script defines ``main(...)`` and ends with::

    if __name__ == "__main__":
        run(main, globals().get("snakemake"))

**The contract.** ``main``'s parameters are the rule's named inputs (annotated :data:`Input`, one
path, or :data:`Inputs`, a list), named outputs (:data:`Output`, :data:`Outputs`) and params
(annotated with their type: ``int``, ``float``, ``bool``, ``str``, ``dict``, ``list``, unions
such as ``str | None``), plus ``threads`` if the script uses the rule's threads. The rule's param
``config`` (the configuration sections its results depend on) is the one exception: it goes into
the provenance records, never to ``main``. Nothing rule-fed has a default in the script: the
configuration schema (``workflow/schemas/config.schema.yaml``) is the single source of defaults.
Under Snakemake, :func:`run` checks the rule against ``main`` before anything runs: an input,
output or param that ``main`` lacks, a parameter of ``main`` the rule omits, a role or default
that does not match, or an unnamed input or output stops the job with a :class:`ContractError`
naming the rule, the script and the name. ``tests/test_contract.py`` checks every rule of every
experiment the same way without running them.

**What run does.** It sends log output (and tqdm progress) to the rule's ``log:`` file, limits
BLAS threads to the rule's ``threads``, checks that every ``.npz``, ``.npy`` and ``.json`` input
is intact (:func:`check_inputs`), hashes the inputs (what the script is about to read) and, once
``main`` has returned, writes a provenance record beside every output
(:mod:`diversity_core.provenance.records`: the SHA-256 of every input, output and of the script,
rule, params, configuration, git state, versions). Records of the outputs are removed before
``main`` runs and again if it fails, so a record exists only beside an output that was written.
``main`` may return a mapping of facts worth recording (counts, checks): they go into the
records' ``extra``.

**Alone.** Outside Snakemake, ``run`` builds a command line from ``main``'s signature
(``python scripts/curvature_generate.py --help``; the PyPSA-Eur convention of scripts that run
alone): every parameter is a required ``--option``, parsed by its annotation (``--magnitude
'{"target": 0.95, ...}'`` is JSON, ``--scales a.npz b.npz`` a list of paths), and the outputs
get their records as under Snakemake, with ``rule: null``.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import logging
import os
import sys
import types
import typing
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Union

# Rule scripts use diversity_core from this checkout, installed or not (a conda environment made
# by `--sdm conda` holds only the third-party packages). Scripts import this module first.
REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from diversity_core.provenance.digests import Hasher  # noqa: E402
from diversity_core.provenance.records import Roots, entries, remove_records, write_records  # noqa: E402

log = logging.getLogger("diversity_pipeline")


class _Role:
    """Marks a parameter of ``main`` as a file the rule reads or writes."""

    def __init__(self, group: str, many: bool):
        self.group, self.many = group, many

    def __repr__(self):
        return f"{self.group}{'s' if self.many else ''}"


Input = Annotated[str, _Role("input", many=False)]
"""A rule input: one path (a file or a folder)."""
Inputs = Annotated[list, _Role("input", many=True)]
"""A rule input that names a list of paths (``expand(...)``; possibly empty)."""
Output = Annotated[str, _Role("output", many=False)]
"""A rule output: one path."""
Outputs = Annotated[list, _Role("output", many=True)]
"""A rule output that names a list of paths."""

# The one rule param that is not passed to main: recorded in the provenance records.
RECORDED_ONLY = "config"
# Filled by run from the rule's `threads:` directive, not from its params.
THREADS = "threads"


class ContractError(TypeError):
    """A rule and its script's ``main`` disagree on names, roles or defaults."""


def run(main, smk=None) -> None:
    """Call ``main`` with the rule's files and params (Snakemake) or from the command line; then
    write the provenance records of its outputs."""
    script = _script_path(main, smk)
    if smk is None:
        kwargs = _parse_cli(main)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        roots = Roots.of(REPO_ROOT / "results", REPO_ROOT / "resources", REPO_ROOT)
        _run_and_record(main, kwargs, script=script, roots=roots, rule=None, config=None,
                        wildcards=None)
        return
    rule = getattr(smk, "rule", None)
    log_file = smk.log[0] if len(smk.log) else None
    with _logging_to(log_file), _thread_limit(smk.threads):
        try:
            kwargs = bind(main, smk, rule=rule, script=script)
        except ContractError:
            log.exception("rule failed")
            remove_records(str(path) for path in smk.output)  # no record without its output
            raise
        config = dict(smk.params.items()).get(RECORDED_ONLY)
        roots = Roots.of(smk.config["results_dir"], smk.config["resources_dir"], os.getcwd())
        _run_and_record(main, kwargs, script=script, roots=roots, rule=rule, config=config,
                        wildcards=dict(smk.wildcards.items()))


def _run_and_record(main, kwargs, *, script, roots, rule, config, wildcards) -> None:
    roles = _roles(main)
    files = {group: {name: _as_list(kwargs[name]) for name, role in roles.items()
                     if role.group == group and name in kwargs} for group in ("input", "output")}
    outputs = [path for paths in files["output"].values() for path in paths]
    params = {name: value for name, value in kwargs.items() if name not in roles}
    try:
        remove_records(outputs)
        inputs = [path for paths in files["input"].values() for path in paths]
        check_inputs(inputs)
        hasher = Hasher()
        # What the script is about to read; assets under resources/ by their pinned digest.
        input_entries = entries(files["input"], roots, hasher, pinned_digest=True)
        _INPUT_DIGESTS.clear()
        _INPUT_DIGESTS.update({os.path.abspath(path): entry["sha256"]
                               for name, paths in files["input"].items()
                               for path, entry in zip(paths, input_entries[name], strict=True)})
        extra = main(**kwargs)
        if extra is not None and not isinstance(extra, Mapping):
            raise TypeError(f"{script.name}: main returned {type(extra).__name__}; it returns "
                            "None or a mapping of facts for the provenance records.")
        written = write_records(files["output"], files["input"], roots=roots, hasher=hasher,
                                rule=rule, script=script, params=params, config=config,
                                wildcards=wildcards, extra=dict(extra or {}),
                                input_entries=input_entries)
    except Exception:
        log.exception("rule failed")
        remove_records(outputs)  # Snakemake removes the outputs; their records go too
        raise
    log.info("provenance: %d record(s); hashed %d file(s), %.1f MB, in %.2f s", len(written),
             hasher.files, hasher.bytes / 1e6, hasher.seconds)


# The digests of the running job's inputs, by absolute path (filled by run before main).
_INPUT_DIGESTS: dict[str, str] = {}


def input_sha256(path) -> str:
    """The SHA-256 of one of the running job's inputs, as its provenance records hold it (an
    asset: its pinned digest): hashed once per job, whoever asks."""
    return _INPUT_DIGESTS[os.path.abspath(path)]


def bind(main, smk, *, rule=None, script=None) -> dict:
    """``main``'s keyword arguments from the rule's named inputs, outputs, params (and threads),
    after checking the rule against ``main`` (:func:`contract_problems`)."""
    rule = rule or getattr(smk, "rule", None) or "?"
    script = script or _script_path(main, smk)
    groups = {"input": smk.input, "output": smk.output, "params": smk.params}
    named = {group: dict(files.items()) for group, files in groups.items()}
    unnamed = {group: len(groups[group]) - _named_length(groups[group], named[group])
               for group in ("input", "output")}
    problems = contract_problems(main, {g: list(v) for g, v in named.items()}, unnamed)
    roles = _roles(main)
    kwargs = {}
    for group in ("input", "output", "params"):
        for name, value in named[group].items():
            if group == "params" and name == RECORDED_ONLY:
                continue
            role = roles.get(name)
            if role is not None and not role.many:
                paths = _as_list(value)
                if len(paths) != 1:
                    problems.append(f"{group} {name!r} names {len(paths)} paths, but main's "
                                    f"{name!r} is one path (annotate it Inputs or Outputs).")
                    continue
                value = paths[0]
            elif role is not None:
                value = _as_list(value)
            kwargs[name] = value
    if THREADS in inspect.signature(main).parameters:
        kwargs[THREADS] = smk.threads
    if problems:
        shown = os.path.relpath(script, REPO_ROOT) if REPO_ROOT in Path(script).parents \
            else script
        raise ContractError(f"rule {rule} and its script {shown}:\n  " + "\n  ".join(problems))
    return kwargs


def contract_problems(main, named: dict[str, list[str]], unnamed: dict[str, int]) -> list[str]:
    """What breaks the contract between a rule and ``main`` (see the module), as sentences.

    ``named``: the rule's names per group (``input``, ``output``, ``params``); ``unnamed``: the
    number of unnamed paths in its ``input`` and ``output``.
    """
    problems = []
    parameters = inspect.signature(main).parameters
    hints = typing.get_type_hints(main, include_extras=True)
    roles = _roles(main)
    fed = set()
    for group in ("input", "output"):
        if unnamed.get(group):
            problems.append(f"its {group} has {unnamed[group]} unnamed path(s): name each, so "
                            "that main receives it.")
    for group in ("input", "output", "params"):
        for name in named.get(group, []):
            if group == "params" and name == RECORDED_ONLY:
                continue
            fed.add(name)
            if name not in parameters:
                problems.append(f"{group} {name!r} is not a parameter of main.")
                continue
            role = roles.get(name)
            expected = None if group == "params" else group
            if (role.group if role else None) != expected:
                what = (f"annotated {role!r}" if role else "not annotated as a file")
                want = ("a plain value (no Input/Output annotation)" if expected is None
                        else f"{'Input or Inputs' if group == 'input' else 'Output or Outputs'}")
                problems.append(f"{group} {name!r}: main's parameter is {what}; make it {want}.")
            if parameters[name].default is not inspect.Parameter.empty:
                problems.append(f"{group} {name!r} has a default in main "
                                f"({parameters[name].default!r}); rule-fed parameters take "
                                "none (the configuration schema holds the defaults).")
    for name, parameter in parameters.items():
        if name == THREADS:
            if parameter.default is not inspect.Parameter.empty:
                problems.append("main's 'threads' has a default; the rule's threads: feed it.")
            continue
        if name not in fed and parameter.default is inspect.Parameter.empty:
            group = roles[name].group if name in roles else "param"
            problems.append(f"main's {group} {name!r} is missing from the rule.")
        if name not in hints:
            problems.append(f"main's parameter {name!r} has no annotation (the command line "
                            "parses it by its type).")
    return problems


def _named_length(files, named: dict) -> int:
    return sum(len(_as_list(value)) for value in named.values()) if named else 0


def _as_list(value) -> list:
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    return [str(v) for v in value]


def _roles(main) -> dict[str, _Role]:
    hints = typing.get_type_hints(main, include_extras=True)
    roles = {}
    for name, hint in hints.items():
        if typing.get_origin(hint) is Annotated:
            for mark in hint.__metadata__:
                if isinstance(mark, _Role):
                    roles[name] = mark
    return roles


def _script_path(main, smk) -> Path:
    """The rule's script: Snakemake runs a copy named ``tmpXXXXXXXX.<script name>`` beside
    ``.snakemake/scripts``; the original lies in ``smk.scriptdir``."""
    path = Path(main.__code__.co_filename)
    scriptdir = getattr(smk, "scriptdir", None)
    if scriptdir and "." in path.name:
        original = Path(scriptdir) / path.name.split(".", 1)[1]
        if original.is_file():
            return original
    return path


def check_inputs(paths) -> None:
    """Raise ``ValueError`` naming the file if a ``.npz``, ``.npy`` or ``.json`` input is
    truncated or corrupt (say, by a full disk or a job killed while another wrote it)."""
    import numpy as np

    for path in map(Path, paths):
        if not path.is_file() or path.suffix not in (".npz", ".npy", ".json"):
            continue
        try:
            if path.suffix == ".npz":
                with zipfile.ZipFile(path) as archive:
                    broken = archive.testzip()  # reads every member, checks its CRC
                if broken is not None:
                    raise ValueError(f"member {broken} fails its CRC check")
            elif path.suffix == ".npy":
                np.load(path, mmap_mode="r", allow_pickle=False)  # header and size
            else:
                json.loads(path.read_text())
        except Exception as err:
            raise ValueError(
                f"input {path} is truncated or corrupt ({type(err).__name__}: {err}). Delete "
                "it so that Snakemake makes it again, or rerun with --forcerun on the rule "
                "that writes it."
            ) from err


@contextlib.contextmanager
def _logging_to(log_file):
    if log_file is None:
        yield
        return
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "w") as stream:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        logging.captureWarnings(True)
        # tqdm and library warnings write to stderr: send them to the rule's log as well.
        old_stderr = sys.stderr
        sys.stderr = stream
        try:
            yield
        finally:
            sys.stderr = old_stderr
            root.removeHandler(handler)


@contextlib.contextmanager
def _thread_limit(threads: int):
    """Limit BLAS/OpenMP threads to the rule's ``threads`` so parallel jobs do not oversubscribe.

    torch reads OMP_NUM_THREADS when it is imported (inside the rule's ``main``); it is only
    imported here if a script did so already, so that rules without torch do not pay for it.
    """
    from threadpoolctl import threadpool_limits

    os.environ["OMP_NUM_THREADS"] = str(threads)
    with threadpool_limits(limits=threads):
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
        yield


# --- the command line of a script run alone --------------------------------------------------

def _parse_cli(main, argv=None) -> dict:
    """Build an argparse parser from ``main``'s signature: every parameter becomes ``--name``,
    required unless it has a default, parsed by its annotation."""
    parser = argparse.ArgumentParser(description=inspect.getdoc(main))
    hints = typing.get_type_hints(main, include_extras=True)
    roles = _roles(main)
    for name, param in inspect.signature(main).parameters.items():
        flag = "--" + name.replace("_", "-")
        options = {"dest": name}
        if param.default is inspect.Parameter.empty:
            options["required"] = True
        else:
            options["default"] = param.default
        role = roles.get(name)
        if role is not None:
            options.update(metavar="PATH", help=repr(role))
            if role.many:
                options["nargs"] = "*"
        else:
            hint = hints.get(name, str)
            options.update(type=cli_value(hint), metavar=_metavar(hint))
        parser.add_argument(flag, **options)
    return vars(parser.parse_args(argv))


def _members(hint) -> tuple:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _is_container(kind) -> bool:
    return (typing.get_origin(kind) or kind) in (dict, list, tuple)


def _metavar(hint) -> str:
    names = []
    for kind in _members(hint):
        if kind is type(None):
            names.append("null")
        elif _is_container(kind):
            names.append("JSON")
        else:
            names.append(getattr(kind, "__name__", str(kind)).upper())
    return "|".join(dict.fromkeys(names))


def cli_value(hint):
    """A converter from command-line text to ``hint``'s type: ``int``, ``float``, ``bool``
    (true/false), ``str``, JSON for ``dict``/``list``/``tuple``, and unions of these (``null``
    for None)."""
    members = _members(hint)

    def convert(text: str):
        lowered = text.strip().lower()
        for kind in sorted(members, key=_priority):
            if kind is type(None) and lowered in ("null", "none"):
                return None
            if kind is bool and lowered in ("true", "false"):
                return lowered == "true"
            if kind in (int, float):
                try:
                    return kind(text)
                except ValueError:
                    continue
            if _is_container(kind):
                try:
                    value = json.loads(text)
                except ValueError:
                    continue
                if isinstance(value, typing.get_origin(kind) or kind) or (
                        kind in (tuple, list) and isinstance(value, list)):
                    return value
            if kind is str or kind is typing.Any:
                return text
        raise argparse.ArgumentTypeError(f"{text!r} is not a {_metavar(hint)}")

    convert.__name__ = _metavar(hint)
    return convert


def _priority(kind) -> int:
    order = [type(None), bool, int, float]
    if kind in order:
        return order.index(kind)
    return 4 if _is_container(kind) else 5


def chunk_indices(n_items: int, n_chunks: int, chunk: int):
    """Indices of the items that job ``chunk`` of ``n_chunks`` processes (contiguous, balanced)."""
    import numpy as np

    if not 0 <= chunk < n_chunks:
        raise ValueError(f"chunk {chunk} is outside 0..{n_chunks - 1}.")
    return np.array_split(np.arange(n_items), n_chunks)[chunk]
