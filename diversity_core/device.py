"""Where the work runs: the device vocabulary, parsed once into a :class:`Device`.

Two kinds of work take a device: the torch networks (the sentence encoders, Inception, GIN,
SmolLM2) and the magnitude engine, which has two implementations, NumPy (on the CPU) and torch
(on a CUDA GPU, or on the CPU to check it). One name means one :class:`Device`, whoever reads
it: the networks read :attr:`Device.torch` (a torch device), the engine :attr:`Device.engine`
(and, on its torch path, the same torch device).

=============  ==================  =================================================
name           magnitude engine    torch device (networks; the engine's torch path)
=============  ==================  =================================================
``cpu``        NumPy               the CPU
``auto``       NumPy               CUDA when torch sees a GPU, else the CPU
``cuda``       torch               the current CUDA GPU
``cuda:N``     torch               CUDA GPU number N
``torch:cpu``  torch               the CPU (the torch path checked without a GPU)
=============  ==================  =================================================

The engine uses a GPU only when one is named (``cuda``, ``cuda:N``): committed tables must not
depend on the machine they were regenerated on, so ``auto``, which picks a GPU for the
networks when there is one, keeps the NumPy engine. The defaults differ by word: the engine's
(``MagnitudeSettings``, ``measure_sets``, the command line) is ``cpu``, the networks' is
``auto``.

Each edge parses a name once (:func:`parse_device`: the configuration's check, the command
line's ``--device``, ``MagnitudeSettings``, a public function given a string) and hands the
:class:`Device` on; nothing downstream checks or resolves it again. A name that is not in the
table is refused in one line naming the key or option; a CUDA GPU that torch does not see is
refused there too (except by the configuration's check, which runs on the machine that submits
the jobs: a SLURM job's node may have the GPU the submitting machine lacks).

:func:`cpu_features` reads the processor's feature flags, which code compiled for a given
instruction set checks before it runs.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

from ._memory import available_memory

__all__ = ["DEVICES", "Device", "parse_device", "device_problem", "free_memory",
           "cpu_features"]

# The one table of names: name -> (the magnitude engine, the torch device; None: auto's choice).
# ``cuda:N`` stands for every numbered GPU (matched by _CUDA_N below; its torch device is the
# name itself).
_TABLE = {
    "cpu": ("numpy", "cpu"),
    "auto": ("numpy", None),
    "cuda": ("torch", "cuda"),
    "cuda:N": ("torch", "cuda:N"),
    "torch:cpu": ("torch", "cpu"),
}
DEVICES = ", ".join(_TABLE)
"""The names, as the one-line refusals list them."""
_CUDA_N = re.compile(r"cuda:[0-9]+", re.ASCII)


def _row(name) -> tuple[str, str | None] | None:
    """The table's row of ``name``; None for a name that is not in it."""
    if not isinstance(name, str) or name == "cuda:N":  # "cuda:N": the placeholder, no device
        return None
    return _TABLE.get("cuda:N" if _CUDA_N.fullmatch(name) else name)


@dataclasses.dataclass(frozen=True)
class Device:
    """Where the work runs: one parsed name of the table (:func:`parse_device`).

    Attributes
    ----------
    name : str
        The name asked for (``cpu``, ``auto``, ``cuda:1``, ``torch:cpu``): what records, cache
        keys and command lines write.
    engine : {"numpy", "torch"}
        The magnitude engine this name selects.
    """

    name: str
    engine: str

    def __post_init__(self):
        row = _row(self.name)
        if row is None or row[0] != self.engine:  # made by hand, not by parse_device
            raise ValueError(f"Device({self.name!r}, {self.engine!r}) is not a row of the "
                             f"table; parse_device(name) makes one of {DEVICES}.")

    @functools.cached_property
    def torch(self) -> str:
        """The torch device of the networks and of the engine's torch path (``cpu``, ``cuda``,
        ``cuda:1``), as the table says; ``auto``'s is chosen here, once per value (CUDA when
        torch sees a GPU; without torch, the CPU)."""
        where = _row(self.name)[1]
        if where is None:
            try:
                import torch
            except ModuleNotFoundError:
                return "cpu"
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.name if where == "cuda:N" else where

    @property
    def kind(self) -> str:
        """``cuda`` or ``cpu``: the kind of :attr:`torch` (what cache keys record)."""
        return "cuda" if self.torch.startswith("cuda") else "cpu"

    def to_torch(self):
        """:attr:`torch` as a ``torch.device``."""
        import torch

        return torch.device(self.torch)

    def __str__(self) -> str:
        return self.name


def parse_device(value, *, key: str = "device", check: bool = True) -> Device:
    """The :class:`Device` a name means (a :class:`Device` is returned as it is).

    ``key`` names the configuration key or option in the one-line ``ValueError`` for a name not
    in the table. ``check``: also refuse, in one line, a CUDA GPU that torch does not see (or
    torch missing where a name needs it); the configuration's check passes False (the name
    only: the GPU may be on the node the job runs on).
    """
    if isinstance(value, Device):
        return value
    row = _row(value)
    if row is None:
        raise ValueError(f"{key}: unknown device {value!r}; the devices are {DEVICES} "
                         "(N = 0, 1, ...).")
    device = Device(value, row[0])
    if check and device.engine == "torch":
        _check_torch_sees(device, key)
    return device


def device_problem(value, key: str) -> str | None:
    """The configuration check's sentence for a device name not in the table, naming ``key``;
    None for a name in it (checked by name alone, without torch)."""
    try:
        parse_device(value, key=key, check=False)
    except ValueError as err:
        return str(err)
    return None


def _check_torch_sees(device: Device, key: str) -> None:
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        raise ValueError(f"{key}: device {device.name!r} needs torch, which is not installed "
                         "(cpu and auto run the magnitude engine without it).") from None
    where = torch.device(device.torch)
    if where.type != "cuda":
        return
    if not torch.cuda.is_available():
        raise ValueError(f"{key}: device {device.name!r} requested but torch sees no CUDA GPU.")
    count = torch.cuda.device_count()
    if where.index is not None and where.index >= count:
        seen = "cuda:0" + (f" to cuda:{count - 1}" if count > 1 else "")
        raise ValueError(f"{key}: device {device.name!r} requested but torch sees {count} CUDA "
                         f"GPU{'s' if count > 1 else ''} ({seen}).")


def free_memory(device) -> int:
    """Bytes free on ``device``'s torch device now (a :class:`Device` or a name): CUDA's
    ``torch.cuda.mem_get_info``; for the CPU the host's ``MemAvailable`` (/proc/meminfo), else
    its physical memory. What the magnitude engine's torch path measures a computation's need
    against."""
    device = parse_device(device)
    if device.kind == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device.to_torch())[0])
    return available_memory()


def cpu_features() -> set[str] | None:
    """The processor's feature flags (``avx2``, ``fma``, ...) from ``/proc/cpuinfo``; None where
    there is no such file or line."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.partition(":")[0].strip() == "flags":
            return set(line.partition(":")[2].split())
    return None
