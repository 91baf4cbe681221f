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
DELTA_SHARE = 4 / 6  # by hand: keys 5 and 6 replace keys 1 and 2 along e1 and e2; keys 3, 4, 5, 6 read their own value
LINEAR_SHARE = 2 / 6  # by hand: e1 holds v1 + v5, e2 holds v2 + v6 (ties); only keys 3 and 4 read their own value
BOUND = 16 / 24  # by hand: at most d_k = 16 of N = 24 independent values lie in S's column space
FORMS = [int, float, np.int64, np.float64, torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64), np.array]


@pytest.mark.parametrize("form", FORMS)
def test_state_bytes_and_crossover_in_every_form(form):
    assert "Correct" in verdict(lesson16.check_state_bytes, form(STATE_BYTES))
    assert "Correct" in verdict(lesson16.check_crossover, form(STATE_BYTES // PER_TOKEN))


@pytest.mark.parametrize("wrong, hints", [(32 * 128 * 128 * 4, ("4 bytes a number", "not one for keys")),  # float32
                                          (2 * 32 * 128 * 128 * 2, ("4 bytes a number", "not one for keys")),  # 2 matrices
                                          (32 * 128 * 128, ("count of numbers",))])
def test_state_bytes_mistakes_get_their_hint(wrong, hints):
    """A float32 state and a state counted twice give the same number (2,097,152), so the hint names both causes."""
    out = verdict(lesson16.check_state_bytes, wrong)
    assert "Not yet" in out and all(hint in out for hint in hints)


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
                                         (lesson16.check_delta_update, (..., READ)), (lesson16.check_crowded_recall, (DELTA_SHARE, ...)),
                                   (lesson16.check_exact_recall_bound, (None,))])
def test_missing_answers_get_a_nudge(check, args):
    assert "Replace the ..." in verdict(check, *args)


def _share_by_columns(state: np.ndarray, directions: tuple[int, ...]) -> float:
    """Key i reads column directions[i]; it is right when token i alone holds that column's largest entry."""
    right = 0
    for token, j in enumerate(directions):
        column = state[:, j]
        if column[token] == column.max() and np.count_nonzero(column == column.max()) == 1:
            right += 1
    return right / len(directions)


def _shares_by_columns() -> tuple[float, float]:
    """A second way to get exercise 3's shares: one column per direction, assigned (delta, β = 1) or summed (linear)."""
    directions = (0, 1, 2, 3, 0, 1)
    delta, linear = np.zeros((6, 4)), np.zeros((6, 4))  # (d_v, d_k): values are the one-hot tokens 0..5
    for token, j in enumerate(directions):
        delta[:, j] = 0.0
        delta[token, j] = 1.0  # a unit key along e_j with β = 1 replaces column j by the new value
        linear[token, j] += 1.0
    return _share_by_columns(delta, directions), _share_by_columns(linear, directions)


def test_exercise_3_hand_values_agree_with_a_second_implementation():
    assert _shares_by_columns() == pytest.approx((DELTA_SHARE, LINEAR_SHARE))


@pytest.mark.parametrize("form", [float, np.float64, torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64),
                                  lambda v: round(v, 2)])
def test_crowded_recall_and_bound_right_in_every_form(form):
    assert "Correct" in verdict(lesson16.check_crowded_recall, form(DELTA_SHARE), form(LINEAR_SHARE))
    assert "Correct" in verdict(lesson16.check_exact_recall_bound, form(BOUND))


@pytest.mark.parametrize("delta, linear, hint", [(1.0, LINEAR_SHARE, "room for one"), (LINEAR_SHARE, LINEAR_SHARE, "linear attention's share"),
                                                 (0.5, LINEAR_SHARE, "one by one"), (DELTA_SHARE, DELTA_SHARE, "adds instead"),
                                                 (DELTA_SHARE, 0.0, "which columns"), (4, 2, "count of questions")])
def test_crowded_recall_mistakes_get_their_hint(delta, linear, hint):
    out = verdict(lesson16.check_crowded_recall, delta, linear)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("wrong, hint", [(1.0, "more pairs"), (24 / 16, "cannot exceed 1"), (1 - BOUND, "must miss"),
                                         (16, "as a share"), (0.5, "divide by N")])
def test_bound_mistakes_get_their_hint(wrong, hint):
    out = verdict(lesson16.check_exact_recall_bound, wrong)
    assert "Not yet" in out and hint in out


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=5), st.booleans(), st.floats(allow_nan=True), st.lists(st.floats(), max_size=3),
                 st.just(Awkward()), st.just(torch.ones(3, dtype=torch.bool)), st.just(object())))
def test_any_answer_gets_a_verdict_never_a_traceback(answer):
    for check, args in ((lesson16.check_state_bytes, (answer,)), (lesson16.check_crossover, (answer,)),
                        (lesson16.check_delta_update, (answer, READ)), (lesson16.check_delta_update, (NEW_STATE, answer)),
                        (lesson16.check_crowded_recall, (answer, LINEAR_SHARE)), (lesson16.check_crowded_recall, (DELTA_SHARE, answer)),
                        (lesson16.check_exact_recall_bound, (answer,))):
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


def test_chinese_lesson_prints_only_chinese_for_exercise_3():
    from attention_utils.plotting import set_language

    set_language("zh")
    try:
        outs = [verdict(lesson16.check_crowded_recall, DELTA_SHARE, LINEAR_SHARE),
                verdict(lesson16.check_exact_recall_bound, 1.0)]
    finally:
        set_language("en")
    assert outs[0].startswith("✅ 正确") and outs[1].startswith("❌ 还不对")
    assert not any(word in out for out in outs for word in ("Correct", "Not yet", "directions"))
