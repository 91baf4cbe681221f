"""Lesson 15's explorer and figures, driven headless: the control redraws, in both languages."""

from __future__ import annotations

import matplotlib.pyplot as plt
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
