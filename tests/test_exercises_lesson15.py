"""Lesson 15's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, anything else a ❌."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_utils.exercises import lesson15
from test_exercises_lesson13 import Awkward, verdict  # the same odd answer and verdict capture

MLA_BYTES = (512 + 64) * 60 * 2  # by hand: latent + rotary key, 60 layers, bfloat16
# by hand, per layer and key/value head: key codes 64 x 4 bits = 32 bytes, key scale + offset per channel and 32 tokens
# = 64 x 2 x 2 / 32 = 8 bytes a token, value codes 32 bytes, value scale + offset per token = 4 bytes; x 3 heads x 30 layers
KIVI = (32 + 8 + 32 + 4) * 3 * 30  # 6,840
FIT = 8 * 1024**3 // (4096 * KIVI)  # 8,589,934,592 // 28,016,640 = 306
FORMS = [int, float, np.int64, np.float64, torch.tensor, np.array,
         lambda v: torch.tensor([v]), lambda v: [v], lambda v: np.array([[v]]), lambda v: torch.tensor([[v]], dtype=torch.float64)]  # one-element forms too


@pytest.mark.parametrize("form", FORMS)
def test_right_answers_in_every_form(form):
    assert "Correct" in verdict(lesson15.check_mla_bytes, form(MLA_BYTES))
    assert "Correct" in verdict(lesson15.check_kivi_bytes, form(KIVI))
    assert "Correct" in verdict(lesson15.check_sequences, form(FIT))


@pytest.mark.parametrize("wrong, hint", [(2 * MLA_BYTES, "cached once"), (512 * 60 * 2, "rotary key"),
                                         (MLA_BYTES // 2, "count of numbers"), (2 * 128 * 128 * 60 * 2, "plain multi-head"),
                                         (12345, "Multiply")])
def test_mla_mistakes_get_their_hint(wrong, hint):
    out = verdict(lesson15.check_mla_bytes, wrong)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("wrong, hint", [
    ((32 + 32) * 90, "scales and offsets too"), ((32 + 16 + 32 + 8) * 90, "not 4"), ((64 + 8 + 64 + 4) * 90, "share one byte"),
    ((32 + 8) * 90, "add the values"), ((32 + 4) * 90, "add the keys"), ((32 + 8 + 32 + 4) * 9 * 30, "not its 9 query heads"),
    ((32 + 8 + 32 + 8) * 90, "grouped per token"), ((32 + 4 + 32 + 4) * 90, "per channel over 32 tokens"),
    ((32 + 8 + 32 + 4) * 3, "one layer"), (46080, "Per layer and head")])
def test_kivi_mistakes_get_their_hint(wrong, hint):
    out = verdict(lesson15.check_kivi_bytes, wrong)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("wrong, hint", [(FIT + 1, "Round down"), (8 * 10**9 // (4096 * KIVI), "not 8 × 10**9"),
                                         (8 * 1024**3 // (4096 * 46080), "float32 cache"),
                                         (8 * 1024**3 // (4096 * (32 + 16 + 32 + 8) * 90), "exercise 2's bytes"), (1000, "round down")])
def test_sequences_mistakes_get_their_hint(wrong, hint):
    out = verdict(lesson15.check_sequences, wrong)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("check", [lesson15.check_mla_bytes, lesson15.check_kivi_bytes, lesson15.check_sequences])
def test_odd_answers_never_raise(check):
    for answer in (None, ..., Awkward(), "many", [1, 2], True):
        out = verdict(check, answer)
        assert out and "Correct" not in out
