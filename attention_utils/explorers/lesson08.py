"""Lesson 8's helpers: the memory explorer (the (T, T) matrix against what SDPA keeps) and a recorder of aten operations."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter
from torch.utils._python_dispatch import TorchDispatchMode

from ..language import text
from .widgets import explore

HEADS, D_MODEL = 12, 768  # one GPT-2-small layer
LENGTHS = [2**p for p in range(7, 16)]  # 128 ... 32768
LAPTOP_GIB = 16
# operations that only change how the same numbers are laid out; the recorder leaves them out
LAYOUT_ONLY = {"view", "_unsafe_view", "expand", "transpose", "t", "permute", "select", "squeeze", "unsqueeze", "clone"}


class RecordOps(TorchDispatchMode):
    """Write down the name of every aten operation that runs inside the `with` block."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def aten_ops(run: Callable[[], object]) -> str:
    """The aten operations that run() calls, in order, layout-only ones left out, as one line."""
    with RecordOps() as record:
        run()
    return ", ".join(name for name in record.names if name not in LAYOUT_ONLY)


def readable(n_bytes: float) -> str:
    """A number of bytes in GiB from 1 GiB up, in MiB below."""
    return f"{n_bytes / 2**30:,.1f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:,.1f} MiB"


def draw_memory(matrix_bytes: Callable[..., int], kernel_bytes: Callable[..., int],
                T: int, batch_size: int, number_format: str) -> Figure:
    """Both memory formulas against T on log-log axes, a 16 GiB line, and a star at the chosen T."""
    size = 4 if number_format == "float32" else 2  # bytes per number
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    ax.loglog(LENGTHS, [matrix_bytes(batch_size, HEADS, t, size) / 2**30 for t in LENGTHS], "o-",
              label=text("explicit: (b, h, T, T) weights", "显式：(b, h, T, T) 权重"))
    ax.loglog(LENGTHS, [kernel_bytes(batch_size, D_MODEL, t, size) / 2**30 for t in LENGTHS], "s-", color="crimson",
              label=text("SDPA: q, k, v, context", "SDPA：q、k、v 与上下文"))
    ax.axhline(LAPTOP_GIB, color="grey", linestyle=":", label=text("16 GiB laptop", "16 GiB 内存的笔记本"))
    matrix, kernel = matrix_bytes(batch_size, HEADS, T, size), kernel_bytes(batch_size, D_MODEL, T, size)
    ax.plot([T, T], [matrix / 2**30, kernel / 2**30], "k*", markersize=12)
    ax.set_xticks(LENGTHS[::2], [str(t) for t in LENGTHS[::2]])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set(xlabel=text("sequence length T", "序列长度 T"), ylabel=text("memory (GiB)", "内存（GiB）"),
           title=text(f"T = {T}, batch {batch_size}, {number_format}: {readable(matrix)} vs {readable(kernel)}",
                      f"T = {T}，批大小 {batch_size}，{number_format}：{readable(matrix)} 对 {readable(kernel)}"))
    ax.legend(loc="upper left")
    return fig


def show_memory(matrix_bytes: Callable[..., int], kernel_bytes: Callable[..., int]) -> None:
    """Move the length T, pick the batch size and the number format; the lesson's two formulas are redrawn.

    matrix_bytes(batch, heads, T, bytes_per_number) and kernel_bytes(batch, d_model, T, bytes_per_number).
    """
    explore(lambda T, batch_size, number_format: draw_memory(matrix_bytes, kernel_bytes, T, batch_size, number_format),
            T=widgets.SelectionSlider(options=LENGTHS, value=2048, description=text("length T", "长度 T")),
            batch_size=widgets.Dropdown(options=[1, 2, 8, 32], value=8, description=text("batch", "批大小")),
            number_format=widgets.ToggleButtons(options=["float32", "bfloat16"], value="float32",
                                                description=text("format", "数值格式")))
