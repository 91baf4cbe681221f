"""The low-rank cache and the quality measures: checked by the SVD's own promise and by hand."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.inference.cache_quality import cache_quality, logits_through_cache, perplexity
from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.low_rank_cache import LowRankLayerCache, fit_bases, fit_basis, low_rank_kv_cache, turned
from attention_utils.rotary import apply_rotary
import tiny_models


@settings(max_examples=40, deadline=None)
@given(heads=st.integers(1, 3), tokens=st.integers(1, 12), head_dim=st.integers(1, 6), rank=st.integers(0, 6),
       seed=st.integers(0, 2**16))
def test_the_basis_keeps_what_the_singular_values_promise(heads, tokens, head_dim, rank, seed):
    """Eckart-Young: projecting onto the first r directions leaves exactly the energy of the other singular values."""
    rank = min(rank, head_dim)
    x = torch.randn(2, heads, tokens, head_dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    basis = fit_basis(x)[..., :rank]
    torch.testing.assert_close(basis.transpose(-2, -1) @ basis, torch.eye(rank, dtype=torch.float64).expand(heads, -1, -1))
    left = ((x - x @ basis @ basis.transpose(-2, -1)) ** 2).sum(dim=(0, 2, 3))
    singular = torch.linalg.svdvals(x.transpose(0, 1).reshape(heads, -1, head_dim))
    torch.testing.assert_close(left, (singular[:, rank:] ** 2).sum(-1), rtol=1e-9, atol=1e-9)


@pytest.fixture(scope="module")
def tiny_llama():
    return tiny_models.tiny_llama(d_model=16, num_heads=2, num_kv_heads=1, seed=1)


def test_full_rank_changes_nothing_and_a_lower_rank_changes_later_chunks_only(tiny_llama):
    tokens = torch.randint(0, 30, (1, 12), generator=torch.Generator().manual_seed(0))
    filled = KVCache(2)
    with torch.no_grad():
        reference = tiny_llama(tokens, cache=filled)
    bases = fit_bases(filled)
    full = logits_through_cache(tiny_llama, tokens, low_rank_kv_cache(bases, 8), prefill=4, chunk=3)
    torch.testing.assert_close(full, reference, rtol=0, atol=1e-10)
    low = logits_through_cache(tiny_llama, tokens, low_rank_kv_cache(bases, 2), prefill=4, chunk=3)
    torch.testing.assert_close(low[:, :4], reference[:, :4], rtol=0, atol=1e-10)  # the prefill reads nothing stored
    assert (low[:, 4:] - reference[:, 4:]).abs().max() > 1e-6
    quality = cache_quality(tiny_llama, tokens, lambda: KVCache(2), reference, prefill=4, chunk=1)
    assert quality.agreement == 1.0 and quality.largest_logit_difference < 1e-10
    assert quality.bytes_per_token == 2 * 2 * 1 * 8 * 8  # K and V x layers x key/value heads x head size x 8 bytes (float64)
    rank_2 = cache_quality(tiny_llama, tokens, lambda: low_rank_kv_cache(bases, 2), reference, prefill=4, chunk=3)
    assert rank_2.bytes_per_token == 2 * 2 * 1 * 2 * 8  # 2 coordinates instead of 8 numbers per key and value


def test_bytes_and_perplexity_by_hand():
    cache = LowRankLayerCache(torch.eye(8).expand(2, 8, 8), torch.eye(8).expand(2, 8, 8), rank=3)
    cache.update(torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8))
    assert cache.nbytes == 2 * 2 * 3 * 5 * 4  # K and V x heads x rank x tokens x 4 bytes
    uniform = torch.zeros(1, 6, 50)
    assert perplexity(uniform, torch.zeros(1, 6, dtype=torch.long)) == pytest.approx(50)  # guessing among 50
    sure = torch.full((1, 3, 4), -1e4)
    sure[0, :, 2] = 0.0
    assert perplexity(sure, torch.tensor([[2, 2, 2]])) == pytest.approx(1.0)
    assert math.isclose(perplexity(uniform, torch.zeros(1, 6, dtype=torch.long), first=3), 50, rel_tol=1e-6)


def test_bfloat16_logits_are_scored_to_float32_precision():
    """bfloat16 logits (lesson 14's formats) get the perplexity of the same numbers in float64, not a 3-digit mean."""
    logits = torch.randn(1, 300, 97, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    tokens = torch.randint(0, 97, (1, 300), generator=torch.Generator().manual_seed(4))
    by_hand = -torch.log_softmax(logits[0, :-1].double(), dim=-1).gather(1, tokens[0, 1:, None]).mean()
    assert perplexity(logits, tokens) == pytest.approx(by_hand.exp().item(), rel=1e-5)


def test_errors_are_bilingual():
    with pytest.raises(ValueError, match="filled.*\n.*填满"):
        fit_bases(KVCache(2))
    with pytest.raises(ValueError, match="rank.*\n.*rank"):
        LowRankLayerCache(torch.eye(4)[None], torch.eye(4)[None], rank=5)
    with pytest.raises(ValueError, match="key_basis.*3 dimensions.*\n.*key_basis"):
        LowRankLayerCache(torch.eye(4), torch.eye(4)[None], rank=2)


def test_turned_back_undoes_apply_rotary():
    keys = torch.randn(1, 2, 7, 8, dtype=torch.float64)
    positions = torch.arange(3, 10)
    rotated = apply_rotary(keys, 3, 10000.0)  # the package's rotary, as the model turns keys
    torch.testing.assert_close(turned(rotated, positions, 10000.0, back=True), keys, rtol=0, atol=1e-12)
    torch.testing.assert_close(turned(keys, positions, 10000.0), rotated, rtol=0, atol=1e-12)


def test_a_basis_fitted_before_the_turn_keeps_keys_of_that_rank_exactly():
    """Keys in a 2-dimensional subspace before rotary: rank 2 before the turn rebuilds them; after the turn it cannot."""
    generator = torch.Generator().manual_seed(3)
    directions = torch.linalg.qr(torch.randn(8, 2, generator=generator, dtype=torch.float64)).Q  # (8, 2), orthonormal
    plain = torch.randn(1, 1, 40, 2, generator=generator, dtype=torch.float64) @ directions.T  # rank 2 before the turn
    keys, values = apply_rotary(plain, 0, 10000.0), torch.randn(1, 1, 40, 8, generator=generator, dtype=torch.float64)
    filled = KVCache(1)
    filled[0].update(keys, values)
    before, after = fit_bases(filled, rotary_base=10000.0)[0], fit_bases(filled)[0]
    kept = {}
    for name, (key_basis, value_basis), base in (("before", before, 10000.0), ("after", after, None)):
        cache = LowRankLayerCache(key_basis, value_basis, rank=2, rotary_base=base)
        cache.update(keys[:, :, :30], values[:, :, :30])
        seen = cache.update(keys[:, :, 30:], values[:, :, 30:])[0]  # the first 30 rebuilt, the last 10 as given
        kept[name] = (seen - keys).abs().max().item()
        assert cache.nbytes == 2 * 1 * 2 * 40 * 8  # K and V x heads x rank x tokens x 8 bytes (float64)
        torch.testing.assert_close(cache.keys[:, :, :30], seen[:, :, :30], rtol=0, atol=1e-12)  # what it holds, read back
    assert kept["before"] < 1e-10 < 0.1 < kept["after"]


def test_full_rank_before_the_turn_changes_nothing(tiny_llama):
    tokens = torch.randint(0, 30, (1, 12), generator=torch.Generator().manual_seed(0))
    filled = KVCache(2)
    with torch.no_grad():
        reference = tiny_llama(tokens, cache=filled)
    bases = fit_bases(filled, rotary_base=10000.0)
    full = logits_through_cache(tiny_llama, tokens, low_rank_kv_cache(bases, 8, rotary_base=10000.0), prefill=4, chunk=3)
    torch.testing.assert_close(full, reference, rtol=0, atol=1e-10)


def test_a_basis_that_is_not_orthonormal_is_refused():
    """Coordinates Bᵀk rebuild k only through an orthonormal B: a stretched basis would make the cache hold other keys."""
    from contract_helpers import assert_contract_error

    stretched = 2 * torch.eye(4)[None]
    assert_contract_error(lambda: LowRankLayerCache(stretched, torch.eye(4)[None], rank=2), "key_basis")
    assert_contract_error(lambda: LowRankLayerCache(torch.eye(4)[None], stretched, rank=2), "value_basis")
    skewed = torch.eye(4)[None].clone()
    skewed[0, 0, 3] = 0.5  # only the fourth column leans: a rank-3 cache never uses it
    LowRankLayerCache(skewed, skewed, rank=3)
