"""Lesson 2 checkers accept the right answer in any form and explain a wrong one, in both languages."""

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import (CORRECT, UNCHECKABLE, any_wrong_type, is_bilingual_no, plain_wrong_types,
                            real_number_forms, verdict_of)

import attention_utils as au
from attention_utils.exercises import lesson02


def verdict(capsys) -> str:
    return capsys.readouterr().out


def test_angle_your_step(capsys):
    lesson02.check_angle_your_step(...)
    assert "Not yet" in verdict(capsys)
    x = au.example_inputs().double()
    cosine = x[0] @ x[5] / (x[0].norm() * x[5].norm())
    lesson02.check_angle_your_step(torch.arccos(cosine))  # radians
    out = verdict(capsys)
    assert "Not yet" in out and "rad2deg" in out
    lesson02.check_angle_your_step(cosine.item())
    assert "arccos" in verdict(capsys)
    lesson02.check_angle_your_step(torch.rad2deg(torch.arccos(cosine)))
    assert "Correct" in verdict(capsys)
    lesson02.check_angle_your_step(49.51)  # by hand: arccos(0.6491) = 49.51°
    assert "Correct" in verdict(capsys)
    lesson02.check_angle_your_step("49.5")
    assert "one real number" in verdict(capsys)


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

YOUR_STEP_DEGREES = 49.5137  # arccos(0.6493...) by hand: 0.43*0.05 + 0.15*0.80 + 0.89*0.55 = 0.631 over 0.9997 * 0.9721


def test_the_angle_your_step_by_hand():
    x = au.example_inputs().double()
    cosine = (x[0] @ x[5]).item() / (x[0].norm() * x[5].norm()).item()
    assert math.isclose(math.degrees(math.acos(cosine)), YOUR_STEP_DEGREES, abs_tol=1e-3)


@settings(max_examples=40, deadline=None)
@given(answer=real_number_forms(YOUR_STEP_DEGREES))
def test_angle_accepts_every_numeric_form(answer):
    assert verdict_of(lesson02.check_angle_your_step, answer).startswith(CORRECT)


@settings(max_examples=40, deadline=None)
@given(answer=real_number_forms(math.radians(YOUR_STEP_DEGREES)))
def test_angle_in_radians_gets_the_conversion_hint_in_every_form(answer):
    assert "rad2deg" in verdict_of(lesson02.check_angle_your_step, answer)


@settings(max_examples=60, deadline=None)
@given(answer=st.one_of(any_wrong_type, st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda v: abs(v - YOUR_STEP_DEGREES) > 0.05)))
def test_angle_answers_anything_else_with_a_bilingual_no(answer):
    out = verdict_of(lesson02.check_angle_your_step, answer)
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
    for check in (lesson02.check_angle_your_step, lesson02.check_widest_pair, lesson02.check_rebuild_from_angles):
        assert UNCHECKABLE not in verdict_of(check, answer)
