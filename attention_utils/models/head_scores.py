"""What the heads of a real model do, measured: maps, the share on the first token, previous-token and induction scores.

Every score is an average of attention weights read from the maps, so it lies between 0 and 1:
- sink share: how much of each query's attention goes to the first token (queries 1 on; query 0
  can only look at itself);
- previous-token score: how much goes to the token just before the query;
- induction score, on a random sequence repeated twice: how much a query in the second copy sends
  to the token that followed its earlier copy, the one it should predict next.
Silencing a head (its part of out_proj set to zero) then shows what the model needs it for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ..checks import bilingual, check_seed, check_size, check_tensor
from ..functional import causal_mask, scaled_dot_product_attention
from ..inference.grouped_query import repeat_kv_heads
from ..inference.sliding_window import check_window
from .llama import LlamaModel


def check_model(model: object) -> LlamaModel:
    """The head measurements read a LlamaModel's blocks (lesson 13's model, from load_smollm2())."""
    if not isinstance(model, LlamaModel):
        raise TypeError(
            bilingual(
                f"model must be the LlamaModel that load_smollm2() returns, got {type(model).__name__}.",
                f"model 必须是 load_smollm2() 返回的 LlamaModel，实际是 {type(model).__name__}。",
            )
        )
    return model


def check_maps(maps: object, name: str = "maps") -> torch.Tensor:
    """Attention maps are (layers, heads, T, T) weights, as attention_maps returns them."""
    check_tensor(maps, name, ranks=(4,))
    if maps.shape[-1] != maps.shape[-2] or maps.shape[-1] < 2:
        raise ValueError(
            bilingual(
                f"{name} must be (layers, heads, T, T) with T >= 2, one row per query and one column per key; "
                f"got shape {tuple(maps.shape)}. Use the maps attention_maps(model, tokens) returns.",
                f"{name} 的形状应为 (layers, heads, T, T) 且 T >= 2，每行一个查询、每列一个键；"
                f"实际形状是 {tuple(maps.shape)}。请使用 attention_maps(model, tokens) 返回的注意力图。",
            )
        )
    return maps


def _attention_inputs(model: nn.Module, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The logits, and what each attention layer received (its RMSNorm's output), for the first sequence."""
    inputs, model = [], check_model(model)
    if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and tokens.shape[0] == 0:
        raise ValueError(bilingual("tokens hold no sequence (batch 0), and the maps are those of the first sequence: "
                                   "give at least one.",
                                   "tokens 里没有序列（批大小为 0），而注意力图取的是第一个序列：请至少给一个序列。"))
    hooks = [block.attention.register_forward_pre_hook(lambda _module, args: inputs.append(args[0][:1]))
             for block in model.blocks]
    try:
        with torch.no_grad():
            logits = model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, inputs


@torch.no_grad()
def attention_maps(model: nn.Module, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits (b, T, vocab) and every head's attention weights, (layers, heads, T, T) for the first sequence.

    The model runs as usual; a hook keeps what each attention layer receives, and the weights
    are computed again from it with the package's scaled_dot_product_attention, which returns them.
    """
    logits, inputs = _attention_inputs(model, tokens)
    maps = []
    for block, x in zip(model.blocks, inputs):
        attention = block.attention
        queries, keys, _ = attention.project_heads(x)  # (1, heads, T, head_dim), (1, kv_heads, T, head_dim)
        keys = repeat_kv_heads(keys, attention.num_heads)  # query head i reads key head i // 3
        _, weights = scaled_dot_product_attention(queries, keys, keys, mask=causal_mask(x.shape[1]))
        maps.append(weights[0])
    return logits, torch.stack(maps)


@torch.no_grad()
def value_lengths(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """(layers, kv_heads, T): the length of each token's value vector, in every key/value head."""
    _, inputs = _attention_inputs(model, tokens)
    return torch.stack([block.attention.project_heads(x)[2][0].norm(dim=-1) for block, x in zip(model.blocks, inputs)])


def sink_share(maps: torch.Tensor) -> torch.Tensor:
    """(layers, heads): the average weight queries 1, 2, ... give to the first token."""
    return check_maps(maps)[..., 1:, 0].mean(dim=-1)


def previous_token_score(maps: torch.Tensor) -> torch.Tensor:
    """(layers, heads): the average weight each query t >= 1 gives to key t - 1."""
    num_tokens = check_maps(maps).shape[-1]
    rows = torch.arange(1, num_tokens)
    return maps[..., rows, rows - 1].mean(dim=-1)


def induction_score(maps: torch.Tensor, period: int) -> torch.Tensor:
    """(layers, heads): on a sequence whose second half repeats the first, the weight query t gives to key t - period + 1."""
    maps, period = check_maps(maps), check_size(period, "period", minimum=2)
    if 2 * period > maps.shape[-1]:
        raise ValueError(
            bilingual(
                f"period={period} needs maps of at least {2 * period} tokens (two copies), got {maps.shape[-1]}.",
                f"period={period} 需要至少 {2 * period} 个词元的注意力图（重复两遍），实际只有 {maps.shape[-1]} 个。",
            )
        )
    rows = torch.arange(period, 2 * period)  # queries in the second copy
    return maps[..., rows, rows - period + 1].mean(dim=-1)


def strongest(scores: torch.Tensor) -> tuple[int, int, float]:
    """(layer, head, score) of the largest entry of a (layers, heads) table."""
    check_tensor(scores, "scores", ranks=(2,))
    if scores.numel() == 0:
        raise ValueError(
            bilingual(
                f"scores is empty (shape {tuple(scores.shape)}), so no head is strongest; pass a (layers, heads) "
                "table such as sink_share(maps).",
                f"scores 是空的（形状为 {tuple(scores.shape)}），没有最强的头可言；请传入 (layers, heads) 的表，"
                "例如 sink_share(maps)。",
            )
        )
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    return layer, head, float(scores[layer, head])


def repeated_random_tokens(period: int, seed: int, low: int = 1000, high: int = 10000) -> torch.Tensor:
    """(1, 2 * period) token ids: `period` random ids from low..high-1, then the same ids again.

    Ids 1,000 to 9,999 are frequent word pieces of SmolLM2's vocabulary (the first ids are control
    tokens and single bytes). Random tokens have no meaning, so only copying predicts the second half.
    """
    period, low = check_size(period, "period", minimum=2, maximum=1_000_000), check_size(low, "low", 0)
    high = check_size(high, "high", maximum=2**63 - 1)  # torch.randint's largest
    if low >= high:
        raise ValueError(bilingual(f"low={low} must be smaller than high={high}.", f"low={low} 必须小于 high={high}。"))
    half = torch.randint(low, high, (1, period), generator=torch.Generator().manual_seed(check_seed(seed)))
    return torch.cat([half, half], dim=1)


@torch.no_grad()
def copying_accuracy(model: nn.Module, tokens: torch.Tensor, period: int) -> float:
    """The share of the second copy the model predicts right (greedy), each token from the ones before it.

    The first token of the second copy is left out: nothing before it says what it will be.
    """
    period = check_size(period, "period", minimum=2)
    logits = check_model(model)(tokens)
    if tokens.shape[1] != 2 * period:
        raise ValueError(
            bilingual(
                f"tokens must be one sequence of period={period} tokens repeated twice ({2 * period} in all), "
                f"got {tokens.shape[1]}; repeated_random_tokens(period, seed) makes one.",
                f"tokens 应为 period={period} 个词元重复两遍（共 {2 * period} 个），实际有 {tokens.shape[1]} 个；"
                "可以用 repeated_random_tokens(period, seed) 生成。",
            )
        )
    predicted = logits[0, period:-1].argmax(dim=-1)  # the guesses for tokens period + 1 .. 2 * period - 1
    return (predicted == tokens[0, period + 1 :]).float().mean().item()


@contextmanager
def silence_head(model: nn.Module, layer: int, head: int) -> Iterator[None]:
    """Inside the `with` block one head adds nothing: its columns of out_proj are zero.

    In lesson 10 a head was silenced through its rows of W_value. Here 3 query heads share one
    key/value head, so zeroing values would silence the whole group; out_proj has one slice per query head.
    """
    blocks = check_model(model).blocks
    if not 0 <= check_size(layer, "layer", 0) < len(blocks):
        raise ValueError(bilingual(f"layer must be between 0 and {len(blocks) - 1}, got {layer}.",
                                   f"layer 应在 0 到 {len(blocks) - 1} 之间，实际是 {layer}。"))
    attention = blocks[layer].attention
    if not 0 <= check_size(head, "head", 0) < attention.num_heads:
        raise ValueError(bilingual(f"head must be between 0 and {attention.num_heads - 1}, got {head}.",
                                   f"head 应在 0 到 {attention.num_heads - 1} 之间，实际是 {head}。"))
    columns = slice(head * attention.head_dim, (head + 1) * attention.head_dim)  # this head's context features
    weight = attention.out_proj.weight
    saved = weight[:, columns].clone()
    with torch.no_grad():
        weight[:, columns] = 0.0
    try:
        yield
    finally:
        with torch.no_grad():
            weight[:, columns] = saved


@contextmanager
def windowed(model: nn.Module, window: int | None, sinks: int = 0) -> Iterator[None]:
    """Inside the `with` block every attention layer sees only a sliding window of `window` keys, plus the first `sinks`.

    Lesson 12's window, put on the real model for a measurement: without a cache each layer recomputes
    the whole text under the window mask. The layers get their own settings back afterwards.
    """
    window, sinks = check_window(window, sinks)
    layers = [block.attention for block in check_model(model).blocks]
    saved = [(layer.window, layer.sinks) for layer in layers]
    for layer in layers:
        layer.window, layer.sinks = window, sinks
    try:
        yield
    finally:
        for layer, (old_window, old_sinks) in zip(layers, saved):
            layer.window, layer.sinks = old_window, old_sinks
