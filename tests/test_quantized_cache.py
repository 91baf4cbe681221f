"""The quantized KV cache: rounding errs by at most half a step, and decoding with it equals a recomputation
that applies the same quantization, written here per (query, key) pair instead of chunk by chunk."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.inference.quantized_cache import (
    QuantizedLayerCache, dequantize, pack_int4, quantize, quantized_cache_bytes, quantized_kv_cache, unpack_int4)
import tiny_models


def test_a_hand_example():
    """0..3 in 4 bits: the step is 3 / 15 = 0.2, so the codes are 0, 5, 10, 15 and the offset is 0."""
    codes, scale, offset = quantize(torch.tensor([[0.0, 1.0, 2.0, 3.0]]), 4, dim=-1)
    assert codes.tolist() == [[0, 5, 10, 15]]
    assert scale.item() == pytest.approx(0.2) and offset.item() == 0.0
    assert quantize(torch.tensor([[2.5, 2.5]]), 8, dim=-1)[1].item() == 0.0  # a constant group: scale 0
    assert dequantize(*quantize(torch.tensor([[2.5, 2.5]]), 8, dim=-1)).tolist() == [[2.5, 2.5]]


@settings(max_examples=80, deadline=None)
@given(bits=st.sampled_from([8, 4]), rows=st.integers(1, 5), cols=st.integers(1, 9), dim=st.sampled_from([0, 1]),
       spread=st.floats(1e-3, 1e3), seed=st.integers(0, 2**16))
def test_rounding_errs_by_at_most_half_a_step(bits, rows, cols, dim, spread, seed):
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * spread
    codes, scale, offset = quantize(x, bits, dim)
    assert codes.dtype == torch.uint8 and int(codes.max()) <= 2**bits - 1
    step = ((x.amax(dim, keepdim=True) - x.amin(dim, keepdim=True)) / (2**bits - 1)).expand_as(x)  # recomputed here
    error = (dequantize(codes, scale, offset) - x).abs()
    assert torch.all(error <= step / 2 * (1 + 1e-9) + 1e-12 * spread)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=2), pairs=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_two_codes_share_a_byte(shape, pairs, seed):
    codes = torch.randint(0, 16, (*shape, 2 * pairs), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)
    packed = pack_int4(codes)
    assert packed.shape[-1] == pairs and torch.equal(unpack_int4(packed), codes)
    assert torch.equal(packed, codes[..., 0::2] + 16 * codes[..., 1::2])


def fake_quantized(x: torch.Tensor, bits: int, dim: int) -> torch.Tensor:
    """Round x to its group's grid, written out with min and max over `dim`."""
    low, high = x.min(dim=dim, keepdim=True).values, x.max(dim=dim, keepdim=True).values
    levels = 2**bits - 1
    step = (high - low) / levels
    safe = torch.where(step == 0, torch.ones_like(step), step)
    return torch.clamp(torch.round((x - low) / safe), 0, levels) * step + low


def reference_attention(q, k, v, chunk_start, bits, group, keep_first):
    """Causal attention where query t sees key j quantized when j lay in the cache before t's chunk: keys once
    their whole group of `group` tokens (counted after the first `keep_first`) was stored, values at once."""
    T = q.shape[2]
    kq, vq = k.clone(), fake_quantized(v, bits, dim=-1)
    for start in range(keep_first, T - group + 1, group):
        kq[:, :, start:start + group] = fake_quantized(k[:, :, start:start + group], bits, dim=2)
    vq[:, :, :keep_first] = v[:, :, :keep_first]
    repeat = q.shape[1] // k.shape[1]
    k, kq, v, vq = (t.repeat_interleave(repeat, dim=1) for t in (k, kq, v, vq))
    j, t = torch.arange(T)[None, :], torch.arange(T)[:, None]
    before = j < chunk_start[:, None]  # (T, T): key j was stored before query t's chunk
    key_done = before & (j >= keep_first) & (keep_first + ((j - keep_first) // group + 1) * group <= chunk_start[:, None])
    value_done = before & (j >= keep_first)
    scale = 1 / math.sqrt(q.shape[-1])
    scores = torch.where(key_done, q @ kq.transpose(-2, -1), q @ k.transpose(-2, -1)) * scale
    weights = torch.softmax(scores.masked_fill(j > t, float("-inf")), dim=-1)
    return (weights * value_done) @ vq + (weights * ~value_done) @ v


def reference_logits(model, tokens, chunk_start, bits, group, keep_first):
    """The whole model in one pass, each layer's attention replaced by reference_attention."""
    x = model.token_embedding(tokens)
    for block in model.blocks:
        q, k, v = block.attention._project_heads(block.attention_norm(x), 0)
        x = x + block.attention._combine_heads(reference_attention(q, k, v, chunk_start, bits, group, keep_first))
        x = x + block.feed_forward(block.feed_forward_norm(x))
    return model.final_norm(x) @ model.token_embedding.weight.T


@pytest.fixture(scope="module")
def tiny_llama():
    return tiny_models.tiny_llama(d_model=32, num_heads=4, num_kv_heads=2, seed=0, vocab_size=40)


@settings(max_examples=8, deadline=None)
@given(bits=st.sampled_from([8, 4]), group=st.integers(1, 6), keep_first=st.integers(0, 3), prompt=st.integers(1, 9),
       steps=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_decoding_with_the_cache_equals_the_recomputation(tiny_llama, bits, group, keep_first, prompt, steps, seed):
    tokens = torch.randint(0, 40, (2, prompt + steps), generator=torch.Generator().manual_seed(seed))
    cache = quantized_kv_cache(2, bits=bits, group_size=group, keep_first=keep_first)
    with torch.no_grad():
        logits = [tiny_llama(tokens[:, :prompt], cache=cache)]
        logits += [tiny_llama(tokens[:, i:i + 1], cache=cache) for i in range(prompt, prompt + steps)]
        chunk_start = torch.tensor([0] * prompt + list(range(prompt, prompt + steps)))
        expected = reference_logits(tiny_llama, tokens, chunk_start, bits, group, keep_first)
    torch.testing.assert_close(torch.cat(logits, dim=1), expected, rtol=0, atol=1e-9)
    assert cache.position == prompt + steps and cache.tokens_kept == prompt + steps


def test_bytes_count_codes_scales_and_full_precision_tokens():
    """8 tokens, 2 heads of 4 channels, 4-bit, key groups of 4, first token kept: counted by hand."""
    cache = QuantizedLayerCache(bits=4, group_size=4, keep_first=1)
    keys, values = torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4)
    cache.update(keys, values)
    first = 2 * (2 * 4) * 4  # keys and values of token 0, float32
    key_group = 2 * 4 * 4 // 2 + 2 * (2 * 4) * 4  # tokens 1-4: 32 codes in 16 bytes, scale + offset per channel
    recent = 2 * 3 * 4 * 4  # tokens 5-7 wait in full precision
    value_rows = 2 * 7 * 4 // 2 + 2 * (2 * 7) * 4  # 7 tokens: codes, scale + offset per token and head
    assert cache.nbytes == first + key_group + recent + value_rows
    torch.testing.assert_close(cache.keys[:, :, :1], keys[:, :, :1], rtol=0, atol=0)
    torch.testing.assert_close(cache.keys[:, :, 5:], keys[:, :, 5:], rtol=0, atol=0)


def test_the_byte_formula_by_hand_and_against_what_a_cache_holds():
    # SmolLM2 (30 layers, 3 heads of 64), a whole number of key groups: per head and layer, int4 keeps 32 bytes of key
    # codes + 2 x 4 bytes per channel and 32 tokens (16 per token), 32 bytes of value codes + 8 for one group per token
    assert quantized_cache_bytes(30, 3, 64, 4096, bits=4) == 4096 * 30 * 3 * (32 + 16 + 32 + 8)  # 7,920 per token
    assert quantized_cache_bytes(30, 3, 64, 4096, bits=8) == 4096 * 30 * 3 * (64 + 16 + 64 + 8)  # 13,680 per token
    for bits, tokens, group, value_group in ((4, 37, 8, None), (8, 5, 4, 2), (4, 64, 32, 4), (8, 0, 3, None)):
        cache = QuantizedLayerCache(bits=bits, group_size=group, value_group=value_group)
        if tokens:
            cache.update(torch.randn(1, 2, tokens, 8), torch.randn(1, 2, tokens, 8))
        assert cache.nbytes == quantized_cache_bytes(1, 2, 8, tokens, bits, group, value_group)


def test_errors_are_bilingual():
    with pytest.raises(ValueError, match="bits must be 8 or 4.*\n.*bits 必须是 8 或 4"):
        QuantizedLayerCache(bits=3)
    with pytest.raises(ValueError, match="sliding window.*\n.*滑动窗口"):
        QuantizedLayerCache().update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4), window=4)
    with pytest.raises(ValueError, match="value_group=3.*\n.*value_group=3"):
        QuantizedLayerCache(value_group=3).update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4))


def test_on_the_real_model_int8_keeps_the_greedy_tokens(smollm2):
    """SmolLM2 on a prompt no lesson uses: 8 decode steps read an int8 cache; each step's top token is float32's."""
    from attention_utils.inference.cache_quality import cache_quality
    from attention_utils.inference.kv_cache import KVCache
    from attention_utils.models.llama import model_inputs

    model, tokenizer = smollm2
    tokens = model_inputs(tokenizer, "Bees visit flowers to collect nectar, and on the way they carry pollen from")
    layers = model.config.num_layers
    with torch.no_grad():
        reference = model(tokens)
    prefill = tokens.shape[1] - 8
    int8 = cache_quality(model, tokens, lambda: quantized_kv_cache(layers, bits=8), reference, prefill)
    int4 = cache_quality(model, tokens, lambda: quantized_kv_cache(layers, bits=4), reference, prefill)
    full = cache_quality(model, tokens, lambda: KVCache(layers), reference, prefill)
    assert full.largest_logit_difference < 1e-3  # the plain cache: only rounding
    assert int8.agreement == 1.0 and int8.largest_logit_difference < 0.5
    assert int4.largest_logit_difference > int8.largest_logit_difference  # fewer bits, a larger drift
