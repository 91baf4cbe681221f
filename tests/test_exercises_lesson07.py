"""Lesson 7 checkers accept right answers and explain typical wrong ones (reshapes, parameter count)."""

import torch

from attention_utils.exercises import lesson07


def verdict(capsys) -> str:
    return capsys.readouterr().out


def test_split_heads(capsys):
    x = torch.arange(24.0).view(1, 2, 12)
    lesson07.check_split_heads(...)
    assert "Not yet" in verdict(capsys)
    lesson07.check_split_heads(x.view(1, 3, 2, 4))  # right shape, tokens mixed up
    out = verdict(capsys)
    assert "Not yet" in out and "view(1, 2, 3, 4)" in out
    assert "first 8 features of token 0" in out and "词元 0 的前 8 个特征" in out  # token 0 has 12 features
    lesson07.check_split_heads(x.view(1, 2, 3, 4))  # forgot the transpose
    assert "Not yet" in verdict(capsys)
    lesson07.check_split_heads(x.view(1, 2, 3, 4).transpose(1, 2))
    assert "Correct" in verdict(capsys)
    # by hand: head 1 of token 1 holds features 16..19
    lesson07.check_split_heads(torch.stack([x[0, :, 4 * h : 4 * h + 4] for h in range(3)])[None])
    assert "Correct" in verdict(capsys)


def test_merge_heads(capsys):
    context = torch.arange(24.0).view(1, 3, 2, 4)
    lesson07.check_merge_heads(...)
    assert "Not yet" in verdict(capsys)
    lesson07.check_merge_heads(context.view(1, 2, 12))  # no transpose
    out = verdict(capsys)
    assert "Not yet" in out and "transpose(1, 2)" in out
    lesson07.check_merge_heads(context.transpose(1, 2).reshape(1, 2, 12))
    assert "Correct" in verdict(capsys)
    typed = torch.tensor([[[0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19],
                           [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23]]], dtype=torch.float32)
    lesson07.check_merge_heads(typed)
    assert "Correct" in verdict(capsys)


def test_parameter_count(capsys):
    lesson07.check_parameter_count(...)
    assert "Not yet" in verdict(capsys)
    lesson07.check_parameter_count(4 * 512 * 512 + 4 * 512)  # counted qkv biases that are not there
    out = verdict(capsys)
    assert "Not yet" in out and "qkv_bias=False" in out
    lesson07.check_parameter_count(4 * 512 * 512)  # forgot out_proj's bias
    assert "Not yet" in verdict(capsys)
    lesson07.check_parameter_count("1049088")
    assert "Not yet" in verdict(capsys)
    lesson07.check_parameter_count(1_049_088)  # 4 * 512 * 512 + 512, by hand
    assert "Correct" in verdict(capsys)
    lesson07.check_parameter_count(1_049_088.0)
    assert "Correct" in verdict(capsys)
