"""Lesson 11's figures: feature pairs turning on a circle, accuracy at longer lengths, and the rotation explorer."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..checks import bilingual, check_same_length, check_tensor, shown
from ..language import text
from ..plotting.heatmaps import show_heatmaps
from ..rotary import apply_rotary, rotary_frequencies
from ..tiny_model import sinusoidal_positions
from .widgets import explore

PALETTE = ["tab:blue", "tab:green", "tab:purple", "tab:cyan", "tab:brown", "tab:pink", "tab:gray", "tab:olive"]


def turned_pair(pairs: torch.Tensor, index: int, head_dim: int, positions: torch.Tensor, base: float) -> torch.Tensor:
    """Pairs (T, 2) placed as feature pair `index` of a head, turned by the package at `positions`, read back (T, 2)."""
    heads = torch.zeros(len(pairs), head_dim, dtype=torch.float64)
    heads[:, 2 * index : 2 * index + 2] = pairs.double()
    return apply_rotary(heads, positions, base)[:, 2 * index : 2 * index + 2]


def _circle(ax: Axes, radius: float) -> None:
    """A grey circle of `radius` around the origin, square axes, no frame."""
    turn = torch.linspace(0, 2 * math.pi, 200)
    ax.plot(radius * torch.cos(turn), radius * torch.sin(turn), color="lightgray", linewidth=1)
    ax.axhline(0, color="lightgray", linewidth=0.6)
    ax.axvline(0, color="lightgray", linewidth=0.6)
    limit = 1.45 * radius
    ax.set(xlim=(-limit, limit), ylim=(-limit, limit), aspect="equal", xticks=[], yticks=[])
    for side in ax.spines.values():
        side.set_visible(False)


def _arrow(ax: Axes, pair: torch.Tensor, color: str, label: str | None = None, faint: bool = False,
           radius: float | None = None) -> None:
    """One 2-D feature pair as an arrow from the origin, with its label just beyond the tip.

    With `radius` (the circle's), the label sits a fixed 0.25 radius beyond the tip, so even a short
    arrow keeps its label off the arrow and off the origin.
    """
    x, y = pair.tolist()
    ax.annotate("", (x, y), (0, 0), arrowprops=dict(arrowstyle="-|>", color=color, linewidth=1 if faint else 2.2,
                                                    linestyle=":" if faint else "-", alpha=0.45 if faint else 1.0))
    if label:
        length = max(math.hypot(x, y), 1e-12)
        reach = 1.16 if radius is None else (length + 0.25 * radius) / length
        side = "center" if radius is None else ("left" if x >= 0 else "right")  # text grows away from the arrow
        ax.text(reach * x, reach * y, label, color=color, ha=side, va="center", fontsize=9)


def draw_turned_tokens(pairs: torch.Tensor, tokens: Sequence[str], head_dim: int = 64, base: float = 10000.0) -> Figure:
    """Token t's pair (row t of `pairs`) turned at position t: as the fastest pair of a head (left), as the slowest (right).

    Dotted arrows are the pairs before turning; the legend gives each token's position.
    """
    check_tensor(pairs, "pairs", ranks=(2,), last_dim=2, last_name="2 (one feature pair)")
    check_same_length({"pairs": pairs, "tokens": tokens})
    speeds = rotary_frequencies(head_dim, base)
    positions = torch.arange(len(pairs))
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.6), layout="constrained")
    for ax, index, (which_en, which_zh) in zip(axes, (0, len(speeds) - 1), (("fastest", "最快"), ("slowest", "最慢"))):
        _circle(ax, pairs.norm(dim=-1).max().item())
        turned = turned_pair(pairs, index, head_dim, positions, base)
        for position, token in enumerate(tokens):
            color = PALETTE[position % len(PALETTE)]
            _arrow(ax, pairs[position].double(), color, faint=True)
            _arrow(ax, turned[position], color)
            ax.plot([], [], color=color, linewidth=2.2, label=f"{token} ({position})")  # a legend entry per token
        ax.set_title(text(f"pair {index} of {head_dim // 2} ({which_en}):\n{speeds[index]:.3g} rad per position",
                          f"特征对 {index}（共 {head_dim // 2} 对，转得{which_zh}）：\n每个位置转 {speeds[index]:.3g} 弧度"))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels),
               title=text("token (position); dotted: before turning", "词元（位置）；虚线：转动之前"))
    return fig


def draw_layout_maps(right: torch.Tensor, converted: torch.Tensor, wrong: torch.Tensor, tokens: Sequence[str]) -> Figure:
    """Three (T, T) maps of one head side by side: as stored (interleaved), halves after reordering, halves without."""
    titles = [text("interleaved (as stored)", "相邻配对（按存储的方式）"), text("halves, rows reordered", "前后两半配对，行已重排"),
              text("halves, rows as stored", "前后两半配对，行未重排")]
    return show_heatmaps(torch.stack([right, converted, wrong])[None], xlabel=text("keys", "键"), ylabel=text("queries", "查询"),
                         titles=titles, xticklabels=list(tokens), yticklabels=list(tokens), vmin=0, vmax=1, figsize=(14, 4.6))


def draw_length_accuracy(accuracies: dict[str, Sequence[float]], lengths: Sequence[int], chance: float) -> Figure:
    """Held-out accuracy against sequence length, one line per kind of positions; the first length is the trained one."""
    if not isinstance(accuracies, dict) or not accuracies:
        raise TypeError(bilingual(f"accuracies must be a non-empty dict {{label: one accuracy per length}}, got {shown(accuracies)}.",
                                  f"accuracies 必须是非空字典 {{标签: 每个长度一个准确率}}，实际是 {shown(accuracies, True)}。"))
    for label, values in accuracies.items():
        check_same_length({f"accuracies[{label!r}]": values, "lengths": lengths})
    fig, ax = plt.subplots(figsize=(8.5, 3.8), layout="constrained")
    for (label, values), marker in zip(accuracies.items(), "osD^v"):
        ax.plot(lengths, [100 * v for v in values], marker=marker, label=label)
    ax.axhline(100 * chance, color="gray", linestyle=":", label=text("guessing a letter", "随机猜一个字母"))
    ax.axvline(lengths[0], color="gold", linewidth=6, alpha=0.5, label=text("training length", "训练长度"))
    ax.set(xticks=list(lengths), ylim=(0, 105), xlabel=text("sequence length", "序列长度"),
           ylabel=text("held-out accuracy (%)", "留出准确率（%）"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=9)
    return fig


def draw_weight_by_offset(weights: torch.Tensor, trained_length: int) -> Figure:
    """Attention weight (one per key) of the last query against its offset m − n, offsets seen in training shaded."""
    offsets = torch.arange(len(weights) - 1, -1, -1)  # key n of the last query m = T - 1 sits at offset m - n
    fig, ax = plt.subplots(figsize=(7.5, 3.4), layout="constrained")
    ax.bar(offsets.tolist(), weights.tolist(), width=0.8, color="tab:purple")
    ax.axvspan(-0.5, trained_length - 0.5, color="gold", alpha=0.25,
               label=text(f"offsets seen in training (0 to {trained_length - 1})", f"训练中见过的位置差（0 到 {trained_length - 1}）"))
    ax.set(xlabel=text("offset m − n (how far back the key is)", "位置差 m − n（键在多远之前）"),
           ylabel=text("mean attention weight", "平均注意力权重"), xlim=(-1, len(weights)))
    ax.legend()
    return fig


def draw_pair_parts(parts: torch.Tensor, trained_length: int, peak: int, shown_pairs: int = 3) -> Figure:
    """Each pair's part of the last query's mean score against the offset: parts is (offsets 0..T-1, pairs).

    The first `shown_pairs` pairs get a line each, the others one line together; offsets 1 and
    `peak` are marked, the offsets seen in training shaded.
    """
    offsets = list(range(len(parts)))
    fig, ax = plt.subplots(figsize=(8.5, 3.6), layout="constrained")
    ax.axvspan(-0.5, trained_length - 0.5, color="gold", alpha=0.25,
               label=text(f"offsets seen in training (0 to {trained_length - 1})", f"训练中见过的位置差（0 到 {trained_length - 1}）"))
    for pair in range(shown_pairs):
        ax.plot(offsets, parts[:, pair].tolist(), color=PALETTE[pair], linewidth=1, label=text(f"pair {pair}", f"特征对 {pair}"))
        ax.plot([1, peak], parts[[1, peak], pair].tolist(), "o", color=PALETTE[pair], markersize=7)  # the two heights to compare
    ax.plot(offsets, parts[:, shown_pairs:].sum(-1).tolist(), color="gray", linestyle=":",
            label=text(f"pairs {shown_pairs} to {parts.shape[1] - 1} together", f"特征对 {shown_pairs} 到 {parts.shape[1] - 1} 合计"))
    for offset in (1, peak):
        ax.axvline(offset, color="black", linewidth=0.8, linestyle="--")
        ax.text(offset, ax.get_ylim()[1], f" {offset}", va="top", fontsize=9)
    ax.set(xlabel=text("offset m − n", "位置差 m − n"), ylabel=text("part of the mean score", "在平均分数中的份额"),
           xlim=(-1, len(parts)))
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=9)
    return fig


def signed(value: float, digits: int = 4) -> str:
    """A number with a true minus sign (−0.0404, not -0.0404), as the text of the lessons writes it."""
    return f"{value:.{digits}f}".replace("-", "−")


def draw_rotation(token: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor, base: float, shift: int, gap: int,
                  pair: int, longest_shift: int) -> Figure:
    """Left: pair `pair` of the query (the token at m = gap + shift) and of the key (the same token at n = shift).

    Right: the whole score as both move together, with rotary positions (flat) and with sinusoidal
    positions added to the token before W_query and W_key, as in lesson 10 (not flat).
    """
    token, w_query, w_key = token.double(), w_query.double(), w_key.double()
    query, key = token @ w_query, token @ w_key
    head_dim = query.shape[-1]
    shifts = torch.arange(longest_shift + 1)
    queries = apply_rotary(query.expand(len(shifts), head_dim), shifts + gap, base)  # row s: query at gap + s
    keys = apply_rotary(key.expand(len(shifts), head_dim), shifts, base)  # row s: key at s
    rotary = (queries * keys).sum(-1)
    table = sinusoidal_positions(longest_shift + gap + 1, head_dim).double()  # lesson 10's table, added to the token
    added = (((token + table[shifts + gap]) @ w_query) * ((token + table[shifts]) @ w_key)).sum(-1)
    fig, (circle, scores) = plt.subplots(1, 2, figsize=(10.5, 4.4), layout="constrained",
                                         gridspec_kw={"width_ratios": [1, 1.4]})
    features = slice(2 * pair, 2 * pair + 2)
    radius = max(query[features].norm().item(), key[features].norm().item(), 1e-6)
    _circle(circle, radius)
    _arrow(circle, query[features], "tab:orange", faint=True)
    _arrow(circle, key[features], "tab:blue", faint=True)
    _arrow(circle, queries[shift, features], "tab:orange", text(f"query, m = {gap + shift}", f"查询，m = {gap + shift}"),
           radius=radius)
    _arrow(circle, keys[shift, features], "tab:blue", text(f"key, n = {shift}", f"键，n = {shift}"), radius=radius)
    speed = rotary_frequencies(head_dim, base)[pair].item()
    part = (queries[shift, features] * keys[shift, features]).sum().item()  # this pair's share of the score
    circle.set_title(text(f"pair {pair}: {speed:.3g} rad per position\nits part of the score: {signed(part)}",
                          f"特征对 {pair}：每个位置转 {speed:.3g} 弧度\n它在分数中的份额：{signed(part)}"))
    scores.plot(shifts, rotary, color="tab:purple", label=text("rotary: query at m − n + s, key at s",
                                                               "旋转位置编码：查询在 m − n + s，键在 s"))
    scores.plot(shifts, added, color="gray", linestyle="--",
                label=text("sinusoidal, added: the same two positions", "正弦式，相加：同样的两个位置"))
    scores.plot([shift], [rotary[shift]], "o", color="tab:purple", markersize=8)
    scores.set(xlabel=text("shift s", "平移量 s"), ylabel=text("score q·k", "分数 q·k"),
               title=text(f"m − n = {gap}, s = {shift}: rotary score {signed(rotary[shift].item())}",
                          f"m − n = {gap}，s = {shift}：旋转位置编码的分数 {signed(rotary[shift].item())}"))
    scores.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=9)
    return fig


def show_rotation(token: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor, base: float = 10000.0,
                  longest_shift: int = 60) -> None:
    """The explorer: move query and key together (shift), set how far apart they are (m − n), pick a feature pair.

    The query and the key come from the same token (token @ w_query, token @ w_key), as in section 2.
    """
    speeds = rotary_frequencies(w_query.shape[-1], base)
    pairs = [(text(f"pair {i} ({speed:.3g} rad per position)", f"特征对 {i}（每个位置转 {speed:.3g} 弧度）"), i)
             for i, speed in enumerate(speeds.tolist())]

    def draw(shift: int, gap: int, pair: int) -> Figure:
        return draw_rotation(token, w_query, w_key, base, shift, gap, pair, longest_shift)

    explore(draw,
            shift=widgets.IntSlider(value=0, min=0, max=longest_shift, description=text("shift", "平移量")),
            gap=widgets.IntSlider(value=2, min=0, max=8, description="m − n"),
            pair=widgets.Dropdown(options=pairs, value=0, description=text("pair", "特征对")))
