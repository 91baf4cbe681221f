"""What a smaller cache costs in quality: logits read chunk by chunk through a cache, perplexity, agreement (lesson 15).

A cache that changes what it stores (quantized, low-rank) changes only what *later* chunks read, so
quality is measured the way text is generated: a prefill of the first tokens, then the rest fed in
chunks (`chunk=1` is decoding token by token), every chunk reading the cache as it stands.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..checks import bilingual, check_size, check_tensor, shown
from .generation import check_prompt, takes_keywords
from .kv_cache import KVCache


@torch.no_grad()
def logits_through_cache(model: nn.Module, tokens: torch.Tensor, cache: KVCache, prefill: int,
                         chunk: int = 1) -> torch.Tensor:
    """Logits (b, T, vocab) for tokens (b, T): the first `prefill` in one call, then `chunk` tokens per call."""
    if not isinstance(model, nn.Module) or not takes_keywords(model, "cache"):
        raise TypeError(bilingual(f"model must be a torch module called as model(tokens, cache=cache), got {shown(model)}.",
                                  f"model 必须是可以这样调用的 torch 模块：model(tokens, cache=cache)，实际是 {shown(model, True)}。"))
    check_prompt(tokens, "tokens")
    if not isinstance(cache, KVCache) or cache.position != 0:
        raise (ValueError if isinstance(cache, KVCache) else TypeError)(bilingual(
            f"cache must be a new, empty KVCache (or one from quantized_kv_cache, low_rank_kv_cache, ...), got "
            f"{shown(cache)}: every chunk after the prefill reads the tokens before it from the cache.",
            f"cache 必须是一个新的、空的 KVCache（或 quantized_kv_cache、low_rank_kv_cache 等返回的缓存），实际是 "
            f"{shown(cache, True)}：预填充之后的每一块都要从缓存里读取前面的词元。"))
    prefill, chunk = check_size(prefill, "prefill"), check_size(chunk, "chunk")
    if prefill > tokens.shape[1]:
        raise ValueError(bilingual(
            f"prefill={prefill} is more than the {tokens.shape[1]} tokens given: it must be at most {tokens.shape[1]}.",
            f"prefill={prefill} 超过了给出的 {tokens.shape[1]} 个词元：它最多只能是 {tokens.shape[1]}。"))
    parts, start = [model(tokens[:, :prefill], cache=cache)], prefill
    while start < tokens.shape[1]:
        parts.append(model(tokens[:, start:start + chunk], cache=cache))
        start += chunk
    return torch.cat(parts, dim=1)


def perplexity(logits: torch.Tensor, tokens: torch.Tensor, first: int = 0) -> float:
    """exp(mean cross-entropy) of predicting tokens[:, t + 1] from logits[:, t], for t >= first."""
    check_tensor(logits, "logits", ranks=(3,))
    check_prompt(tokens, "tokens")
    if tokens.shape != logits.shape[:2] or (tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < logits.shape[-1]):
        raise ValueError(bilingual(
            f"tokens {tuple(tokens.shape)} must be the (batch, T) ids that logits {tuple(logits.shape)} score, each from 0 "
            f"to {logits.shape[-1] - 1}.",
            f"tokens {tuple(tokens.shape)} 必须是 logits {tuple(logits.shape)} 所打分的 (batch, T) 词元编号，"
            f"每个都在 0 到 {logits.shape[-1] - 1} 之间。"))
    if not tokens.shape[0]:
        raise ValueError(bilingual("tokens hold no sequence (batch 0): there is nothing to score.",
                                   "tokens 里没有序列（批大小为 0）：没有可以计分的内容。"))
    first = check_size(first, "first", minimum=0)
    if first > tokens.shape[1] - 2:
        raise ValueError(bilingual(
            f"first={first} leaves no prediction to score in {tokens.shape[1]} tokens: it must be at most "
            f"{tokens.shape[1] - 2} (the last token predicts nothing).",
            f"first={first} 使 {tokens.shape[1]} 个词元里没有可以计分的预测：它最多只能是 {tokens.shape[1] - 2}"
            "（最后一个词元不预测任何词元）。"))
    # in float32: a bfloat16 mean keeps 3 digits, so every bfloat16 model scored 29.25 on lesson 15's text
    predicted, actual = logits[:, first:-1].float(), tokens[:, first + 1:].long()  # cross_entropy takes int64 targets only
    return torch.nn.functional.cross_entropy(predicted.flatten(0, 1), actual.flatten()).exp().item()


def _callable_alone(make_cache: object) -> bool:
    """Whether make_cache can be called with no arguments (read from its signature, before it is called)."""
    if not callable(make_cache):
        return False
    try:
        inspect.signature(make_cache).bind()
    except TypeError:  # it needs arguments: the factory itself was passed, not a lambda that calls it
        return False
    except ValueError:  # no signature to read: let the call tell
        return True
    return True


def _factory_slip(make_cache: object, cache: object) -> tuple[str, str]:
    """What was passed instead of a factory, in English and Chinese: a cache, a function that needs arguments, ..."""
    name = getattr(make_cache, "__name__", type(make_cache).__name__)
    if isinstance(make_cache, KVCache) or isinstance(cache, KVCache):
        return "it was given a cache (or one that already holds tokens)", "传入的是一个缓存（或已经存了词元的缓存）"
    if callable(make_cache) and cache is None and not _callable_alone(make_cache):
        return f"{name} itself needs arguments", f"{name} 本身需要参数"
    return f"got {shown(make_cache)}", f"实际是 {shown(make_cache, True)}"


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
    cache = make_cache() if _callable_alone(make_cache) else None
    if not isinstance(cache, KVCache) or cache.position:
        what_en, what_zh = _factory_slip(make_cache, cache)
        raise TypeError(bilingual(
            f"make_cache must be a function of no arguments that returns a new, empty cache; {what_en}: pass "
            "`lambda: quantized_kv_cache(30, bits=8)` (or another cache made inside a lambda).",
            f"make_cache 必须是一个不带参数、每次返回一个新的空缓存的函数；{what_zh}：请传入 "
            "`lambda: quantized_kv_cache(30, bits=8)`（或在 lambda 里创建的其他缓存）。"))
    check_tensor(reference, "reference", ranks=(3,))
    check_prompt(tokens, "tokens")
    if reference.shape[:2] != tokens.shape or not 1 <= check_size(prefill, "prefill") <= tokens.shape[1] - 2:
        raise ValueError(bilingual(
            f"reference {tuple(reference.shape)} must be the logits of tokens {tuple(tokens.shape)}, and prefill={prefill} "
            f"from 1 to {tokens.shape[1] - 2}, so that some predictions after the prefill are scored.",
            f"reference {tuple(reference.shape)} 必须是 tokens {tuple(tokens.shape)} 的 logits，prefill={prefill} 必须在 1 到 "
            f"{tokens.shape[1] - 2} 之间，这样预填充之后才有可以计分的预测。"))
    logits = logits_through_cache(model, tokens, cache, prefill, chunk)
    if logits.shape != reference.shape:
        raise ValueError(bilingual(
            f"reference {tuple(reference.shape)} must have the shape of the model's logits {tuple(logits.shape)}.",
            f"reference {tuple(reference.shape)} 的形状必须与模型的 logits {tuple(logits.shape)} 相同。"))
    scored = slice(prefill, None)  # only predictions that read the cache after the prefill
    agreement = (logits[:, scored].argmax(-1) == reference[:, scored].argmax(-1)).float().mean().item()
    difference = (logits[:, scored] - reference[:, scored]).abs().max().item()
    return CacheQuality(perplexity(logits, tokens, prefill), agreement, difference, cache.nbytes / tokens.numel())
