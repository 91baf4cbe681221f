"""Lesson 18's cost figure and speed-up explorer, driven headless on the saved bench, in both languages."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from explorer_harness import drive, language  # noqa: F401 (a fixture)

from attention_utils import results
from attention_utils.explorers import lesson18

SAVED = results.load_saved(results.SAVED_SPECULATIVE)


def test_every_control_redraws(language):
    redrawn = drive(lesson18.show_speedup, SAVED, results.load_saved(results.SAVED_SPECULATIVE_BF16))
    assert len(redrawn) == 3 and all(redrawn.values()), redrawn  # alpha, d and the measured c(k)
    plt.close("all")


def test_the_menu_offers_each_measured_cost_and_refuses_another_bench(language):
    second = results.load_saved(results.SAVED_SPECULATIVE_BF16)
    runs = list(lesson18.cost_runs(SAVED, second).values())
    assert len(lesson18.cost_runs(SAVED)) == 1 and len(runs) == 3
    expected = [second["weights_left"]["verification_ms"]["4"] / second["weights_left"]["verification_ms"]["0"]]
    assert lesson18.pass_costs(runs[2])[4] == pytest.approx(expected[0])  # the weights-left c(4), as the lesson prints it
    with pytest.raises(ValueError, match="SAVED_SPECULATIVE_BF16"):
        lesson18.cost_runs(SAVED, results.load_saved(results.SAVED_MODEL))
    with pytest.raises(TypeError, match="SAVED_SPECULATIVE_BF16"):
        lesson18.cost_runs(SAVED, [second])


def test_the_k0_pass_is_one_decode_step_and_the_curve_by_hand():
    made_up = {"verification_ms": {"0": 50.0, "1": 55.0, "2": 60.0}, "roofline_cost": {"0": 1.0, "1": 1.0, "2": 1.0}}
    assert lesson18.pass_costs(made_up) == {0: 1.0, 1: 1.1, 2: 1.2}
    fig = lesson18.draw_speedup(made_up, alpha=1.0, draft_cost=0.0)  # every token kept, free draft: (k + 1) / c(k)
    assert fig.axes[0].lines[0].get_ydata().tolist() == pytest.approx([1.0, 2 / 1.1, 3 / 1.2])
    assert "k = 2" in fig.axes[0].get_title()
    lesson18.draw_costs(made_up)
    plt.close("all")


def test_both_ways_draws_each_draft_and_k_of_the_second_machine_in_two_panels(language):
    second = results.load_saved(results.SAVED_SPECULATIVE_BF16)
    fig = lesson18.draw_both_ways(second)
    for ax, rows in zip(fig.axes, (second["summary"], second["summary_weights_left"])):
        heights = sorted(round(bar.get_height(), 9) for bar in ax.patches)
        assert heights == sorted(round(row["speedup"], 9) for row in rows)  # one bar per draft and k, at its measured speed-up
        assert len(ax.get_xticklabels()) == len({row["draft"] for row in rows})
    plt.close(fig)
