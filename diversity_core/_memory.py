"""The host's available memory, and the one error of every memory rule of the package.

:func:`available_memory` is what every memory rule measures a need against (the magnitude
engine's paths, ``compare``'s sets, the readers of embedding files, the torch path on the CPU);
:class:`MemoryNeedError` is what each raises, before anything is allocated, carrying the need
and the limit as numbers, so that a caller (the command line) words the remedy itself and never
reads the message. A module of its own, importing nothing of the package, so that each of
those rooms can read it without an import cycle."""

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


class MemoryNeedError(MemoryError):
    """A computation refused before anything is allocated: it would need ``need`` bytes where
    ``limit`` bytes are available (or allowed by the caller's ``memory_limit``). The message is
    one line saying what needs them; ``need`` and ``limit`` are set when the error is made."""

    def __init__(self, message: str, *, need: int, limit: int):
        super().__init__(message)
        self.need, self.limit = int(need), int(limit)

    def __reduce__(self):  # kept whole through pickling (a worker process's error)
        return _memory_need_error, (str(self), self.need, self.limit)


def _memory_need_error(message: str, need: int, limit: int) -> MemoryNeedError:
    return MemoryNeedError(message, need=need, limit=limit)
