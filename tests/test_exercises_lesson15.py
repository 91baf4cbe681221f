"""Lesson 15's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, anything else a ❌."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_utils.exercises import lesson15
from test_exercises_lesson13 import Awkward, verdict  # the same odd answer and verdict capture

MLA_BYTES = (512 + 64) * 60 * 2  # by hand: latent + rotary key, 60 layers, bfloat16
PAGES = 3 + 1 + 4 + 7 + 2  # by hand: ceil(37/16), ceil(5/16), 64/16, ceil(100/16), ceil(17/16)
FORMS = [int, float, np.int64, np.float64, torch.tensor, np.array,
         lambda v: torch.tensor([v]), lambda v: [v], lambda v: np.array([[v]]), lambda v: torch.tensor([[v]], dtype=torch.float64)]  # one-element forms too


@pytest.mark.parametrize("form", FORMS)
def test_right_answers_in_every_form(form):
    assert "Correct" in verdict(lesson15.check_mla_bytes, form(MLA_BYTES))
    assert "Correct" in verdict(lesson15.check_pages, form(PAGES))


@pytest.mark.parametrize("wrong, hint", [(2 * MLA_BYTES, "cached once"), (512 * 60 * 2, "rotary key"),
                                         (MLA_BYTES // 2, "count of numbers"), (2 * 128 * 128 * 60 * 2, "plain multi-head"),
                                         (12345, "Multiply")])
def test_mla_mistakes_get_their_hint(wrong, hint):
    out = verdict(lesson15.check_mla_bytes, wrong)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("wrong, hint", [(14, "round up each sequence"), (2 + 0 + 4 + 6 + 1, "round up, not down"), (99, "ceil")])
def test_pages_mistakes_get_their_hint(wrong, hint):
    out = verdict(lesson15.check_pages, wrong)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("written", [" Channel", "channels", "per-channel", "channel-wise", "by channel", "per channel"])
def test_grouping_written_in_any_natural_way(written):
    assert "Correct" in verdict(lesson15.check_grouping, written)


def test_grouping():
    assert "Correct" in verdict(lesson15.check_grouping, " Channel")
    assert "outlier sets the range" in verdict(lesson15.check_grouping, "per token")
    assert "'channel' or 'token'" in verdict(lesson15.check_grouping, "channel and token")
    assert "outlier sets the range" in verdict(lesson15.check_grouping, "token")
    assert "'channel' or 'token'" in verdict(lesson15.check_grouping, 3)


@pytest.mark.parametrize("check", [lesson15.check_mla_bytes, lesson15.check_grouping, lesson15.check_pages])
def test_odd_answers_never_raise(check):
    for answer in (None, ..., Awkward(), "many", [1, 2], True):
        out = verdict(check, answer)
        assert out and "Correct" not in out
