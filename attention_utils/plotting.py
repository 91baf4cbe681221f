"""Figures for the series: bilingual labels, a Chinese font that works offline, and heatmaps.

Plot text follows one language setting ("en" or "zh"). Chinese needs a CJK font. The series
ships one: Noto Sans SC Regular (SIL Open Font License) from the pinned `pylopdf-fonts-zh-cn`
package, a static font with Simplified Chinese glyph forms. It is preferred over any system
font, so every machine draws the same regular-weight Chinese and the figures are reproducible.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
from collections.abc import Iterator, Sequence

import matplotlib
import matplotlib.pyplot as plt
import torch
from matplotlib import font_manager

from .checks import bilingual
from .language import LANGUAGES, choose_language, get_language, text  # noqa: F401 (lessons import text from here)

BUNDLED_FONT_PACKAGE = "pylopdf_fonts_zh_cn"
BUNDLED_FONT_FILE = "NotoSansSC-Regular.otf"
# The Chinese font in use is registered under a family name of its own, so a system font that happens
# to share its name (perhaps a thin variable "Noto Sans SC") can never be picked in its place.
CHINESE_FAMILY = "Chinese (attention_utils)"
# Used only when the bundled font is missing: Simplified Chinese system fonts, best first.
SYSTEM_CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "Noto Sans SC",
    "Microsoft YaHei",
    "PingFang SC",
    "WenQuanYi Micro Hei",
)
REGULAR, BOLD = 400, 700


def set_language(language: str) -> None:
    """Choose the language of plot titles, labels and printed lines ("en" or "zh"); make sure glyphs exist."""
    choose_language(language)
    use_cjk_font()


def _weight(entry: font_manager.FontEntry) -> int:
    """A font entry's weight as a number (matplotlib stores 400 or "normal", 700 or "bold")."""
    return entry.weight if isinstance(entry.weight, int) else font_manager.weight_dict.get(entry.weight, REGULAR)


def _candidate_fonts() -> Iterator[tuple[str, str]]:
    """Yield (font file, family name) pairs to try for Chinese text, most reliable first.

    The bundled font comes first: it is pinned, regular weight and tested. A system font is used
    only without it, and only a regular or medium face of a known Simplified Chinese family:
    a thin face would draw hairline strokes next to regular Latin text.
    """
    try:
        bundled = importlib.resources.files(BUNDLED_FONT_PACKAGE) / BUNDLED_FONT_FILE
    except ModuleNotFoundError:
        bundled = None
    if bundled is not None and bundled.is_file():
        yield str(bundled), "Noto Sans SC"
    installed = list(font_manager.fontManager.ttflist)
    for family in SYSTEM_CJK_FAMILIES:
        for entry in installed:
            if entry.name == family and entry.style == "normal" and REGULAR <= _weight(entry) <= 500:
                yield entry.fname, family


def _register(path: str, family: str) -> bool:
    """Register the regular face `family` of the font file at `path` as CHINESE_FAMILY; True if found.

    The face is registered for normal and for bold text: matplotlib cannot embolden a font, and
    without a bold entry it logs "Failed to find font weight" on stderr for every bold label.
    Bold Chinese therefore keeps regular strokes.
    """
    manager = font_manager.fontManager
    before = len(manager.ttflist)
    manager.addfont(path)  # this also clears matplotlib's cache of font look-ups
    faces = [entry for entry in manager.ttflist[before:] if entry.name == family and entry.style == "normal"]
    regular = min(faces, key=lambda entry: abs(_weight(entry) - REGULAR), default=None)
    manager.ttflist[before:] = (
        [dataclasses.replace(regular, name=CHINESE_FAMILY, weight=weight) for weight in (REGULAR, BOLD)]
        if regular is not None
        else []
    )
    return regular is not None


def use_cjk_font() -> str:
    """Make Chinese text render with real glyphs at regular weight; return the font file in use."""
    manager = font_manager.fontManager
    if not any(entry.name == CHINESE_FAMILY for entry in manager.ttflist):
        if not any(_register(path, family) for path, family in _candidate_fonts()):
            raise RuntimeError(
                bilingual(
                    "matplotlib has no Chinese font: run `make setup` (or `pip install pylopdf-fonts-zh-cn==0.1.1`) "
                    "in the series' environment, then restart the kernel.",
                    "matplotlib 找不到中文字体：请在本系列的环境中运行 `make setup`"
                    "（或 `pip install pylopdf-fonts-zh-cn==0.1.1`），然后重启内核。",
                )
            )
    # DejaVu Sans first keeps Latin text and minus signs as they always were; Chinese falls back.
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", CHINESE_FAMILY]
    return next(entry.fname for entry in manager.ttflist if entry.name == CHINESE_FAMILY)


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
    # no red in the palette: next to the orange query it is hard to tell apart, above all for colour-blind readers
    palette = ["tab:blue", "tab:green", "tab:purple", "tab:cyan", "tab:brown", "tab:pink", "tab:gray", "tab:olive"]
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
