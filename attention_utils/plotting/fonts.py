"""The language of plot text, and a Chinese font that works offline.

Plot text follows one language setting ("en" or "zh"). Chinese needs a CJK font. The series
ships one: Noto Sans SC Regular (SIL Open Font License) from the pinned `pylopdf-fonts-zh-cn`
package, a static font with Simplified Chinese glyph forms. It is preferred over any system
font, so every machine draws the same regular-weight Chinese and the figures are reproducible.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
from collections.abc import Iterator

import matplotlib
from matplotlib import font_manager

from ..arguments import bilingual
from ..language import choose_language

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
