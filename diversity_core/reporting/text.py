"""Aligned plain-text tables, as the command line prints them."""

from __future__ import annotations

__all__ = ["aligned"]


def aligned(header: list[str], rows: list[list[str]], *, free_last: bool = False) -> list[str]:
    """Lines of a table: the first column left-aligned, the others right-aligned, a rule of
    dashes under the header. ``free_last``: the last column (a note) is neither padded nor
    measured, so one long note does not widen the table."""
    measured = len(header) - 1 if free_last else len(header)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(measured)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    if free_last:
        fmt += "  {}"
    rule = "  ".join("-" * w for w in widths) + ("  ----" if free_last else "")
    return [fmt.format(*header).rstrip(), rule,
            *(fmt.format(*r).rstrip() for r in rows)]
