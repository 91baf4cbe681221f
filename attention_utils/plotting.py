"""Figures for the series: bilingual labels, a CJK font that works offline, and heatmaps.

Plot text follows one language setting ("en" or "zh"). Chinese needs a CJK font; we register
Noto Sans CJK from the `manimgx-fonts-cjk` wheel, so a fresh laptop renders real glyphs
without any system font or download.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
from collections.abc import Sequence

import matplotlib
import matplotlib.pyplot as plt
import torch
from matplotlib import font_manager

from .checks import bilingual

LANGUAGES = ("en", "zh")
CJK_FAMILY = "Noto Sans CJK SC"
_SYSTEM_CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans SC", "WenQuanYi Micro Hei", "Source Han Sans SC")
_state = {"language": "en"}


def set_language(language: str) -> None:
    """Choose the language of plot titles and labels ("en" or "zh") and make sure glyphs exist."""
    if language not in LANGUAGES:
        raise ValueError(
            bilingual(
                f"language must be 'en' or 'zh', got {language!r}.",
                f"language 只能是 'en' 或 'zh'，实际是 {language!r}。",
            )
        )
    _state["language"] = language
    use_cjk_font()


def get_language() -> str:
    """The current plot language."""
    return _state["language"]


def text(en: str, zh: str) -> str:
    """Pick the English or the Chinese version of a label, following set_language()."""
    return zh if _state["language"] == "zh" else en


def _register_bundled_font() -> str | None:
    """Register the Simplified Chinese face of the bundled Noto Sans CJK; return its family name."""
    try:
        font_dir = importlib.resources.files("manimgx_fonts_cjk")
    except ModuleNotFoundError:
        return None
    font_file = next((f for f in font_dir.iterdir() if f.name.endswith((".ttc", ".otf", ".ttf"))), None)
    if font_file is None:
        return None
    manager = font_manager.fontManager
    before = len(manager.ttflist)
    manager.addfont(str(font_file))
    added = manager.ttflist[before:]
    # The file is a variable font whose default instance declares weight 100. We register the SC
    # face as normal and as bold so matplotlib picks it for either without a "weight not found"
    # log on stderr (bold Chinese then draws with the same strokes as normal text).
    sc_faces = [entry for entry in added if entry.name == CJK_FAMILY]
    manager.ttflist[before:] = [dataclasses.replace(entry, weight=weight) for entry in sc_faces for weight in (400, 700)]
    return CJK_FAMILY


def use_cjk_font() -> str:
    """Make Chinese text render with real glyphs; return the CJK font family in use."""
    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    family = next((name for name in _SYSTEM_CJK_FAMILIES if name in installed), None)
    family = family or _register_bundled_font()
    if family is None:
        raise RuntimeError(
            bilingual(
                "No Chinese font found for matplotlib; run `make setup` (or pip install manimgx-fonts-cjk) and restart the kernel.",
                "matplotlib 找不到中文字体；请运行 `make setup`（或 pip install manimgx-fonts-cjk）后重启内核。",
            )
        )
    # DejaVu Sans first keeps Latin text and minus signs as they always were; CJK falls back.
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", family]
    return family


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
    0 and 1 for attention weights, so two figures can be compared).
    """
    if matrices.dim() != 4:
        raise ValueError(
            bilingual(
                f"show_heatmaps expects a 4-d tensor (rows, cols, queries, keys), got shape {tuple(matrices.shape)}; "
                "wrap a single matrix as m[None, None].",
                f"show_heatmaps 需要形状为 (行, 列, 查询, 键) 的 4 维张量，实际形状是 {tuple(matrices.shape)}；"
                "单个矩阵请写成 m[None, None]。",
            )
        )
    data = matrices.detach().float().cpu().numpy()
    rows, cols, n_q, n_k = data.shape
    size = figsize or (max(3.2, 0.55 * n_k + 1.6) * cols, max(2.8, 0.5 * n_q + 1.2) * rows)
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, layout="constrained")
    vmin = float(data.min()) if vmin is None else vmin
    vmax = float(data.max()) if vmax is None else vmax
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
            ax.set_xticks(range(n_k), xticklabels or range(n_k), rotation=45 if xticklabels else 0)
            ax.set_yticks(range(n_q), yticklabels or range(n_q))
            if r == rows - 1:
                ax.set_xlabel(xlabel)
            if c == 0:
                ax.set_ylabel(ylabel)
            if titles is not None:
                ax.set_title(titles[r * cols + c])
    fig.colorbar(image, ax=axes, shrink=0.8)
    return fig


def plot_vectors_3d(
    vectors: torch.Tensor,
    labels: Sequence[str],
    highlight: int | None = None,
    angle_between: tuple[int, int] | None = None,
    title: str | None = None,
    elev: float = 15.0,
    azim: float = -35.0,
    ax=None,
):
    """Draw each row of an (n, 3) tensor as a labelled arrow from the origin; return the figure.

    `highlight` draws one arrow (the query) thick and orange; `angle_between=(i, j)` marks the
    angle between arrows i and j with an arc and its size in degrees. Pass `ax` (a 3D axes) to
    draw into an existing figure. The view is orthographic, so angles are not bent by perspective.
    """
    if not isinstance(vectors, torch.Tensor) or vectors.dim() != 2 or vectors.shape[-1] != 3:
        shape = tuple(vectors.shape) if isinstance(vectors, torch.Tensor) else type(vectors).__name__
        raise ValueError(
            bilingual(
                f"plot_vectors_3d expects a tensor of shape (n, 3), one vector per row, got {shape}.",
                f"plot_vectors_3d 需要形状为 (n, 3) 的张量，每行一个向量，实际是 {shape}。",
            )
        )
    if len(labels) != len(vectors):
        raise ValueError(
            bilingual(
                f"Give one label per vector: {len(vectors)} vectors but {len(labels)} labels.",
                f"每个向量需要一个标签：共有 {len(vectors)} 个向量，却给了 {len(labels)} 个标签。",
            )
        )
    data = vectors.detach().double().cpu()
    if ax is None:
        fig = plt.figure(figsize=(6.5, 5.5), layout="constrained")
        ax = fig.add_subplot(projection="3d")
    palette = ["tab:blue", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray", "tab:cyan"]
    for i, (vector, label) in enumerate(zip(data.tolist(), labels)):
        strong = i == highlight
        color = "tab:orange" if strong else palette[i % len(palette)]
        ax.quiver(0, 0, 0, *vector, color=color, linewidth=3 if strong else 1.6, arrow_length_ratio=0.08)
        # labels alternate above and below their tips, so two nearly equal arrows stay readable
        ax.text(*[1.06 * v for v in vector], label, color=color, fontsize=13 if strong else 10,
                va="bottom" if i % 2 else "top")
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
    ax.set_box_aspect((1, 1, 1), zoom=0.9)  # leave room for the axis labels
    ax.set_proj_type("ortho")
    ax.view_init(elev=elev, azim=azim)
    ax.set_xlabel(text("feature 1", "特征 1"))
    ax.set_ylabel(text("feature 2", "特征 2"))
    ax.set_zlabel(text("feature 3", "特征 3"))
    if title is not None:
        ax.set_title(title)
    return ax.figure
