"""What the plotting helpers take: real tensors, labels one per item, text, figure sizes, colours, colour maps.

Each check raises the package's two-line TypeError or ValueError (see `checks`), naming the argument passed.
"""

from __future__ import annotations

import numbers

import matplotlib
import numpy as np
import torch

from ..arguments import bilingual, check_real, shown

MOST_PANELS = 100  # a grid beyond this is never meant, and takes minutes to lay out
LARGEST_FIGURE = 100.0  # inches per side; matplotlib cannot draw images much larger


def as_real_tensor(data: object, name: str, shape_en: str, shape_zh: str) -> torch.Tensor:
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


def listed(value: object) -> bool:
    """A list, tuple, numpy array or tensor of things; a string or a single (0-d) number is not."""
    if isinstance(value, (str, bytes)) or (isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0):
        return False
    return hasattr(value, "__len__") and hasattr(value, "__iter__")


def check_labels(labels: object, count: int, name: str, what_en: str, what_zh: str) -> list[str] | None:
    """None, or one label per item: a list, tuple or numpy array (a string is not a list of labels)."""
    if labels is None:
        return None
    if not listed(labels):
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


def check_text(value: object, name: str, optional: bool = False) -> None:
    """Axis labels and titles are strings (text(en, zh) gives one in the current language)."""
    if not isinstance(value, str) and not (optional and value is None):
        raise TypeError(
            bilingual(
                f"{name} must be a string, got {type(value).__name__}; for example {name}='keys'.",
                f"{name} 必须是字符串，实际是 {type(value).__name__}；例如 text('keys', '键')。",
            )
        )


def check_figsize(figsize: object) -> tuple[float, float] | None:
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


def check_colour_range(data: torch.Tensor, vmin: object, vmax: object) -> tuple[float, float]:
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


def check_color(color: object, name: str) -> None:
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


def check_cmap(cmap: object) -> object:
    """A colour map's name known to matplotlib ('Blues', 'viridis', ...) or a Colormap."""
    if isinstance(cmap, matplotlib.colors.Colormap) or (isinstance(cmap, str) and cmap in matplotlib.colormaps):
        return cmap
    raise ValueError(
        bilingual(
            f"cmap must name a matplotlib colour map such as 'Blues' or 'viridis', got {shown(cmap)}.",
            f"cmap 必须是 matplotlib 的颜色映射名，例如 'Blues' 或 'viridis'，实际是 {shown(cmap, True)}。",
        )
    )
