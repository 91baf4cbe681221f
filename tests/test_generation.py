"""Generation with and without the KV cache: the tiny model gives the same tokens and logits either way.

The uncached reference is the book-style TinyAttentionModel itself; for a window, the same model
with the window mask written into each layer's `mask` buffer (True = hide, as the book stores it).
"""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.inference.generation import generate
from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.sliding_window import sliding_window_mask
from attention_utils.tiny_model import POSITION_KINDS, CachedTinyModel, TinyAttentionModel


def random_model(seed: int, positions: str, heads: int, layers: int, scale: float = 3.0) -> TinyAttentionModel:
    """A random tiny model in float64 with larger-than-usual weights, so attention is peaked and the greedy tokens vary."""
    torch.manual_seed(seed)
    model = TinyAttentionModel(12, 20, d_model=16, num_heads=heads, num_layers=layers, positions=positions)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(scale)
    return model.double().eval()


def with_window_mask(model: TinyAttentionModel, window: int, sinks: int) -> TinyAttentionModel:
    """A copy of the book-style model whose mask buffers hide what the window hides."""
    windowed = copy.deepcopy(model)
    for layer in windowed.layers:
        layer.mask.copy_(sliding_window_mask(layer.mask.shape[-1], window, sinks).float())
    return windowed


@settings(max_examples=25, deadline=None)
# CachedTinyModel refuses ALiBi, whose penalty its fused layers do not have (tests/test_alibi.py checks the refusal)
@given(seed=st.integers(0, 2**16), positions=st.sampled_from([k for k in POSITION_KINDS if k != "alibi"]),
       heads=st.sampled_from([1, 2, 4]),
       layers=st.integers(1, 3), prompt_length=st.integers(1, 8), new_tokens=st.integers(0, 10),
       window=st.one_of(st.none(), st.integers(1, 6)), sinks=st.integers(0, 2))
def test_cached_generation_equals_recomputing_everything(seed, positions, heads, layers, prompt_length, new_tokens,
                                                         window, sinks):
    sinks = sinks if window else 0
    model = random_model(seed, positions, heads, layers)
    reference = model if window is None else with_window_mask(model, window, sinks)
    prompt = torch.randint(0, 12, (2, prompt_length), generator=torch.Generator().manual_seed(seed))
    slow = generate(reference, prompt, new_tokens)
    cache = KVCache(layers)
    fast = generate(CachedTinyModel(model, window=window, sinks=sinks), prompt, new_tokens, cache=cache)
    assert torch.equal(fast.tokens, slow.tokens)
    # float64 sums in another order: logits up to a few hundred (scale-3 weights) may differ by ~1e-9 (seed 1638 did)
    torch.testing.assert_close(fast.logits, slow.logits, rtol=1e-9, atol=1e-9)
    assert fast.logits.shape[:2] == (2, new_tokens)
    assert cache.position == (prompt_length + new_tokens - 1 if new_tokens else 0)


def test_the_learned_positions_continue_where_the_cache_ends():
    """The position offset matters for added positions too: the decode step reads row `cache.position` of the table."""
    model = random_model(3, "learned", 2, 2)
    cached = CachedTinyModel(model)
    tokens = torch.randint(0, 12, (1, 9), generator=torch.Generator().manual_seed(0))
    cache = KVCache(2)
    cached(tokens[:, :8], cache=cache)
    torch.testing.assert_close(cached(tokens[:, 8:], cache=cache)[:, -1], model(tokens)[:, -1], rtol=0, atol=1e-9)
    restarted = KVCache(2)  # what the classic bug does: the new token read as if it sat at position 0
    assert not torch.allclose(cached(tokens[:, 8:], cache=restarted)[:, -1], model(tokens)[:, -1], atol=1e-3)


def test_generate_keeps_the_training_mode_and_refuses_a_used_cache():
    model = random_model(0, "learned", 1, 1).train()
    prompt = torch.tensor([[1, 2, 3]])
    generate(model, prompt, 2)
    assert model.training
    cached, cache = CachedTinyModel(model), KVCache(1)
    generate(cached, prompt, 3, cache=cache)
    with pytest.raises(ValueError, match="empty KVCache.*\n.*KVCache"):
        generate(cached, prompt, 3, cache=cache)  # a cache that holds another sequence
    with pytest.raises(ValueError, match="new_tokens"):
        generate(cached, prompt, -1)


def test_the_cached_model_checks_its_cache():
    cached = CachedTinyModel(random_model(0, "learned", 1, 2))
    with pytest.raises(TypeError, match="KVCache\\(2\\).*\n.*KVCache\\(2\\)"):
        cached(torch.tensor([[1, 2]]), cache=KVCache(3))
    with pytest.raises(ValueError, match="context_length=20"):
        cache = KVCache(2)
        cached(torch.zeros(1, 20, dtype=torch.long), cache=cache)
        cached(torch.zeros(1, 1, dtype=torch.long), cache=cache)  # position 20 does not exist
    with pytest.raises(TypeError, match="TinyAttentionModel"):
        CachedTinyModel(torch.nn.Linear(2, 2))
