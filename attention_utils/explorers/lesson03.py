"""Lesson 3's figures: the temperature explorer, the √d_k experiment's plot, and the dimension explorer."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..language import text
from .widgets import explore

# One row of the √d_k experiment: (d_k, variance of q·k, (largest weight, gradient at the softmax input) raw,
# the same scaled).
Measurement = tuple[int, float, tuple[float, float], tuple[float, float]]


def draw_temperature(scores: torch.Tensor, tokens: Sequence[str], query_token: str, temperature: float) -> Figure:
    """Bars of softmax(scores / T) for one query; the largest weight orange, the uniform 1/6 dashed."""
    tokens = list(tokens)
    weights = torch.softmax(scores[tokens.index(query_token)] / temperature, dim=0)
    top = int(weights.argmax())
    fig, ax = plt.subplots(figsize=(6.5, 3.2), layout="constrained")
    ax.bar(tokens, weights.tolist(), color=["tab:orange" if i == top else "tab:blue" for i in range(len(tokens))])
    ax.axhline(1 / len(tokens), color="gray", linestyle="--", label=text("uniform, 1/6", "均匀分布，1/6"))
    ax.set(ylim=(0, 1), ylabel=text("attention weight", "注意力权重"))
    ax.set_title(text(f"query '{query_token}', T = {temperature:.2f}: largest weight {weights.max():.3f}",
                      f"查询“{query_token}”，T = {temperature:.2f}：最大权重 {weights.max():.3f}"))
    ax.legend(loc="upper right")
    return fig


def show_temperature(scores: torch.Tensor, tokens: Sequence[str]) -> None:
    """Pick a query and move the temperature T (a logarithmic slider from 0.05 to 20)."""
    explore(lambda query_token, temperature: draw_temperature(scores, tokens, query_token, temperature),
            query_token=widgets.Dropdown(options=list(tokens), value="journey", description=text("query", "查询")),
            temperature=widgets.FloatLogSlider(value=1.0, base=10, min=-1.3, max=1.3, step=0.02,
                                               description=text("temperature T", "温度 T")))


def draw_scaling(results: Sequence[Measurement], num_keys: int) -> Figure:
    """Three panels against d_k: the variance of q·k, the largest weight, the gradient at the softmax input; raw against scaled."""
    d = [row[0] for row in results]
    fig, axes = plt.subplots(1, 3, figsize=(9, 3.2), layout="constrained")
    axes[0].loglog(d, [row[1] for row in results], "o-", label=text("measured", "实测"))
    axes[0].loglog(d, d, "k--", label=text("dₖ (theory)", "dₖ（理论值）"))
    axes[0].set_title(text("variance of q·k", "q·k 的方差"))
    for ax, column, title in ((axes[1], 0, text("largest softmax weight", "softmax 的最大权重")),
                              (axes[2], 1, text("gradient at the softmax input", "softmax 输入处的梯度"))):
        ax.semilogx(d, [row[2][column] for row in results], "o-", color="tab:red", label=text("raw", "不缩放"))
        ax.semilogx(d, [row[3][column] for row in results], "o-", color="tab:green", label=text("divided by √dₖ", "除以 √dₖ"))
        ax.set_title(title)
    axes[1].axhline(1 / num_keys, color="gray", linestyle=":",
                    label=text(f"uniform, 1/{num_keys}", f"均匀分布，1/{num_keys}"))
    for ax in axes:
        ax.set_xlabel(text("dimension dₖ", "维数 dₖ"))
        ax.legend(fontsize=8)
    return fig


def draw_dimension(draw_entries: Callable[..., torch.Tensor], seed: int, num_keys: int, d_k: int) -> Figure:
    """One random query against `num_keys` random keys: softmax of the raw scores beside the scaled ones."""
    generator = torch.Generator().manual_seed(seed)
    q, k = draw_entries(d_k, generator=generator), draw_entries(num_keys, d_k, generator=generator)
    s = k @ q  # (num_keys, d_k) @ (d_k,) -> (num_keys,)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3), sharey=True, layout="constrained")
    for ax, name, scaled in ((axes[0], text("raw scores", "原始分数"), s),
                             (axes[1], text("divided by √dₖ", "除以 √dₖ"), s / math.sqrt(d_k))):
        weights = torch.softmax(scaled, dim=0)
        ax.bar(range(num_keys), weights.tolist())
        ax.set_xticks(range(0, num_keys, 5))
        ax.set(ylim=(0, 1), xlabel=text("key", "键"),
               title=text(f"{name}: largest weight {weights.max():.2f}", f"{name}：最大权重 {weights.max():.2f}"))
    axes[0].set_ylabel(text("attention weight", "注意力权重"))
    fig.suptitle(text(f"one query, {num_keys} random keys, dₖ = {d_k}", f"一个查询、{num_keys} 个随机键，dₖ = {d_k}"))
    return fig


def show_dimension(draw_entries: Callable[..., torch.Tensor], seed: int, num_keys: int = 16) -> None:
    """Slide d_k from 1 to 1024; `draw_entries(*shape, generator=g)` draws the entries of the query and keys."""
    explore(lambda d_k: draw_dimension(draw_entries, seed, num_keys, d_k),
            d_k=widgets.SelectionSlider(options=[2 ** i for i in range(11)], value=64, description="d_k"))
