"""Lesson 11's explorer and figures: every control redraws, and what is drawn is what the rotation gives."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from explorer_harness import drive

from attention_utils.explorers import lesson11
from attention_utils.language import choose_language


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One token of 8 features and the two projections that make its query and key."""
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(8, generator=generator) - 0.5, *(torch.rand(2, 8, 8, generator=generator) - 0.5)


def test_every_control_of_the_rotation_explorer_changes_the_figure():
    assert all(drive(lesson11.show_rotation, *inputs(0)).values())
    plt.close("all")


def test_the_rotation_figure_shows_a_flat_rotary_score_and_a_wandering_added_one():
    token, w_query, w_key = inputs(1)
    figure = lesson11.draw_rotation(token, w_query, w_key, 10000.0, shift=5, gap=2, pair=1, longest_shift=30)
    rotary, added = (line.get_ydata() for line in figure.axes[1].get_lines()[:2])
    assert max(rotary) - min(rotary) < 1e-9  # the rotary score when both move stays put
    assert max(added) - min(added) > 1e-2  # the same shift with added positions does not
    # the first rotary point, written here with complex numbers: q turned by 2, k at 0
    query, key = token.double() @ w_query.double(), token.double() @ w_key.double()
    pairs_q = torch.complex(query[0::2], query[1::2])
    pairs_k = torch.complex(key[0::2], key[1::2])
    speeds = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    assert abs(rotary[0] - (pairs_q * torch.exp(2j * speeds) * pairs_k.conj()).real.sum().item()) < 1e-9
    # every added point, written here with the sinusoid formula by hand: sin on even, cos on odd columns
    def position(p: int) -> torch.Tensor:
        angles = p * speeds
        return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten()
    for s in (0, 7, 30):
        expected = ((token.double() + position(s + 2)) @ w_query.double()) @ ((token.double() + position(s)) @ w_key.double())
        assert abs(added[s] - expected.item()) < 1e-5
    plt.close(figure)


def test_minus_signs_are_true_minus_signs():
    assert lesson11.signed(-0.04041) == "−0.0404" and lesson11.signed(0.5, 1) == "0.5"


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
                   lesson11.draw_weight_by_offset(torch.full((64,), 1 / 64), 16),
                   lesson11.draw_pair_parts(torch.randn(64, 16), 16, 57)]
        for figure in figures:
            assert figure.axes
            plt.close(figure)
    choose_language("en")
