"""Lesson 3 checkers accept the right answer and explain a wrong one, in both languages."""

import math

import torch

import attention_utils as au
from attention_utils.exercises import lesson03


def verdict(capsys) -> str:
    return capsys.readouterr().out


def stable_1d(s):
    exps = torch.exp(s - s.max())
    return exps / exps.sum()


def stable_rows(s):
    exps = torch.exp(s - s.max(dim=-1, keepdim=True).values)
    return exps / exps.sum(dim=-1, keepdim=True)


def test_stable_softmax(capsys):
    lesson03.check_stable_softmax(...)
    assert "Not yet" in verdict(capsys)
    lesson03.check_stable_softmax(lambda s: torch.exp(s) / torch.exp(s).sum())  # the naive one: nan
    out = verdict(capsys)
    assert "Not yet" in out and "Subtract the maximum" in out
    lesson03.check_stable_softmax(lambda s: s / s.sum())
    assert "should be" in verdict(capsys)
    lesson03.check_stable_softmax(stable_1d)
    out = verdict(capsys)
    assert "Correct" in out
    # by hand: 250, 252, 249 differ by 2 and 1, so the weights are e^-2, 1, e^-3 (and ~0) over their sum
    total = math.exp(-2) + 1 + math.exp(-3)
    assert f"{1 / total:.4f}" in out and f"{math.exp(-2) / total:.4f}" in out


def test_stable_softmax_refuses_every_shortcut_and_restores_them(capsys):
    for shortcut in (lambda s: torch.softmax(s, dim=-1), lambda s: torch.nn.functional.softmax(s, dim=-1),
                     lambda s: s.softmax(-1), lambda s: torch.special.softmax(s, -1), lambda s: au.stable_softmax(s),
                     lambda s: torch.log_softmax(s, dim=-1).exp(), lambda s: s.log_softmax(-1).exp()):
        lesson03.check_stable_softmax(shortcut)
        out = verdict(capsys)
        assert "Not yet" in out and "ready-made softmax" in out
    x = torch.tensor([1.0, 2.0])
    assert torch.allclose(x.softmax(-1), torch.softmax(x, dim=-1))  # everything works again afterwards
    assert torch.allclose(au.stable_softmax(x), torch.nn.functional.softmax(x, dim=-1))
    assert "softmax" not in torch.Tensor.__dict__ and "log_softmax" not in torch.Tensor.__dict__


def test_softmax_rows(capsys):
    lesson03.check_softmax_rows(stable_rows)
    assert "Correct" in verdict(capsys)
    lesson03.check_softmax_rows(stable_1d)  # one maximum and one sum for the whole tensor
    assert "add up to 1" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: torch.exp(s - s.max()) / torch.exp(s - s.max()).sum(dim=-1, keepdim=True))
    assert "each row's own maximum" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: torch.exp(s - s.max(dim=0, keepdim=True).values)
                                / torch.exp(s - s.max(dim=0, keepdim=True).values).sum(dim=0, keepdim=True))
    assert "dim=0" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: torch.softmax(s, dim=-1))
    assert "ready-made softmax" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: stable_rows(s)[0])
    assert "same shape" in verdict(capsys)


def test_scaled_context(capsys):
    x = au.example_inputs()
    lesson03.check_scaled_context(torch.softmax(x @ x.T, dim=-1) @ x)
    out = verdict(capsys)
    assert "Not yet" in out and "sqrt(3)" in out
    lesson03.check_scaled_context(torch.softmax(x @ x.T / 3, dim=-1) @ x)  # divided by d_k, not its root
    assert "different values" in verdict(capsys)
    lesson03.check_scaled_context(torch.softmax(x @ x.T / math.sqrt(3), dim=-1) @ x)
    assert "Correct" in verdict(capsys)
    context, _ = au.scaled_dot_product_attention(x, x, x)
    lesson03.check_scaled_context(context)
    assert "Correct" in verdict(capsys)
