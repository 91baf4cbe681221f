"""Lesson 2 checkers accept the right answer in any form and explain a wrong one, in both languages."""

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import CORRECT, UNCHECKABLE, any_wrong_type, is_bilingual_no, plain_wrong_types, verdict_of

import attention_utils as au
from attention_utils.exercises import lesson02


def verdict(capsys) -> str:
    return capsys.readouterr().out


# By hand, independently of the checker: one = (0.77, 0.25, 0.10), journey = (0.55, 0.87, 0.66);
# one·journey = 0.7070, journey·journey = 1.4950, so one's shadow is 0.47291 journey and the rest is
# (0.50990, -0.16143, -0.21212), of length 0.5754; scaled to 1: (0.8862, -0.2806, -0.3687) (checked below).
UNSEEN = (0.8862, -0.2806, -0.3687)


def test_unseen_by_journey_by_hand():
    journey, one = au.example_inputs().double()[1], au.example_inputs().double()[4]
    rest = one - 0.7070 / 1.4950 * journey
    assert torch.allclose(rest / rest.norm(), torch.tensor(UNSEEN, dtype=torch.float64), atol=1e-4)


def test_unseen_by_journey_names_each_slip(capsys):
    lesson02.check_unseen_by_journey(...)
    assert "Not yet" in verdict(capsys)
    x = au.example_inputs().double()
    journey, one = x[1], x[4]
    rest = one - (one @ journey) / (journey @ journey) * journey
    lesson02.check_unseen_by_journey(rest)  # the remainder, not scaled to length 1
    out = verdict(capsys)
    assert "Not yet" in out and "length is 0.5" in out and "v / v.norm()" in out
    lesson02.check_unseen_by_journey(-rest / rest.norm())  # perpendicular, length 1, but the wrong side of "one"
    out = verdict(capsys)
    assert "Not yet" in out and "Flip its sign" in out and "取反" in out
    lesson02.check_unseen_by_journey(one / one.norm())  # "one" itself: it has a shadow on journey
    out = verdict(capsys)
    assert "Not yet" in out and "shadow" in out and "影子" in out
    cross = torch.linalg.cross(journey, one)
    lesson02.check_unseen_by_journey(cross / cross.norm())  # perpendicular to both
    out = verdict(capsys)
    assert "Not yet" in out and "as well" in out
    lesson02.check_unseen_by_journey(torch.zeros(3))
    assert "zero vector" in verdict(capsys)
    lesson02.check_unseen_by_journey([0.5, "x", 0.1])
    assert "three real numbers" in verdict(capsys)


def test_unseen_by_journey_accepts_any_right_vector(capsys):
    x = au.example_inputs().double()
    journey, one = x[1], x[4]
    rest = one - (one @ journey) / (journey @ journey) * journey
    other = torch.linalg.cross(journey, one)  # perpendicular to journey too; mixed in, the score against one shrinks
    tilted = rest / rest.norm() + 0.5 * other / other.norm()
    lesson02.check_unseen_by_journey(tilted / tilted.norm())
    out = verdict(capsys)
    assert "Correct" in out and "more than 0.5754" in out  # |rest|, by hand above: 0.5754


def test_widest_pair(capsys):
    lesson02.check_widest_pair(("Your", "one"))
    assert "Not yet" in verdict(capsys)
    lesson02.check_widest_pair(("one", "one"))
    assert "two different tokens" in verdict(capsys)
    lesson02.check_widest_pair(["step", "One"])  # 68.3°, in any order and case
    out = verdict(capsys)
    assert "Correct" in out and "68.3" in out


def test_rebuild_from_angles(capsys):
    def rebuild(lengths, angles):
        return torch.outer(lengths, lengths) * torch.cos(torch.deg2rad(angles))

    lesson02.check_rebuild_from_angles(rebuild)
    assert "Correct" in verdict(capsys)
    lesson02.check_rebuild_from_angles(lambda lengths, angles: torch.outer(lengths, lengths) * torch.cos(angles))
    out = verdict(capsys)
    assert "Not yet" in out and "deg2rad" in out
    x = au.example_inputs()
    lesson02.check_rebuild_from_angles(lambda lengths, angles: x @ x.T)  # the shortcut ignores its arguments
    out = verdict(capsys)
    assert "Not yet" in out and "made-up vectors" in out
    lesson02.check_rebuild_from_angles(lambda lengths, angles: lengths)
    assert "shape" in verdict(capsys)
    lesson02.check_rebuild_from_angles(lambda lengths, angles: torch.zeros_like(angles))
    assert "our six tokens" in verdict(capsys)
    lesson02.check_rebuild_from_angles(x @ x.T)
    assert "Define a function" in verdict(capsys)


def test_the_angle_between_one_and_step_by_hand():
    x = au.example_inputs().double()
    cosine = x[4] @ x[5] / (x[4].norm() * x[5].norm())  # 0.2935 / (0.8157 × 0.9721)
    assert math.isclose(math.degrees(math.acos(cosine)), 68.28, abs_tol=0.01)


# ---------------------------------------------------------------------------------------------
# Every form of a right answer, every wrong type (Hypothesis)

@settings(max_examples=40, deadline=None)
@given(form=st.sampled_from([lambda v: torch.tensor(v), lambda v: torch.tensor(v, dtype=torch.float64), np.array, list,
                             tuple, lambda v: [np.float32(x) for x in v], lambda v: torch.tensor([v]),
                             lambda v: [torch.tensor(x) for x in v]]))
def test_unseen_by_journey_accepts_every_form(form):
    assert verdict_of(lesson02.check_unseen_by_journey, form(UNSEEN)).startswith(CORRECT)


@settings(max_examples=60, deadline=None)
@given(answer=any_wrong_type)
def test_unseen_by_journey_answers_anything_else_with_a_bilingual_no(answer):
    out = verdict_of(lesson02.check_unseen_by_journey, answer)
    assert is_bilingual_no(out), out


@settings(max_examples=40, deadline=None)
@given(form=st.sampled_from([tuple, list, set, frozenset, np.array, lambda p: (p[1].upper(), f" {p[0]} "),
                             lambda p: [p[1], p[0]]]))
def test_widest_pair_accepts_any_collection_of_the_two_names(form):
    assert verdict_of(lesson02.check_widest_pair, form(("one", "step"))).startswith(CORRECT)


@settings(max_examples=60, deadline=None)
@given(answer=st.one_of(any_wrong_type, st.tuples(st.sampled_from(au.TOKENS), st.sampled_from(au.TOKENS)).filter(
    lambda p: {p[0].lower(), p[1].lower()} != {"one", "step"})))
def test_widest_pair_answers_anything_else_with_a_bilingual_no(answer):
    out = verdict_of(lesson02.check_widest_pair, answer)
    assert is_bilingual_no(out), out


def right_rebuild(form):
    return lambda lengths, angles: form(torch.outer(lengths, lengths) * torch.cos(torch.deg2rad(angles)))


@settings(max_examples=30, deadline=None)
@given(form=st.sampled_from([lambda t: t, torch.Tensor.double, lambda t: t.numpy(), lambda t: t.double().numpy(),
                             lambda t: t.clone().requires_grad_(True)]))
def test_rebuild_accepts_a_result_in_any_tensor_form(form):
    assert verdict_of(lesson02.check_rebuild_from_angles, right_rebuild(form)).startswith(CORRECT)


@settings(max_examples=60, deadline=None)
@given(result=any_wrong_type)
def test_rebuild_answers_any_return_value_with_a_bilingual_no(result):
    out = verdict_of(lesson02.check_rebuild_from_angles, lambda lengths, angles: result)
    assert is_bilingual_no(out), out


def test_rebuild_refuses_a_complex_matrix_whose_real_part_is_right(capsys):
    lesson02.check_rebuild_from_angles(right_rebuild(lambda t: t.cfloat() + 1j))
    out = verdict(capsys)
    assert "Not yet" in out and "real numbers" in out


@settings(max_examples=40, deadline=None)
@given(answer=plain_wrong_types)
def test_plain_wrong_types_get_a_hint_not_an_error_report(answer):
    for check in (lesson02.check_unseen_by_journey, lesson02.check_widest_pair, lesson02.check_rebuild_from_angles):
        assert UNCHECKABLE not in verdict_of(check, answer)
