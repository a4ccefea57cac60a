"""The host's available memory: what every memory rule of the package measures a need against
(the magnitude engine's paths, ``compare``'s sets, the readers of embedding files, the torch
path on the CPU). A module of its own, importing nothing of the package, so that each of those
rooms can read it without an import cycle."""

from __future__ import annotations

import os


def available_memory() -> int:
    """MemAvailable of /proc/meminfo (Linux), else the physical memory, in bytes."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
