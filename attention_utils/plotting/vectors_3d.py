"""Vectors in 3D as labelled arrows from the origin, with the angle between two of them (lessons 2 and 3)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch

from ..arguments import bilingual, check_index, check_real, shown
from ..language import text
from .arguments import as_real_tensor, check_color, check_labels, check_text, listed


def plot_vectors_3d(
    vectors: torch.Tensor,
    labels: Sequence[str],
    highlight: int | None = None,
    angle_between: tuple[int, int] | None = None,
    title: str | None = None,
    elev: float = 15.0,
    azim: float = -35.0,
    ax=None,
    highlight_color: str = "tab:orange",
):
    """Draw each row of an (n, 3) tensor as a labelled arrow from the origin; return the figure.

    `highlight` draws one arrow (the query) thick and orange; `angle_between=(i, j)` marks the
    angle between arrows i and j with an arc and its size in degrees. Pass `ax` (a 3D axes) to
    draw into an existing figure. The view is orthographic, so angles are not bent by perspective.
    `highlight_color` recolours the thick arrow where it is not a query (lesson 3's context vector
    is black, so orange keeps meaning the query "journey" across lessons). Labels sit on a pale
    patch in front of the arrows, so a short arrow's label stays readable over a longer arrow.
    """
    data = as_real_tensor(vectors, "vectors", "of shape (n, 3)", "形状为 (n, 3)")
    if data.dim() != 2 or data.shape[-1] != 3 or data.shape[0] == 0:
        raise ValueError(
            bilingual(
                f"plot_vectors_3d expects `vectors` of shape (n, 3), one vector per row, got {tuple(data.shape)}.",
                f"plot_vectors_3d 需要的 `vectors` 是形状为 (n, 3) 的张量，每行一个向量，实际是 {tuple(data.shape)}。",
            )
        )
    if not torch.isfinite(data).all() or data.abs().max() > 1e150:
        raise ValueError(
            bilingual(
                "vectors must hold finite numbers of a drawable size (below 1e150), got NaN, inf or larger; "
                "find where they first appear with torch.isfinite(vectors).",
                "vectors 里的数必须是有限的，而且不超过 1e150 才能画出来，实际有 NaN、inf 或更大的数；"
                "请用 torch.isfinite(vectors) 找到它们。",
            )
        )
    count = len(data)
    labels = check_labels(labels, count, "labels", "vector", "向量")
    if labels is None:
        raise TypeError(
            bilingual(
                f"labels must be a list with one label per vector ({count}), for example ['a', 'b'], got None.",
                f"labels 必须是列表，每个向量一个标签（共 {count} 个），例如 ['a', 'b']，实际是 None。",
            )
        )
    if highlight is not None:
        highlight = check_index(highlight, "highlight", count, "向量数")
    if angle_between is not None:
        angle_between = _check_pair(angle_between, data)
    check_text(title, "title", optional=True)
    elev, azim = check_real(elev, "elev", "15"), check_real(azim, "azim", "-35")
    check_color(highlight_color, "highlight_color")
    if ax is not None and getattr(ax, "name", None) != "3d":
        raise TypeError(
            bilingual(
                f"ax must be 3D axes, made with fig.add_subplot(projection='3d'), got {type(ax).__name__}.",
                f"ax 必须是三维坐标轴，用 fig.add_subplot(projection='3d') 创建，实际是 {type(ax).__name__}。",
            )
        )
    if ax is None:
        fig = plt.figure(figsize=(6.5, 5.5), layout="constrained")
        ax = fig.add_subplot(projection="3d")
    # no red in the palette: next to the orange query it is hard to tell apart, above all for colour-blind readers
    palette = ["tab:blue", "tab:green", "tab:purple", "tab:cyan", "tab:brown", "tab:pink", "tab:gray", "tab:olive"]
    for i, (vector, label) in enumerate(zip(data.tolist(), labels)):
        strong = i == highlight
        color = highlight_color if strong else palette[i % len(palette)]
        ax.quiver(0, 0, 0, *vector, color=color, linewidth=3 if strong else 1.6, arrow_length_ratio=0.08)
        # labels alternate above and below their tips, so two nearly equal arrows stay readable
        ax.text(*[1.06 * v for v in vector], label, color=color, fontsize=13 if strong else 10,
                va="bottom" if i % 2 else "top", zorder=100,  # in front of every arrow
                bbox={"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 0.5})
    if angle_between is not None:
        a, b = data[angle_between[0]], data[angle_between[1]]
        cosine = float((a @ b / (a.norm() * b.norm())).clamp(-1, 1))
        theta = torch.arccos(torch.tensor(cosine))
        side = b / b.norm() - cosine * a / a.norm()  # the part of b's direction perpendicular to a
        if side.norm() > 1e-9:
            radius = 0.35 * float(min(a.norm(), b.norm()))
            t = torch.linspace(0, float(theta), 30, dtype=torch.float64)[:, None]
            arc = radius * (torch.cos(t) * a / a.norm() + torch.sin(t) * side / side.norm())
            ax.plot(*arc.T.tolist(), color="black", linewidth=1.2)
            ax.text(*(1.15 * arc[15]).tolist(), f"θ = {torch.rad2deg(theta):.1f}°", fontsize=10)
    low, high = min(0.0, float(data.min())), max(1.0, float(data.max()))
    ax.set(xlim=(low, high), ylim=(low, high), zlim=(low, high))
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    ticks = ticks[::2] if len(ticks) > 6 else ticks  # a box wider than 0 to 1 gets every other tick, so labels stay apart
    ax.set(xticks=ticks, yticks=ticks[1:], zticks=ticks)  # no first y tick: it collided with the last x tick ("1.00.0")
    ax.set_box_aspect((1, 1, 1), zoom=0.9)  # leave room for the axis labels
    ax.set_proj_type("ortho")
    ax.view_init(elev=elev, azim=azim)
    ax.set_xlabel(text("feature 1", "特征 1"))
    ax.set_ylabel(text("feature 2", "特征 2"))
    ax.set_zlabel(text("feature 3", "特征 3"))
    if title is not None:
        ax.set_title(title)
    return ax.figure


def _check_pair(pair: object, data: torch.Tensor) -> tuple[int, int]:
    """Two indices of vectors that have a length, so the angle between them exists."""
    if not listed(pair) or len(pair) != 2:
        raise TypeError(
            bilingual(
                f"angle_between must be a pair of vector indices such as (0, 1), got {shown(pair)}.",
                f"angle_between 必须是两个向量下标组成的一对，例如 (0, 1)，实际是 {shown(pair, True)}。",
            )
        )
    first, second = (check_index(i, "angle_between", len(data), "向量数") for i in pair)
    for index in (first, second):
        if not data[index].any():
            raise ValueError(
                bilingual(
                    f"angle_between=({first}, {second}): vector {index} has length 0, so it makes no angle.",
                    f"angle_between=({first}, {second})：向量 {index} 的长度为 0，不构成角度。",
                )
            )
    return first, second
