"""Greedy generation for several prompts at once: left padding, a padding mask, per-prompt positions (lesson 14).

A decode step at batch 1 reads every weight to use it once. Decoding B prompts together reads the
weights once for B tokens, so a step costs nearly the same and gives B tokens. Prompts of
different lengths are padded on the left, so every row's newest token sits in the last column and
the next tokens are appended to all rows alike; the model is told which tokens are padding
(`padding_mask`, True = padding), hides them from every query and counts each row's positions from
its first real token, so each row computes what its prompt alone would (up to rounding).

`generate_batch` works with any model called as `model(tokens, cache=cache, padding_mask=mask)`
that returns logits (batch, T, vocab): lesson 13's LlamaModel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..checks import bilingual, check_size
from .generation import check_reach, stated_sizes, takes_keywords
from .kv_cache import KVCache


LARGEST_ID = 2**63 - 1  # token ids are int64


@dataclass
class BatchedGeneration:
    """What batched generation leaves: the left-padded prompts and the new tokens, and where the padding is."""

    tokens: torch.Tensor  # (batch, longest prompt + new): padding, then the prompt, then the new tokens
    padding: torch.Tensor  # (batch, longest prompt): True at the padding tokens
    logits: torch.Tensor  # (batch, new, vocab): row i scored the choice of new token i

    @property
    def new_tokens(self) -> torch.Tensor:
        """(batch, new): the generated tokens of every row, without its prompt."""
        return self.tokens[:, self.padding.shape[1]:]


def check_prompts(prompts: object) -> list[list[int]]:
    """Prompts as lists of token ids: a non-empty list of non-empty sequences of non-negative integers."""
    hint_en, hint_zh = "for example [tokenizer.encode('The capital of France is'), ...]", "例如 [tokenizer.encode('The capital of France is'), ...]"
    if isinstance(prompts, (str, bytes, torch.Tensor)) or not isinstance(prompts, Sequence) or not prompts:
        raise TypeError(bilingual(
            f"prompts must be a non-empty list of prompts, each a list of token ids, {hint_en}; got {type(prompts).__name__}.",
            f"prompts 必须是非空的列表，每个元素是一个提示词的词元编号列表，{hint_zh}；实际是 {type(prompts).__name__}。"))
    checked = []
    for index, prompt in enumerate(prompts):
        if isinstance(prompt, np.ndarray) and prompt.dtype.kind in "iu":  # numpy ids count, as everywhere
            prompt = torch.from_numpy(prompt.astype(np.int64))
        if isinstance(prompt, torch.Tensor):
            if prompt.dim() != 1 or prompt.dtype not in (torch.int64, torch.int32):
                raise TypeError(bilingual(
                    f"prompts[{index}] must be a 1-D integer tensor of token ids, got {prompt.dtype} {tuple(prompt.shape)}.",
                    f"prompts[{index}] 必须是一维整数张量（词元编号），实际是 {prompt.dtype} {tuple(prompt.shape)}。"))
            prompt = prompt.tolist()
        if isinstance(prompt, (str, bytes)) or not isinstance(prompt, Sequence) or not prompt:
            raise ValueError(bilingual(
                f"prompts[{index}] must be a non-empty list of token ids, got {prompt!r:.60}; encode the text first, {hint_en}.",
                f"prompts[{index}] 必须是非空的词元编号列表，实际是 {prompt!r:.60}；请先把文字编码，{hint_zh}。"))
        checked.append([_check_id(token, f"prompts[{index}] token") for token in prompt])
    return checked


def _check_id(value: object, name: str) -> int:
    """A token id: an integer from 0 to 2**63 - 1, what an int64 tensor holds."""
    value = check_size(value, name, minimum=0)
    if value > LARGEST_ID:
        raise ValueError(bilingual(f"{name} must be a token id of at most 2**63 - 1 (int64), got {value}.",
                                   f"{name} 必须是不超过 2**63 - 1（int64）的词元编号，实际是 {value}。"))
    return value


def left_pad(prompts: object, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (batch, longest) with each prompt at the right end, and the padding mask (True = padding)."""
    prompts = check_prompts(prompts)
    pad_id = _check_id(pad_id, "pad_id")
    longest = max(len(prompt) for prompt in prompts)
    tokens = torch.full((len(prompts), longest), pad_id, dtype=torch.long)
    padding = torch.ones(len(prompts), longest, dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        tokens[row, longest - len(prompt):] = torch.tensor(prompt)
        padding[row, longest - len(prompt):] = False
    return tokens, padding


@torch.no_grad()
def generate_batch(
    model: nn.Module, prompts: object, new_tokens: int, cache: KVCache, pad_id: int = 0
) -> BatchedGeneration:
    """Greedy decoding of every prompt at once: one prefill of the left-padded batch, then one decode step per token.

    `cache` is a new, empty KVCache(num_layers); `pad_id` is the id written at padding places (the
    model never reads it: the padding mask hides it).
    """
    new_tokens = check_size(new_tokens, "new_tokens", minimum=0)
    if not isinstance(model, nn.Module) or not takes_keywords(model, "cache", "padding_mask"):
        raise TypeError(bilingual(
            f"model must be a torch module called as model(tokens, cache=..., padding_mask=...), like lesson 13's "
            f"LlamaModel, got {type(model).__name__}.",
            f"model 必须是可以这样调用的 torch 模块：model(tokens, cache=..., padding_mask=...)，例如第 13 课的 LlamaModel，"
            f"实际是 {type(model).__name__}。"))
    if not isinstance(cache, KVCache) or cache.position != 0:
        raise ValueError(bilingual(
            "cache must be a new, empty KVCache(num_layers): batched decoding always uses one.",
            "cache 必须是一个新的、空的 KVCache(num_layers)：批量解码总要用到缓存。"))
    device = next(model.parameters(), torch.empty(0)).device  # the ids are built here: put them where the model is
    tokens, padding = left_pad(prompts, pad_id)
    _check_vocabulary(model, tokens, padding, pad_id)  # on the CPU, where the ids were built: a meta model has no values
    tokens, padding = tokens.to(device), padding.to(device)
    check_reach(model, tokens.shape[1], new_tokens)  # refused before the first step, as generate does
    was_training = model.training
    model.eval()
    chosen_from = []
    try:
        if not new_tokens:  # nothing to generate: the logits still have the vocabulary's width
            vocab = stated_sizes(model)[1] or model(tokens, padding_mask=padding).shape[-1]
            return BatchedGeneration(tokens, padding, torch.empty(tokens.shape[0], 0, vocab, device=device))
        step_input, mask = tokens, padding
        for _ in range(new_tokens):
            logits = model(step_input, cache=cache, padding_mask=mask)[:, -1]  # (batch, vocab)
            chosen_from.append(logits)
            step_input, mask = logits.argmax(dim=-1, keepdim=True), None  # new tokens are never padding
            tokens = torch.cat([tokens, step_input], dim=1)
    finally:
        model.train(was_training)
    return BatchedGeneration(tokens, padding, torch.stack(chosen_from, dim=1))


def _check_vocabulary(model: nn.Module, tokens: torch.Tensor, padding: torch.Tensor, pad_id: int) -> None:
    """Every prompt's ids and pad_id below the vocabulary size the model states (`model.config.vocab_size`)."""
    vocab = stated_sizes(model)[1]
    if vocab is None:
        return
    largest = int(tokens[~padding].max())
    for name, value in (("prompts", largest), ("pad_id", pad_id if padding.any() else 0)):
        if value >= vocab:
            raise ValueError(bilingual(
                f"{name} holds the token id {value}, but the model's vocabulary has ids 0 to {vocab - 1}; "
                "encode the prompts with this model's tokenizer.",
                f"{name} 里有词元编号 {value}，而模型的词表只有 0 到 {vocab - 1}；请用这个模型的分词器来编码提示词。"))
