"""A tiny float64 Llama with random weights, for the cache tests that decode through a whole model."""

from __future__ import annotations

import torch

from attention_utils.models.llama import LlamaConfig, LlamaModel


def tiny_llama(d_model: int, num_heads: int, num_kv_heads: int, seed: int, vocab_size: int = 30,
               weight_std: float | None = 0.3) -> LlamaModel:
    """Two layers in float64, in eval mode. weight_std redraws every parameter from N(0, std²) (None keeps the
    default initialization), so that attention is far from uniform and a wrong cache shows in the logits."""
    config = LlamaConfig(vocab_size=vocab_size, context_length=64, d_model=d_model, num_layers=2, num_heads=num_heads,
                         num_kv_heads=num_kv_heads, d_ff=3 * d_model // 2, rotary_base=10000.0, norm_eps=1e-5)
    torch.manual_seed(seed)
    model = LlamaModel(config).double().eval()
    if weight_std is not None:
        for parameter in model.parameters():
            torch.nn.init.normal_(parameter, std=weight_std)
    return model
