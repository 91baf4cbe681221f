"""Lesson 18's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, odd input a ❌."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_utils.exercises import lesson18
from test_exercises_lesson13 import Awkward, verdict

TOKENS = 1 + 0.8 + 0.64 + 0.512 + 0.4096  # by hand: 3.3616
SPEEDUP = TOKENS / (1.2 + 4 * 0.5)  # by hand: 3.3616 / 3.2 = 1.0505
ACCEPTED = 0.2 + 0.3 + 0.2  # min(p, q) summed over [0.5, 0.3, 0.2] and [0.2, 0.6, 0.2]
RESIDUAL = [1.0, 0.0, 0.0]  # max(0, p - q) = [0.3, 0, 0], normalized
FORMS = [float, np.float64, torch.tensor, lambda v: [v], lambda v: np.array([[v]])]


@pytest.mark.parametrize("form", FORMS)
def test_right_answers_in_every_form(form):
    assert "Correct" in verdict(lesson18.check_tokens_per_pass, form(TOKENS))
    assert "Correct" in verdict(lesson18.check_speedup, form(SPEEDUP))
    assert "Correct" in verdict(lesson18.check_acceptance, form(ACCEPTED))


@pytest.mark.parametrize("form", [list, tuple, torch.tensor, np.array])
def test_the_residual_in_every_form(form):
    assert "Correct" in verdict(lesson18.check_residual, form(RESIDUAL))


@pytest.mark.parametrize("check, wrong, hint", [
    (lesson18.check_tokens_per_pass, 1 + 0.8 * 4, "judged alone"), (lesson18.check_tokens_per_pass, TOKENS - 1, "own token"),
    (lesson18.check_tokens_per_pass, 5.0, "Sum the probability"),
    (lesson18.check_speedup, TOKENS / 1.2, "leaves out the draft"), (lesson18.check_speedup, TOKENS / 3.0, "not 1"),
    (lesson18.check_speedup, 2.0, "divided by"),
    (lesson18.check_acceptance, 0.5, "sum them"),
    (lesson18.check_residual, [0.5, 0.3, 0.2], "shortcut"), (lesson18.check_residual, [0.3, 0.0, 0.0], "Normalize"),
    (lesson18.check_residual, [0.0, 1.0, 0.0], "max(0, p − q)"),
])
def test_mistakes_get_their_hint(check, wrong, hint):
    out = verdict(check, wrong)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("check", [lesson18.check_tokens_per_pass, lesson18.check_speedup, lesson18.check_acceptance,
                                   lesson18.check_residual])
@pytest.mark.parametrize("odd", ["3", [1, 2], Awkward(), None])
def test_odd_answers_get_a_verdict_not_a_traceback(check, odd):
    out = verdict(check, odd)
    assert "Correct" not in out


def test_unanswered_asks_for_an_answer():
    assert "Replace the ..." in verdict(lesson18.check_speedup, ...)
