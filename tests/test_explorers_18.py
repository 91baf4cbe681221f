"""Lesson 18's cost figure and speed-up explorer, driven headless on the saved bench, in both languages."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from explorer_harness import drive, language  # noqa: F401 (a fixture)

from attention_utils import results
from attention_utils.explorers import lesson18

SAVED = results.load_saved(results.SAVED_SPECULATIVE)


def test_every_control_redraws(language):
    redrawn = drive(lesson18.show_speedup, SAVED)
    assert len(redrawn) == 2 and all(redrawn.values()), redrawn
    plt.close("all")


def test_the_k0_pass_is_one_decode_step_and_the_curve_by_hand():
    made_up = {"verification_ms": {"0": 50.0, "1": 55.0, "2": 60.0}, "roofline_cost": {"0": 1.0, "1": 1.0, "2": 1.0}}
    assert lesson18.pass_costs(made_up) == {0: 1.0, 1: 1.1, 2: 1.2}
    fig = lesson18.draw_speedup(made_up, alpha=1.0, draft_cost=0.0)  # every token kept, free draft: (k + 1) / c(k)
    assert fig.axes[0].lines[0].get_ydata().tolist() == pytest.approx([1.0, 2 / 1.1, 3 / 1.2])
    assert "k = 2" in fig.axes[0].get_title()
    lesson18.draw_costs(made_up)
    plt.close("all")
