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
    # The file is a variable font whose default instance declares weight 100; we register the
    # SC face as a normal-weight font so matplotlib picks it without a "weight not found" log.
    manager.ttflist[before:] = [
        dataclasses.replace(entry, weight=400) for entry in added if entry.name == CJK_FAMILY
    ]
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
):
    """Draw a grid of heatmaps from a (rows, cols, queries, keys) tensor; return the figure.

    One function serves every lesson: a single matrix is passed as matrices[None, None].
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
    vmin, vmax = float(data.min()), float(data.max())
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
