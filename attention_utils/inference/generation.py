"""Greedy generation, token by token: the slow way (recompute everything) or with a KV cache (prefill, then decode).

`generate` works with any model called as `model(tokens)` or `model(tokens, cache=cache)` that
returns logits (batch, T, vocab): the tiny model of lessons 10-12 and the real one of lesson 13.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..checks import bilingual, check_size
from .kv_cache import KVCache


@dataclass
class Generation:
    """What generation leaves: every token (prompt first) and the logits each new token was picked from."""

    tokens: torch.Tensor  # (batch, prompt + new)
    logits: torch.Tensor  # (batch, new, vocab): row i scored the choice of new token i


@torch.no_grad()
def generate(model: nn.Module, prompt: torch.Tensor, new_tokens: int, cache: KVCache | None = None) -> Generation:
    """Append the most likely next token `new_tokens` times (greedy decoding), in eval mode.

    Without a cache every step runs the model on the whole sequence so far. With an empty
    KVCache the first call runs on the prompt (prefill) and fills the cache; each later call
    runs on the one new token (decode) and reads the rest from the cache.
    """
    new_tokens = check_size(new_tokens, "new_tokens", minimum=0)
    if not isinstance(model, nn.Module):
        raise TypeError(
            bilingual(
                f"model must be a torch module that returns logits (batch, T, vocab), got {type(model).__name__}.",
                f"model 必须是返回 logits (batch, T, vocab) 的 torch 模块，实际是 {type(model).__name__}。",
            )
        )
    if cache is not None and (not isinstance(cache, KVCache) or cache.position != 0):
        raise ValueError(
            bilingual(
                "cache must be a new, empty KVCache(num_layers) (or None to recompute everything); "
                "a cache that holds another sequence would mix the two.",
                "cache 必须是一个新的、空的 KVCache(num_layers)（或者传 None，每步全部重新计算）；"
                "装着另一个序列的缓存会把两个序列混在一起。",
            )
        )
    was_training = model.training
    model.eval()
    tokens, step_input, chosen_from = prompt, prompt, []
    try:
        for _ in range(new_tokens):
            logits = model(step_input) if cache is None else model(step_input, cache=cache)
            chosen_from.append(logits[:, -1])  # (batch, vocab): the scores for the next token
            tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
            step_input = tokens if cache is None else tokens[:, -1:]  # with a cache, only the new token goes in
    finally:
        model.train(was_training)
    if not chosen_from:  # nothing generated, nothing scored
        return Generation(tokens, torch.empty(prompt.shape[0], 0, 0))
    return Generation(tokens, torch.stack(chosen_from, dim=1))
