"""Profile a few decode steps with torch.profiler, and the share of their time in matrix products (lesson 14).

torch 2.13's profiler writes a "profiler_start" and a "profiler_stop" line from C++ straight to the
process's standard error (file descriptor 2), past Python's sys.stderr; in a notebook they would be
stored as an error stream. `profile_calls` points descriptor 2 at the null device while it profiles,
and keeps Python's own sys.stderr on the real one, so warnings and errors still reach the learner.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator

import torch
from torch.autograd.profiler_util import EventList

from ..checks import bilingual, check_size, shown

MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::_weight_int8pack_mm", "aten::_weight_int4pack_mm_for_cpu")


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


MOST_REPEATS = 1000  # lesson 14 profiles 3 decode steps; a thousand of the real model's take a minute


def profile_calls(call: Callable[[], object], repeats: int = 3) -> EventList:
    """Run `call` `repeats` times under torch.profiler (CPU) and return the events averaged by operator."""
    if not callable(call) or not _takes_no_arguments(call):
        raise TypeError(bilingual(f"call must be a function taking no arguments, such as lambda: model(x), got {shown(call)}.",
                                  f"call 须是不带参数的函数，例如 lambda: model(x)，收到的是 {shown(call, True)}。"))
    repeats = check_size(repeats, "repeats", maximum=MOST_REPEATS)
    with _native_stderr_hidden():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            for _ in range(repeats):
                call()
    return profile.key_averages()


def _takes_no_arguments(call: Callable) -> bool:
    """False when calling `call()` would fail for want of an argument (True where Python cannot tell)."""
    try:
        inspect.signature(call.forward if isinstance(call, torch.nn.Module) else call).bind()
    except TypeError:
        return False
    except ValueError:  # some built-ins have no signature to read
        return True
    return True


def matmul_share(events: EventList) -> float:
    """The fraction of the events' own CPU time spent in matrix products (mm, addmm, bmm, int8 and int4 weight mm)."""
    if not isinstance(events, (EventList, list, tuple)) or not all(
            hasattr(event, "self_cpu_time_total") and hasattr(event, "key") for event in events):
        raise TypeError(bilingual(f"events must be what profile_calls returns, got {shown(events)}.",
                                  f"events 必须是 profile_calls 的返回值，实际是 {shown(events, True)}。"))
    total = sum(event.self_cpu_time_total for event in events)
    if total <= 0:
        raise ValueError(bilingual("events hold no CPU time: profile at least one call that runs torch operators.",
                                   "events 里没有 CPU 时间：请至少剖析一次会调用 torch 算子的运算。"))
    matmul = sum(event.self_cpu_time_total for event in events if event.key in MATMUL_OPS)
    return matmul / total


def attention_ms(own_ms: dict[str, float]) -> float:
    """SDPA's own time in a profile given as {operator: ms}: every operator named scaled_dot_product (the CPU kernel
    torch picked, whichever it was, and the call around it), so a step's growth with its cache can be read apart."""
    return sum(ms for name, ms in own_ms.items() if "scaled_dot_product" in name)
