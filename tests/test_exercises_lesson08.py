"""Lesson 8 checkers accept right answers in any form and explain typical wrong ones (weight order, the longest length that fits, SDPA's mask)."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import CORRECT, any_wrong_type, is_bilingual_no, verdict_of, whole_number_forms
from torch.nn import functional as F

import attention_utils as au
from attention_utils.exercises import lesson08


def verdict(capsys) -> str:
    return capsys.readouterr().out


def by_hand(mha, order=("W_query", "W_key", "W_value"), bias=True, out_proj=True):
    """A hand-made fused copy of mha, with one of the usual mistakes switched on by the arguments."""
    has_bias = mha.W_query.bias is not None
    fused = au.FusedMultiHeadAttention(mha.d_in, mha.d_out, mha.context_length, 0.0, mha.num_heads, has_bias)
    with torch.no_grad():
        fused.qkv.weight.copy_(torch.cat([getattr(mha, name).weight for name in order]))
        if bias and has_bias:
            fused.qkv.bias.copy_(torch.cat([getattr(mha, name).bias for name in order]))
        if out_proj:
            fused.out_proj.load_state_dict(mha.out_proj.state_dict())
    return fused


def test_fused_by_hand(capsys):
    lesson08.check_fused_by_hand(...)
    assert "Not yet" in verdict(capsys)
    lesson08.check_fused_by_hand(lambda mha: None)  # the template's body: nothing returned yet
    assert "Replace the ..." in verdict(capsys)
    lesson08.check_fused_by_hand(lambda mha: mha)
    out = verdict(capsys)
    assert "Not yet" in out and "three projections" in out
    lesson08.check_fused_by_hand(lambda mha: by_hand(mha, order=("W_key", "W_query", "W_value")))
    out = verdict(capsys)
    assert "Not yet" in out and "wrong order" in out
    lesson08.check_fused_by_hand(lambda mha: by_hand(mha, bias=False))
    out = verdict(capsys)
    assert "Not yet" in out and "biases" in out
    lesson08.check_fused_by_hand(lambda mha: by_hand(mha, out_proj=False))
    out = verdict(capsys)
    assert "Not yet" in out and "out_proj" in out
    lesson08.check_fused_by_hand(lambda mha: au.FusedMultiHeadAttention(4, 6, 8, 0.0, num_heads=3, qkv_bias=True))
    assert "Not yet" in verdict(capsys)
    lesson08.check_fused_by_hand(by_hand(lesson08._source_module(*lesson08.SOURCES[0])))  # a module, not a function
    assert "function itself" in verdict(capsys)
    lesson08.check_fused_by_hand(by_hand)
    assert "Correct" in verdict(capsys)


def test_fused_by_hand_refuses_from_multihead(capsys):
    lesson08.check_fused_by_hand(au.FusedMultiHeadAttention.from_multihead)
    out = verdict(capsys)
    assert "Not yet" in out and "from_multihead" in out
    lesson08.check_fused_by_hand(lambda mha: au.FusedMultiHeadAttention.from_multihead(mha))
    assert "from_multihead" in verdict(capsys)
    alias = au.FusedMultiHeadAttention.from_multihead
    lesson08.check_fused_by_hand(lambda mha: alias(mha))
    assert "from_multihead" in verdict(capsys)
    # the shortcut is switched off only while the learner's function runs
    torch.manual_seed(8)
    mha = au.MultiHeadAttention(4, 6, 8, 0.0, num_heads=3, qkv_bias=True)
    x = torch.rand(1, 5, 4)
    assert torch.allclose(au.FusedMultiHeadAttention.from_multihead(mha)(x), mha(x), atol=1e-6)


def test_a_failing_function_gets_its_error_named(capsys):
    def broken(mha):
        raise KeyError("W_qkv")

    lesson08.check_fused_by_hand(broken)
    out = verdict(capsys)
    assert "Not yet" in out and "KeyError" in out


def test_checker_leaves_the_random_stream_alone(capsys):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    lesson08.check_fused_by_hand(by_hand)
    assert "Correct" in verdict(capsys)
    assert torch.equal(torch.rand(3), expected)


def test_longest_length(capsys):
    lesson08.check_longest_length(...)
    assert "Not yet" in verdict(capsys)
    # by hand: 2 matrices x 8 x 12 x T^2 x 4 bytes <= 2^34 gives T^2 <= 22,369,621.3, T <= 4729.65
    assert 2 * 8 * 12 * 4729**2 * 4 <= 16 * 2**30 < 2 * 8 * 12 * 4730**2 * 4
    for right in (4729, 4729.0, np.int64(4729), torch.tensor(4729), torch.tensor(4729.0, dtype=torch.float64), np.array(4729)):
        lesson08.check_longest_length(right)
        assert "Correct" in verdict(capsys), right
    for wrong, words in (
        (6688, "one (b, h, T, T) matrix"),  # the softmax output forgotten (or bfloat16 read for float32)
        (16384, "12 heads"),
        (13377, "batch of 8"),
        (4564, "16 × 2**30"),
        (4730, "one less"),
        (4096, "power of two"),
        (4729.65, "round 4729.65 down"),
        (torch.tensor(4729.65), "round"),
        ("4729", "whole number"),
        (5000, "Solve 2 × batch"),
    ):
        lesson08.check_longest_length(wrong)
        out = verdict(capsys)
        assert "Not yet" in out and words in out, (wrong, out)


def test_merged_mask(capsys):
    padding = torch.tensor(lesson08.PADDING)  # (2, 5), True = padding
    right = ~(au.causal_mask(5) | padding[:, None, None, :])  # the module's own recipe, written out
    lesson08.check_merged_mask(...)
    assert "Not yet" in verdict(capsys)
    lesson08.check_merged_mask(right)
    assert "Correct" in verdict(capsys)
    by_rule = torch.tensor([[[[j <= i and not padding[b, j] for j in range(5)] for i in range(5)]] for b in range(2)])
    lesson08.check_merged_mask(by_rule)
    assert "Correct" in verdict(capsys)
    for wrong, words in (
        (~right, "Invert it"),
        (~au.causal_mask(5).expand(2, 1, 5, 5), "padding keys are not"),
        ((~padding)[:, None, None, :].expand(2, 1, 5, 5), "the future is not"),
        (right[:, 0], "head dimension"),
        (right.float(), "boolean"),
        (torch.ones(2, 1, 5, 5, dtype=torch.bool), "j <= i"),
    ):
        lesson08.check_merged_mask(wrong)
        out = verdict(capsys)
        assert "Not yet" in out and words in out, (words, out)
    hides_queries = ~au.causal_mask(5) & ~padding[:, None, :, None]
    lesson08.check_merged_mask(hides_queries)
    assert "not as queries" in verdict(capsys)


def test_merged_mask_gives_the_modules_numbers():
    torch.manual_seed(1)
    fused = au.FusedMultiHeadAttention(3, 4, 5, 0.0, num_heads=2)
    x = torch.rand(2, 5, 3)
    padding = torch.tensor(lesson08.PADDING)
    queries, keys, values = fused.project_heads(x)
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=lesson08._expected_merged())
    assert torch.allclose(fused.combine_heads(context), fused(x, padding_mask=padding), atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Generated answers: a right answer in every form gets ✅, anything else a bilingual ❌, never an error

FEW = settings(max_examples=25, deadline=None)
PADDING = torch.tensor([[True, True, False, False, False], [False] * 5])
# typed by hand from the rule "key j <= query i and key j is not padding": sentence 0 hides keys 0 and 1
MERGED = torch.tensor([[[[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 1, 1, 1]]],
                       [[[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]]]).bool()


@FEW
@given(dtype=st.sampled_from([torch.float32, torch.float64]), training=st.booleans())
def test_fused_by_hand_accepts_weights_in_float64_and_gives_back_the_learners_mode(dtype, training):
    returned = []

    def fuse(mha):
        module = by_hand(mha).to(dtype).train(training)
        returned.append(module)
        return module

    assert verdict_of(lesson08.check_fused_by_hand, fuse).startswith(CORRECT)
    assert returned and all(module.training == training for module in returned)  # its train/eval mode, restored


@FEW
@given(name=st.sampled_from(["qkv.weight", "out_proj.weight", "out_proj.bias"]), position=st.integers(0, 200),
       offset=st.floats(1e-3, 10.0), sign=st.sampled_from([-1, 1]))
def test_fused_by_hand_refuses_any_changed_weight(name, position, offset, sign):
    def fuse(mha):
        module = by_hand(mha)
        with torch.no_grad():
            weights = module.get_parameter(name).view(-1)
            weights[position % weights.numel()] += sign * offset
        return module

    assert is_bilingual_no(verdict_of(lesson08.check_fused_by_hand, fuse))


@FEW
@given(result=any_wrong_type)
def test_fused_by_hand_answers_any_return_value_and_any_non_function_with_a_bilingual_no(result):
    assert is_bilingual_no(verdict_of(lesson08.check_fused_by_hand, lambda mha: result))
    assert is_bilingual_no(verdict_of(lesson08.check_fused_by_hand, result))


LONGEST = 4729  # by hand, in test_longest_length


@FEW
@given(answer=whole_number_forms(LONGEST))
def test_longest_length_accepts_every_form(answer):
    assert verdict_of(lesson08.check_longest_length, answer).startswith(CORRECT)


@FEW
@given(answer=st.one_of(st.integers(-10**6, 10**6).filter(lambda n: n != LONGEST),
                        st.floats(allow_nan=True).filter(lambda v: v != LONGEST)))
def test_longest_length_refuses_any_other_number(answer):
    assert is_bilingual_no(verdict_of(lesson08.check_longest_length, answer))


@FEW
@given(answer=any_wrong_type)
def test_longest_length_answers_any_wrong_type_with_a_bilingual_no(answer):
    assert is_bilingual_no(verdict_of(lesson08.check_longest_length, answer))


def test_the_typed_mask_is_the_modules_recipe():
    assert torch.equal(MERGED, ~(au.causal_mask(5) | PADDING[:, None, None, :]))


@FEW
@given(form=st.sampled_from([lambda m: m, lambda m: m.numpy(), lambda m: m.clone(), lambda m: m.transpose(2, 3).contiguous().transpose(2, 3)]))
def test_merged_mask_accepts_every_form(form):
    assert verdict_of(lesson08.check_merged_mask, form(MERGED)).startswith(CORRECT)


@FEW
@given(position=st.integers(0, 49))
def test_merged_mask_refuses_any_flipped_entry(position):
    wrong = MERGED.clone()
    wrong.view(-1)[position] = ~wrong.view(-1)[position]
    assert is_bilingual_no(verdict_of(lesson08.check_merged_mask, wrong))


@FEW
@given(answer=any_wrong_type)
def test_merged_mask_answers_any_wrong_type_with_a_bilingual_no(answer):
    assert is_bilingual_no(verdict_of(lesson08.check_merged_mask, answer))
