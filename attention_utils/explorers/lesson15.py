"""Lesson 15's figures and explorer: key magnitudes by channel, quality against cache bytes, and bytes read per token.

A point is a dict: {"method": a key of METHOD_NAMES, "label": its setting ("int4", "rank 16"),
"bytes_per_token": cache bytes per token of text, "perplexity": on the held-out text}.
A set-up is a dict: {"label", "shrunk": a key of SHRUNK_NAMES, "weights": weight bytes, "cache_per_token": cache bytes
per cached token, "kept": the most tokens the cache keeps (None: all of them), "perplexity"}.
"""

from __future__ import annotations

import math
import numbers

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..checks import bilingual, cannot_read, check_holds_values, check_index, check_size, check_tensor, shown
from ..language import text
from ..plotting.arguments import MOST_PANELS
from ..plotting.labels import label_points
from .widgets import explore

MOST_POINTS = 200  # each point gets a label placed around the others: a thousand took over a minute
MOST_BARS = 1024  # channels per head drawn as bars (SmolLM2's heads have 64)
METHOD_NAMES = {
    "full": ("float32 as shipped", "原样发布的 float32 缓存"),
    "quantized": ("quantized keys and values", "量化的键和值"),
    "quantized_first": ("quantized, first token kept", "量化，保留第一个词元"),
    "low_rank": ("low-rank, fitted after the turn", "低秩，旋转之后拟合"),
    "low_rank_before": ("low-rank, fitted before the turn", "低秩，旋转之前拟合"),
    "window": ("window with sinks", "带汇聚点的窗口"),
}
SHRUNK_NAMES = {"none": ("nothing shrunk (float32)", "什么都没缩小（float32）"), "weights": ("weights shrunk", "缩小权重"),
                "cache": ("cache shrunk", "缩小缓存"), "both": ("both shrunk", "两者都缩小")}
SETTINGS = ((1, 1024), (16, 4096))  # (batch, tokens in each sequence's cache): one chat, and a busy server


def key_magnitudes(keys: torch.Tensor) -> torch.Tensor:
    """The median |key| of each channel over the tokens, (kv_heads, head_dim), from keys (1, kv_heads, T, head_dim).

    A typical magnitude: a channel large in every token stands out, one large at a single token does not.
    """
    check_tensor(keys, "keys", ranks=(4,))
    if not keys.shape[0] or not keys.shape[2]:
        raise ValueError(bilingual(f"keys {tuple(keys.shape)} hold no token of a first sequence: there is no median.",
                                   f"keys {tuple(keys.shape)} 里第一个序列没有词元：求不出中位数。"))
    return keys[0].abs().median(dim=1).values


def draw_key_magnitudes(magnitudes: torch.Tensor, layer: int) -> Figure:
    """One bar chart per key/value head: the median |key| of each channel; feature pairs (2i, 2i + 1) share a colour."""
    check_tensor(magnitudes, "magnitudes", ranks=(2,))  # (kv_heads, head_dim), as key_magnitudes returns
    check_holds_values(magnitudes, "magnitudes", "a bar chart", "画柱状图")
    negative = not cannot_read(magnitudes) and bool((magnitudes < 0).any())
    if not 1 <= magnitudes.shape[0] <= MOST_PANELS or magnitudes.shape[1] > MOST_BARS or negative:
        raise ValueError(bilingual(
            f"magnitudes must be key_magnitudes' (kv_heads, head_dim) of median |k|, values of at least 0, with 1 to "
            f"{MOST_PANELS} heads (one panel each) of at most {MOST_BARS} channels; got {shown(magnitudes)}.",
            f"magnitudes 应是 key_magnitudes 返回的 (kv_heads, head_dim) |k| 的中位数：值不小于 0，头数在 1 到 {MOST_PANELS} 之间"
            f"（每个头一幅子图），每个头最多 {MOST_BARS} 个通道；实际是 {shown(magnitudes, True)}。"))
    layer = check_size(layer, "layer", minimum=0)
    heads, head_dim = magnitudes.shape
    fig, axes = plt.subplots(heads, 1, figsize=(11, 1.9 * heads + 0.6), sharex=True, layout="constrained", squeeze=False)
    colours = ["C0" if (channel // 2) % 2 == 0 else "C1" for channel in range(head_dim)]
    for head, ax in enumerate(axes[:, 0]):
        ax.bar(range(head_dim), magnitudes[head].tolist(), color=colours)
        ax.set_ylabel(text(f"head {head}\nmedian |k|", f"头 {head}\n|k| 的中位数"))
        ax.grid(True, axis="y", alpha=0.3)
    axes[-1, 0].set_xlabel(text("channel (neighbours 2i, 2i+1 turn together: one colour per feature pair)",
                                "通道（相邻的 2i、2i+1 组成一个特征对：同一特征对同一颜色）"))
    axes[0, 0].set_title(text(f"SmolLM2, layer {layer}: keys after rotary, median magnitude of each channel over the text",
                              f"SmolLM2 第 {layer} 层：旋转之后的键，每个通道在整段文本上绝对值的中位数"))
    return fig


def draw_quality_bytes(points: list[dict], highlight: int | None = None) -> Figure:
    """Perplexity against cache bytes per token (log scale), one colour per method; `highlight` rings one point."""
    _check_points(points)
    if highlight is not None:
        highlight = check_index(highlight, "highlight", len(points), "点数")
    fig, ax = plt.subplots(figsize=(9, 5), layout="constrained")
    for index, method in enumerate(METHOD_NAMES):
        chosen = sorted((p for p in points if p["method"] == method), key=lambda p: p["bytes_per_token"])
        if not chosen:
            continue
        xs, ys = [p["bytes_per_token"] for p in chosen], [p["perplexity"] for p in chosen]
        ax.plot(xs, ys, marker="o", color=f"C{index}", label=text(*METHOD_NAMES[method]))
    full = [p["perplexity"] for p in points if p["method"] == "full"]
    if full:
        ax.axhline(full[0], color="grey", linestyle="--", linewidth=1)
    if highlight is not None:
        point = points[highlight]
        ax.plot(point["bytes_per_token"], point["perplexity"], "o", markersize=16, markerfacecolor="none", color="black")
        ax.set_title(text(f"{point['label']}: {point['bytes_per_token']:,.0f} bytes per token, perplexity "
                          f"{point['perplexity']:.2f}", f"{point['label']}：每个词元 {point['bytes_per_token']:,.0f} 字节，"
                          f"困惑度 {point['perplexity']:.2f}"))
    ax.set_xscale("log")
    ax.set(xlabel=text("cache bytes per token (all layers)", "每个词元的缓存字节数（所有层）"),
           ylabel=text("perplexity on the held-out text", "留出文本上的困惑度"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    # int4 with and without the first token sit a few bytes apart: each label goes where it covers no other,
    # in its method's colour, so the two "int4" labels say which point they belong to
    notes = label_points(ax, [(p["bytes_per_token"], p["perplexity"]) for p in points], [p["label"] for p in points])
    for note, p in zip(notes, points):
        note.set_color(f"C{list(METHOD_NAMES).index(p['method'])}" if p["method"] in METHOD_NAMES else "black")
    return fig


def _check_points(points: object) -> None:
    """A list of 1 to MOST_POINTS points, each a dict with the four keys the figure reads."""
    fields = ("method", "label", "bytes_per_token", "perplexity")
    if not isinstance(points, (list, tuple)) or not 1 <= len(points) <= MOST_POINTS or not all(
            isinstance(p, dict) and set(fields) <= p.keys() for p in points):
        raise TypeError(bilingual(
            f"points must be a list of 1 to {MOST_POINTS} dicts with the keys {', '.join(fields)}, got {shown(points)}.",
            f"points 必须是 1 到 {MOST_POINTS} 个字典组成的列表，每个字典带有 {'、'.join(fields)} 这些键，实际是 {shown(points, True)}。"))
    unknown = [point["method"] for point in points if point["method"] not in METHOD_NAMES]
    if unknown:
        raise ValueError(bilingual(
            f"points: method {shown(unknown[0])} is not one of {', '.join(METHOD_NAMES)}; its colour and legend would be "
            "missing from the figure.",
            f"points：method {shown(unknown[0], True)} 不在 {'、'.join(METHOD_NAMES)} 之中；图里不会有它的颜色和图例。"))
    for point in points:
        if not all(isinstance(point[key], numbers.Real) and not isinstance(point[key], bool) and 0 < point[key] < math.inf
                   for key in ("bytes_per_token", "perplexity")):
            raise ValueError(bilingual(
                f"bytes_per_token and perplexity of each point must be positive, finite numbers (bytes sit on a "
                f"logarithmic axis), got {shown(point)}.",
                f"每个点的 bytes_per_token 和 perplexity 都必须是有限的正数（字节数画在对数坐标轴上），实际是 {shown(point, True)}。"))


def show_quality_bytes(points: list[dict]) -> None:
    """The explorer: pick a cache (ordered by bytes) and see where it sits."""
    _check_points(points)
    order = sorted(range(len(points)), key=lambda i: points[i]["bytes_per_token"])
    options = [(f"{points[i]['label']} ({points[i]['bytes_per_token']:,.0f} B)", i) for i in order]
    explore(lambda chosen: draw_quality_bytes(points, chosen),
            chosen=widgets.SelectionSlider(options=options, value=order[-1], description=text("cache", "缓存"),
                                           layout=widgets.Layout(width="520px")))


def bytes_read(setup: dict, batch: int, length: int) -> float:
    """Bytes a decode step reads per generated token: the weights, shared by the batch, plus this sequence's own cache."""
    kept = length if setup["kept"] is None else min(length, setup["kept"])
    return setup["weights"] / batch + setup["cache_per_token"] * kept


def draw_bytes_read(setups: list[dict], settings: tuple = SETTINGS) -> Figure:
    """Perplexity against MB read per generated token, one panel per (batch, length): which bytes are worth shrinking."""
    _check_setups(setups)
    if not isinstance(settings, (list, tuple)) or not 1 <= len(settings) <= MOST_PANELS or not all(
            isinstance(s, (list, tuple)) and len(s) == 2 and all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                                                 for n in s) for s in settings):
        raise TypeError(bilingual(
            f"settings must be 1 to {MOST_PANELS} (batch, length) pairs of positive whole numbers, got {shown(settings)}.",
            f"settings 必须是 1 到 {MOST_PANELS} 个由正整数组成的 (batch, length) 对，实际是 {shown(settings, True)}。"))
    fig, axes = plt.subplots(1, len(settings), figsize=(5.5 * len(settings), 4.6), sharey=True, layout="constrained",
                             squeeze=False)
    for ax, (batch, length) in zip(axes[0], settings):
        for index, shrunk in enumerate(SHRUNK_NAMES):
            chosen = [s for s in setups if s["shrunk"] == shrunk]
            if chosen:
                ax.scatter([bytes_read(s, batch, length) / 1e6 for s in chosen], [s["perplexity"] for s in chosen],
                           color="black" if shrunk == "none" else f"C{index - 1}", label=text(*SHRUNK_NAMES[shrunk]))
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))  # 50, 100, 200 rather than 10^2
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set(title=text(f"batch {batch}, {length:,} tokens in each cache", f"批大小 {batch}，每个缓存 {length:,} 个词元"),
               xlabel=text("MB read per generated token (log scale)", "每生成一个词元读取的 MB（对数刻度）"))
        ax.grid(True, which="both", alpha=0.3)
        label_points(ax, [(bytes_read(s, batch, length) / 1e6, s["perplexity"]) for s in setups], [s["label"] for s in setups])
    axes[0, 0].set_ylabel(text("perplexity on the held-out text", "留出文本上的困惑度"))
    handles, labels = axes[0, 0].get_legend_handles_labels()  # one legend below both panels: inside, it hid a point
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9)
    return fig


def _check_setups(setups: object) -> None:
    """A list of 1 to MOST_POINTS set-ups, each with the keys bytes_read and the figure read."""
    fields = ("label", "shrunk", "weights", "cache_per_token", "kept", "perplexity")
    if not isinstance(setups, (list, tuple)) or not 1 <= len(setups) <= MOST_POINTS or not all(
            isinstance(s, dict) and set(fields) <= s.keys() for s in setups):
        raise TypeError(bilingual(
            f"setups must be a list of 1 to {MOST_POINTS} dicts with the keys {', '.join(fields)}, got {shown(setups)}.",
            f"setups 必须是 1 到 {MOST_POINTS} 个字典组成的列表，每个字典带有 {'、'.join(fields)} 这些键，实际是 {shown(setups, True)}。"))
    for s in setups:
        sizes = [s[key] for key in ("weights", "cache_per_token", "perplexity")] + ([] if s["kept"] is None else [s["kept"]])
        if s["shrunk"] not in SHRUNK_NAMES or not all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) and 0 < v < math.inf for v in sizes):
            raise ValueError(bilingual(
                f"each set-up needs shrunk from {', '.join(SHRUNK_NAMES)}, positive finite weights, cache_per_token and "
                f"perplexity, and kept None or a positive number; got {shown(s)}.",
                f"每个设置的 shrunk 必须是 {'、'.join(SHRUNK_NAMES)} 之一，weights、cache_per_token 和 perplexity 必须是有限的正数，"
                f"kept 是 None 或正数；实际是 {shown(s, True)}。"))
