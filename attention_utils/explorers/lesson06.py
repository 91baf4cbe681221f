"""Lesson 6's figures: which dropout scale keeps the mean, how fast an average of draws converges, and the rate explorer."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..language import text
from .widgets import explore

COIN_SETS = 10  # the explorer flips its coins from this many fixed sets of uniform numbers


def draw_scale_means(rates: torch.Tensor, kept: torch.Tensor) -> Figure:
    """The mean of a vector of ones after dropout at each rate, scaled by 1/(1-p) and by 1/p (log scale)."""
    fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
    ax.plot(rates.tolist(), (kept / (1 - rates)).tolist(), "o-", label=text("scale 1/(1-p): mean stays 1", "缩放 1/(1-p)：均值保持为 1"))
    ax.plot(rates.tolist(), (kept / rates).tolist(), "s--", label=text("scale 1/p: mean is (1-p)/p", "缩放 1/p：均值为 (1-p)/p"))
    ax.axvline(0.5, color="gray", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel(text("dropout rate p", "丢弃率 p"))
    ax.set_ylabel(text("mean after dropout (log scale)", "dropout 后的均值（对数坐标）"))
    ax.set_title(text("Dropout on a vector of ones: which scale keeps the mean?", "对全 1 向量做 dropout：哪种缩放能保持均值？"))
    ax.legend()
    return fig


def draw_error_shrinks(counts: Sequence[int], errors: torch.Tensor) -> Figure:
    """Largest error of the average against the number of draws N: mean of the runs, their range, and 1/√N."""
    repeats = len(errors)  # errors: (repeats, len(counts))
    fig, ax = plt.subplots(figsize=(6.5, 3.6), layout="constrained")
    ax.fill_between(counts, errors.min(dim=0).values.tolist(), errors.max(dim=0).values.tolist(), alpha=0.25,
                    label=text(f"range of {repeats} runs", f"{repeats} 次结果的范围"))
    ax.loglog(counts, errors.mean(dim=0).tolist(), "o-", label=text(f"mean of {repeats} runs", f"{repeats} 次结果的平均"))
    ax.loglog(counts, [1 / c**0.5 for c in counts], "--", color="gray", label="$1/\\sqrt{N}$")
    ax.set_xlabel(text("number of dropout draws N", "dropout 抽样次数 N"))
    ax.set_ylabel(text("max |average - weights|", "最大偏差 |平均 - 权重|"))
    ax.set_title(text("The average of many dropouts approaches the weights", "多次 dropout 的平均值逼近原权重"))
    ax.legend()
    return fig


def draw_dropout(weights: torch.Tensor, tokens: Sequence[str], coins: torch.Tensor, p: float) -> Figure:
    """The weights after dropout at rate p (keep where the coin value is >= p), with each row's sum beside them."""
    rate = round(p, 2)
    result = weights * (coins >= rate) / (1 - rate)
    top = 1 / (1 - rate)  # the largest possible value: a weight of 1, kept and scaled
    fig, (ax_map, ax_sum) = plt.subplots(1, 2, figsize=(8.5, 3.8), width_ratios=[1.7, 1], layout="constrained")
    ax_map.imshow(result.numpy(), cmap="Blues", vmin=0, vmax=top)
    for i, row in enumerate(result):
        for j, value in enumerate(row):
            ax_map.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if value > top / 2 else "black")
    ax_map.set_xticks(range(len(tokens)), tokens, rotation=45)
    ax_map.set_yticks(range(len(tokens)), tokens)
    ax_map.set_title(text(f"causal weights after dropout, p = {rate:.1f}", f"dropout 后的因果权重，p = {rate:.1f}"))
    sums = result.sum(dim=-1)
    ax_sum.barh(list(tokens), sums.tolist(), color="tab:orange")
    ax_sum.axvline(1.0, color="gray", ls="--")
    ax_sum.set_xlim(0, max(2.0, 1.1 * sums.max().item()))
    ax_sum.invert_yaxis()
    ax_sum.set_xlabel(text("row sum", "行和"))
    ax_sum.set_title(text("row sums (1 before dropout)", "每行之和（dropout 前为 1）"))
    return fig


def show_dropout(weights: torch.Tensor, tokens: Sequence[str]) -> None:
    """Move the rate p and pick one of ten fixed coin sets: the dropped weights and their row sums redraw.

    The same uniform numbers serve every rate, so raising p only ever drops more entries.
    """
    coins = torch.rand(COIN_SETS, *weights.shape, generator=torch.Generator().manual_seed(0))
    explore(lambda p, sample: draw_dropout(weights, tokens, coins[sample], p),
            p=widgets.FloatSlider(value=0.5, min=0.0, max=0.9, step=0.1, description="p"),
            sample=widgets.IntSlider(value=0, min=0, max=COIN_SETS - 1, description=text("draw", "第几组")))
