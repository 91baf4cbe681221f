"""Lesson 11 checkers: right answers in every numeric form get ✅, typical mistakes get their hint, nothing ends in a traceback."""

from __future__ import annotations

import cmath
import contextlib
import io
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.exercises import lesson11


def said(check, *answer) -> str:
    """What a checker prints for `answer` (captured here: Hypothesis runs many answers in one test)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        check(*answer)
    return printed.getvalue()


# The right answers, worked out here by other routes than the checkers'.
TURNED = (0.6 + 0.8j) * cmath.exp(1j * 3 * 100 ** -0.5)  # pair 1 of 4 features: speed 100^(-2/4) = 0.1, position 3
TURNED_PAIR = [TURNED.real, TURNED.imag]
SLOWEST_TURN = 2 * math.pi * 10 ** (4 * 62 / 64)  # pair 31 of 64 features turns 10000^(-62/64) rad per position
HALVES_ROWS = [0, 2, 4, 6, 1, 3, 5, 7]  # even rows (first of each pair) then odd rows (their partners)


class Unreadable:
    """An answer whose every comparison or conversion raises, as a learner's half-written object might."""

    def __eq__(self, other):
        raise RuntimeError("no comparison")

    __lt__ = __gt__ = __le__ = __ge__ = __eq__
    __hash__ = None

    def __float__(self):
        raise RuntimeError("no float")

    __index__ = __int__ = __float__


FORMS = {
    "list": lambda v: list(v),
    "tuple": lambda v: tuple(v),
    "float32 tensor": lambda v: torch.tensor(v, dtype=torch.float32),
    "float64 tensor": lambda v: torch.tensor(v, dtype=torch.float64),
    "numpy float64": lambda v: np.array(v, dtype=np.float64),
    "numpy float32": lambda v: np.array(v, dtype=np.float32),
    "list of numpy numbers": lambda v: [np.float64(x) for x in v],
    "list of 0-d tensors": lambda v: [torch.tensor(x) for x in v],
}
WHOLE_FORMS = {**FORMS, "int64 tensor": lambda v: torch.tensor(v), "numpy int32": lambda v: np.array(v, dtype=np.int32)}
NUMBER_FORMS = [int, float, np.int64, np.float32, np.float64, torch.tensor, lambda x: torch.tensor(x, dtype=torch.float64)]


@settings(max_examples=40, deadline=None)
@given(form=st.sampled_from(sorted(FORMS)), wiggle=st.floats(-2e-4, 2e-4))
def test_the_turned_pair_in_any_form_is_right(form, wiggle):
    assert "Correct" in said(lesson11.check_turned_pair, FORMS[form]([TURNED_PAIR[0] + wiggle, TURNED_PAIR[1] - wiggle]))


@settings(max_examples=40, deadline=None)
@given(x=st.floats(-2, 2), y=st.floats(-2, 2))
def test_any_other_pair_is_not_right(x, y):
    if math.hypot(x - TURNED_PAIR[0], y - TURNED_PAIR[1]) < 2e-3:
        return
    assert "Not yet" in said(lesson11.check_turned_pair, [x, y])


@pytest.mark.parametrize("angle, words", [(-0.3, "other way"), (3.0, "pair 0"), (0.1, "one position"),
                                          (math.radians(0.3), "radians")])
def test_typical_mistakes_with_the_pair_get_their_hint(angle, words):
    turned = (0.6 + 0.8j) * cmath.exp(1j * angle)
    out = said(lesson11.check_turned_pair, torch.tensor([turned.real, turned.imag]))
    assert "Not yet" in out and words in out


def test_a_pair_of_the_wrong_length_is_named():
    out = said(lesson11.check_turned_pair, [0.3368, 0.5])
    assert "Not yet" in out and "length" in out


@pytest.mark.parametrize("answer", ["0.34, 0.94", {"x": 0.34}, [0.34], [0.34, 0.94, 0.0], torch.zeros(2, 1),
                                    torch.tensor([True, False]), torch.tensor([1 + 1j, 0j]), [0.34, "0.94"],
                                    [0.34, float("nan")], Unreadable(), [Unreadable(), 0.94], 3.0])
def test_the_pair_checker_answers_anything_with_a_verdict(answer):
    assert "Not yet" in said(lesson11.check_turned_pair, answer)


@settings(max_examples=40, deadline=None)
@given(forms=st.tuples(*[st.sampled_from(range(len(NUMBER_FORMS)))] * 3), wiggle=st.floats(-0.004, 0.004))
def test_the_speeds_in_any_form_are_right(forms, wiggle):
    fast, slow, turn = (NUMBER_FORMS[f] for f in forms)
    turn_value = SLOWEST_TURN * (1 + wiggle)
    whole = turn in (int, np.int64)  # a whole number of positions, rounded, is right too
    assert "Correct" in said(lesson11.check_speeds, fast(0), slow(31), turn(round(turn_value) if whole else turn_value))


@pytest.mark.parametrize("answer, words", [((1, 31, SLOWEST_TURN), "smallest i"), ((0, 63, SLOWEST_TURN), "64 features"),
                                           ((0, 32, SLOWEST_TURN), "from 0"), ((0, 31, SLOWEST_TURN / (2 * math.pi)), "2π"),
                                           ((0, 31, SLOWEST_TURN / (2 * math.pi) * 360), "not 360"),
                                           ((0, 31, 2 * math.pi * 10000), "1/10000"), ((0, 31, 1000.0), "10000^")])
def test_typical_mistakes_with_the_speeds_get_their_hint(answer, words):
    out = said(lesson11.check_speeds, *answer)
    assert "Not yet" in out and words in out


@pytest.mark.parametrize("answer", [(..., 31, 1.0), (0.5, 31, 1.0), ("0", 31, 1.0), (0, True, 1.0), (0, 31, "47117"),
                                    (0, 31, float("inf")), (Unreadable(), 31, 1.0), (0, 31, Unreadable()),
                                    (torch.tensor([0, 1]), 31, 1.0), (0, 31, torch.tensor(1 + 2j))])
def test_the_speeds_checker_answers_anything_with_a_verdict(answer):
    assert "Not yet" in said(lesson11.check_speeds, *answer)


@settings(max_examples=30, deadline=None)
@given(form=st.sampled_from(sorted(WHOLE_FORMS)))
def test_the_halves_rows_in_any_form_are_right(form):
    assert "Correct" in said(lesson11.check_halves_rows, WHOLE_FORMS[form](HALVES_ROWS))


@settings(max_examples=40, deadline=None)
@given(order=st.permutations(range(8)))
def test_every_other_order_of_the_rows_is_not_right(order):
    assert ("Correct" in said(lesson11.check_halves_rows, order)) == (list(order) == HALVES_ROWS)


def test_the_inverse_order_gets_its_hint():
    inverse = [HALVES_ROWS.index(row) for row in range(8)]  # [0, 4, 1, 5, 2, 6, 3, 7]
    out = said(lesson11.check_halves_rows, inverse)
    assert "Not yet" in out and "other way" in out


def test_the_right_order_makes_the_halves_layout_give_the_same_scores():
    """The order the checker accepts really converts a head: checked with the package's rotation."""
    from attention_utils.rotary import apply_rotary

    w_query, w_key = torch.randn(2, 8, 5, dtype=torch.float64)
    x = torch.randn(6, 5, dtype=torch.float64)
    interleaved = apply_rotary(x @ w_query.T, 0) @ apply_rotary(x @ w_key.T, 0).T
    rows = torch.tensor(HALVES_ROWS)
    halves = apply_rotary(x @ w_query[rows].T, 0, layout="halves") @ apply_rotary(x @ w_key[rows].T, 0, layout="halves").T
    torch.testing.assert_close(halves, interleaved)


@pytest.mark.parametrize("answer", [..., [0, 2, 4, 6, 1, 3, 5], [0, 2, 4, 6, 1, 3, 5, 5], [0.5, 2, 4, 6, 1, 3, 5, 7],
                                    "02461357", torch.tensor(HALVES_ROWS).reshape(2, 4), [Unreadable()] * 8,
                                    Unreadable(), torch.tensor([True] * 8), {0: 0}, [[0], [2]]])
def test_the_rows_checker_answers_anything_with_a_verdict(answer):
    assert "Not yet" in said(lesson11.check_halves_rows, answer)


# Exercise 4: the learner's rotate_complex, against rotations written here pair by pair with cmath.
def turned_by_hand(x: torch.Tensor, positions: torch.Tensor, base: float, sign: int = 1, halves: bool = False) -> torch.Tensor:
    """Each pair turned with cmath.exp, one number at a time: the reference the right and wrong answers are built from."""
    out = torch.empty_like(x, dtype=torch.float64)
    t_count, d = x.shape
    for t in range(t_count):
        for i in range(d // 2):
            a, b = (i, i + d // 2) if halves else (2 * i, 2 * i + 1)
            z = complex(x[t, a], x[t, b]) * cmath.exp(sign * 1j * int(positions[t]) * base ** (-2 * i / d))
            out[t, a], out[t, b] = z.real, z.imag
    return out


def right_rotation(x, positions, base=10000.0):
    return turned_by_hand(x, positions, base).to(x.dtype)


def test_a_right_rotate_complex_is_right():
    assert "Correct" in said(lesson11.check_complex_rotation, right_rotation)


def test_the_reference_here_agrees_with_the_package():
    from attention_utils.rotary import apply_rotary

    x = torch.randn(4, 6, dtype=torch.float64)
    positions = torch.tensor([0, 3, 9, 40])
    torch.testing.assert_close(turned_by_hand(x, positions, 100.0), apply_rotary(x, positions, 100.0))


@pytest.mark.parametrize("answer, words", [
    (lambda x, p, b: turned_by_hand(x, p, b, sign=-1), "other way"),
    (lambda x, p, b: turned_by_hand(x, p, b, halves=True), "halves"),
    (lambda x, p, b: turned_by_hand(x, p, b ** 0.5), "−2i/d"),
    (lambda x, p, b: x.clone(), "Nothing turned"),
    (lambda x, p, b: turned_by_hand(x, p, 10000.0), "use the base"),
    (lambda x, p, b: torch.view_as_complex(x.reshape(x.shape[0], -1, 2).contiguous()), "view_as_real"),
    (lambda x, p, b: turned_by_hand(x, p, b)[:, :2], "shaped like x"),
    (lambda x, p, b: turned_by_hand(x, p, b).tolist(), "shaped like x"),
    (lambda x, p, b: turned_by_hand(x, p + 1, b), "differs from apply_rotary"),
])
def test_typical_mistakes_with_rotate_complex_get_their_hint(answer, words):
    out = said(lesson11.check_complex_rotation, answer)
    assert "Not yet" in out and words in out


@pytest.mark.parametrize("answer", [..., "rotate_complex", right_rotation(torch.ones(2, 4), torch.arange(2)),
                                    lambda x: x, lambda x, p, b: 1 / 0, lambda x, p, b: Unreadable()])
def test_the_rotation_checker_answers_anything_with_a_verdict(answer):
    assert "Not yet" in said(lesson11.check_complex_rotation, answer)


def test_the_rotation_hints_are_in_chinese_in_a_chinese_lesson():
    from attention_utils.language import choose_language

    choose_language("zh")
    try:
        out = said(lesson11.check_complex_rotation, lambda x, p, b: turned_by_hand(x, p, b, sign=-1))
    finally:
        choose_language("en")
    assert "还不对" in out and "转反了方向" in out and "other way" not in out
