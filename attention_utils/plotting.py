"""Figures for the series: bilingual labels, a Chinese font that works offline, and heatmaps.

Plot text follows one language setting ("en" or "zh"). Chinese needs a CJK font. The series
ships one: Noto Sans SC Regular (SIL Open Font License) from the pinned `pylopdf-fonts-zh-cn`
package, a static font with Simplified Chinese glyph forms. It is preferred over any system
font, so every machine draws the same regular-weight Chinese and the figures are reproducible.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import math
import numbers
from collections.abc import Iterator, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

from .checks import bilingual, check_flag, check_index, check_real, shown
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
    if not isinstance(language, str):
        raise TypeError(
            bilingual(
                f"language must be 'en' or 'zh', got {type(language).__name__}.",
                f"language 只能是 'en' 或 'zh'，实际是 {type(language).__name__}。",
            )
        )
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


MOST_PANELS = 100  # a grid beyond this is never meant, and takes minutes to lay out
LARGEST_FIGURE = 100.0  # inches per side; matplotlib cannot draw images much larger


def _as_real_tensor(data: object, name: str, shape_en: str, shape_zh: str) -> torch.Tensor:
    """A tensor or numpy array of real numbers (bools count as 0 and 1), as a float64 tensor on the CPU."""
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        data = torch.from_numpy(data.astype(np.float64))
    if not isinstance(data, torch.Tensor) or data.is_complex() or data.is_meta:
        kind = f"a {data.dtype} tensor" if isinstance(data, torch.Tensor) else type(data).__name__
        kind_zh = f"{data.dtype} 张量" if isinstance(data, torch.Tensor) else type(data).__name__
        if getattr(data, "is_meta", False):
            kind, kind_zh = "a tensor on the meta device, which holds no values", "meta 设备上的张量，它没有数值"
        raise TypeError(
            bilingual(
                f"{name} must be a tensor (or numpy array) of real numbers {shape_en}, got {kind}.",
                f"{name} 必须是由实数组成的张量（或 numpy 数组），{shape_zh}，实际是 {kind_zh}。",
            )
        )
    return data.detach().cpu().double()


def _listed(value: object) -> bool:
    """A list, tuple, numpy array or tensor of things; a string or a single (0-d) number is not."""
    if isinstance(value, (str, bytes)) or (isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0):
        return False
    return hasattr(value, "__len__") and hasattr(value, "__iter__")


def _check_labels(labels: object, count: int, name: str, what_en: str, what_zh: str) -> list[str] | None:
    """None, or one label per item: a list, tuple or numpy array (a string is not a list of labels)."""
    if labels is None:
        return None
    if not _listed(labels):
        raise TypeError(
            bilingual(
                f"{name} must be a list with one label per {what_en}, got {type(labels).__name__}.",
                f"{name} 必须是列表，每个{what_zh}一个标签，实际是 {type(labels).__name__}。",
            )
        )
    single = (lambda label: isinstance(label, (str, numbers.Number))
              or (isinstance(label, (torch.Tensor, np.ndarray)) and label.ndim == 0 and not getattr(label, "is_meta", False)))
    if not all(single(label) for label in labels):
        raise TypeError(
            bilingual(
                f"{name} must hold strings (or numbers), one per {what_en}, not lists or tensors.",
                f"{name} 里应当是字符串（或数），每个{what_zh}一个，而不是列表或张量。",
            )
        )
    if len(labels) != count:
        raise ValueError(
            bilingual(
                f"{name} must hold one label per {what_en}: {count} needed, {len(labels)} given.",
                f"{name} 必须每个{what_zh}一个标签：需要 {count} 个，实际给了 {len(labels)} 个。",
            )
        )
    return [str(label.item()) if isinstance(label, (torch.Tensor, np.ndarray)) else str(label) for label in labels]


def _check_text(value: object, name: str, optional: bool = False) -> None:
    """Axis labels and titles are strings (text(en, zh) gives one in the current language)."""
    if not isinstance(value, str) and not (optional and value is None):
        raise TypeError(
            bilingual(
                f"{name} must be a string, got {type(value).__name__}; for example {name}='keys'.",
                f"{name} 必须是字符串，实际是 {type(value).__name__}；例如 text('keys', '键')。",
            )
        )


def _check_figsize(figsize: object) -> tuple[float, float] | None:
    """None, or (width, height) in inches, each a number above 0 and at most LARGEST_FIGURE."""
    if figsize is None:
        return None
    if not isinstance(figsize, (tuple, list)) or len(figsize) != 2:
        raise TypeError(
            bilingual(
                f"figsize must be (width, height) in inches, for example figsize=(6, 4), got {shown(figsize)}.",
                f"figsize 必须是以英寸为单位的 (宽, 高)，例如 figsize=(6, 4)，实际是 {shown(figsize, True)}。",
            )
        )
    sides = [check_real(side, "figsize", "(6, 4)", positive=True) for side in figsize]
    if max(sides) > LARGEST_FIGURE:
        raise ValueError(
            bilingual(
                f"figsize must be at most {LARGEST_FIGURE:g} inches a side, got {tuple(figsize)}.",
                f"figsize 每边不能超过 {LARGEST_FIGURE:g} 英寸，实际是 {tuple(figsize)}。",
            )
        )
    return sides[0], sides[1]


def _check_colour_range(data: torch.Tensor, vmin: object, vmax: object) -> tuple[float, float]:
    """The colour scale: vmin and vmax as given (finite numbers, vmin <= vmax), else the finite data's range."""
    finite = data[torch.isfinite(data)]
    low = check_real(vmin, "vmin", "0") if vmin is not None else float(finite.min()) if finite.numel() else 0.0
    high = check_real(vmax, "vmax", "1") if vmax is not None else float(finite.max()) if finite.numel() else 1.0
    if low > high:
        raise ValueError(
            bilingual(
                f"vmin={low:g} must not be above vmax={high:g}; for attention weights use vmin=0, vmax=1.",
                f"vmin={low:g} 不能大于 vmax={high:g}；注意力权重可以用 vmin=0、vmax=1。",
            )
        )
    return low, high


def _check_color(color: object, name: str) -> None:
    """A colour matplotlib understands, such as 'black' or 'tab:orange'."""
    if not isinstance(color, str):
        raise TypeError(
            bilingual(
                f"{name} must be a colour name (a string) such as 'black', got {shown(color)}.",
                f"{name} 必须是颜色名（字符串），例如 'black'，实际是 {shown(color, True)}。",
            )
        )
    if not matplotlib.colors.is_color_like(color):
        raise ValueError(
            bilingual(
                f"{name} must name a matplotlib colour such as 'black' or 'tab:orange', got {shown(color)}.",
                f"{name} 必须是 matplotlib 认识的颜色名，例如 'black' 或 'tab:orange'，实际是 {shown(color, True)}。",
            )
        )


def _check_cmap(cmap: object) -> object:
    """A colour map's name known to matplotlib ('Blues', 'viridis', ...) or a Colormap."""
    if isinstance(cmap, matplotlib.colors.Colormap) or (isinstance(cmap, str) and cmap in matplotlib.colormaps):
        return cmap
    raise ValueError(
        bilingual(
            f"cmap must name a matplotlib colour map such as 'Blues' or 'viridis', got {shown(cmap)}.",
            f"cmap 必须是 matplotlib 的颜色映射名，例如 'Blues' 或 'viridis'，实际是 {shown(cmap, True)}。",
        )
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
    data = _as_real_tensor(matrices, "matrices", "(rows, cols, queries, keys)", "形状为 (行, 列, 查询, 键)").float()
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
    _check_text(xlabel, "xlabel")
    _check_text(ylabel, "ylabel")
    titles = _check_labels(titles, rows * cols, "titles", "panel", "子图")
    xticklabels = _check_labels(xticklabels, n_k, "xticklabels", "key (column)", "键（列）")
    yticklabels = _check_labels(yticklabels, n_q, "yticklabels", "query (row)", "查询（行）")
    cmap = _check_cmap(cmap)
    annotate = check_flag(annotate, "annotate")
    figsize = _check_figsize(figsize)
    vmin, vmax = _check_colour_range(data, vmin, vmax)
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
    data = _as_real_tensor(vectors, "vectors", "of shape (n, 3)", "形状为 (n, 3)")
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
    labels = _check_labels(labels, count, "labels", "vector", "向量")
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
    _check_text(title, "title", optional=True)
    elev, azim = check_real(elev, "elev", "15"), check_real(azim, "azim", "-35")
    _check_color(highlight_color, "highlight_color")
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
    if not _listed(pair) or len(pair) != 2:
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



# Where a point's label may go, in points from the point, tried in order: right and above, right and below,
# left and above, left and below, then one line further out on each side.
LABEL_OFFSETS = ((4, 3), (4, -3), (-4, 3), (-4, -3), (4, 13), (4, -13), (-4, 13), (-4, -13))


def label_points(ax: Axes, points: Sequence[tuple[float, float]], labels: Sequence[str],
                 fontsize: float = 8) -> list[Annotation]:
    """Write each label beside its point (x, y in data coordinates) so that no label covers another.

    Each label takes the first place of LABEL_OFFSETS where its box stays inside the axes and covers no
    other label, no point and not the legend (draw the legend first); one that fits nowhere takes the
    first place. The figure is laid out once first, so the boxes are measured at the axes' final size.
    """
    if not isinstance(ax, Axes):
        raise TypeError(bilingual(f"ax must be a matplotlib Axes, got {type(ax).__name__}.",
                                  f"ax 必须是 matplotlib 的 Axes，实际是 {type(ax).__name__}。"))
    if not _listed(points) or not all(_listed(p) and len(p) == 2 and all(isinstance(v, numbers.Real) for v in p)
                                      for p in points):
        raise TypeError(bilingual("points must be a list of (x, y) pairs of real numbers, one per label.",
                                  "points 必须是由实数对 (x, y) 组成的列表，每个标签一对。"))
    if not all(math.isfinite(v) for p in points for v in p):
        raise ValueError(bilingual("points must be finite: a point at NaN or inf has no place on the axes; leave it out.",
                                   "points 必须是有限的数：NaN 或 inf 的点在坐标轴上没有位置；请把它去掉。"))
    labels = _check_labels(labels, len(points), "labels", "point", "点")
    fontsize = check_real(fontsize, "fontsize", "8", positive=True)
    if fontsize > 1000:
        raise ValueError(bilingual(f"fontsize must be at most 1000 points, got {fontsize:g}; for example fontsize=8.",
                                   f"fontsize 不能超过 1000 磅，实际是 {fontsize:g}；例如 fontsize=8。"))
    if labels is None:
        raise TypeError(bilingual("labels must be a list with one label per point, got None.",
                                  "labels 必须是列表，每个点一个标签，实际是 None。"))
    fig = ax.figure
    fig.draw_without_rendering()  # a constrained layout settles the axes' size and the log-scale limits first
    renderer = fig.canvas.get_renderer()
    room = 4 * fig.dpi / 72  # half a 6-point marker, and a little space around it
    dots = [ax.transData.transform(point) for point in points]
    taken = [Bbox.from_extents(x - room, y - room, x + room, y + room) for x, y in dots]
    taken += [ax.get_legend().get_window_extent(renderer)] if ax.get_legend() is not None else []
    frame, notes = ax.get_window_extent(renderer), []
    for index, (point, label) in enumerate(zip(points, labels)):
        others = taken[:index] + taken[index + 1:]  # its own point does not count
        for dx, dy in LABEL_OFFSETS:
            note = ax.annotate(label, point, textcoords="offset points", xytext=(dx, dy), fontsize=fontsize,
                               ha="left" if dx > 0 else "right", va="bottom" if dy > 0 else "top")
            box = note.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in others):
                break
            note.remove()
        else:  # no place is free: the first one, as before
            note = ax.annotate(label, point, textcoords="offset points", xytext=LABEL_OFFSETS[0], fontsize=fontsize,
                               ha="left", va="bottom")
            box = note.get_window_extent(renderer)
        taken.append(box)
        notes.append(note)
    return notes
