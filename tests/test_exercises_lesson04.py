"""Lesson 4 checkers: wrong answers get a hint, right ones are accepted in any form, in both languages."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import CORRECT, UNCHECKABLE, any_wrong_type, is_bilingual_no, plain_wrong_types, tensor_forms, verdict_of

import attention_utils as au
from attention_utils.exercises import lesson04


def verdict(capsys) -> str:
    return capsys.readouterr().out


def book_matrices():
    torch.manual_seed(123)
    return torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)


def test_step_context(capsys):
    lesson04.check_step_context(...)
    assert "Not yet" in verdict(capsys)
    lesson04.check_step_context(torch.tensor([0.3061, 0.8210]))  # journey's, not step's
    assert "Not yet" in verdict(capsys)
    torch.manual_seed(123)
    v1 = au.SelfAttentionV1(3, 2)
    lesson04.check_step_context(v1(au.example_inputs())[5])  # row 5 of the book's V1 output
    assert "Correct" in verdict(capsys)


def test_checkers_leave_the_random_state_alone(capsys):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    lesson04.check_step_context(torch.zeros(2))
    lesson04.check_cross_weights(torch.zeros(3, 3))
    lesson04.check_v1_from_v2(torch.nn.Module())
    verdict(capsys)
    assert torch.equal(torch.rand(3), expected)


def test_v1_from_v2(capsys):
    torch.manual_seed(789)
    sa_v2 = au.SelfAttentionV2(3, 2)
    lesson04.check_v1_from_v2(...)
    assert "Not yet" in verdict(capsys)
    lesson04.check_v1_from_v2(sa_v2)  # V2 itself: nn.Linear layers, not tensors
    assert "Not yet" in verdict(capsys)

    untransposed = torch.nn.Module()
    for name in ("W_query", "W_key", "W_value"):
        setattr(untransposed, name, getattr(sa_v2, name).weight.detach().clone())
    lesson04.check_v1_from_v2(untransposed)
    out = verdict(capsys)
    assert "Not yet" in out and "weight.T" in out

    torch.manual_seed(0)
    lesson04.check_v1_from_v2(au.SelfAttentionV1(3, 2))  # right shapes, other weights
    assert "Not yet" in verdict(capsys)

    sa_v1 = au.SelfAttentionV1(3, 2)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(sa_v1, name).copy_(getattr(sa_v2, name).weight.T)
    assert torch.allclose(sa_v1(au.example_inputs()), sa_v2(au.example_inputs()))
    lesson04.check_v1_from_v2(sa_v1)
    assert "Correct" in verdict(capsys)


def test_cross_weights(capsys):
    w_q, w_k, _ = book_matrices()
    x = au.example_inputs()
    lesson04.check_cross_weights(torch.full((3, 3), 1 / 3))
    assert "Not yet" in verdict(capsys)
    unscaled = torch.softmax((x[3:] @ w_q) @ (x[:3] @ w_k).T, dim=-1)
    lesson04.check_cross_weights(unscaled)
    assert "different values" in verdict(capsys)
    scaled = torch.softmax((x[3:] @ w_q) @ (x[:3] @ w_k).T / math.sqrt(2), dim=-1)
    lesson04.check_cross_weights(scaled)
    assert "Correct" in verdict(capsys)


# ---------------------------------------------------------------------------------------------
# Every form of a right answer, every wrong type (Hypothesis)


def step_context_by_hand() -> torch.Tensor:
    w_q, w_k, w_v = book_matrices()
    x = au.example_inputs()
    weights = torch.softmax((x[5] @ w_q) @ (x @ w_k).T / math.sqrt(2), dim=-1)
    return weights @ (x @ w_v)


def cross_weights_by_hand() -> torch.Tensor:
    w_q, w_k, _ = book_matrices()
    x = au.example_inputs()
    return torch.softmax((x[3:] @ w_q) @ (x[:3] @ w_k).T / math.sqrt(2), dim=-1)


@settings(max_examples=30, deadline=None)
@given(context=tensor_forms(step_context_by_hand()), weights=tensor_forms(cross_weights_by_hand()))
def test_tensor_answers_are_accepted_in_every_form(context, weights):
    assert verdict_of(lesson04.check_step_context, context).startswith(CORRECT)
    assert verdict_of(lesson04.check_cross_weights, weights).startswith(CORRECT)


def v1_holding(weights, form) -> torch.nn.Module:
    module = torch.nn.Module()
    for name, weight in zip(("W_query", "W_key", "W_value"), weights):
        setattr(module, name, form(weight.T.detach().clone()))
    return module


@settings(max_examples=20, deadline=None)
@given(form=st.sampled_from([torch.nn.Parameter, lambda w: w, torch.Tensor.double,
                             lambda w: torch.nn.Parameter(w.double()), lambda w: w.T.contiguous().T]))
def test_a_v1_module_is_accepted_with_weights_of_any_real_dtype(form):
    torch.manual_seed(789)
    sa_v2 = au.SelfAttentionV2(3, 2)
    weights = (sa_v2.W_query.weight, sa_v2.W_key.weight, sa_v2.W_value.weight)
    assert verdict_of(lesson04.check_v1_from_v2, v1_holding(weights, form)).startswith(CORRECT)


def test_a_v1_module_with_complex_weights_is_refused(capsys):
    torch.manual_seed(789)
    sa_v2 = au.SelfAttentionV2(3, 2)
    weights = (sa_v2.W_query.weight, sa_v2.W_key.weight, sa_v2.W_value.weight)
    lesson04.check_v1_from_v2(v1_holding(weights, lambda w: w.cfloat() + 1j))  # the real parts are right
    out = verdict(capsys)
    assert "Not yet" in out and "real numbers" in out


@settings(max_examples=60, deadline=None)
@given(answer=any_wrong_type, check=st.sampled_from(["check_step_context", "check_v1_from_v2", "check_cross_weights"]))
def test_any_wrong_type_gets_a_bilingual_no(answer, check):
    out = verdict_of(getattr(lesson04, check), answer)
    assert is_bilingual_no(out), out


@settings(max_examples=40, deadline=None)
@given(answer=plain_wrong_types)
def test_plain_wrong_types_get_a_hint_not_an_error_report(answer):
    for check in (lesson04.check_step_context, lesson04.check_v1_from_v2, lesson04.check_cross_weights):
        assert UNCHECKABLE not in verdict_of(check, answer)
