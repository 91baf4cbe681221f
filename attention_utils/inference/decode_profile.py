"""Profile a few decode steps with torch.profiler, and the share of their time in matrix products (lesson 14).

torch 2.13's profiler writes a "profiler_start" and a "profiler_stop" line from C++ straight to the
process's standard error (file descriptor 2), past Python's sys.stderr; in a notebook they would be
stored as an error stream. `profile_calls` points descriptor 2 at the null device while it profiles,
and keeps Python's own sys.stderr on the real one, so warnings and errors still reach the learner.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

import torch
from torch.autograd.profiler_util import EventList

from ..checks import bilingual, check_size

MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::_weight_int8pack_mm")


@contextlib.contextmanager
def _native_stderr_hidden() -> Iterator[None]:
    """Send what C++ writes to descriptor 2 to the null device; Python's sys.stderr keeps writing where it did."""
    python_stderr = sys.stderr
    python_stderr.flush()
    saved = os.dup(2)
    try:
        if _writes_to_descriptor_2(python_stderr):  # a terminal or a pipe, not a notebook's kernel stream
            sys.stderr = open(saved, "w", closefd=False)
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        if sys.stderr is not python_stderr:
            sys.stderr.close()
            sys.stderr = python_stderr
        os.dup2(saved, 2)
        os.close(saved)


def _writes_to_descriptor_2(stream: object) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False


def profile_calls(call: Callable[[], object], repeats: int = 3) -> EventList:
    """Run `call` `repeats` times under torch.profiler (CPU) and return the events averaged by operator."""
    if not callable(call):
        raise TypeError(bilingual(f"call must be a function taking no arguments, got {type(call).__name__}.",
                                  f"call 须是不带参数的函数，收到的是 {type(call).__name__}。"))
    repeats = check_size(repeats, "repeats")
    with _native_stderr_hidden():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            for _ in range(repeats):
                call()
    return profile.key_averages()


def matmul_share(events: EventList) -> float:
    """The fraction of the events' own CPU time spent in matrix products (mm, addmm, bmm, int8 weight mm)."""
    total = sum(event.self_cpu_time_total for event in events)
    if total <= 0:
        raise ValueError(bilingual("The profile holds no CPU time: profile at least one call that runs torch operators.",
                                   "剖析结果里没有 CPU 时间：请至少剖析一次会调用 torch 算子的运算。"))
    matmul = sum(event.self_cpu_time_total for event in events if event.key in MATMUL_OPS)
    return matmul / total
