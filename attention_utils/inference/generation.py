"""Greedy generation, token by token: the slow way (recompute everything) or with a KV cache (prefill, then decode).

`generate` works with any model called as `model(tokens)` or `model(tokens, cache=cache)` that
returns logits (batch, T, vocab): the tiny model of lessons 10-12 and the real one of lesson 13.
"""

from __future__ import annotations

import inspect
import numbers
from dataclasses import dataclass

import torch
from torch import nn

from ..checks import bilingual, cannot_read, check_size
from .kv_cache import KVCache


@dataclass
class Generation:
    """What generation leaves: every token (prompt first) and the logits each new token was picked from."""

    tokens: torch.Tensor  # (batch, prompt + new)
    logits: torch.Tensor  # (batch, new, vocab): row i scored the choice of new token i


UNSTATED_CONTEXT = 10_000  # the most steps for a model that states no context length, so a slip never runs for hours


@torch.no_grad()
def generate(model: nn.Module, prompt: torch.Tensor, new_tokens: int, cache: KVCache | None = None) -> Generation:
    """Append the most likely next token `new_tokens` times (greedy decoding), in eval mode.

    Without a cache every step runs the model on the whole sequence so far. With an empty
    KVCache the first call runs on the prompt (prefill) and fills the cache; each later call
    runs on the one new token (decode) and reads the rest from the cache. Everything that can
    be checked is checked before the first step: the prompt and new tokens must fit the model's
    context length, so a call never runs for minutes and then fails at the end.
    """
    new_tokens = check_size(new_tokens, "new_tokens", minimum=0)
    if not isinstance(model, nn.Module):
        raise TypeError(
            bilingual(
                f"model must be a torch module that returns logits (batch, T, vocab), got {type(model).__name__}.",
                f"model 必须是返回 logits (batch, T, vocab) 的 torch 模块，实际是 {type(model).__name__}。",
            )
        )
    check_prompt(prompt)
    if cache is not None and (not isinstance(cache, KVCache) or cache.position != 0):
        raise ValueError(
            bilingual(
                "cache must be a new, empty KVCache(num_layers) (or None to recompute everything); "
                "a cache that holds another sequence would mix the two.",
                "cache 必须是一个新的、空的 KVCache(num_layers)（或者传 None，每步全部重新计算）；"
                "装着另一个序列的缓存会把两个序列混在一起。",
            )
        )
    if cache is not None and not takes_keywords(model, "cache"):
        raise TypeError(bilingual(
            f"model {type(model).__name__} takes no cache (its forward has no `cache` keyword); call generate without one.",
            f"模型 {type(model).__name__} 不接受缓存（它的 forward 没有 `cache` 参数）；调用 generate 时请不要传 cache。"))
    check_reach(model, prompt.shape[1], new_tokens)
    was_training = model.training
    model.eval()
    tokens, step_input, chosen_from = prompt, prompt, []
    try:
        if not new_tokens:  # nothing to generate: one run on the prompt (no cache touched) tells the vocabulary size
            vocab = stated_sizes(model)[1] or check_logits(model(prompt), prompt).shape[-1]
            return Generation(prompt, torch.empty(prompt.shape[0], 0, vocab, device=prompt.device))
        for _ in range(new_tokens):
            logits = check_logits(model(step_input) if cache is None else model(step_input, cache=cache), step_input)
            chosen_from.append(logits[:, -1])  # (batch, vocab): the scores for the next token
            tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
            step_input = tokens if cache is None else tokens[:, -1:]  # with a cache, only the new token goes in
    finally:
        model.train(was_training)
    return Generation(tokens, torch.stack(chosen_from, dim=1))


def check_prompt(prompt: object, name: str = "prompt") -> torch.Tensor:
    """A prompt is token ids: an integer tensor (batch, T) with at least one token (the model checks the ids)."""
    if not isinstance(prompt, torch.Tensor) or prompt.dtype not in (torch.int64, torch.int32):
        kind = prompt.dtype if isinstance(prompt, torch.Tensor) else type(prompt).__name__
        raise TypeError(
            bilingual(
                f"{name} must be an integer tensor of token ids (batch, T), got {kind}; "
                "use model_inputs(tokenizer, 'your prompt') or torch.tensor([[1, 2, 3]]).",
                f"{name} 必须是由词元编号组成的整数张量 (batch, T)，实际是 {kind}；"
                "请用 model_inputs(tokenizer, '你的提示词') 或 torch.tensor([[1, 2, 3]]) 生成。",
            )
        )
    if prompt.dim() != 2 or prompt.shape[1] == 0:
        raise ValueError(
            bilingual(
                f"{name} must have shape (batch, T) with at least one token, got {tuple(prompt.shape)}; "
                f"for one sequence of ids write {name}.unsqueeze(0).",
                f"{name} 的形状应为 (batch, T)，且至少有一个词元，实际是 {tuple(prompt.shape)}；"
                f"如果是一条编号序列，请写 {name}.unsqueeze(0)。",
            )
        )
    return prompt


def takes_keywords(model: nn.Module, *names: str) -> bool:
    """True when model(...) accepts these keyword arguments (or any keyword at all): a cache, a padding mask."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # no signature to read: let the call tell
        return True
    return any(p.kind is p.VAR_KEYWORD for p in parameters.values()) or all(name in parameters for name in names)


def stated_sizes(model: nn.Module) -> tuple[int | None, int | None]:
    """The context length and vocabulary size a model states (`model.config.x` or `model.x`), None where it states none."""
    found = []
    for name in ("context_length", "vocab_size"):
        value = getattr(getattr(model, "config", None), name, getattr(model, name, None))
        stated = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0  # numpy counts too
        found.append(int(value) if stated else None)
    return found[0], found[1]


def check_reach(model: nn.Module, prompt_length: int, new_tokens: int) -> None:
    """The last new token is chosen after the model read prompt + new_tokens - 1 tokens: that must fit its context."""
    context, _ = stated_sizes(model)
    limit = UNSTATED_CONTEXT if context is None else context
    read = prompt_length + new_tokens - 1
    if context is not None and prompt_length > context:
        raise ValueError(
            bilingual(
                f"prompt has {prompt_length} tokens, but the model reads at most {context} (its context length); "
                "shorten the prompt.",
                f"prompt 有 {prompt_length} 个词元，而模型最多只能读 {context} 个（它的上下文长度）；请缩短提示词。",
            )
        )
    if new_tokens and read > limit:
        what_en, what_zh = (f"the model's context length is {context}", f"模型的上下文长度是 {context}") if context else (
            f"the model states no context length, so at most {limit:,} tokens are read here",
            f"模型没有给出上下文长度，这里最多读 {limit:,} 个词元")
        raise ValueError(
            bilingual(
                f"new_tokens={new_tokens:,} after a prompt of {prompt_length} tokens means reading {read:,} tokens, but "
                f"{what_en}; ask for at most new_tokens={max(0, limit - prompt_length + 1):,}.",
                f"在 {prompt_length} 个词元的提示词之后生成 new_tokens={new_tokens:,} 个词元，需要读 {read:,} 个词元，"
                f"但{what_zh}；new_tokens 最多取 {max(0, limit - prompt_length + 1):,}。",
            )
        )


def check_logits(logits: object, step_input: torch.Tensor) -> torch.Tensor:
    """The model's answer must be logits (batch, T, vocab), one row of scores per token it was given."""
    batch, length = step_input.shape
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or tuple(logits.shape[:2]) != (batch, length) \
            or logits.shape[2] == 0 or not logits.is_floating_point():
        got = f"{logits.dtype} {tuple(logits.shape)}" if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(
            bilingual(
                f"model must return logits (batch, T, vocab) = ({batch}, {length}, vocab) for tokens of shape "
                f"{(batch, length)}, got {got}; generate needs a language model's next-token scores.",
                f"对形状为 {(batch, length)} 的词元，model 应返回 logits (batch, T, vocab) = ({batch}, {length}, vocab)，"
                f"实际是 {got}；generate 需要语言模型对下一个词元的打分。",
            )
        )
    if logits.numel() and not cannot_read(logits) and not torch.isfinite(logits.sum()) and bool(
            (torch.isnan(logits) | (logits == float("inf"))).any()):  # -inf (a banned token) is a score; NaN is none
        raise ValueError(bilingual(
            "model returned logits holding NaN or inf, so no token can be chosen: its weights hold NaN or inf, or "
            "its activations overflowed; check them with torch.isfinite.",
            "model 返回的 logits 里有 NaN 或 inf，无法选出下一个词元：可能是它的权重里有 NaN 或 inf，"
            "也可能是中间结果溢出了；请用 torch.isfinite 检查。"))
    return logits
