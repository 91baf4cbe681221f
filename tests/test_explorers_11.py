"""Lesson 11's explorer and figures: every control redraws, and what is drawn is what the rotation gives."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from explorer_harness import drive

from attention_utils.explorers import lesson11
from attention_utils.language import choose_language


def test_every_control_of_the_rotation_explorer_changes_the_figure():
    query, key = torch.rand(2, 8, generator=torch.Generator().manual_seed(0)) - 0.5
    assert all(drive(lesson11.show_rotation, query, key).values())
    plt.close("all")


def test_the_rotation_figure_shows_a_flat_score_when_both_move():
    query, key = torch.rand(2, 8, generator=torch.Generator().manual_seed(1)) - 0.5
    figure = lesson11.draw_rotation(query, key, 10000.0, shift=5, gap=2, pair=1, longest_shift=30)
    together, query_only = (line.get_ydata() for line in figure.axes[1].get_lines()[:2])
    assert max(together) - min(together) < 1e-9  # the score when both move stays put
    assert max(query_only) - min(query_only) > 1e-3  # and moves when only the query does
    # the first point is the plain dot product of q turned by 2 with k at 0, written here with complex numbers
    pairs_q = torch.complex(query[0::2].double(), query[1::2].double())
    pairs_k = torch.complex(key[0::2].double(), key[1::2].double())
    speeds = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    expected = (pairs_q * torch.exp(2j * speeds) * pairs_k.conj()).real.sum().item()
    assert abs(together[0] - expected) < 1e-9
    plt.close(figure)


def test_the_turned_pair_sits_where_position_times_speed_puts_it():
    pairs = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    turned = lesson11.turned_pair(pairs, index=1, head_dim=4, positions=torch.tensor([0, 1, 5]), base=100.0)
    angles = torch.tensor([0.0, 0.1, 0.5], dtype=torch.float64)  # pair 1 of 4 with base 100 turns 0.1 rad per position
    as_complex = torch.complex(pairs[:, 0].double(), pairs[:, 1].double()) * torch.exp(1j * angles)
    torch.testing.assert_close(turned, torch.stack([as_complex.real, as_complex.imag], dim=-1))


def test_the_static_figures_draw_in_both_languages():
    for language in ("en", "zh"):
        choose_language(language)
        figures = [lesson11.draw_turned_tokens(torch.rand(6, 2), list("abcdef")),
                   lesson11.draw_length_accuracy({"a": [1.0, 0.5, 0.25]}, [16, 32, 64], 1 / 16),
                   lesson11.draw_weight_by_offset(torch.full((64,), 1 / 64), 16)]
        for figure in figures:
            assert figure.axes
            plt.close(figure)
    choose_language("en")
