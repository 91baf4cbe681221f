"""FusedMultiHeadAttention for generation: key/value groups, rotary positions, windows and the KV cache.

The reference here is written another way: separate query, key and value weights, rotations as
complex multiplications, key/value heads picked by index, and masks from loops. Cached decoding in
any chunks must equal one pass over the whole sequence, for random models, lengths, groupings and
windows.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_utils as au
from attention_utils.inference.grouped_query import repeat_kv_heads
from attention_utils.inference.kv_cache import KVCache, LayerCache


def turn(x: torch.Tensor, base: float, layout: str) -> torch.Tensor:
    """RoPE as complex multiplication: x (b, heads, T, d), token t turned by t * base^(-2i/d) in pair i."""
    d = x.shape[-1]
    if layout == "halves":  # pair i is (i, i + d/2): interleave them, turn, and put them back
        order = torch.stack([torch.arange(d // 2), torch.arange(d // 2) + d // 2], dim=-1).flatten()
        return turn(x[..., order], base, "interleaved")[..., order.argsort()]
    angles = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def reference(module: au.FusedMultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """The module's attention written out from its weights, in float64, with loops where they are clearest."""
    h, g, d = module.num_heads, module.num_kv_heads, module.head_dim
    weight = module.qkv.weight.double()
    bias = module.qkv.bias.double() if module.qkv.bias is not None else torch.zeros(weight.shape[0], dtype=torch.float64)
    w_query, w_key, w_value = weight[: h * d], weight[h * d : (h + g) * d], weight[(h + g) * d :]
    b_query, b_key, b_value = bias[: h * d], bias[h * d : (h + g) * d], bias[(h + g) * d :]
    x = x.double()
    batch, tokens, _ = x.shape
    queries = (x @ w_query.T + b_query).view(batch, tokens, h, d).transpose(1, 2)
    keys = (x @ w_key.T + b_key).view(batch, tokens, g, d).transpose(1, 2)
    values = (x @ w_value.T + b_value).view(batch, tokens, g, d).transpose(1, 2)
    if module.rotary_base is not None:
        queries, keys = turn(queries, module.rotary_base, module.rotary_layout), turn(keys, module.rotary_base, module.rotary_layout)
    visible = torch.tensor([[s <= p and (module.window is None or p - s < module.window or s < module.sinks)
                             for s in range(tokens)] for p in range(tokens)]).reshape(tokens, tokens)
    heads = []
    for head in range(h):
        shared = head * g // h  # the key/value head this query head reads
        scores = queries[:, head] @ keys[:, shared].transpose(-2, -1) / math.sqrt(d)
        heads.append(torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1) @ values[:, shared])
    context = torch.cat(heads, dim=-1)  # (batch, T, h * d)
    return context @ module.out_proj.weight.double().T + module.out_proj.bias.double()


def decode_in_chunks(module: au.FusedMultiHeadAttention, x: torch.Tensor, chunks: list[int]) -> tuple[torch.Tensor, LayerCache]:
    """x through the module with a cache, a chunk at a time (the first chunk is the prefill)."""
    cache, outputs, start = LayerCache(), [], 0
    for size in chunks:
        outputs.append(module(x[:, start : start + size], cache=cache))
        start += size
    return torch.cat(outputs, dim=1), cache


layouts = st.fixed_dictionaries({
    "heads_and_groups": st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (6, 3), (6, 2), (8, 2)]),
    "head_dim": st.sampled_from([2, 4, 8]),
    "rotary": st.sampled_from([None, (10000.0, "interleaved"), (100.0, "halves"), (500.0, "interleaved")]),
    "window": st.one_of(st.none(), st.integers(1, 6)),
    "sinks": st.integers(0, 2),
    "bias": st.booleans(),
})


def build(layout: dict, seed: int, context_length: int) -> au.FusedMultiHeadAttention:
    heads, groups = layout["heads_and_groups"]
    d_out = heads * layout["head_dim"]
    rotary_base, rotary_layout = layout["rotary"] or (None, "interleaved")
    torch.manual_seed(seed)
    return au.FusedMultiHeadAttention(5, d_out, context_length, 0.0, heads, layout["bias"], num_kv_heads=groups,
                                      rotary_base=rotary_base, rotary_layout=rotary_layout, window=layout["window"],
                                      sinks=layout["sinks"] if layout["window"] else 0).double().eval()


@settings(max_examples=80, deadline=None)
@given(layout=layouts, chunks=st.lists(st.integers(1, 4), min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_cached_decoding_equals_one_pass_and_the_reference(layout, chunks, seed):
    total = sum(chunks)
    module = build(layout, seed, context_length=total + 2)
    x = torch.randn(2, total, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        one_pass = module(x)
        decoded, cache = decode_in_chunks(module, x, chunks)
        expected = reference(module, x)
    torch.testing.assert_close(one_pass, expected, rtol=0, atol=1e-10)
    torch.testing.assert_close(decoded, expected, rtol=0, atol=1e-10)
    kept = total if module.window is None else min(total, module.window + module.sinks)
    assert cache.position == total and cache.positions.numel() == kept
    # keys and values of every key/value head, 8 bytes each in float64, for the tokens kept
    assert cache.nbytes == 2 * 2 * module.num_kv_heads * module.head_dim * kept * 8


def test_the_defaults_are_lesson_8s_module():
    torch.manual_seed(1)
    book = au.MultiHeadAttention(6, 8, context_length=10, dropout=0.0, num_heads=2, qkv_bias=True)
    fused = au.FusedMultiHeadAttention.from_multihead(book)
    assert fused.num_kv_heads == 2 and fused.rotary_base is None and fused.window is None
    assert set(fused.state_dict()) == {"qkv.weight", "qkv.bias", "out_proj.weight", "out_proj.bias"}
    assert fused.qkv.weight.shape == (3 * 8, 6)
    x = torch.randn(3, 7, 6)
    torch.testing.assert_close(fused(x), book(x), rtol=0, atol=1e-5)
    torch.manual_seed(5)
    before = au.FusedMultiHeadAttention(6, 8, 10, 0.0, 2)
    torch.manual_seed(5)
    after = au.FusedMultiHeadAttention(6, 8, 10, 0.0, 2, num_kv_heads=2)  # the same draws: the same weights
    assert all(torch.equal(a, b) for a, b in zip(before.state_dict().values(), after.state_dict().values()))


def test_grouped_heads_by_hand_equal_enable_gqa():
    torch.manual_seed(0)
    queries = torch.randn(2, 6, 5, 4)
    keys, values = torch.randn(2, 2, 2, 5, 4)
    by_hand = torch.nn.functional.scaled_dot_product_attention(
        queries, repeat_kv_heads(keys, 6), repeat_kv_heads(values, 6), is_causal=True)
    shared = torch.nn.functional.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(by_hand, shared, rtol=0, atol=1e-6)
    # query head 4 reads key/value head 4 * 2 // 6 = 1: the repeated keys say so
    assert torch.equal(repeat_kv_heads(keys, 6)[:, 4], keys[:, 1])


def test_separate_query_key_value_weights_go_into_qkv():
    """Lesson 13's route: a checkpoint's q_proj, k_proj, v_proj, concatenated in that order, give the same layer."""
    torch.manual_seed(2)
    heads, groups, head_dim, d = 9, 3, 4, 12
    q_proj, k_proj, v_proj = (torch.nn.Linear(d, n * head_dim, bias=False) for n in (heads, groups, groups))
    module = au.FusedMultiHeadAttention(d, heads * head_dim, 16, 0.0, heads, num_kv_heads=groups,
                                        rotary_base=100000.0).eval()
    with torch.no_grad():
        module.qkv.weight.copy_(torch.cat([q_proj.weight, k_proj.weight, v_proj.weight]))
    x = torch.randn(1, 7, d)
    queries, keys, values = module.project_heads(x)
    assert queries.shape == (1, heads, 7, head_dim) and keys.shape == values.shape == (1, groups, 7, head_dim)
    torch.testing.assert_close(values, v_proj(x).view(1, 7, groups, head_dim).transpose(1, 2))
    torch.testing.assert_close(keys, au.apply_rotary(k_proj(x).view(1, 7, groups, head_dim).transpose(1, 2), 0, 100000.0))
    torch.testing.assert_close(module(x), reference(module, x).float(), rtol=0, atol=1e-5)


def test_a_cache_holds_a_sequence_to_its_context_length_only():
    module = au.FusedMultiHeadAttention(4, 4, 6, 0.0, 2).eval()
    cache = LayerCache()
    module(torch.randn(1, 5, 4), cache=cache)
    module(torch.randn(1, 1, 4), cache=cache)
    with pytest.raises(ValueError, match="context_length=6"):
        module(torch.randn(1, 1, 4), cache=cache)  # position 6 does not fit


@pytest.mark.parametrize("build_it, error, words", [
    (lambda: au.FusedMultiHeadAttention(8, 8, 4, 0.0, 4, num_kv_heads=3), ValueError, ("num_kv_heads=3", "[1, 2, 4]")),
    (lambda: au.FusedMultiHeadAttention(8, 8, 4, 0.0, 4, num_kv_heads=0), ValueError, ("num_kv_heads",)),
    (lambda: au.FusedMultiHeadAttention(8, 8, 4, 0.0, 4, num_kv_heads=2.0), TypeError, ("num_kv_heads",)),
    (lambda: au.FusedMultiHeadAttention(8, 8, 4, 0.0, 4, window=0), ValueError, ("window",)),
    (lambda: au.FusedMultiHeadAttention(8, 8, 4, 0.0, 4, sinks=2), ValueError, ("sinks=2",)),
    (lambda: au.FusedMultiHeadAttention(12, 12, 4, 0.0, 4, rotary_base=10000.0), ValueError, ("num_heads=4",)),
    (lambda: au.FusedMultiHeadAttention(8, 8, 4, 0.0, 4, rotary_base=10000.0, rotary_layout="halfs"), ValueError,
     ("rotary_layout", "halfs")),
])
def test_bad_settings_are_explained_in_english_and_chinese(build_it, error, words):
    with pytest.raises(error) as raised:
        build_it()
    english, chinese = str(raised.value).split("\n")
    assert all(word in english and word in chinese for word in words)


def test_bad_caches_are_explained_in_english_and_chinese():
    module = au.FusedMultiHeadAttention(4, 4, 8, 0.0, 2).eval()
    x = torch.randn(1, 3, 4)
    with pytest.raises(TypeError, match="cache\\[i\\].*\n.*cache\\[i\\]"):
        module(x, cache=KVCache(1))  # the whole cache instead of one layer's
    with pytest.raises(ValueError, match="padding_mask.*\n.*padding_mask"):
        module(x, torch.zeros(1, 3, dtype=torch.bool), cache=LayerCache())
    cache = LayerCache()
    module(x, cache=cache)
    windowed = au.FusedMultiHeadAttention(4, 4, 8, 0.0, 2, window=2).eval()
    windowed.load_state_dict(module.state_dict())
    with pytest.raises(ValueError, match="window=None.*\n.*window=None"):
        windowed(x[:, :1], cache=cache)  # a cache filled without a window


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_from_multihead_carries_rotary_positions(layout):
    """Lesson 11's rotary MultiHeadAttention and its fused copy agree, in one pass and decoding from a cache."""
    torch.manual_seed(4)
    book = au.MultiHeadAttention(6, 8, context_length=12, dropout=0.0, num_heads=2, rotary_base=500.0,
                                 rotary_layout=layout).eval()
    fused = au.FusedMultiHeadAttention.from_multihead(book)
    assert (fused.rotary_base, fused.rotary_layout) == (500.0, layout)
    x = torch.randn(2, 9, 6)
    with torch.no_grad():
        torch.testing.assert_close(fused(x), book(x), rtol=0, atol=1e-5)
        decoded, _ = decode_in_chunks(fused, x, [4, 1, 1, 3])
        # a token placed at position 4 on its own gets the key it gets inside the whole sequence
        torch.testing.assert_close(fused.project_heads(x[:, 4:5], start=4)[1], fused.project_heads(x)[1][:, :, 4:5])
    torch.testing.assert_close(decoded, book(x), rtol=0, atol=1e-5)
