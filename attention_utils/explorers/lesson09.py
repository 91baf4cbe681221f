"""Lesson 9's figures: the tiled kernel at work tile by tile (the explorer), and the saved memory measurements."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..language import text
from .widgets import explore

# tiled(queries, keys, values, block_q, block_k, causal, steps) -> output, appending to `steps` one dict per
# tile: rows, cols (slices), skipped (bool), and max, sum, unnormalized (every query's m, ℓ and o after it).
TiledLoop = Callable[..., torch.Tensor]
BLOCK_SIZES = (1, 2, 3)


def _draw_tiles(ax: Axes, steps: list[dict], step: int, tokens: Sequence[str], causal: bool) -> None:
    """The grid of tiles: the current one orange, finished ones blue, skipped ones hatched; dots on hidden positions."""
    length = len(tokens)
    for number, tile in enumerate(steps):
        corner = (tile["cols"].start, tile["rows"].start)
        size = (tile["cols"].stop - corner[0], tile["rows"].stop - corner[1])
        colour = "orange" if number == step - 1 else "#9ecae1" if number < step - 1 and not tile["skipped"] else "white"
        ax.add_patch(Rectangle(corner, *size, facecolor=colour, edgecolor="black", linewidth=1.2,
                               hatch="///" if tile["skipped"] else None))
    if causal:
        hidden = [(j + 0.5, i + 0.5) for i in range(length) for j in range(i + 1, length)]
        ax.plot(*zip(*hidden), ".", color="grey")
    centres = [t + 0.5 for t in range(length)]
    ax.set(xlim=(0, length), ylim=(length, 0), xlabel=text("keys", "键"), ylabel=text("queries", "查询"))
    ax.set_xticks(centres, tokens, rotation=45)
    ax.set_yticks(centres, tokens)
    skipped = step > 0 and steps[step - 1]["skipped"]
    if step == 0:
        ax.set_title(text(f"start: no tile computed yet (of {len(steps)})", f"开始：还没有计算任何分数块（共 {len(steps)} 个）"))
        return
    ax.set_title(text(f"tile {step} of {len(steps)}" + (" (skipped)" if skipped else ""),
                      f"第 {step} 个分数块，共 {len(steps)} 个" + ("（跳过）" if skipped else "")))


def _draw_statistics(ax: Axes, state: dict | None, started: torch.Tensor, tokens: Sequence[str]) -> None:
    """A table of every query row's running maximum m and running sum ℓ; the rows of the current tile shaded."""
    cells = [[f"{state['max'][i, 0]:.3f}", f"{state['sum'][i, 0]:.3f}"] if started[i] else ["–", "–"]
             for i in range(len(tokens))]
    current = range(state["rows"].start, state["rows"].stop) if state else range(0)
    shades = [["#fdd0a2"] * 2 if i in current else ["white"] * 2 for i in range(len(tokens))]
    ax.table(cellText=cells, rowLabels=tokens, colLabels=["m", "ℓ"], loc="center", cellColours=shades).scale(1, 1.6)
    ax.axis("off")
    ax.set_title(text("running max m and sum ℓ", "累积最大值 m 与累积和 ℓ"))


def _draw_outputs(ax: Axes, state: dict | None, started: torch.Tensor, final: torch.Tensor, tokens: Sequence[str]) -> None:
    """Each row's output so far, o / ℓ, over its final value; the redder, the further from it (grey: not started)."""
    partial = state["unnormalized"] / state["sum"].clamp(min=1e-12) if state else torch.zeros_like(final)
    distance = torch.where(started[:, None], (partial - final).abs(), torch.full_like(final, math.nan))
    ax.imshow(distance.numpy(), cmap=plt.get_cmap("Reds").with_extremes(bad="#eeeeee"), vmin=0, vmax=0.05, aspect="auto")
    for i in range(final.shape[0]):
        for c in range(final.shape[1]):
            now = f"{partial[i, c]:.2f}" if started[i] else "–"
            dark = started[i] and distance[i, c] > 0.03  # white text on dark red
            ax.text(c, i, f"{now}\n({final[i, c]:.2f})", ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")
    ax.set(xticks=range(final.shape[1]), xlabel=text("feature", "特征"))
    ax.set_yticks(range(len(tokens)), tokens)
    ax.set_title(text("output so far (final)", "目前的输出（最终值）"))


def draw_kernel(tiled: TiledLoop, inputs: torch.Tensor, tokens: Sequence[str], step: int, block: int,
                causal: bool) -> Figure:
    """Self-attention of `inputs` with square tiles of `block`, stopped after tile `step` (0: before the first)."""
    steps: list[dict] = []
    final = tiled(inputs, inputs, inputs, block, block, causal, steps)
    step = min(step, len(steps))
    state = steps[step - 1] if step else None
    started = state["sum"][:, 0] > 0 if state else torch.zeros(len(tokens), dtype=torch.bool)
    fig, (ax_tiles, ax_stats, ax_out) = plt.subplots(1, 3, figsize=(13, 4.3), layout="constrained",
                                                    gridspec_kw={"width_ratios": [1, 0.8, 1]})
    _draw_tiles(ax_tiles, steps, step, tokens, causal)
    _draw_statistics(ax_stats, state, started, tokens)
    _draw_outputs(ax_out, state, started, final, tokens)
    return fig


def _tile_count(length: int, block: int) -> int:
    """Square tiles of `block` over a (length, length) score matrix: the step slider's last value."""
    return math.ceil(length / block) ** 2


def show_kernel(tiled: TiledLoop, inputs: torch.Tensor, tokens: Sequence[str], step: int = 4, block: int = 2,
                causal: bool = True) -> None:
    """The explorer: a step slider walks through the tiles; the block size and the causal rule can be changed."""
    last = _tile_count(len(tokens), block)
    step_slider = widgets.IntSlider(value=step, min=0, max=last, description=text("step", "第几步"))
    block_choice = widgets.Dropdown(options=BLOCK_SIZES, value=block, description=text("block size", "块大小"))
    block_choice.observe(lambda change: setattr(step_slider, "max", _tile_count(len(tokens), change["new"])),
                         names="value")
    rule = widgets.ToggleButtons(options=[(text("causal", "因果"), True), (text("full", "完整"), False)], value=causal)
    explore(functools.partial(draw_kernel, tiled, inputs, tokens), step=step_slider, block=block_choice, causal=rule)


def draw_memory(kernel: dict, names: dict[str, str]) -> Figure:
    """Extra peak memory against T on log-log axes, one line per kernel, each with its slope fitted from T = 2048."""
    lengths = sorted({row["length"] for row in kernel["rows"]})
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    for key, style in zip(names, ("o-", "s-", "^-")):
        own = sorted((row for row in kernel["rows"] if row["kernel"] == key), key=lambda row: row["length"])
        x, y = [row["length"] for row in own], [row["memory_mib"] for row in own]
        ax.loglog(x, y, style, label=names[key])
        slope = kernel["slopes_from_2048"][key]["memory"]
        ax.annotate(text(f"slope {slope:.2f}", f"斜率 {slope:.2f}"), (x[-1], y[-1]), textcoords="offset points",
                    xytext=(6, -4))
    ax.set_xticks(lengths, [str(t) for t in lengths])
    ax.minorticks_off()
    ax.set_xlim(right=ax.get_xlim()[1] * 1.8)  # room for the slopes
    ax.set(xlabel=text("sequence length T", "序列长度 T"), ylabel=text("extra peak memory (MiB)", "额外峰值内存（MiB）"),
           title=text("One causal attention call, (1, 8, T, 64), float32", "一次因果注意力计算，(1, 8, T, 64)，float32"))
    ax.legend()
    return fig
