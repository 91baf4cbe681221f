"""Every cache holds what its `nbytes` says: the bytes of the tensors found inside it, counted by walking it.

The walk knows nothing of how a cache stores its numbers: it follows every attribute, list and tuple
down to the tensors and adds up their sizes. Only the bookkeeping it is told to skip is left out:
the positions (token numbers, not keys or values) and a low-rank cache's bases (fixed per layer, one
copy however many tokens). The caches are filled with 16 tokens (8 at once, then one at a time), so
the growing buffers are exactly full and a page pool holds just this sequence.
"""

from __future__ import annotations

import pytest
import torch

from attention_utils.inference.cache_quality import logits_through_cache
from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.latent_attention import LatentAttention, LatentCache
from attention_utils.inference.low_rank_cache import fit_bases, low_rank_kv_cache
from attention_utils.inference.paged_cache import PagedCache, paged_kv_cache
from attention_utils.inference.quantized_cache import quantized_kv_cache
import tiny_models

TOKENS, PREFILL = 16, 8
HEADS, HEAD_DIM, RANK = 1, 8, 3  # d_model 16 with 2 query heads and one key/value head of 8 numbers
SKIPPED = {"positions", "key_basis", "value_basis"}


def held_bytes(thing: object, seen: set[int] | None = None) -> int:
    """Bytes of every tensor reachable from `thing` through attributes, lists, tuples and dicts (each tensor once)."""
    seen = set() if seen is None else seen
    if id(thing) in seen:
        return 0
    seen.add(id(thing))
    if isinstance(thing, torch.Tensor):
        return thing.numel() * thing.element_size()
    if isinstance(thing, (list, tuple)):
        return sum(held_bytes(item, seen) for item in thing)
    if isinstance(thing, dict):
        return sum(held_bytes(item, seen) for item in thing.values())
    if hasattr(thing, "__dict__") and not isinstance(thing, (type, torch.nn.Module)):
        return sum(held_bytes(value, seen) for name, value in vars(thing).items() if name not in SKIPPED)
    return 0


@pytest.fixture(scope="module")
def model():
    return tiny_models.tiny_llama(d_model=16, num_heads=2, num_kv_heads=HEADS, seed=3)


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 30, (1, TOKENS), generator=torch.Generator().manual_seed(5))


def filled(model, tokens, cache: KVCache) -> KVCache:
    with torch.no_grad():
        logits_through_cache(model, tokens, cache, prefill=PREFILL, chunk=1)
    return cache


def bases(model, tokens):
    return fit_bases(filled(model, tokens, KVCache(2)))


CACHES = {
    "contiguous": lambda model, tokens: KVCache(2),
    "paged": lambda model, tokens: paged_kv_cache(
        [PagedCache(TOKENS // 4, HEADS, HEAD_DIM, page_size=4, dtype=torch.float64) for _ in range(2)]),
    "int8": lambda model, tokens: quantized_kv_cache(2, bits=8, group_size=4),
    "int4": lambda model, tokens: quantized_kv_cache(2, bits=4, group_size=4, keep_first=2),
    "low-rank": lambda model, tokens: low_rank_kv_cache(bases(model, tokens), RANK),
}


@pytest.mark.parametrize("kind", CACHES)
def test_each_layer_holds_the_bytes_it_reports(kind, model, tokens):
    cache = filled(model, tokens, CACHES[kind](model, tokens))
    for layer in cache.layers:
        assert layer.nbytes == held_bytes(layer) > 0
    assert cache.nbytes == sum(held_bytes(layer) for layer in cache.layers)


def test_the_low_rank_cache_holds_rank_coordinates_per_key_and_value(model, tokens):
    """By hand: 2 (keys, values) x 1 head x 16 tokens x 3 coordinates x 8 bytes (float64) = 768 bytes a layer."""
    cache = filled(model, tokens, low_rank_kv_cache(bases(model, tokens), RANK))
    assert [held_bytes(layer) for layer in cache.layers] == [2 * HEADS * TOKENS * RANK * 8] * 2
    full = filled(model, tokens, KVCache(2))  # the same keys at full size: head_dim / rank times more
    assert held_bytes(full.layers[0]) == 2 * HEADS * TOKENS * HEAD_DIM * 8


def test_the_low_rank_cache_reads_back_its_keys_projected_onto_the_basis(model, tokens):
    """Layer 0's keys and values (which depend on the tokens only) read back projected onto the first RANK directions."""
    fitted = bases(model, tokens)
    exact, kept = filled(model, tokens, KVCache(2)).layers[0], filled(model, tokens, low_rank_kv_cache(fitted, RANK)).layers[0]
    for basis, vectors, rebuilt in ((fitted[0][0], exact.keys, kept.keys), (fitted[0][1], exact.values, kept.values)):
        top = basis[..., :RANK]
        torch.testing.assert_close(rebuilt, vectors @ top @ top.mT)


def test_a_latent_cache_holds_the_bytes_it_reports():
    torch.manual_seed(0)
    attention = LatentAttention(d_model=16, context_length=32, num_heads=2, head_dim=8, latent_dim=6, rope_dim=4).eval()
    cache = LatentCache()
    with torch.no_grad():
        attention(torch.randn(2, PREFILL, 16), cache=cache)
        for _ in range(TOKENS - PREFILL):
            attention(torch.randn(2, 1, 16), cache=cache)
    assert cache.nbytes == held_bytes(cache) == 2 * TOKENS * (6 + 4) * 4  # batch 2, (latent + rotary key) floats
