"""Lesson 17's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, anything else a ❌."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_utils.exercises import lesson17
from test_exercises_lesson13 import Awkward, verdict  # the same odd answer and verdict capture

# by hand: the third request waits 4 + 2 steps, then its own prefill step gives its first token; batched: step 1
FIRST_TOKEN_ALONE, FIRST_TOKEN_BATCHED = 7, 1
# by hand: (40 + 24) / 16 = 4 pages a request, 20 // 4 = 5; int8: 20 x 256 // 72 = 71 pages, 71 // 4 = 17
FLOAT32_FIT, INT8_FIT = 5, 17
# by hand: 120 + 9 x (120 - 96) = 336 (96 = the system prompt's 6 full pages of 16)
PREFILL = 336
FORMS = [int, float, np.int64, np.float64, torch.tensor, lambda v: torch.tensor([v]), lambda v: [v]]


@pytest.mark.parametrize("form", FORMS)
def test_right_answers_in_every_form(form):
    assert "Correct" in verdict(lesson17.check_first_token_steps, form(FIRST_TOKEN_ALONE), form(FIRST_TOKEN_BATCHED))
    assert "Correct" in verdict(lesson17.check_budget_sequences, form(FLOAT32_FIT), form(INT8_FIT))
    assert "Correct" in verdict(lesson17.check_prefill_tokens, form(PREFILL))


@pytest.mark.parametrize("alone, batched, hint", [(6, 1, "Count the step"), (9, 1, "when it finishes"),
                                                  (7, 3, "all three are prefilled"), (12, 1, "add the steps")])
def test_first_token_mistakes_get_their_hint(alone, batched, hint):
    out = verdict(lesson17.check_first_token_steps, alone, batched)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("float32, int8, hint", [(6, 17, "keeps growing"), (4, 17, "Pages per request"),
                                                 (5, 18, "Round down, twice"), (5, 20, "same bytes hold")])
def test_budget_mistakes_get_their_hint(float32, int8, hint):
    out = verdict(lesson17.check_budget_sequences, float32, int8)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("wrong, hint", [(120 + 9 * 20, "Only full pages"), (9 * 24, "first request finds nothing"),
                                         (1200, "First request: its whole prompt")])
def test_prefill_mistakes_get_their_hint(wrong, hint):
    out = verdict(lesson17.check_prefill_tokens, wrong)
    assert "Not yet" in out and hint in out


def test_missing_odd_and_unreadable_answers_never_raise():
    assert "Replace the ..." in verdict(lesson17.check_prefill_tokens, ...)
    for odd in (Awkward(), "336", 336.5, True):
        assert "Not yet" in verdict(lesson17.check_prefill_tokens, odd)
    assert "Not yet" in verdict(lesson17.check_budget_sequences, Awkward(), 17)
    assert "Not yet" in verdict(lesson17.check_first_token_steps, 7, "1")
