"""How result tables spell a measure: every spelling a catalogue of measures knows (a mapping of
names to objects with ``column``, ``label``, ``description`` and ``in_paper``, such as
``diversity_core.measures.registry.MEASURES``; a missing attribute is skipped). The summary and
the leaderboard match the names of result files against these, each without case or
punctuation."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["measure_spellings"]

_ATTRIBUTES = ("column", "label", "in_paper", "description")


def measure_spellings(measures: Mapping) -> dict[str, list[str]]:
    """Each measure's spellings, its name first, by name."""
    return {name: [name, *(text for attribute in _ATTRIBUTES
                           if (text := getattr(measure, attribute, None)))]
            for name, measure in measures.items()}
