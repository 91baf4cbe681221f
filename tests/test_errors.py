"""Each bad input gets one clear sentence in English and in Chinese."""

import math

import pytest
import torch

import attention_utils as au


def assert_says(info: pytest.ExceptionInfo, *phrases: str) -> None:
    """The error message holds every phrase (an English and a Chinese one)."""
    message = str(info.value)
    for phrase in phrases:
        assert phrase in message, message


def test_wrong_rank():
    with pytest.raises(ValueError) as info:
        au.MultiHeadAttention(3, 4, 6, 0.0, 2)(torch.rand(6, 3))
    assert_says(info, "must have 3 dimensions", "x.unsqueeze(0)", "维")


def test_wrong_last_dimension():
    with pytest.raises(ValueError) as info:
        au.CausalAttention(3, 2, 6, 0.0)(torch.rand(1, 6, 5))
    assert_says(info, "must be d_in=3, got 5", "最后一维")


def test_heads_must_divide_d_out():
    with pytest.raises(ValueError) as info:
        au.MultiHeadAttention(3, 5, 6, 0.0, num_heads=2)
    assert_says(info, "d_out=5 must be divisible by num_heads=2", "整除")


def test_too_many_tokens():
    with pytest.raises(ValueError) as info:
        au.MultiHeadAttention(3, 4, 6, 0.0, 2)(torch.rand(1, 8, 3))
    assert_says(info, "has 8 tokens but the module was built with context_length=6", "词元")


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_dropout_out_of_range(p):
    with pytest.raises(ValueError) as info:
        au.CausalAttention(3, 2, 6, p)
    assert_says(info, "dropout must be in [0, 1)", "区间")


def test_mask_that_does_not_broadcast():
    q = torch.rand(6, 2)
    with pytest.raises(ValueError) as info:
        au.scaled_dot_product_attention(q, q, q, mask=torch.zeros(5, 5, dtype=torch.bool))
    assert_says(info, "does not broadcast", "无法广播")


def test_mask_that_is_not_boolean():
    q = torch.rand(6, 2)
    with pytest.raises(TypeError) as info:
        au.scaled_dot_product_attention(q, q, q, mask=torch.zeros(6, 6))
    assert_says(info, "boolean tensor", "布尔")


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nan_or_inf_input(bad):
    x = torch.rand(1, 6, 3)
    x[0, 2, 1] = bad
    with pytest.raises(ValueError) as info:
        au.MultiHeadAttention(3, 4, 6, 0.0, 2)(x)
    assert_says(info, "NaN or inf", "NaN")


def test_not_a_tensor():
    with pytest.raises(TypeError) as info:
        au.SelfAttentionV1(3, 2)([[0.1, 0.2, 0.3]])
    assert_says(info, "must be a torch.Tensor", "张量")


def test_queries_and_keys_of_different_width():
    with pytest.raises(ValueError) as info:
        au.attention_scores(torch.rand(6, 2), torch.rand(6, 3))
    assert_says(info, "same last dimension", "最后一维")


def test_zero_heads():
    with pytest.raises(ValueError) as info:
        au.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=0)
    assert_says(info, "num_heads must be a positive integer", "正整数")
