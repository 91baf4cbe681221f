"""Lesson 16's explorer and figures, driven headless: every control redraws, in both languages; the states are right."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from explorer_harness import drive, language  # noqa: F401 (a fixture)

from attention_utils.explorers import lesson16


def test_every_control_redraws(language):
    redrawn = drive(lesson16.show_states, 8, 4, 3)
    assert len(redrawn) == 2 and all(redrawn.values()), redrawn
    plt.close("all")


def test_orthogonal_keys_are_all_recalled_by_the_delta_rule():
    """With as many pairs as d_k, the first pairs are kept exactly when the keys are orthogonal: a hand-made case."""
    keys = torch.eye(4, dtype=torch.float64)
    values = torch.arange(16, dtype=torch.float64).reshape(4, 4)
    states = lesson16._states_after(keys, values, 4)
    torch.testing.assert_close(states["delta"], values.T)  # column i of S is value i: S e_i = v_i
    torch.testing.assert_close(states["linear"], values.T)  # orthogonal keys: linear attention is exact too
    assert lesson16._recalled(states["delta"], keys, values).all()


def test_a_repeated_key_is_overwritten_by_the_delta_rule_only():
    keys = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    values = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]], dtype=torch.float64)
    states = lesson16._states_after(keys, values, 2)
    torch.testing.assert_close(states["delta"] @ keys[0], values[1])
    torch.testing.assert_close(states["linear"] @ keys[0], values[0] + values[1])


def test_the_recall_table_and_figure(language):
    rows = [{"model": m, "seed": s, "pairs": n, "accuracy": 0.5 + 0.1 * s, "kept_floats": 10 * n}
            for m in ("softmax", "delta") for s in (0, 1) for n in (2, 4)]
    shown = lesson16.recall_table(rows, language)
    assert "0.50 / 0.60" in shown and ("delta 规则" if language == "zh" else "delta rule") in shown
    figure = lesson16.draw_recall(rows)
    assert len(figure.axes) == 2
    plt.close("all")


def test_the_state_size_table_and_figure(language):
    rows = [{"model": m, "seed": s, "pairs": n, "key_size": k, "accuracy": 0.2 + 0.1 * s + 0.01 * k,
             "kept_floats": 100 * k + n} for m, sizes in (("softmax", (16,)), ("linear", (64, 16)), ("delta", (16, 32)))
            for k in sizes for s in (0, 1) for n in (2, 4)]
    lines = lesson16.state_size_table(rows, language).splitlines()
    assert len(lines) == 1 + 5
    name = "线性注意力" if language == "zh" else "linear attention"
    linear = [line for line in lines if line.startswith(name)]
    assert "0.36 / 0.46" in linear[0] and "1,604" in linear[0]  # d_k 16 first; numbers kept at the largest N (4)
    assert "0.84 / 0.94" in linear[1] and "6,404" in linear[1]
    figure = lesson16.draw_state_sizes(rows)
    assert len(figure.axes) == 2  # linear attention and the delta rule; softmax is the dashed reference in both
    assert all(len(ax.lines) == 3 for ax in figure.axes)  # two key sizes and the reference
    plt.close("all")


@pytest.mark.parametrize("written", [0, 1, 8, 12])
def test_any_number_written_draws(written):
    figure = lesson16.draw_states(8, 3, written)
    assert len(figure.axes) >= 3
    plt.close("all")


def test_rewritten_keys_defeat_linear_attention_but_not_the_delta_rule():
    """Orthonormal keys (d_k = 8 >= 6), 12 pairs: every key written twice; the delta rule returns each latest value exactly."""
    keys, values, ids = lesson16.recall_example(12, 8)
    assert ids == [0, 1, 2, 3, 4, 5] * 2
    torch.testing.assert_close(keys[:6] @ keys[:6].T, torch.eye(6, dtype=torch.float64))
    states = lesson16._states_after(keys, values, 12)
    seen_keys, seen_values = lesson16._latest(keys, values, ids, 12)
    torch.testing.assert_close(seen_keys @ states["delta"].T, seen_values)
    torch.testing.assert_close(seen_keys @ states["linear"].T, values[:6] + values[6:])  # old + new, by orthogonality
