"""Lesson 14's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, odd input a ❌, never a traceback."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_utils.exercises import lesson14
from test_exercises_lesson13 import Awkward, verdict  # the same odd answer and verdict capture

STEP_MS = 100.0  # by hand: 1e9 weights × 2 bytes / 20e9 bytes per second = 0.1 s
INTENSITY = 4.0  # by hand: 2 FLOPs × 8 tokens / 4 bytes
RIDGE_BATCH = 20.0  # by hand: 400 / 40 = 10 FLOPs per byte = 2B / 4
FORMS = [float, np.float64, torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64), np.array,
         lambda v: torch.tensor([v]), lambda v: [v], lambda v: np.array([[v]]), lambda v: torch.tensor([[v]], dtype=torch.float64)]  # one-element forms too


@pytest.mark.parametrize("form", FORMS)
def test_right_answers_in_every_form(form):
    assert "Correct" in verdict(lesson14.check_step_ms, form(STEP_MS))
    assert "Correct" in verdict(lesson14.check_intensity, form(INTENSITY))
    assert "Correct" in verdict(lesson14.check_ridge_batch, form(RIDGE_BATCH))


@pytest.mark.parametrize("check, wrong, hint", [
    (lesson14.check_step_ms, 200.0, "float32"), (lesson14.check_step_ms, 0.1, "seconds"),
    (lesson14.check_step_ms, 7.0, "divided by"),
    (lesson14.check_intensity, 0.5, "batch 1"), (lesson14.check_intensity, 2.0, "multiply and an add"),
    (lesson14.check_ridge_batch, 10.0, "where the roofs meet"), (lesson14.check_ridge_batch, 3.0, "Set 2 × B / 4"),
    (lesson14.check_step_ms, torch.tensor([0.1]), "seconds"), (lesson14.check_intensity, [0.5], "batch 1"),
])
def test_mistakes_get_their_hint(check, wrong, hint):
    out = verdict(check, wrong)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("check", [lesson14.check_step_ms, lesson14.check_intensity, lesson14.check_ridge_batch])
@pytest.mark.parametrize("odd", ["100", [1, 2], Awkward(), float("nan"), None])
def test_odd_answers_get_a_verdict_not_a_traceback(check, odd):
    out = verdict(check, odd)
    assert "Correct" not in out


def test_a_meta_tensor_has_no_value_to_check():
    out = verdict(lesson14.check_step_ms, torch.tensor([STEP_MS], device="meta"))
    assert "Not yet" in out and "number of milliseconds" in out
