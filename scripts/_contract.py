"""The contract between a rule and its script's ``main``: names, roles, no defaults.

A rule script defines ``main(...)``; its parameters are the rule's named inputs (annotated
:data:`Input`, one path, or :data:`Inputs`, a list), named outputs (:data:`Output`,
:data:`Outputs`) and params (annotated with their type: ``int``, ``float``, ``bool``, ``str``,
``dict``, ``list``, unions such as ``str | None``), plus ``threads`` if the script uses the
rule's threads. The rule's param ``config`` (the configuration sections its results depend on)
is the one exception: it goes into the provenance records, never to ``main``. Nothing rule-fed
has a default in the script: the configuration schema (``workflow/schemas/config.schema.yaml``)
is the single source of defaults.

Under Snakemake, :func:`bind` checks the rule against ``main`` before anything runs (``_job.run``
calls it): an input, output or param that ``main`` lacks, a parameter of ``main`` the rule
omits, a role or default that does not match, or an unnamed input or output stops the job with
a :class:`ContractError` naming the rule, the script and the name.
``tests/workflow/test_contract.py`` checks every rule of every experiment the same way
(:func:`contract_problems`) without running
them.
"""

from __future__ import annotations

import inspect
import os
import typing
from pathlib import Path
from typing import Annotated

REPO_ROOT = Path(__file__).resolve().parent.parent


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
# Filled from the rule's `threads:` directive, not from its params.
THREADS = "threads"


class ContractError(TypeError):
    """A rule and its script's ``main`` disagree on names, roles or defaults."""


def bind(main, smk, *, rule=None, script=None) -> dict:
    """``main``'s keyword arguments from the rule's named inputs, outputs, params (and threads),
    after checking the rule against ``main`` (:func:`contract_problems`)."""
    rule = rule or getattr(smk, "rule", None) or "?"
    script = script or script_path(main, smk)
    groups = {"input": smk.input, "output": smk.output, "params": smk.params}
    named = {group: dict(files.items()) for group, files in groups.items()}
    unnamed = {group: len(groups[group]) - _named_length(groups[group], named[group])
               for group in ("input", "output")}
    problems = contract_problems(main, {g: list(v) for g, v in named.items()}, unnamed)
    main_roles = roles(main)
    kwargs = {}
    for group in ("input", "output", "params"):
        for name, value in named[group].items():
            if group == "params" and name == RECORDED_ONLY:
                continue
            role = main_roles.get(name)
            if role is not None and not role.many:
                paths = as_list(value)
                if len(paths) != 1:
                    problems.append(f"{group} {name!r} names {len(paths)} paths, but main's "
                                    f"{name!r} is one path (annotate it Inputs or Outputs).")
                    continue
                value = paths[0]
            elif role is not None:
                value = as_list(value)
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
    main_roles = roles(main)
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
            role = main_roles.get(name)
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
            group = main_roles[name].group if name in main_roles else "param"
            problems.append(f"main's {group} {name!r} is missing from the rule.")
        if name not in hints:
            problems.append(f"main's parameter {name!r} has no annotation (the command line "
                            "parses it by its type).")
    return problems


def _named_length(files, named: dict) -> int:
    return sum(len(as_list(value)) for value in named.values()) if named else 0


def as_list(value) -> list:
    """The paths of a rule's input or output entry (one path or many), as strings."""
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    return [str(v) for v in value]


def roles(main) -> dict[str, _Role]:
    """The parameters of ``main`` annotated as files (:data:`Input` ...), by name."""
    hints = typing.get_type_hints(main, include_extras=True)
    found = {}
    for name, hint in hints.items():
        if typing.get_origin(hint) is Annotated:
            for mark in hint.__metadata__:
                if isinstance(mark, _Role):
                    found[name] = mark
    return found


def script_path(main, smk) -> Path:
    """The rule's script: Snakemake runs a copy named ``tmpXXXXXXXX.<script name>`` beside
    ``.snakemake/scripts``; the original lies in ``smk.scriptdir``."""
    path = Path(main.__code__.co_filename)
    scriptdir = getattr(smk, "scriptdir", None)
    if scriptdir and "." in path.name:
        original = Path(scriptdir) / path.name.split(".", 1)[1]
        if original.is_file():
            return original
    return path
