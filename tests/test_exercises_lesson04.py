"""Lesson 4 checkers: wrong answers get a hint, right ones are accepted in any form, in both languages."""

import math

import numpy as np
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


# A hand-made answer, checked by hand: keys k = (x3, x2), queries q = (x1, x3 - x1). The query of "one",
# (0.77, -0.67), scores the key of "Your", (0.89, 0.15), 0.5848, above every other key (journey -0.0594);
# the query of "Your", (0.43, 0.46), scores "journey" (0.66, 0.87) 0.6840, above "starts" 0.6662 and "Your" 0.4517.
W_QUERY = [[1.0, -1.0], [0.0, 0.0], [0.0, 1.0]]
W_KEY = [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]]


def test_one_way_by_hand():
    x = au.example_inputs().double()
    scores = (x @ torch.tensor(W_QUERY, dtype=torch.float64)) @ (x @ torch.tensor(W_KEY, dtype=torch.float64)).T
    assert math.isclose(scores[4, 0].item(), 0.77 * 0.89 - 0.67 * 0.15, abs_tol=1e-4)
    assert scores[4].argmax().item() == 0 and scores[0].argmax().item() == 1


def test_one_way_accepts_the_two_matrices_in_every_form(capsys):
    for form in (lambda m: m, torch.tensor, lambda m: torch.tensor(m, dtype=torch.float64), np.array,
                 lambda m: torch.nn.Parameter(torch.tensor(m)), tuple):
        lesson04.check_one_way(form(W_QUERY), form(W_KEY))
        out = verdict(capsys)
        assert "Correct" in out and "one-way" in out and "单向" in out, out


def test_one_way_names_each_slip(capsys):
    lesson04.check_one_way(...)
    assert "Not yet" in verdict(capsys)
    lesson04.check_one_way(torch.tensor(W_QUERY).T, torch.tensor(W_KEY).T)  # nn.Linear's layout
    out = verdict(capsys)
    assert "Not yet" in out and "(2, 3)" in out and "x @ W_query" in out
    lesson04.check_one_way(torch.zeros(3, 2), torch.zeros(3, 2))  # every weight 1/6: a tie
    out = verdict(capsys)
    assert "Not yet" in out and "tie" in out and "并列" in out
    torch.manual_seed(123)
    w_q, w_k = torch.rand(3, 2), torch.rand(3, 2)  # the lesson's matrices: every row's top key is journey
    lesson04.check_one_way(w_q, w_k)
    out = verdict(capsys)
    assert "Not yet" in out and '"one" puts its largest weight on "journey"' in out
    lesson04.check_one_way(torch.tensor(W_KEY), torch.tensor(W_QUERY))  # the two swapped
    assert "Not yet" in verdict(capsys)
    lesson04.check_one_way(torch.zeros(3, 3), torch.zeros(3, 2))
    assert "(3, 2)" in verdict(capsys)
    lesson04.check_one_way([[1, "a"], [0, 0], [0, 1]], W_KEY)
    assert "two matrices of real numbers" in verdict(capsys)


def test_checkers_leave_the_random_state_alone(capsys):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    lesson04.check_one_way(torch.zeros(3, 2), torch.zeros(3, 2))
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
    out = verdict(capsys)
    assert "Not yet" in out and "V2-style module" in out and "V2 式的模块" in out

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
    out = verdict(capsys)
    assert "unscaled" in out and "math.sqrt(d_k)" in out and "没有缩放" in out
    scaled = torch.softmax((x[3:] @ w_q) @ (x[:3] @ w_k).T / math.sqrt(2), dim=-1)
    lesson04.check_cross_weights(scaled)
    assert "Correct" in verdict(capsys)


# ---------------------------------------------------------------------------------------------
# Every form of a right answer, every wrong type (Hypothesis)


def cross_weights_by_hand() -> torch.Tensor:
    w_q, w_k, _ = book_matrices()
    x = au.example_inputs()
    return torch.softmax((x[3:] @ w_q) @ (x[:3] @ w_k).T / math.sqrt(2), dim=-1)


@settings(max_examples=30, deadline=None)
@given(weights=tensor_forms(cross_weights_by_hand()))
def test_tensor_answers_are_accepted_in_every_form(weights):
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
@given(answer=any_wrong_type, check=st.sampled_from(["check_one_way", "check_v1_from_v2", "check_cross_weights"]))
def test_any_wrong_type_gets_a_bilingual_no(answer, check):
    out = verdict_of(getattr(lesson04, check), answer)
    assert is_bilingual_no(out), out


@settings(max_examples=40, deadline=None)
@given(answer=plain_wrong_types)
def test_plain_wrong_types_get_a_hint_not_an_error_report(answer):
    for check in (lesson04.check_one_way, lesson04.check_v1_from_v2, lesson04.check_cross_weights):
        assert UNCHECKABLE not in verdict_of(check, answer)
