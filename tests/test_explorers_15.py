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
    keys = torch.tensor([[[[1.0, -5.0], [-2.0, 3.0]]]])  # 1 head, 2 tokens, 2 channels
    assert lesson15.key_magnitudes(keys).tolist() == [[2.0, 5.0]]
    figure = lesson15.draw_key_magnitudes(torch.rand(3, 8), layer=2)
    assert len(figure.axes) == 3
    plt.close(figure)
