"""Chinese plot labels render with real glyphs on a fresh machine; heatmaps take 4-d input."""

import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attention_utils import language  # noqa: E402
from attention_utils.plotting import fonts, heatmaps, labels  # noqa: E402


def render(label: str) -> np.ndarray:
    fig = plt.figure(figsize=(2, 1), dpi=60)
    fig.text(0.1, 0.4, label, fontsize=20)
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., 0].copy()
    plt.close(fig)
    return pixels


def test_chinese_renders_with_real_glyphs():
    fonts.set_language("zh")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        first, second = render("注意"), render("权重")
    # missing glyphs all draw the same empty box, so two different words would look identical
    assert (first < 128).sum() > 50 and not np.array_equal(first, second)
    assert language.text("keys", "键") == "键"
    fonts.set_language("en")
    assert language.text("keys", "键") == "keys"


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="'en' or 'zh'"):
        fonts.set_language("fr")


def test_heatmaps_need_four_dimensions():
    with pytest.raises(ValueError, match=r"m\[None, None\]"):
        heatmaps.show_heatmaps(torch.rand(3, 3), "k", "q")
    fig = heatmaps.show_heatmaps(torch.rand(2, 3, 4, 4), "k", "q", titles=[str(i) for i in range(6)])
    assert len(fig.axes) == 6 + 1  # six heatmaps and one colour bar
    plt.close(fig)


def test_figures_are_made_by_code(tmp_path):
    from attention_utils.course import figures

    written = figures.write_all(tmp_path)
    assert sorted(p.name for p in written) == sorted(
        f"{name}_{lang}.png" for name in figures.FIGURES for lang in ("en", "zh"))
    committed = Path(__file__).resolve().parents[1] / "figures"
    for path in written:
        assert (committed / path.name).is_file(), f"run `make figures`: {path.name} is not in figures/"


def test_bold_chinese_logs_nothing(caplog):
    fonts.set_language("zh")
    fig = plt.figure()
    fig.text(0.1, 0.5, "粗体 bold", fontweight="bold")
    fig.canvas.draw()
    plt.close(fig)
    assert "Failed to find font" not in caplog.text


def test_label_points_keeps_labels_apart_and_refuses_bad_input():
    from contract_helpers import assert_contract_error

    fig, ax = plt.subplots(figsize=(4, 3))
    points = [(1.0, 1.0), (1.01, 1.0), (1.0, 1.01), (2.0, 1.0)]  # three on top of one another, one at the right edge
    ax.plot(*zip(*points), "o")
    notes = labels.label_points(ax, points, ["first", "second", "third", "edge"])
    renderer = fig.canvas.get_renderer()
    boxes, frame = [note.get_window_extent(renderer) for note in notes], ax.get_window_extent(renderer)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert boxes[3].x1 <= frame.x1  # the edge point's label went to its left
    assert_contract_error(lambda: labels.label_points(ax, points, ["one"]), "labels")
    assert_contract_error(lambda: labels.label_points(ax, [(1.0, "a")], ["one"]), "points")
    assert_contract_error(lambda: labels.label_points(None, points, ["a"] * 4), "ax")
    # issue 30: these were accepted (a label at NaN, a negative font size) or failed in matplotlib's English
    assert_contract_error(lambda: labels.label_points(ax, [(float("nan"), 1.0)], ["a"]), "points", kind=ValueError)
    assert_contract_error(lambda: labels.label_points(ax, [(1.0, 1.0)], None), "labels", kind=TypeError)
    assert_contract_error(lambda: labels.label_points(ax, [(1.0, 1.0)], ["a"], fontsize=-1), "fontsize", kind=ValueError)
    assert_contract_error(lambda: labels.label_points(ax, [(1.0, 1.0)], ["a"], fontsize="huge!"), "fontsize",
                          kind=TypeError)
    assert_contract_error(lambda: labels.label_points(ax, [(1.0, 1.0)], ["a"], fontsize=10**12), "fontsize", kind=ValueError)
    plt.close(fig)
