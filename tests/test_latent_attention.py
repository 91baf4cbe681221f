"""Multi-head latent attention: the absorbed form equals the naive one, the cache changes nothing, and the
naive form equals attention written out head by head with explicit keys and values."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.inference.kv_cache import kv_cache_bytes
from attention_utils.inference.latent_attention import LatentAttention, LatentCache, latent_cache_bytes
from attention_utils.rotary import apply_rotary

shapes = dict(batch=st.integers(1, 2), tokens=st.integers(1, 7), heads=st.integers(1, 4), head_dim=st.integers(1, 6),
              latent=st.integers(1, 9), rope=st.sampled_from([0, 2, 4]), seed=st.integers(0, 2**16))


def build(heads, head_dim, latent, rope, seed, d_model=8):
    torch.manual_seed(seed)
    layer = LatentAttention(d_model, 16, heads, head_dim, latent, rope).double()
    return layer, torch.randn(2, 12, d_model, dtype=torch.float64)


@settings(max_examples=40, deadline=None)
@given(**shapes)
def test_absorbed_equals_naive(batch, tokens, heads, head_dim, latent, rope, seed):
    layer, x = build(heads, head_dim, latent, rope, seed)
    x = x[:batch, :tokens]
    torch.testing.assert_close(layer(x, absorbed=True), layer(x), rtol=0, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(chunks=st.lists(st.integers(1, 3), min_size=1, max_size=4), absorbed=st.booleans(), **shapes)
def test_decoding_with_the_latent_cache_equals_one_pass(chunks, absorbed, batch, tokens, heads, head_dim, latent, rope,
                                                        seed):
    layer, x = build(heads, head_dim, latent, rope, seed)
    cache, start, parts = LatentCache(), 0, []
    for size in chunks:
        parts.append(layer(x[:batch, start:start + size], cache=cache, absorbed=absorbed))
        start += size
    torch.testing.assert_close(torch.cat(parts, dim=1), layer(x[:batch, :start]), rtol=0, atol=1e-12)
    assert cache.nbytes == batch * start * (latent + rope) * 8  # float64


def test_naive_equals_attention_written_head_by_head():
    """Keys and values made per head from the latent, the rotary key shared, softmax by hand."""
    layer, x = build(3, 4, 5, 2, seed=1)
    b, t, _ = x.shape
    latents, shared = layer.W_down(x), apply_rotary(layer.W_key_rope(x), 0, 10000.0)
    queries = layer.W_query(x).view(b, t, 3, 6)
    heads = []
    for h in range(3):
        rows = slice(4 * h, 4 * h + 4)
        key = torch.cat([latents @ layer.W_up_key.weight[rows].T, shared], dim=-1)  # (b, T, 6)
        query = torch.cat([queries[:, :, h, :4], apply_rotary(queries[:, :, h, 4:], 0, 10000.0)], dim=-1)
        scores = (query @ key.transpose(1, 2)) / math.sqrt(6)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ (latents @ layer.W_up_value.weight[rows].T))
    expected = layer.out_proj(torch.cat(heads, dim=-1))
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=1e-12)


def test_changing_a_later_token_never_changes_an_earlier_output():
    layer, x = build(2, 4, 3, 2, seed=3)
    changed = x.clone()
    changed[:, 4:] += 1.0
    for absorbed in (False, True):
        torch.testing.assert_close(layer(changed, absorbed=absorbed)[:, :4], layer(x, absorbed=absorbed)[:, :4],
                                   rtol=0, atol=0)


def test_cache_bytes_by_hand():
    """DeepSeek-V2's sizes: latent 512 + rotary key 64 per token and layer, 60 layers, 2 bytes each."""
    assert latent_cache_bytes(512, 64, 60, tokens=1, bytes_per_value=2) == 576 * 60 * 2
    # the same model with 128 heads of 128 as plain multi-head attention: 2 x 128 x 128 per token and layer
    assert kv_cache_bytes(60, 128, 128, tokens=1, bytes_per_value=2) / latent_cache_bytes(512, 64, 60, 1, 2) == \
        pytest.approx(32768 / 576)


def test_errors_are_bilingual():
    with pytest.raises(ValueError, match="rope_dim must be even.*\n.*rope_dim 必须是偶数"):
        LatentAttention(8, 16, 2, 4, 3, rope_dim=3)
    layer = LatentAttention(8, 4, 2, 4, 3, rope_dim=2)
    with pytest.raises(TypeError, match="LatentCache.*\n.*LatentCache"):
        layer(torch.zeros(1, 2, 8), cache=object())
    with pytest.raises(ValueError, match="context_length=4.*\n.*context_length=4"):
        layer(torch.zeros(1, 5, 8))
    with pytest.raises(ValueError, match="d_in=8|d_model=8"):
        layer(torch.zeros(1, 2, 7))
