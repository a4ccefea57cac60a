"""The command line of a rule script run alone, built from its ``main``'s signature.

Outside Snakemake (``python scripts/curvature_generate.py --help``; the PyPSA-Eur convention of
scripts that run alone) every parameter of ``main`` is a required ``--option``, parsed by its
annotation: ``--magnitude '{"target": 0.95, ...}'`` is JSON, ``--scales a.npz b.npz`` a list of
paths (:data:`_contract.Inputs`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import types
import typing
from typing import Annotated, Union

from _contract import roles


def parse_cli(main, argv=None) -> dict:
    """Build an argparse parser from ``main``'s signature: every parameter becomes ``--name``,
    required unless it has a default, parsed by its annotation."""
    parser = argparse.ArgumentParser(description=inspect.getdoc(main))
    hints = typing.get_type_hints(main, include_extras=True)
    main_roles = roles(main)
    for name, param in inspect.signature(main).parameters.items():
        flag = "--" + name.replace("_", "-")
        options = {"dest": name}
        if param.default is inspect.Parameter.empty:
            options["required"] = True
        else:
            options["default"] = param.default
        role = main_roles.get(name)
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
