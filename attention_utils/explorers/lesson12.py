"""Lesson 12's figures: the cache growing token by token, and the explorer that steps through generation."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..inference.kv_cache import LayerCache, kv_cache_bytes
from ..checks import bilingual, check_same_length, check_size
from ..language import text
from .widgets import explore

# what happens to the key and value of each position at one step
FUTURE, COMPUTED, READ, DROPPED = 0, 1, 2, 3
COLORS = ListedColormap(["white", "tab:orange", "tab:blue", "lightgray"])
MOST_STEPS = 1000  # one column per position: more would be unreadable, and each step walks the cache again


def draw_cache_growth(tokens_seen: list[int], nbytes: list[int]) -> Figure:
    """cache.nbytes after each step against the tokens it holds: a straight line whose slope the formula predicts."""
    check_same_length({"tokens_seen": tokens_seen, "nbytes": nbytes})
    fig, ax = plt.subplots(figsize=(6, 3.2), layout="constrained")
    ax.plot(tokens_seen, nbytes, marker="o")
    ax.set(xlabel=text("tokens in the cache", "缓存中的词元数"), ylabel=text("cache.nbytes", "cache.nbytes（字节）"))
    return fig


def cache_after(steps: int, prompt_length: int, window: int | None, sinks: int) -> LayerCache:
    """The package's cache after the prefill and `steps` decode steps (1 key and value per head of 1 number)."""
    steps, prompt_length = check_size(steps, "steps", minimum=0, maximum=MOST_STEPS), check_size(prompt_length, "prompt_length")
    cache = LayerCache()
    prompt = torch.zeros(1, 1, prompt_length, 1)
    cache.update(prompt, prompt, window, sinks)
    for _ in range(steps):
        new = torch.zeros(1, 1, 1, 1)
        cache.update(new, new, window, sinks)
    return cache


def step_rows(step: int, prompt_length: int, window: int | None, sinks: int) -> torch.Tensor:
    """(3, positions) states at one step: without a cache, with a cache, with a windowed cache (the real one)."""
    step, prompt_length = check_size(step, "step", minimum=0, maximum=MOST_STEPS), check_size(prompt_length, "prompt_length")
    total = prompt_length + step  # tokens that go into this step's attention
    new = range(total) if step == 0 else range(total - 1, total)
    rows = torch.full((3, total), FUTURE)
    rows[0] = COMPUTED  # without a cache every key and value is computed again
    rows[1:, : total - len(new)] = READ
    rows[1:, list(new)] = COMPUTED
    if window is not None:
        kept = cache_after(step, prompt_length, window, sinks).positions.tolist()
        for position in range(total):
            if position not in kept:
                rows[2, position] = DROPPED
    return rows


def draw_generation(step: int, prompt_length: int, new_tokens: int, window: int, sinks: int, bytes_per_token: int) -> Figure:
    """Positions across, one row per way of generating; below, the windowed cache's slots; the title gives its size."""
    new_tokens = check_size(new_tokens, "new_tokens", maximum=MOST_STEPS)
    if check_size(step, "step", minimum=0) >= new_tokens:
        raise ValueError(bilingual(f"step must be below new_tokens={new_tokens} (steps 0 to {new_tokens - 1}), got {step}.",
                                   f"step 必须小于 new_tokens={new_tokens}（第 0 到 {new_tokens - 1} 步），实际是 {step}。"))
    window, sinks = check_size(window, "window", minimum=0), check_size(sinks, "sinks", minimum=0)
    window_or_none = window or None
    sinks = sinks if window_or_none else 0
    rows = step_rows(step, prompt_length, window_or_none, sinks)
    positions = prompt_length + new_tokens
    grid = torch.full((3, positions), FUTURE)
    grid[:, : rows.shape[1]] = rows
    fig, (ax, slots_ax) = plt.subplots(2, 1, figsize=(10, 4.4), height_ratios=(3, 1), layout="constrained")
    ax.imshow(grid.numpy(), cmap=COLORS, vmin=0, vmax=3, aspect="auto")
    sink_words = text(f" + {sinks} sink{'s' if sinks > 1 else ''}", f" + {sinks} 个汇聚点") if sinks else ""
    ax.set_yticks(range(3), [text("no cache", "不用缓存"), text("KV cache", "KV 缓存"),
                             text(f"window W = {window}", f"窗口 W = {window}") + sink_words if window
                             else text("window: off", "窗口：关闭")])
    ax.set_xticks(range(positions))
    ax.set_xticks([x - 0.5 for x in range(positions)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(3)], minor=True)
    ax.grid(which="minor", color="white", linewidth=3)
    ax.tick_params(which="minor", length=0)
    ax.axvline(prompt_length - 0.5, color="black", linewidth=1.5)
    ax.set_xlabel(text("position (the prompt left of the black line, then generated tokens)",
                       "位置（黑线左边是提示词，右边是生成的词元）"))
    cached = rows[2] if window else rows[1]
    kept, seen = int(((cached == READ) | (cached == COMPUTED)).sum()), rows.shape[1]
    what = text("prefill" if step == 0 else f"decode step {step}", "预填充" if step == 0 else f"第 {step} 步解码")
    ax.set_title(text(f"{what}: the cache holds {kept} of {seen} tokens per layer, {kept * bytes_per_token:,} bytes in all",
                      f"{what}：每层缓存存着 {seen} 个词元中的 {kept} 个，共 {kept * bytes_per_token:,} 字节"))
    legend = [Patch(facecolor=COLORS(state), edgecolor="gray", label=label) for state, label in (
        (COMPUTED, text("computed at this step", "这一步计算")), (READ, text("read from the cache", "从缓存读取")),
        (DROPPED, text("dropped by the window", "被窗口丢弃")))]
    ax.legend(handles=legend, loc="lower center", bbox_to_anchor=(0.5, 1.12), ncol=3, fontsize=9, frameon=False)
    draw_slots(slots_ax, step, prompt_length, window_or_none, sinks)
    return fig


def draw_slots(ax, step: int, prompt_length: int, window: int | None, sinks: int) -> None:
    """The windowed cache's slots in memory order, each with the position it holds; the one just written in orange."""
    ax.set(xticks=[], yticks=[])
    for side in ax.spines.values():
        side.set_visible(False)
    if window is None:
        ax.text(0.5, 0.5, text("no window: the cache grows by one slot per token",
                               "没有窗口：每来一个词元，缓存就多一个位置"), ha="center", va="center", transform=ax.transAxes)
        return
    held = cache_after(step, prompt_length, window, sinks).positions.tolist()
    newest = prompt_length + step - 1
    for slot, position in enumerate(held):
        color = COLORS(COMPUTED) if position == newest else COLORS(READ)
        ax.add_patch(plt.Rectangle((slot, 0), 0.92, 0.8, facecolor=color, edgecolor="gray"))
        ax.text(slot + 0.46, 0.4, str(position), ha="center", va="center", color="white", fontsize=11)
    ax.set(xlim=(-0.1, max(len(held), 1) + 0.1), ylim=(-0.35, 0.9))
    ax.set_title(text("the windowed cache in memory: slot by slot, the position each slot holds",
                      "窗口缓存在内存中的样子：逐个槽位，标出每个槽位存的是哪个位置"), fontsize=10)


def show_generation(prompt_length: int = 6, new_tokens: int = 10, num_layers: int = 2, kv_heads: int = 1,
                    head_dim: int = 32, bytes_per_value: int = 4) -> None:
    """Sliders for the decode step, the window W (0 = none) and the sinks kept; the cache's bytes use the model's sizes."""
    prompt_length = check_size(prompt_length, "prompt_length", maximum=MOST_STEPS)
    new_tokens = check_size(new_tokens, "new_tokens", maximum=MOST_STEPS)
    bytes_per_token = kv_cache_bytes(num_layers, kv_heads, head_dim, 1, bytes_per_value)
    explore(
        lambda step, window, sinks: draw_generation(step, prompt_length, new_tokens, window, sinks, bytes_per_token),
        step=widgets.IntSlider(value=new_tokens // 2, min=0, max=new_tokens - 1, description=text("step", "步")),
        window=widgets.IntSlider(value=4, min=0, max=prompt_length + new_tokens, description=text("window W", "窗口 W")),
        sinks=widgets.IntSlider(value=0, min=0, max=3, description=text("sinks", "汇聚点")),
    )
