"""The cost of a forward from the configuration (lesson 14), against torch's FLOP counter, a hand count and the bytes held.

References: torch.utils.flop_counter.FlopCounterMode counts the matrix products a real forward
runs (on CPU it does not count the fused attention kernel, so attention's share is counted by hand);
the bytes of the model's parameters and of the KVCache after the call.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attention_utils.inference.decode_cost import forward_cost, weights_per_layer
from attention_utils.inference.kv_cache import KVCache
from contract_helpers import assert_contract_error

pytestmark = pytest.mark.usefixtures("one_thread")


def counted(model, tokens, cache):
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tokens, cache=cache)
    return counter.get_total_flops()


@pytest.mark.parametrize("batch", [1, 3])
def test_prefill_and_decode_against_the_flop_counter_and_the_bytes_held(smollm2, batch):
    model, _ = smollm2
    config, prompt = model.config, 12
    tokens = torch.randint(0, config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(0))
    cache = KVCache(config.num_layers)
    prefill = forward_cost(config, prompt, batch=batch)
    assert counted(model, tokens, cache) == prefill.flops - prefill.attention_flops
    assert cache.nbytes == prefill.cache_bytes
    decode = forward_cost(config, 1, prompt, batch=batch)
    assert counted(model, tokens[:, :1], cache) == decode.flops - decode.attention_flops
    assert cache.nbytes == decode.cache_bytes
    assert decode.weight_bytes == sum(p.numel() * p.element_size() for p in model.parameters())


def test_a_hand_count_of_smollm2():
    class Sizes:  # SmolLM2-135M, as its GGUF header states
        d_model, num_layers, num_heads, num_kv_heads, head_dim, d_ff, vocab_size = 576, 30, 9, 3, 64, 1536, 49152

    # per layer: QKV 576 x (9 + 6) * 64, output 576 x 576, three of 576 x 1536
    assert weights_per_layer(Sizes) == 576 * 960 + 576 * 576 + 3 * 576 * 1536 == 3_538_944
    step = forward_cost(Sizes, 1, 99)  # the 100th token: it sees 100 keys
    assert step.attention_flops == 30 * 2 * 2 * 9 * 64 * 100
    assert step.flops == 2 * (30 * 3_538_944 + 576 * 49152) + 30 * 2 * 2 * 9 * 64 * 100
    assert step.cache_bytes == 2 * 30 * 3 * 64 * 100 * 4
    assert step.weight_bytes == 4 * (30 * 3_538_944 + 576 * 49152 + 61 * 576)
    assert forward_cost(Sizes, 1, 99, bytes_per_weight=2).weight_bytes == step.weight_bytes // 2
    # batch B: B times the FLOPs, the same weight bytes, so about B times the intensity
    eight = forward_cost(Sizes, 1, 99, batch=8)
    assert eight.flops == 8 * step.flops and eight.weight_bytes == step.weight_bytes
    assert 0.49 < step.intensity < 0.51 and eight.intensity > 7 * step.intensity / 1.02


def test_contract():
    assert_contract_error(lambda: forward_cost(object(), 1), "config", kind=TypeError)
    class Sizes:
        d_model, num_layers, num_heads, num_kv_heads, head_dim, d_ff, vocab_size = 576, 30, 9, 3, 64, 1536, 49152
    assert_contract_error(lambda: forward_cost(Sizes, 0), "new_tokens", kind=ValueError)
    assert_contract_error(lambda: forward_cost(Sizes, 1, -1), "earlier_tokens", kind=ValueError)
    assert_contract_error(lambda: forward_cost(Sizes, 1, batch=0), "batch", kind=ValueError)
    assert_contract_error(lambda: forward_cost(Sizes, 1, bytes_per_weight=0), "bytes_per_weight", kind=ValueError)
