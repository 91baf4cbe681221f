"""The series' own Chinese font draws regular-weight glyphs on a machine without any CJK font.

A fresh laptop has no Chinese font, so these tests hide every font that matplotlib did not ship
(the system CJK fonts included) and let the package register its bundled font.
"""

import dataclasses
import logging
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from attention_utils.plotting import fonts  # noqa: E402

CHINESE = "注意力权重缩放点积"
LATIN = "attention weights"
# Ink per em of the Chinese line divided by that of the Latin line (DejaVu Sans), measured with
# the 40 pt rendering below: Noto Sans SC Regular (bundled) 1.37, Noto Sans CJK SC Regular (Debian)
# 1.37 and Bold 2.05, the Thin default instance of the variable font bundled before (manimgx-fonts-cjk)
# 0.63. A regular face must reach 1; a thin or light one does not.
MINIMUM_INK_RATIO = 1.0


@pytest.fixture
def fresh_laptop():
    """Hide every font except matplotlib's own for one test, as on a machine with no CJK font."""
    manager = font_manager.fontManager
    saved = manager.ttflist
    manager.ttflist = [entry for entry in saved if entry.fname.startswith(matplotlib.get_data_path())]
    manager._findfont_cached.cache_clear()  # forget look-ups made with the full font list
    with matplotlib.rc_context():
        yield
    manager.ttflist = saved
    manager._findfont_cached.cache_clear()
    fonts.use_cjk_font()


def ink_per_em(label: str, size: float = 40) -> float:
    """Darkness summed over a rendered line of text, per square em of the line's width."""
    dpi = 100
    fig = plt.figure(figsize=(12, 1.5), dpi=dpi)
    line = fig.text(0.02, 0.3, label, fontsize=size)
    fig.canvas.draw()
    grey = np.asarray(fig.canvas.buffer_rgba())[..., :3].mean(axis=-1) / 255
    width = line.get_window_extent().width
    plt.close(fig)
    em = size * dpi / 72
    return float((1 - grey).sum()) / (width * em)


def test_fresh_laptop_hides_system_chinese_fonts(fresh_laptop):
    names = {entry.name for entry in font_manager.fontManager.ttflist}
    assert not names & set(fonts.SYSTEM_CJK_FAMILIES)
    assert fonts.CHINESE_FAMILY not in names


def test_bundled_font_is_regular_simplified_chinese(fresh_laptop):
    path = Path(fonts.use_cjk_font())
    assert path.name == "NotoSansSC-Regular.otf" and path.parent.name == fonts.BUNDLED_FONT_PACKAGE
    face = font_manager.ttfFontProperty(font_manager.ft2font.FT2Font(str(path)))
    assert (face.name, face.weight, face.style) == ("Noto Sans SC", 400, "normal")
    # the OFL licence ships with the font's package
    licence = next(path.parents[1].glob("pylopdf_fonts_zh_cn-*.dist-info/licenses/LICENSE"))
    assert "SIL Open Font License" in licence.read_text(encoding="utf-8")


def test_chinese_is_as_heavy_as_latin_text(fresh_laptop):
    fonts.set_language("zh")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        ratio = ink_per_em(CHINESE) / ink_per_em(LATIN)
    fonts.set_language("en")
    assert ratio >= MINIMUM_INK_RATIO, (
        f"Chinese glyphs carry {ratio:.2f} times the ink of Latin text; a thin font is in use")


def test_bold_chinese_draws_without_warnings(fresh_laptop, caplog):
    fonts.set_language("zh")
    with caplog.at_level(logging.INFO, logger="matplotlib.font_manager"), warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plt.figure()
        fig.text(0.1, 0.5, "粗体标题 bold title", fontweight="bold")
        fig.suptitle("注意力权重")
        fig.canvas.draw()
        plt.close(fig)
    fonts.set_language("en")
    assert "Failed to find font" not in caplog.text and "not found" not in caplog.text


def test_no_font_at_all_gives_a_bilingual_instruction(fresh_laptop, monkeypatch):
    monkeypatch.setattr(fonts, "BUNDLED_FONT_PACKAGE", "no_such_font_package")
    with pytest.raises(RuntimeError) as error:
        fonts.use_cjk_font()
    assert "pip install pylopdf-fonts-zh-cn" in str(error.value)
    assert "找不到中文字体" in str(error.value) and "重启内核" in str(error.value)


def test_bundled_font_wins_over_system_fonts():
    # on a machine with Debian's Noto Sans CJK SC the figures still use the pinned font
    assert Path(fonts.use_cjk_font()).name == fonts.BUNDLED_FONT_FILE


def test_a_thin_system_font_is_never_chosen(fresh_laptop, monkeypatch):
    monkeypatch.setattr(fonts, "BUNDLED_FONT_PACKAGE", "no_such_font_package")
    manager = font_manager.fontManager
    dejavu = next(entry for entry in manager.ttflist
                  if entry.name == "DejaVu Sans" and entry.style == "normal" and entry.weight == 400)
    thin = dataclasses.replace(dejavu, name="Noto Sans CJK SC", weight=100)
    manager.ttflist.append(thin)
    assert list(fonts._candidate_fonts()) == []
    manager.ttflist.append(dataclasses.replace(thin, weight=400))
    assert list(fonts._candidate_fonts()) == [(dejavu.fname, "Noto Sans CJK SC")]
