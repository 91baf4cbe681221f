"""FusedMultiHeadAttention: the book's numbers, dropout only in training, padding ignored, clear errors."""

import math
import re

import pytest
import torch

import attention_utils as au


def book_and_fused(qkv_bias: bool = False, dropout: float = 0.0):
    torch.manual_seed(1)
    mha = au.MultiHeadAttention(6, 8, context_length=10, dropout=dropout, num_heads=2, qkv_bias=qkv_bias)
    return mha, au.FusedMultiHeadAttention.from_multihead(mha)


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_from_multihead_gives_the_books_outputs_and_gradients(qkv_bias):
    mha, fused = book_and_fused(qkv_bias)
    x = torch.randn(3, 7, 6, requires_grad=True)
    expected = mha(x)
    (expected_grad,) = torch.autograd.grad(expected.sum(), x)
    actual = fused(x)
    (actual_grad,) = torch.autograd.grad(actual.sum(), x)
    assert torch.allclose(actual, expected, atol=1e-5)
    assert torch.allclose(actual_grad, expected_grad, atol=1e-5)


def test_one_qkv_layer_replaces_three():
    _, fused = book_and_fused(qkv_bias=True)
    assert set(fused.state_dict()) == {"qkv.weight", "qkv.bias", "out_proj.weight", "out_proj.bias"}
    assert fused.qkv.weight.shape == (3 * 8, 6)


def test_dropout_acts_in_training_only():
    mha, fused = book_and_fused(dropout=0.5)
    x = torch.randn(2, 7, 6)
    fused.train()
    first, second = fused(x), fused(x)
    assert not torch.allclose(first, second)
    fused.eval()
    assert torch.equal(fused(x), fused(x))
    assert not torch.allclose(first, fused(x))
    assert torch.allclose(fused(x), mha.eval()(x), atol=1e-5)


def test_padded_tokens_do_not_change_the_real_tokens_outputs():
    _, fused = book_and_fused()
    x = torch.randn(2, 7, 6)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[0, 5:] = True  # padding at the end, as after batching sequences of different lengths
    padding[1, [1, 4]] = True  # and holes anywhere
    changed = torch.where(padding[..., None], 10 * torch.randn_like(x), x)
    real = ~padding
    assert torch.allclose(fused(x, padding)[real], fused(changed, padding)[real], atol=1e-6)
    # without the mask the same change does move the real tokens' outputs, so the line above can fail
    assert not torch.allclose(fused(x)[real], fused(changed)[real], atol=1e-6)
    # right padding gives exactly what the shorter sequence gives alone
    assert torch.allclose(fused(x, padding)[0, :5], fused(x[:1, :5])[0], atol=1e-6)


def test_a_padding_mask_without_padding_changes_nothing():
    _, fused = book_and_fused()
    x = torch.randn(2, 7, 6)
    assert torch.allclose(fused(x, torch.zeros(2, 7, dtype=torch.bool)), fused(x), atol=1e-6)


def test_left_padding_gives_finite_outputs():
    _, fused = book_and_fused()
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[:, :2] = True  # the first two queries can see no key at all
    out = fused(torch.randn(2, 7, 6), padding)
    assert torch.isfinite(out).all()
    assert torch.allclose(out[:, 0], fused.out_proj.bias.expand(2, -1))  # a zero context, then out_proj


def nan_input() -> torch.Tensor:
    x = torch.rand(1, 6, 6)
    x[0, 2, 1] = math.nan
    return x


FUSED = au.FusedMultiHeadAttention(6, 8, context_length=10, dropout=0.0, num_heads=2)
BAD_INPUTS = {
    "d_out not divisible": (
        lambda: au.FusedMultiHeadAttention(6, 5, 10, 0.0, num_heads=2),
        ValueError, "d_out=5 must be divisible by num_heads=2", "整除",
    ),
    "too many tokens": (
        lambda: FUSED(torch.rand(1, 12, 6)),
        ValueError, "has 12 tokens but the module was built with context_length=10", "词元",
    ),
    "wrong rank": (lambda: FUSED(torch.rand(7, 6)), ValueError, "must have 3 dimensions", "x.unsqueeze(0)"),
    "NaN": (lambda: FUSED(nan_input()), ValueError, "NaN or inf", "NaN"),
    "dropout out of range": (
        lambda: au.FusedMultiHeadAttention(6, 8, 10, 1.0, 2),
        ValueError, "dropout must be in [0, 1)", "区间",
    ),
    "wrong last dimension": (lambda: FUSED(torch.rand(1, 6, 5)), ValueError, "must be d_in=6, got 5", "最后一维"),
    "padding mask not boolean": (
        lambda: FUSED(torch.rand(2, 6, 6), torch.zeros(2, 6)),
        TypeError, "boolean tensor where True marks a position to hide", "布尔",
    ),
    "padding mask of the wrong length": (
        lambda: FUSED(torch.rand(2, 6, 6), torch.zeros(2, 5, dtype=torch.bool)),
        ValueError, "`padding_mask` must have shape (batch, num_tokens) = (2, 6)", "形状必须是",
    ),
    "padding mask of the wrong rank": (
        lambda: FUSED(torch.rand(2, 6, 6), torch.zeros(6, dtype=torch.bool)),
        ValueError, "`padding_mask` must have shape (batch, num_tokens) = (2, 6)", "每个词元对应一个布尔值",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_explained_in_english_and_chinese(case):
    call, error, english, chinese = BAD_INPUTS[case]
    with pytest.raises(error, match=f"(?s){re.escape(english)}.*{re.escape(chinese)}"):
        call()


def test_compiles_to_one_graph_that_matches_eager():
    import torch._dynamo

    fused = au.FusedMultiHeadAttention(16, 16, 32, 0.0, 4).eval()
    x = torch.randn(2, 10, 16)
    explanation = torch._dynamo.explain(fused)(x)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons
    compiled = torch.compile(fused, fullgraph=True)
    padding = torch.zeros(2, 10, dtype=torch.bool)
    padding[0, :3] = True
    assert torch.allclose(compiled(x), fused(x), atol=1e-5)
    assert torch.allclose(compiled(x, padding), fused(x, padding), atol=1e-5)
