"""Lesson 7 checkers accept right answers in any form and explain typical wrong ones (reshapes, parameter count)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import CORRECT, NOT_YET, any_wrong_type, is_bilingual_no, tensor_forms, verdict_of, whole_number_forms

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


# ---------------------------------------------------------------------------------------------
# Generated answers: a right answer in every form gets ✅, anything else a bilingual ❌, never an error

FEW = settings(max_examples=30, deadline=None)
# typed by hand: head h holds features 4h..4h+3 of each token, token 1's features are 12..23
SPLIT = torch.tensor([[[[0, 1, 2, 3], [12, 13, 14, 15]], [[4, 5, 6, 7], [16, 17, 18, 19]],
                       [[8, 9, 10, 11], [20, 21, 22, 23]]]])
MERGED = torch.tensor([[[0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19], [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23]]])
PARAMETERS = 1_049_088  # 4 * 512 * 512 + 512


def shuffled(tensor: torch.Tensor, seed: int) -> torch.Tensor:
    """The same numbers in another order (never the identity order)."""
    order = torch.randperm(tensor.numel(), generator=torch.Generator().manual_seed(seed))
    if torch.equal(order, torch.arange(tensor.numel())):
        order = order.roll(1)
    return tensor.reshape(-1)[order].reshape(tensor.shape)


@pytest.mark.parametrize("check, right", [(lesson07.check_split_heads, SPLIT), (lesson07.check_merge_heads, MERGED)])
def test_heads_accept_every_form(check, right):
    @FEW
    @given(answer=st.one_of(tensor_forms(right), st.sampled_from([right, right.numpy(), right.int(), right.numpy().astype(np.int32)])))
    def accepts(answer):
        assert verdict_of(check, answer).startswith(CORRECT)

    accepts()


@pytest.mark.parametrize("check, right", [(lesson07.check_split_heads, SPLIT), (lesson07.check_merge_heads, MERGED)])
def test_heads_refuse_the_numbers_in_another_order_and_any_wrong_type(check, right):
    @FEW
    @given(seed=st.integers(0, 2**16), answer=any_wrong_type)
    def refuses(seed, answer):
        assert is_bilingual_no(verdict_of(check, shuffled(right.float(), seed)))
        assert is_bilingual_no(verdict_of(check, answer))

    refuses()


@FEW
@given(answer=whole_number_forms(PARAMETERS))
def test_parameter_count_accepts_every_form(answer):
    assert verdict_of(lesson07.check_parameter_count, answer).startswith(CORRECT)


@FEW
@given(answer=st.one_of(st.integers(-2**31, 2**31 - 1).filter(lambda n: n != PARAMETERS).flatmap(whole_number_forms),
                        st.floats(allow_nan=True).filter(lambda v: v != PARAMETERS)))
def test_parameter_count_refuses_any_other_number(answer):
    assert is_bilingual_no(verdict_of(lesson07.check_parameter_count, answer))


@FEW
@given(answer=any_wrong_type)
def test_parameter_count_answers_any_wrong_type_with_a_bilingual_no(answer):
    assert is_bilingual_no(verdict_of(lesson07.check_parameter_count, answer))


def test_parameter_count_of_two_numbers_is_a_verdict(capsys):
    lesson07.check_parameter_count(torch.tensor([786432, 262656]))  # the review's case: the parts, not the sum
    out = verdict(capsys)
    assert out.startswith(NOT_YET) and "whole number" in out
