"""Lesson 17's explorer and figures, driven headless: every control redraws, in both languages; the timeline is right."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from explorer_harness import drive, language  # noqa: F401 (a fixture)

from attention_utils.explorers import lesson17
from attention_utils.inference.scheduler import Request, StepRecord
from contract_helpers import assert_contract_error

STREAM = [Request((1, 2, 3, 4, 5), 4, 0), Request((6, 7), 6, 1), Request(tuple(range(9)), 3, 2)]


def test_every_control_redraws(language):
    crowd = [Request(tuple(range(i, i + 10)), 3 + i, 0) for i in range(6)]  # six at once: the batch limit and chunks matter
    redrawn = drive(lesson17.show_schedule, crowd)
    assert len(redrawn) == 4 and all(redrawn.values()), redrawn
    plt.close("all")


def test_the_timeline_by_hand():
    """Request 0 prefills then decodes; request 1 joins at step 1 with its prompt; a chunk of 2 counts as prompt."""
    steps = [StepRecord([(0, 3)], 1, 0.1), StepRecord([(0, 1), (1, 2)], 2, 0.1), StepRecord([(1, 1)], 2, 0.1)]
    assert lesson17.timeline(steps, 3).tolist() == [[2, 1, 0], [0, 2, 1], [0, 0, 0]]
    assert lesson17.timeline([StepRecord([(0, 1)], 1, 0.1)], 1).tolist() == [[2]]  # a one-token prompt is a prefill
    plt.close(lesson17.draw_timeline(steps, 3, "x"))


def test_the_schedule_title_counts_steps_and_preemptions(language):
    figure = lesson17.draw_schedule(STREAM, "one", 4, 40, 0)
    steps = sum(r.max_new_tokens for r in STREAM)  # one at a time: one step per token, nothing shared
    assert str(steps) in figure.axes[0].get_title()
    plt.close("all")


def test_running_per_step_figure(language):
    figure = lesson17.draw_running({"static": [2, 2, 1], "continuous": [2, 3, 3]})
    assert len(figure.axes[0].lines) == 2
    plt.close("all")


def test_contract():
    assert_contract_error(lambda: lesson17.timeline([], 2), "steps", kind=TypeError)
    assert_contract_error(lambda: lesson17.timeline([StepRecord([(3, 1)], 1, 0.1)], 2), "count", kind=ValueError)
    assert_contract_error(lambda: lesson17.draw_running({"fast": [1]}), "running", kind=TypeError)
    assert_contract_error(lambda: lesson17.small_model(-1), "seed", kind=ValueError)
