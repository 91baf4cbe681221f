"""What a smaller cache costs in quality: logits read chunk by chunk through a cache, perplexity, agreement (lesson 15).

A cache that changes what it stores (quantized, low-rank) changes only what *later* chunks read, so
quality is measured the way text is generated: a prefill of the first tokens, then the rest fed in
chunks (`chunk=1` is decoding token by token), every chunk reading the cache as it stands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..arguments import check_size
from .kv_cache import KVCache


@torch.no_grad()
def logits_through_cache(model: nn.Module, tokens: torch.Tensor, cache: KVCache, prefill: int,
                         chunk: int = 1) -> torch.Tensor:
    """Logits (b, T, vocab) for tokens (b, T): the first `prefill` in one call, then `chunk` tokens per call."""
    prefill, chunk = check_size(prefill, "prefill"), check_size(chunk, "chunk")
    parts, start = [model(tokens[:, :prefill], cache=cache)], prefill
    while start < tokens.shape[1]:
        parts.append(model(tokens[:, start:start + chunk], cache=cache))
        start += chunk
    return torch.cat(parts, dim=1)


def perplexity(logits: torch.Tensor, tokens: torch.Tensor, first: int = 0) -> float:
    """exp(mean cross-entropy) of predicting tokens[:, t + 1] from logits[:, t], for t >= first."""
    predicted, actual = logits[:, first:-1], tokens[:, first + 1:]
    return torch.nn.functional.cross_entropy(predicted.flatten(0, 1), actual.flatten()).exp().item()


@dataclass
class CacheQuality:
    """One cache's price on a text: perplexity, and against full-precision logits the top-1 agreement and largest difference.

    `bytes_per_token` is what the cache held after the whole text, divided by the tokens of the text (and the batch).
    """

    perplexity: float
    agreement: float  # share of positions whose most likely next token is the full model's
    largest_logit_difference: float
    bytes_per_token: float = 0.0


def cache_quality(model: nn.Module, tokens: torch.Tensor, make_cache: Callable[[], KVCache], reference: torch.Tensor,
                  prefill: int, chunk: int = 1) -> CacheQuality:
    """Measure a cache kind on `tokens`; `reference` holds the full-precision logits of the same tokens."""
    cache = make_cache()
    logits = logits_through_cache(model, tokens, cache, prefill, chunk)
    scored = slice(prefill, None)  # only predictions that read the cache after the prefill
    agreement = (logits[:, scored].argmax(-1) == reference[:, scored].argmax(-1)).float().mean().item()
    difference = (logits[:, scored] - reference[:, scored]).abs().max().item()
    return CacheQuality(perplexity(logits, tokens, prefill), agreement, difference, cache.nbytes / tokens.numel())
