"""MkDocs hook: links from a page to files of the repository outside ``docs/``.

A page links ``../results/curvature/figure2.png`` or ``../workflow/paper_claims.yaml`` so that it
reads right where it lies in the repository. In the site, a committed figure under ``results/``
is shown from the copy ``docs/gen_pages.py`` puts there; any other repository file becomes its
path in code (the site has no copy of it). A link to a path that is not in the repository is a
warning, so ``mkdocs build --strict`` fails on it as on any broken link.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("mkdocs.hooks.repository_links")

_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_LINK = re.compile(r"(!?)\[([^\]]*)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def _rewrite(match: re.Match, page_path: str) -> str:
    bang, text, target, _anchor = match.groups()
    path = (ROOT / "docs" / Path(page_path).parent / target).resolve()
    try:
        relative = path.relative_to(ROOT).as_posix()
    except ValueError:
        log.warning("%s: the link %s leaves the repository.", page_path, target)
        return match.group(0)
    if not path.exists():
        log.warning("%s: the link %s names %s, which is not in the repository.",
                    page_path, target, relative)
        return match.group(0)
    if relative.startswith("results/") and path.suffix == ".png":
        depth = "../" * page_path.count("/")
        return f"{bang}[{text}]({depth}{relative})"
    return text if text.strip("`") == relative else f"{text} (`{relative}`)"


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    out, in_fence = [], False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        out.append(line if in_fence else _LINK.sub(lambda m: _rewrite(m, page.file.src_path),
                                                    line))
    return "".join(out)
