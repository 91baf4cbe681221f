"""Lesson 3 checkers accept the right answer and explain a wrong one, in both languages."""

import math

import torch

import attention_utils as au
from attention_utils.exercises import lesson03


def verdict(capsys) -> str:
    return capsys.readouterr().out


def test_stable_softmax(capsys):
    lesson03.check_stable_softmax(...)
    assert "Not yet" in verdict(capsys)
    scores = torch.tensor(lesson03.BIG_SCORES)
    lesson03.check_stable_softmax(torch.exp(scores) / torch.exp(scores).sum())  # the naive one: nan
    out = verdict(capsys)
    assert "Not yet" in out and "Subtract the maximum" in out
    lesson03.check_stable_softmax(scores / scores.sum())
    assert "different values" in verdict(capsys)
    shifted = torch.exp(scores - scores.max())
    lesson03.check_stable_softmax(shifted / shifted.sum())
    assert "Correct" in verdict(capsys)
    # by hand: the scores 250, 252, 249 differ by 2 and 1, so the weights are e^-2, 1, e^-3 over their sum
    total = math.exp(-2) + 1 + math.exp(-3)
    lesson03.check_stable_softmax(torch.tensor([math.exp(-2) / total, 1 / total, math.exp(-3) / total, 0.0]))
    assert "Correct" in verdict(capsys)


def test_batch_weights(capsys):
    batch = au.example_batch(2)
    scores = batch @ batch.transpose(1, 2)  # (2, 6, 6)
    lesson03.check_batch_weights(torch.softmax(scores, dim=0))
    out = verdict(capsys)
    assert "Not yet" in out and "dim=0" in out
    lesson03.check_batch_weights(torch.softmax(scores, dim=1))
    assert "add up to 1" in verdict(capsys)
    lesson03.check_batch_weights(torch.softmax(scores, dim=-1)[0])
    assert "shape (2, 6, 6)" in verdict(capsys)
    lesson03.check_batch_weights(torch.softmax(scores, dim=-1))
    assert "Correct" in verdict(capsys)


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
