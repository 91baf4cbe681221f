"""Lesson 5 checkers: wrong answers get a hint, right ones are accepted, in both languages."""

import math

import torch

import attention_utils as au
from attention_utils.exercises import lesson05


def verdict(capsys) -> str:
    return capsys.readouterr().out


def book_scores():
    torch.manual_seed(789)
    sa_v2 = au.SelfAttentionV2(3, 2)
    x = au.example_inputs()
    with torch.no_grad():
        return sa_v2.W_query(x) @ sa_v2.W_key(x).T


def test_local_window(capsys):
    scores = book_scores()
    lesson05.check_local_window(...)
    assert "Not yet" in verdict(capsys)
    causal = torch.softmax(scores.masked_fill(au.causal_mask(6), float("-inf")) / math.sqrt(2), dim=-1)
    lesson05.check_local_window(causal)
    out = verdict(capsys)
    assert "Not yet" in out and "j < i - 2" in out
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    hide = (j > i) | (j < i - 2)
    zeroed = torch.softmax(scores / math.sqrt(2), dim=-1).masked_fill(hide, 0.0)  # not renormalized
    lesson05.check_local_window(zeroed)
    assert "sum to 1" in verdict(capsys)
    local = torch.softmax(scores.masked_fill(hide, float("-inf")) / math.sqrt(2), dim=-1)
    assert local[5, :3].sum() == 0 and torch.allclose(local.sum(dim=-1), torch.ones(6))
    lesson05.check_local_window(local)
    assert "Correct" in verdict(capsys)


def test_padding_mask(capsys):
    causal = au.causal_mask(6)
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    right = causal | pad[:, None, :]
    lesson05.check_padding_mask(...)
    assert "Not yet" in verdict(capsys)
    lesson05.check_padding_mask(causal)  # (6, 6): no batch dimension
    assert "(2, 6, 6)" in verdict(capsys)
    lesson05.check_padding_mask(right.float())
    assert "boolean" in verdict(capsys)
    lesson05.check_padding_mask(~right)
    assert "inverted" in verdict(capsys)
    lesson05.check_padding_mask(causal.expand(2, 6, 6))
    assert "causal mask only" in verdict(capsys)
    lesson05.check_padding_mask(causal | pad[:, :, None])  # hides pad queries instead of pad keys
    assert "Not yet" in verdict(capsys)
    lesson05.check_padding_mask(right)
    assert "Correct" in verdict(capsys)


def test_empty_rows(capsys):
    # by hand: left padding puts 0, 2 and 5 pads first, and each pad query sees only pads; right padding empties nothing
    lesson05.check_empty_rows(..., [0, 0, 0])
    assert "Not yet" in verdict(capsys)
    lesson05.check_empty_rows([6, 4, 1], [0, 0, 0])  # counted the real tokens
    assert "real tokens" in verdict(capsys)
    lesson05.check_empty_rows([0, 0, 0], [0, 0, 0])
    assert "Left padding" in verdict(capsys)
    lesson05.check_empty_rows([0, 2, 5], [0, 2, 5])  # thought right padding behaves like left padding
    assert "Right padding" in verdict(capsys)
    lesson05.check_empty_rows([0, 2], [0, 0, 0])
    assert "three whole numbers" in verdict(capsys)
    lesson05.check_empty_rows([0, 2, 5], [0, 0, 0])
    assert "Correct" in verdict(capsys)
    lesson05.check_empty_rows(torch.tensor([0, 2, 5]), (0.0, 0.0, 0.0))
    assert "Correct" in verdict(capsys)


def test_padding_mask_shape_hint(capsys):
    lesson05.check_padding_mask(au.causal_mask(6))
    out = verdict(capsys)
    assert "(2, 1, 6)" in out and "掩码的形状应为 (2, 6, 6)，你的是 (6, 6)；" in out
