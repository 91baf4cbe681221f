"""Lesson 4 checkers: wrong answers get a hint, right ones are accepted, in both languages."""

import math

import torch

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
