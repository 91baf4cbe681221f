"""ALiBi: the paper's slopes, the module against a loop written from the paper's definition, and the tiny model with it."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils import training
from attention_utils.alibi import ALiBiAttention, alibi_bias, alibi_slopes
from attention_utils.modules import MultiHeadAttention
from attention_utils.tiny_model import CachedTinyModel, TinyAttentionModel
from test_rotary import PreviousToken


def test_the_slopes_are_the_papers():
    # Press et al. 2022, section 3: "for 8 heads, the slopes we use are the geometric sequence 1/2^1, 1/2^2, ..., 1/2^8"
    assert alibi_slopes(8) == [1 / 2**k for k in range(1, 9)]
    # "for 16 heads ... 1/2^0.5, 1/2^1, 1/2^1.5, ..., 1/2^8"
    assert alibi_slopes(16) == pytest.approx([2 ** -(k / 2) for k in range(1, 17)])
    # not a power of 2: the 4-head slopes 1/4, 1/16, 1/64, 1/256, then every other 8-head slope: 1/2, 1/8
    assert alibi_slopes(6) == pytest.approx([1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8])
    assert alibi_slopes(1) == [1 / 256]


def test_the_bias_is_minus_slope_times_distance():
    bias = alibi_bias(4, torch.tensor([0.5, 2.0]))
    expected_head_0 = torch.tensor([[0.0, -0.5, -1.0, -1.5], [-0.5, 0.0, -0.5, -1.0],
                                    [-1.0, -0.5, 0.0, -0.5], [-1.5, -1.0, -0.5, 0.0]])
    torch.testing.assert_close(bias[0], expected_head_0)
    torch.testing.assert_close(bias[1], 4 * expected_head_0)


def alibi_by_loops(mha: ALiBiAttention, x: torch.Tensor, slopes: list[float]) -> torch.Tensor:
    """The module's output, recomputed query by query and head by head: softmax(q.k / sqrt(d) - slope (t - s)) over s <= t."""
    b, num_tokens, _ = x.shape
    heads, size = mha.num_heads, mha.head_dim
    with torch.no_grad():
        q, k, v = (layer(x).double().view(b, num_tokens, heads, size) for layer in (mha.W_query, mha.W_key, mha.W_value))
    context = torch.zeros(b, num_tokens, heads, size, dtype=torch.float64)
    for t in range(num_tokens):
        for h in range(heads):
            scores = [(q[:, t, h] * k[:, s, h]).sum(-1) / math.sqrt(size) - slopes[h] * (t - s) for s in range(t + 1)]
            weights = torch.softmax(torch.stack(scores, dim=-1), dim=-1)  # (b, t + 1)
            context[:, t, h] = torch.einsum("bs,bsd->bd", weights, v[:, : t + 1, h])
    with torch.no_grad():
        return mha.out_proj(context.reshape(b, num_tokens, heads * size).float()).double()


@settings(max_examples=20, deadline=None)
@given(heads=st.integers(1, 4), size=st.integers(1, 4), tokens=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_alibi_attention_equals_the_definition_written_as_loops(heads, size, tokens, seed):
    torch.manual_seed(seed)
    slopes = alibi_slopes(heads)
    mha = ALiBiAttention(5, heads * size, 8, 0.0, heads).eval()
    x = torch.randn(2, tokens, 5)
    with torch.no_grad():
        torch.testing.assert_close(mha(x).double(), alibi_by_loops(mha, x, slopes), rtol=0, atol=2e-5)


def test_alibi_keeps_the_weights_of_multi_head_attention_and_adds_a_penalty():
    torch.manual_seed(0)
    plain = MultiHeadAttention(4, 8, 6, 0.0, 2)
    torch.manual_seed(0)
    alibi = ALiBiAttention(4, 8, 6, 0.0, 2, slopes=[0.5, 0.25])
    assert alibi.state_dict().keys() == plain.state_dict().keys()  # the slopes are fixed, not in a checkpoint
    assert all(torch.equal(a, p) for a, p in zip(alibi.state_dict().values(), plain.state_dict().values()))
    x = torch.randn(1, 6, 4)
    with torch.no_grad():
        assert not torch.allclose(alibi(x), plain(x), atol=1e-4)
        assert torch.equal(alibi(x, start_position=40), alibi(x))  # only offsets count
        with_zero_slopes = ALiBiAttention(4, 8, 6, 0.0, 2, slopes=[0.0, 0.0])
        with_zero_slopes.load_state_dict(plain.state_dict())
        torch.testing.assert_close(with_zero_slopes(x), plain(x))  # no penalty: the book's module


def test_the_alibi_tiny_model_starts_like_the_model_without_positions_and_reaches_longer_sequences():
    torch.manual_seed(0)
    none = TinyAttentionModel(8, 36, d_model=16, num_heads=1, positions="none")
    torch.manual_seed(0)
    alibi = TinyAttentionModel(8, 36, d_model=16, num_heads=1, positions="alibi")
    assert all(torch.equal(a, b) for a, b in zip(alibi.state_dict().values(), none.state_dict().values()))
    training.train(alibi, PreviousToken(), steps=150, seed=0, progress=False)
    short, long = (training.accuracy(alibi, training.held_out_batch(PreviousToken(n), 0)) for n in (12, 36))
    assert short > 0.85 and abs(long - short) < 0.03  # the penalty only grows with distance: 3x the length costs little


@pytest.mark.parametrize(
    "call, error, names",
    [
        (lambda: ALiBiAttention(4, 8, 5, 0.0, 2, slopes=[0.5]), ValueError, ("slopes",)),
        (lambda: ALiBiAttention(4, 8, 5, 0.0, 2, slopes=[0.5, -1.0]), ValueError, ("slopes",)),
        (lambda: ALiBiAttention(4, 8, 5, 0.0, 2, slopes="0.5"), TypeError, ("slopes",)),
        (lambda: ALiBiAttention(4, 8, 5, 0.0, 2)(torch.randn(1, 6, 4)), ValueError, ("context_length",)),
        (lambda: ALiBiAttention(4, 8, 5, 0.0, 2)(torch.randn(1, 3, 4), return_weights="yes"), TypeError,
         ("return_weights",)),
        (lambda: alibi_slopes(0), ValueError, ("num_heads",)),
        (lambda: CachedTinyModel(TinyAttentionModel(8, 12, positions="alibi")), ValueError, ("ALiBi",)),
    ],
)
def test_bad_alibi_settings_get_one_sentence_in_each_language(call, error, names):
    with pytest.raises(error) as caught:
        call()
    english, chinese = str(caught.value).split("\n")
    assert all(name in english and name in chinese for name in names)
