"""The paged cache against plain contiguous tensors: random lengths, page sizes and shared prefixes."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.inference.paged_cache import PagedCache, pages_needed, paged_attention


def causal_attention_by_hand(queries, keys, values):
    """Softmax attention written out; the T_q queries are the last T_q positions of the keys."""
    repeat = queries.shape[0] // keys.shape[0]
    keys, values = keys.repeat_interleave(repeat, 0), values.repeat_interleave(repeat, 0)
    t, s = queries.shape[1], keys.shape[1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    future = torch.tensor([[j > s - t + i for j in range(s)] for i in range(t)])
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ values


@settings(max_examples=60, deadline=None)
@given(page_size=st.integers(1, 5), prefix=st.integers(0, 11),
       continuations=st.lists(st.lists(st.integers(1, 6), max_size=3), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_shared_prefix_then_divergent_chunks_read_back_as_contiguous(page_size, prefix, continuations, seed):
    generator = torch.Generator().manual_seed(seed)
    new = lambda n: (torch.randn(2, n, 3, generator=generator, dtype=torch.float64),
                     torch.randn(2, n, 3, generator=generator, dtype=torch.float64))
    cache = PagedCache(num_pages=60, num_kv_heads=2, head_dim=3, page_size=page_size, dtype=torch.float64)
    root = cache.new_sequence()
    keys, values = new(prefix)
    cache.append(root, keys, values)
    contiguous = {}
    for chunks in continuations:  # each continuation forks the prompt and writes its own chunks
        sequence = cache.fork(root)
        contiguous[sequence] = [keys, values]
        for size in chunks:
            more = new(size)
            cache.append(sequence, *more)
            contiguous[sequence] = [torch.cat([old, add], dim=1) for old, add in zip(contiguous[sequence], more)]
    contiguous[root] = [keys, values]
    for sequence, (expected_keys, expected_values) in contiguous.items():
        got_keys, got_values = cache.gather(sequence)
        assert torch.equal(got_keys, expected_keys) and torch.equal(got_values, expected_values)
        if expected_keys.shape[1]:
            queries = torch.randn(4, min(3, expected_keys.shape[1]), 3, generator=generator, dtype=torch.float64)
            torch.testing.assert_close(paged_attention(queries, cache, sequence),
                                       causal_attention_by_hand(queries, expected_keys, expected_values),
                                       rtol=0, atol=1e-12)
    # the prompt's full pages are held once, by every sequence; each table has exactly the pages its length needs
    full = prefix // page_size
    for sequence, table in cache.block_tables.items():
        assert table[:full] == cache.block_tables[root][:full]
        assert len(table) == math.ceil(cache.lengths[sequence] / page_size)
    assert cache.pages_in_use == len({page for table in cache.block_tables.values() for page in table})
    assert cache.nbytes == cache.pages_in_use * 2 * 2 * page_size * 3 * 8


def test_freeing_returns_pages_and_shared_ones_stay():
    cache = PagedCache(num_pages=4, num_kv_heads=1, head_dim=2, page_size=2)
    a = cache.new_sequence()
    cache.append(a, torch.ones(1, 3, 2), torch.ones(1, 3, 2))  # pages 0 (full) and 1 (half)
    b = cache.fork(a)
    cache.append(b, torch.zeros(1, 1, 2), torch.zeros(1, 1, 2))  # writes into the shared half page: copied first
    assert cache.block_tables[a] == [0, 1] and cache.block_tables[b] == [0, 2]
    assert cache.gather(a)[0].tolist() == [[[1, 1]] * 3]
    cache.free(a)
    assert cache.holders == [1, 0, 1, 0]
    assert cache.gather(b)[0].tolist() == [[[1, 1]] * 3 + [[0, 0]]]


def test_pages_needed_by_hand():
    assert pages_needed([1, 16, 17, 40], page_size=16) == 1 + 1 + 2 + 3
    assert pages_needed([], page_size=16) == 0


def test_errors_are_bilingual():
    cache = PagedCache(num_pages=1, num_kv_heads=1, head_dim=2, page_size=2)
    with pytest.raises(ValueError, match="no sequence 7.*\n.*没有序列 7"):
        cache.gather(7)
    sequence = cache.new_sequence()
    with pytest.raises(ValueError, match="All 1 pages.*\n.*全部 1 页"):
        cache.append(sequence, torch.zeros(1, 3, 2), torch.zeros(1, 3, 2))
    assert cache.holders == [0] and cache.lengths[sequence] == 0  # refused before anything was written
    with pytest.raises(ValueError, match="kv_heads=1.*\n.*kv_heads=1"):
        cache.append(sequence, torch.zeros(2, 1, 2), torch.zeros(2, 1, 2))


def test_a_model_decodes_through_pages_as_through_the_plain_cache():
    """A tiny Llama: prefill, fork after the prompt, decode two continuations; logits equal the plain cache's."""
    from attention_utils.inference.kv_cache import KVCache
    from attention_utils.inference.paged_cache import paged_kv_cache
    from tiny_models import tiny_llama

    model = tiny_llama(d_model=16, num_heads=2, num_kv_heads=1, seed=2, weight_std=None)
    tokens = torch.randint(0, 30, (2, 14), generator=torch.Generator().manual_seed(3))
    tokens[1, :5] = tokens[0, :5]  # both share a 5-token prompt
    pools = [PagedCache(20, 1, 8, page_size=4, dtype=torch.float64) for _ in range(2)]
    first = paged_kv_cache(pools)
    with torch.no_grad():
        model(tokens[:1, :5], cache=first)
        second = paged_kv_cache(pools, [pool.fork(layer.sequence) for pool, layer in zip(pools, first.layers)])
        for row, cache in ((0, first), (1, second)):
            plain = KVCache(2)
            model(tokens[row:row + 1, :5], cache=plain)
            for t in range(5, 14):
                expected = model(tokens[row:row + 1, t:t + 1], cache=plain)
                torch.testing.assert_close(model(tokens[row:row + 1, t:t + 1], cache=cache), expected, rtol=0, atol=1e-12)
    # the prompt's first page (4 tokens) is shared; its second page (token 4) was copied when the sequences diverged
    assert pools[0].block_tables[first[0].sequence][0] == pools[0].block_tables[second[0].sequence][0]
    assert pools[0].pages_in_use == 1 + 2 * 3  # shared page + 3 own pages each for tokens 4..13
