"""Grids of heatmaps: attention scores and weights, one panel per head or layer, on one colour scale."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch

from ..arguments import bilingual, check_flag
from .arguments import (
    LARGEST_FIGURE,
    MOST_PANELS,
    as_real_tensor,
    check_cmap,
    check_colour_range,
    check_figsize,
    check_labels,
    check_text,
)


def show_heatmaps(
    matrices: torch.Tensor,
    xlabel: str,
    ylabel: str,
    titles: Sequence[str] | None = None,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    cmap: str = "Blues",
    annotate: bool = True,
    figsize: tuple[float, float] | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
):
    """Draw a grid of heatmaps from a (rows, cols, queries, keys) tensor; return the figure.

    One function serves every lesson: a single matrix is passed as matrices[None, None]. All panels
    share one colour scale, from the data's min and max unless `vmin`/`vmax` fix it (for example
    0 and 1 for attention weights, so two figures can be compared). NaN and inf are drawn as they
    are (lesson 3 shows where they come from); the scale then comes from the finite entries.
    """
    data = as_real_tensor(matrices, "matrices", "(rows, cols, queries, keys)", "形状为 (行, 列, 查询, 键)").float()
    if data.dim() != 4 or 0 in data.shape:
        raise ValueError(
            bilingual(
                f"show_heatmaps expects `matrices` as a 4-d tensor (rows, cols, queries, keys) with no empty side, "
                f"got shape {tuple(data.shape)}; wrap a single matrix as m[None, None].",
                f"show_heatmaps 需要的 `matrices` 是形状为 (行, 列, 查询, 键) 且每一维都不为空的 4 维张量，实际形状是 "
                f"{tuple(data.shape)}；单个矩阵请写成 m[None, None]。",
            )
        )
    rows, cols, n_q, n_k = data.shape
    if rows * cols > MOST_PANELS:
        raise ValueError(
            bilingual(
                f"matrices of shape {tuple(data.shape)} would draw {rows * cols} panels; show at most "
                f"{MOST_PANELS}, for example matrices[:2, :4].",
                f"形状为 {tuple(data.shape)} 的 matrices 要画 {rows * cols} 个子图；最多画 {MOST_PANELS} 个，"
                "例如 matrices[:2, :4]。",
            )
        )
    check_text(xlabel, "xlabel")
    check_text(ylabel, "ylabel")
    titles = check_labels(titles, rows * cols, "titles", "panel", "子图")
    xticklabels = check_labels(xticklabels, n_k, "xticklabels", "key (column)", "键（列）")
    yticklabels = check_labels(yticklabels, n_q, "yticklabels", "query (row)", "查询（行）")
    cmap = check_cmap(cmap)
    annotate = check_flag(annotate, "annotate")
    figsize = check_figsize(figsize)
    vmin, vmax = check_colour_range(data, vmin, vmax)
    data = data.numpy()
    size = figsize or (min(max(3.2, 0.55 * n_k + 1.6) * cols, LARGEST_FIGURE),
                       min(max(2.8, 0.5 * n_q + 1.2) * rows, LARGEST_FIGURE))
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, layout="constrained")
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            image = ax.imshow(data[r, c], cmap=cmap, vmin=vmin, vmax=vmax)
            if annotate and n_q * n_k <= 100:
                for i in range(n_q):
                    for j in range(n_k):
                        value = float(data[r, c, i, j])
                        shade = "white" if value > (vmin + vmax) / 2 else "black"
                        ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8, color=shade)
            ax.set_xticks(range(n_k), xticklabels if xticklabels is not None else range(n_k),
                          rotation=45 if xticklabels is not None else 0)
            ax.set_yticks(range(n_q), yticklabels if yticklabels is not None else range(n_q))
            if r == rows - 1:
                ax.set_xlabel(xlabel)
            if c == 0:
                ax.set_ylabel(ylabel)
            if titles is not None:
                ax.set_title(titles[r * cols + c])
    fig.colorbar(image, ax=axes, shrink=0.8)
    return fig
