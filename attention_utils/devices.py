"""Devices and memory: which devices this machine has, and whether a size's tensors can fit in memory.

torch answers a device it does not know, a CUDA device on a CPU-only build and a size beyond the
memory with English errors deep inside an allocation (or, on Linux, with a process killed later);
these checks say the same thing before anything is allocated, in both languages, with what is possible.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from .checks import bilingual, shown


def device_counts() -> dict[str, int]:
    """How many devices of each kind this torch build can put tensors on right now (cpu and meta: always one)."""
    xpu = getattr(torch, "xpu", None)
    return {
        "cpu": 1,
        "cuda": torch.cuda.device_count(),
        "mps": int(torch.backends.mps.is_available()),
        "xpu": xpu.device_count() if xpu is not None and xpu.is_available() else 0,
        "meta": 1,
    }


def check_device(device: object, name: str = "device") -> torch.device | None:
    """Check that `device` (None, a string, a torch.device or an accelerator index) names a device this machine has."""
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, (str, torch.device, int)):
        raise TypeError(
            bilingual(
                f"{name} must be a string such as 'cpu' or a torch.device, got {shown(device)}.",
                f"{name} 必须是 'cpu' 这样的字符串或 torch.device，实际是 {shown(device, True)}。",
            )
        )
    counts = device_counts()
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):  # a name torch does not know ('gpu'), or an index with no accelerator
        parsed = None
    if parsed is None or counts.get(parsed.type, 0) <= (parsed.index or 0):
        here = [kind if count == 1 and kind in ("cpu", "meta", "mps") else f"{kind}:{i}"
                for kind, count in counts.items() for i in range(count)]
        raise ValueError(
            bilingual(
                f"{name}={shown(device)} is not a device this machine has; here you can use "
                f"{', '.join(repr(d) for d in here)}.",
                f"{name}={shown(device, True)} 不是这台机器上的设备；这里可以用 {'、'.join(repr(d) for d in here)}。",
            )
        )
    return parsed


def memory_of(device: torch.device) -> int | None:
    """Bytes of memory on `device`, or None where it cannot be known (meta needs none)."""
    if device.type == "cpu":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):  # not on every system (Windows)
            return None
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_properties(device.index if device.index is not None else 0).total_memory
    return None


def amount(num_bytes: int) -> str:
    """A number of bytes for people: '512 B', '3.2 GB', '80,000,000 TB'."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if num_bytes >= scale:
            amount = num_bytes / scale
            return f"{amount:.3g} {unit}" if amount < 1000 else f"{amount:,.0f} {unit}"
    return f"{num_bytes} B"


def check_fits(value: int, name: str, bytes_for: Callable[[int], int], device: object = None) -> None:
    """Refuse a size whose tensors cannot fit in the device's memory, before torch tries and fails in English."""
    device = torch.device(device) if device is not None else torch.get_default_device()
    limit = memory_of(device)
    if limit is None or bytes_for(value) <= limit:
        return
    low, high = 0, value  # bytes_for grows with the size: find the largest one that fits
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if bytes_for(middle) <= limit else (low, middle)
    raise ValueError(
        bilingual(
            f"{name}={value} needs {amount(bytes_for(value))} of memory, more than the {amount(limit)} this "
            f"machine's {device.type} has; here {name} can be at most about {low:,}.",
            f"{name}={value} 需要 {amount(bytes_for(value))} 内存，超过了这台机器 {device.type} 上的 {amount(limit)}；"
            f"在这里 {name} 最多约为 {low:,}。",
        )
    )
