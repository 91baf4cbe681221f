"""The KV cache and the sliding window, on their own: what a cache returns always gives the rows full attention gives."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.inference.kv_cache import KVCache, LayerCache, kv_cache_bytes
from attention_utils.inference.sliding_window import hidden_by_window, sliding_window_mask


def visible_by_loops(num_tokens: int, window: int | None, sinks: int) -> list[list[bool]]:
    """The window rule written with loops: query p sees key s if s <= p and (p - s < window or s < sinks)."""
    return [[s <= p and (window is None or p - s < window or s < sinks) for s in range(num_tokens)]
            for p in range(num_tokens)]


@settings(max_examples=60, deadline=None)
@given(num_tokens=st.integers(0, 12), window=st.one_of(st.none(), st.integers(1, 14)), sinks=st.integers(0, 4))
def test_the_window_mask_is_the_rule(num_tokens, window, sinks):
    sinks = sinks if window else 0
    expected = torch.tensor(visible_by_loops(num_tokens, window, sinks), dtype=torch.bool).reshape(num_tokens, num_tokens)
    assert torch.equal(~sliding_window_mask(num_tokens, window, sinks), expected)


def test_without_a_window_the_mask_is_causal():
    assert torch.equal(sliding_window_mask(5, None), torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1))
    assert torch.equal(sliding_window_mask(5, 5), sliding_window_mask(5, None))  # a window as long as the text hides nothing more


def attend_rows(queries, keys, values, hidden):
    """Softmax attention written out: (b, h, T_q, d) queries against kept keys, hidden = True where not allowed."""
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1) @ values


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.integers(1, 5), min_size=1, max_size=6), window=st.one_of(st.none(), st.integers(1, 6)),
       sinks=st.integers(0, 2), seed=st.integers(0, 2**16))
def test_attending_to_what_the_cache_returns_equals_full_attention(chunks, window, sinks, seed):
    """Feed a sequence in chunks (a prefill, then decode steps); each chunk's rows equal those of full attention."""
    sinks = sinks if window else 0
    generator = torch.Generator().manual_seed(seed)
    total = sum(chunks)
    queries, keys, values = (torch.randn(2, 3, total, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    expected = attend_rows(queries, keys, values, sliding_window_mask(total, window, sinks))
    cache, start = LayerCache(), 0
    for size in chunks:
        part = slice(start, start + size)
        kept_keys, kept_values, positions = cache.update(keys[:, :, part], values[:, :, part], window, sinks)
        hidden = hidden_by_window(torch.arange(start, start + size), positions, window, sinks)
        torch.testing.assert_close(attend_rows(queries[:, :, part], kept_keys, kept_values, hidden),
                                   expected[:, :, part], rtol=0, atol=1e-12)
        start += size
        assert cache.position == start  # the position counts every token, kept or dropped
        if window is not None:
            assert cache.positions.numel() <= window + sinks  # never more than the window and the sinks
            assert set(cache.positions.tolist()) == {s for s in range(start) if start - s <= window or s < sinks}


def test_a_full_ring_buffer_overwrites_the_oldest_slot_in_place():
    cache = LayerCache()
    step = torch.ones(1, 1, 1, 2)
    for position in range(4):
        cache.update(step * position, step * position, window=4)
    storage = cache.keys.data_ptr()
    cache.update(step * 4, step * 4, window=4)
    assert cache.keys.data_ptr() == storage  # no new memory: the ring buffer was written in place
    assert cache.positions.tolist() == [4, 1, 2, 3] and cache.keys[0, 0, :, 0].tolist() == [4.0, 1.0, 2.0, 3.0]
    cache.update(step * 5, step * 5, window=4)
    assert cache.positions.tolist() == [4, 5, 2, 3]


def test_sinks_stay_while_the_window_moves_on():
    cache = LayerCache()
    step = torch.ones(1, 1, 1, 2)
    for position in range(9):
        cache.update(step * position, step * position, window=3, sinks=2)
    assert sorted(cache.positions.tolist()) == [0, 1, 6, 7, 8] and cache.positions[:2].tolist() == [0, 1]


@pytest.mark.parametrize("dtype, size", [(torch.float32, 4), (torch.float16, 2), (torch.float64, 8)])
@pytest.mark.parametrize("window", [None, 5])
def test_cache_memory_is_the_formula_to_the_byte(dtype, size, window):
    layers, batch, kv_heads, head_dim, tokens = 3, 2, 4, 8, 11
    cache = KVCache(layers)
    for layer in range(layers):
        for _ in range(tokens):
            new = torch.zeros(batch, kv_heads, 1, head_dim, dtype=dtype)
            cache[layer].update(new, new, window)
    kept = tokens if window is None else window
    by_hand = 2 * layers * batch * kv_heads * head_dim * kept * size  # K and V, every layer, every number
    assert cache.nbytes == by_hand == kv_cache_bytes(layers, kv_heads, head_dim, kept, size, batch)
    assert cache.position == tokens and cache.tokens_kept == kept
    reserved = sum(layer.reserved_bytes for layer in cache.layers)
    assert by_hand <= reserved <= 2 * by_hand and (window is None or reserved == by_hand)  # buffers grow by doubling


def test_bad_use_is_explained_in_both_languages():
    cache = LayerCache()
    new = torch.zeros(1, 2, 1, 4)
    cache.update(new, new, window=3)
    with pytest.raises(ValueError, match="window=3.*\n.*window=3"):
        cache.update(new, new, window=4)
    with pytest.raises(ValueError, match="KVCache.*\n.*KVCache"):
        cache.update(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4), window=3)  # another number of key/value heads
    with pytest.raises(ValueError, match="same shape"):
        cache.update(new, torch.zeros(1, 2, 2, 4), window=3)
    with pytest.raises(ValueError, match="sinks=2.*\n.*sinks=2"):
        sliding_window_mask(4, None, sinks=2)
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(4, 0)
    with pytest.raises(IndexError, match="0 to 1.*\n.*0 到 1"):
        KVCache(2)[2]
    with pytest.raises(TypeError, match="num_layers"):
        KVCache(2.5)
