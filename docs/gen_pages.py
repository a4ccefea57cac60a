"""Pages written at build time (mkdocs-gen-files): the references and the committed results.

- ``configuration.md``: every key of ``workflow/schemas/config.schema.yaml`` with its type,
  default, allowed values and its ``description`` (the schema is the single source);
- ``cli.md``: the ``--help`` of ``python -m diversity_core`` and of each subcommand, from the
  parsers themselves;
- ``api.md``: every public name of ``diversity_core`` (its ``__all__``), rendered by mkdocstrings
  from the docstrings where the name is defined;
- ``results/**/*.png``: the committed figures, so that a page shows them without a copy in
  ``docs/`` (``docs/hooks.py`` points a page's ``../results/...png`` links at these);
- ``changelog.md``: ``CHANGELOG.md``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path

import mkdocs_gen_files
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("COLUMNS", "100")  # argparse wraps --help to the terminal's width

import diversity_core  # noqa: E402  (after the repository is on the path)
from diversity_core.cli.main import main as cli_main  # noqa: E402

# --------------------------------------------------------------------------------------------
# Configuration reference
# --------------------------------------------------------------------------------------------

_RANGE_KEYS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
               ("exclusiveMaximum", "<"))


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "…"


def _number(value) -> str:
    return str(value) if isinstance(value, int) or float(value) == int(value) and abs(
        value) < 1e6 else f"{value:g}"


def _type(spec: dict) -> str:
    if "enum" in spec:
        return "one of"
    kind = spec.get("type", "")
    if kind == "array" and isinstance(spec.get("items"), dict):
        return f"list of {_type(spec['items']) or 'values'}"
    return " or ".join(kind) if isinstance(kind, list) else kind


def _allowed(spec: dict) -> str:
    parts = []
    if "enum" in spec:
        parts.append(", ".join(f"`{_short(v)}`" for v in spec["enum"]))
    parts += [f"{sign} {_number(spec[key])}" for key, sign in _RANGE_KEYS if key in spec]
    if "x-allowed" in spec:
        parts.append(spec["x-allowed"])
    elif "pattern" in spec:
        parts.append(f"matches `{spec['pattern']}`")
    if "minItems" in spec:
        parts.append(f"at least {spec['minItems']} item(s)")
    items = spec.get("items")
    if isinstance(items, dict) and _allowed(items):
        parts.append(f"each: {_allowed(items)}")
    return "; ".join(parts)


def _rows(properties: dict, prefix: str = ""):
    """Every key below ``properties``: nested objects as ``a.b``, the objects of a list as
    ``a[].b``, those under any name as ``a.<name>.b``."""
    for name, spec in properties.items():
        key = f"{prefix}{name}"
        yield key, spec
        for inner, suffix in ((spec, "."), (spec.get("items"), "[]."),
                              (spec.get("additionalProperties"), ".<name>.")):
            if isinstance(inner, dict) and isinstance(inner.get("properties"), dict):
                yield from _rows(inner["properties"], key + suffix)


def configuration_page(schema: dict) -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from `workflow/schemas/config.schema.yaml` when the site is built: every key, "
        "its type, default, the values allowed and what it means. `config.yaml` sets the "
        "defaults; overlay your own with `--configfile FILE.yaml` or single keys with "
        "`--config key=value`. The whole configuration is checked before any job (a dry run "
        "included): one line per problem, naming the key, the value and what is allowed.",
        "",
        "**The integration limit t_cut is not a key.** Every experiment integrates MagArea and "
        "MagDiff up to the median convergence scale of the sets it compares, each set's scale "
        "being where its magnitude reaches `magnitude.target` × its number of distinct points "
        "(the paper's reference-free protocol); comparisons against a reference use the "
        "reference's convergence scale. Change `magnitude.target` to move it. On the command "
        "line, `compare --t-cut T` fixes it by hand.",
        "",
    ]
    header = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]

    def row(key: str, sub: dict) -> str:
        default = f"`{_short(sub['default'])}`" if "default" in sub else "—"
        return (f"| `{key}` | {_cell(_type(sub))} | {_cell(default)} | {_cell(_allowed(sub))} | "
                f"{_cell(sub.get('description', ''))} |")

    top = {k: v for k, v in schema["properties"].items() if "properties" not in v}
    out += ["## General", "", *header, *(row(k, v) for k, v in top.items()), ""]
    for section, spec in schema["properties"].items():
        if section in top:
            continue
        out += [f"## `{section}`", "", _cell(spec.get("description", "")), "", *header,
                *(row(k, v) for k, v in _rows(spec["properties"], section + ".")), ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Command-line reference
# --------------------------------------------------------------------------------------------


def _help(argv: list[str]) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = cli_main([*argv, "--help"])
    if status not in (0, None):
        raise RuntimeError(f"python -m diversity_core {' '.join(argv)} --help exited {status}")
    return buffer.getvalue().rstrip()


def cli_page() -> str:
    top = _help([])
    commands = re.search(r"\{([a-z_,-]+)\}", top).group(1).split(",")
    out = ["# Command-line reference", "",
           "Generated from the command line's own parsers when the site is built. The same "
           "program is installed as the `diversity-core` console script. Exit status: 0 done, "
           "1 findings (`audit` only), 2 a usage or input error (one line `error: ...`), "
           "130 interrupted.", "",
           "## `python -m diversity_core`", "", "```text", top, "```", ""]
    for command in commands:
        out += [f"## `{command}`", "", "```text", _help([command]), "```", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# API reference
# --------------------------------------------------------------------------------------------


def _defining_module(name: str) -> str:
    value = getattr(diversity_core, name)
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and module.startswith("diversity_core") and hasattr(
            sys.modules.get(module), name):
        return module
    # A constant (a dict, a tuple): the deepest loaded module of the package that holds it.
    holders = [m for m, mod in list(sys.modules.items())
               if m.startswith("diversity_core.") and getattr(mod, name, None) is value]
    return max(holders, key=lambda m: m.count("."))


def api_page() -> str:
    out = ["# API reference", "",
           "Generated from the docstrings when the site is built: every public name of "
           "`diversity_core` (its `__all__`), documented where it is defined and used as "
           "`dc.<name>` after `import diversity_core as dc`. The wings (`dc.embed`, "
           "`dc.files`, `dc.magnitude`, ...) hold the rest; [The package](package.md) says "
           "which is which.", ""]
    for name in sorted(diversity_core.__all__, key=str.lower):
        out += [f"## `dc.{name}`", "", f"::: {_defining_module(name)}.{name}",
                "    options:", "      show_root_heading: false", "      heading_level: 3", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# The pages
# --------------------------------------------------------------------------------------------

schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
with mkdocs_gen_files.open("configuration.md", "w") as f:
    f.write(configuration_page(schema))
mkdocs_gen_files.set_edit_path("configuration.md", "../workflow/schemas/config.schema.yaml")
with mkdocs_gen_files.open("cli.md", "w") as f:
    f.write(cli_page())
with mkdocs_gen_files.open("api.md", "w") as f:
    f.write(api_page())
with mkdocs_gen_files.open("changelog.md", "w") as f:
    f.write((ROOT / "CHANGELOG.md").read_text())
for path in sorted((ROOT / "results").glob("**/*")):
    if path.suffix == ".png" and "interim" not in path.parts:
        with mkdocs_gen_files.open(str(path.relative_to(ROOT)), "wb") as f:
            f.write(path.read_bytes())
