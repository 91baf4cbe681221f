"""Lesson 16's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, anything else a ❌, never a traceback."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.exercises import lesson16
from test_exercises_lesson13 import Awkward, verdict  # the same odd answer and verdict capture

STATE_BYTES = 32 * 128 * 128 * 2  # by hand: 32 heads, a 128 x 128 state each, bfloat16
PER_TOKEN = 2 * 2 * 256 * 2  # by hand: a key and a value, 2 key/value heads of 256, bfloat16
NEW_STATE = [[3.72, 1.96]]  # by hand: S k = 2.6, error 2.4, β 0.5 -> + 1.2 × (0.6, 0.8)
READ = 3.8  # 3.72 × 0.6 + 1.96 × 0.8
FORMS = [int, float, np.int64, np.float64, torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64), np.array]


@pytest.mark.parametrize("form", FORMS)
def test_state_bytes_and_crossover_in_every_form(form):
    assert "Correct" in verdict(lesson16.check_state_bytes, form(STATE_BYTES))
    assert "Correct" in verdict(lesson16.check_crossover, form(STATE_BYTES // PER_TOKEN))


@pytest.mark.parametrize("wrong, hint", [(2 * STATE_BYTES, "no separate one"), (STATE_BYTES // 2, "count of numbers"),
                                         (STATE_BYTES * 2 // 2 * 2, "no separate one")])
def test_state_bytes_mistakes_get_their_hint(wrong, hint):
    out = verdict(lesson16.check_state_bytes, wrong)
    assert "Not yet" in out and hint in out


def test_crossover_that_forgets_the_values_gets_a_hint():
    out = verdict(lesson16.check_crossover, 2 * STATE_BYTES // PER_TOKEN)
    assert "Not yet" in out and "AND a value" in out


@pytest.mark.parametrize("state", [NEW_STATE, torch.tensor(NEW_STATE), np.array(NEW_STATE), [3.72, 1.96],
                                   torch.tensor(NEW_STATE, dtype=torch.float64).T])
def test_delta_update_right_in_every_form(state):
    assert "Correct" in verdict(lesson16.check_delta_update, state, READ)


@pytest.mark.parametrize("state, hint", [([[3 + 2.5 * 0.6, 1 + 2.5 * 0.8]], "linear attention"),
                                         ([[3 + 2.4 * 0.6, 1 + 2.4 * 0.8]], "β = 1"),
                                         ([[3 - 1.2 * 0.6, 1 - 1.2 * 0.8]], "First S k")])
def test_delta_update_mistakes_get_their_hint(state, hint):
    out = verdict(lesson16.check_delta_update, state, READ)
    assert "Not yet" in out and hint in out


def test_a_right_state_with_a_wrong_read_is_told_how_to_read():
    out = verdict(lesson16.check_delta_update, NEW_STATE, 2.6)
    assert "Not yet" in out and "read it with the same key" in out


@pytest.mark.parametrize("check, args", [(lesson16.check_state_bytes, (...,)), (lesson16.check_crossover, (None,)),
                                         (lesson16.check_delta_update, (..., READ))])
def test_missing_answers_get_a_nudge(check, args):
    assert "Replace the ..." in verdict(check, *args)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=5), st.booleans(), st.floats(allow_nan=True), st.lists(st.floats(), max_size=3),
                 st.just(Awkward()), st.just(torch.ones(3, dtype=torch.bool)), st.just(object())))
def test_any_answer_gets_a_verdict_never_a_traceback(answer):
    for check, args in ((lesson16.check_state_bytes, (answer,)), (lesson16.check_crossover, (answer,)),
                        (lesson16.check_delta_update, (answer, READ)), (lesson16.check_delta_update, (NEW_STATE, answer))):
        out = verdict(check, *args)
        assert ("Correct" in out) or ("Not yet" in out)


def test_chinese_lesson_prints_only_chinese():
    from attention_utils.plotting import set_language

    set_language("zh")
    try:
        out = verdict(lesson16.check_delta_update, NEW_STATE, READ)
    finally:
        set_language("en")
    assert out.startswith("✅ 正确") and "Correct" not in out
