"""Lesson 15's explorer and figures, driven headless: the control redraws, in both languages."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from explorer_harness import drive, language  # noqa: F401 (a fixture)

from attention_utils.explorers import lesson15

POINTS = [{"method": "full", "label": "float32", "bytes_per_token": 46080, "perplexity": 30.0},
          {"method": "quantized", "label": "int8", "bytes_per_token": 14000, "perplexity": 30.1},
          {"method": "quantized", "label": "int4", "bytes_per_token": 8500, "perplexity": 31.0},
          {"method": "low_rank", "label": "rank 16", "bytes_per_token": 11520, "perplexity": 44.0}]


def test_the_control_redraws(language):
    redrawn = drive(lesson15.show_quality_bytes, POINTS)
    assert len(redrawn) == 1 and all(redrawn.values()), redrawn
    plt.close("all")


def test_key_magnitudes_by_hand(language):
    keys = torch.tensor([[[[1.0, -5.0], [-2.0, 3.0], [4.0, 0.5]]]])  # 1 head, 3 tokens, 2 channels
    assert lesson15.key_magnitudes(keys).tolist() == [[2.0, 3.0]]  # |k| sorted: 1, 2, 4 and 0.5, 3, 5
    figure = lesson15.draw_key_magnitudes(torch.rand(3, 8), layer=2)
    assert len(figure.axes) == 3
    plt.close(figure)


def test_no_label_of_the_quality_plot_covers_another(language):
    """int4 with and without the first token sit 44 bytes and 0.11 apart, as in the lesson; float32 at the right edge."""
    points = POINTS + [{"method": "quantized_first", "label": "int4", "bytes_per_token": 8544, "perplexity": 30.89},
                       {"method": "window", "label": "4 + 64", "bytes_per_token": 7138, "perplexity": 36.3}]
    figure = lesson15.draw_quality_bytes(points, highlight=4)
    renderer = figure.canvas.get_renderer()
    boxes = [note.get_window_extent(renderer) for note in figure.axes[0].texts]
    frame = figure.axes[0].get_window_extent(renderer)
    assert len(boxes) == len(points)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert all(frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1 for box in boxes)
    plt.close(figure)


SETUPS = [{"label": "float32", "shrunk": "none", "weights": 538_060_032, "cache_per_token": 46_080, "kept": None,
           "perplexity": 29.45},
          {"label": "q4", "shrunk": "weights", "weights": 123_118_848, "cache_per_token": 46_080, "kept": None,
           "perplexity": 29.5},
          {"label": "4 + 64", "shrunk": "cache", "weights": 538_060_032, "cache_per_token": 46_080, "kept": 68,
           "perplexity": 36.3}]


def test_bytes_read_per_token_by_hand():
    """The weights are read once for the whole batch; each sequence reads its own cache, a window at most its tokens."""
    assert lesson15.bytes_read(SETUPS[0], 1, 1024) == 538_060_032 + 46_080 * 1024  # 585,246,720
    assert lesson15.bytes_read(SETUPS[0], 16, 4096) == 33_628_752 + 188_743_680  # 538,060,032 / 16 + 46,080 × 4,096
    assert lesson15.bytes_read(SETUPS[2], 16, 4096) == 33_628_752 + 46_080 * 68  # the window keeps 68 tokens
    assert lesson15.bytes_read(SETUPS[2], 1, 40) == 538_060_032 + 46_080 * 40  # a text shorter than the window


def test_the_bytes_read_figure_has_a_panel_per_setting_and_a_point_per_setup(language):
    figure = lesson15.draw_bytes_read(SETUPS)
    assert len(figure.axes) == 2 and all(len(ax.texts) == len(SETUPS) for ax in figure.axes)
    plt.close(figure)


def test_a_wrong_setup_is_named_in_both_languages():
    with pytest.raises(ValueError, match="shrunk.*\n.*shrunk"):
        lesson15.draw_bytes_read([{**SETUPS[0], "shrunk": "weight"}])
    with pytest.raises(ValueError, match="kept"):
        lesson15.draw_bytes_read([{**SETUPS[0], "kept": 0}])
    with pytest.raises(TypeError, match="settings.*\n.*settings"):
        lesson15.draw_bytes_read(SETUPS, settings=[(1, 0)])
    with pytest.raises(TypeError, match="keys"):
        lesson15.draw_bytes_read([{"label": "x"}])
