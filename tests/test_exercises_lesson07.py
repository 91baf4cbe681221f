"""Lesson 7 checkers accept right answers in any form and explain typical wrong ones (reshapes, hand-set heads)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import CORRECT, any_wrong_type, is_bilingual_no, tensor_forms, verdict_of

import attention_utils as au
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


def hand_set(head_0_back: int, head_1_back: int, strength: float = 5.0) -> "au.MultiHeadAttention":
    """Two heads over one-hot positions whose key j answers "j + back": each query finds the token `back` before it.

    Written here without the checker: the key matrix of each head has ones on the diagonal `back` below the main one.
    """
    module = au.MultiHeadAttention(6, 12, 6, 0.0, num_heads=2)
    with torch.no_grad():
        keys = [torch.diag(torch.ones(6 - abs(b)), diagonal=-b) for b in (head_0_back, head_1_back)]
        module.W_query.weight.copy_(strength * torch.cat([torch.eye(6), torch.eye(6)]))
        module.W_key.weight.copy_(strength * torch.cat(keys))
        module.W_value.weight.copy_(torch.cat([torch.eye(6), torch.eye(6)]))
    return module


def test_hand_set_heads_by_hand():
    with torch.no_grad():
        _, weights = hand_set(2, 1)(torch.eye(6)[None], return_weights=True)
    assert weights[0, 0, 5, 3] > 0.99 and weights[0, 1, 5, 4] > 0.99  # "step" (5): head 0 on "with" (3), head 1 on "one" (4)


def test_looks_back(capsys):
    lesson07.check_looks_back(...)
    assert "Not yet" in verdict(capsys)
    lesson07.check_looks_back(hand_set(2, 1))
    out = verdict(capsys)
    assert "Correct" in out and "头 0 看前两个词元" in out
    lesson07.check_looks_back(hand_set(1, 2))  # the two heads swapped
    out = verdict(capsys)
    assert "Not yet" in out and "swapped" in out and "弄反了" in out
    lesson07.check_looks_back(hand_set(-2, 1))  # the diagonal moved up: key j answers "j - 2", a later token
    out = verdict(capsys)
    assert "Not yet" in out and "Head 0 should look 2" in out and "down, not up" in out
    lesson07.check_looks_back(hand_set(2, 1, strength=0.5))  # the right way, but a soft softmax
    out = verdict(capsys)
    assert "Not yet" in out and "weakly" in out
    lesson07.check_looks_back(au.MultiHeadAttention(6, 12, 6, 0.0, num_heads=3))
    assert "2 heads" in verdict(capsys)
    lesson07.check_looks_back(torch.eye(6))
    assert "the module itself" in verdict(capsys)


# ---------------------------------------------------------------------------------------------
# Generated answers: a right answer in every form gets ✅, anything else a bilingual ❌, never an error

FEW = settings(max_examples=30, deadline=None)
# typed by hand: head h holds features 4h..4h+3 of each token, token 1's features are 12..23
SPLIT = torch.tensor([[[[0, 1, 2, 3], [12, 13, 14, 15]], [[4, 5, 6, 7], [16, 17, 18, 19]],
                       [[8, 9, 10, 11], [20, 21, 22, 23]]]])
MERGED = torch.tensor([[[0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19], [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23]]])


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
@given(answer=any_wrong_type)
def test_looks_back_answers_any_wrong_type_with_a_bilingual_no(answer):
    assert is_bilingual_no(verdict_of(lesson07.check_looks_back, answer))
