"""A tiny attention-only model for lessons 10-12: token embeddings, positions, the package's attention, a read-out.

Each layer is the package's `MultiHeadAttention` added to its input (a residual connection), so
the only way information moves between positions is the attention maps the lesson plots. Lesson 15
builds the same model with grouped-query or latent-attention layers, to compare caches of equal size.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import torch
from torch import nn

from .alibi import ALiBiAttention
from .checks import bilingual, cannot_read, check_flag, check_heads, check_index, check_length, check_size, shown
from .devices import check_fits
from .functional import future
from .inference.grouped_query import GroupedQueryAttention, check_kv_heads
from .inference.kv_cache import KVCache, check_model_cache
from .inference.latent_attention import LatentAttention
from .fused import FusedMultiHeadAttention
from .modules import FLOAT_BYTES, MOST_MODULES, MultiHeadAttention
from .overflow import Overflowed, check_result, check_weights, overflow_error

POSITION_KINDS = ("learned", "sinusoidal", "none", "rotary", "alibi")
ROTARY_BASE = 10000.0  # "rotary" turns each layer's queries and keys with the RoFormer paper's base (lesson 11)
# "alibi" takes 1/2 per position of distance off every score: the steepest of the slopes 1/2 ... 1/256 that
# Press et al. give an 8-head model (lesson 11). alibi_slopes(1) would give a single head 1/256, too flat
# to single out one neighbour among 16.
ALIBI_SLOPE = 0.5


def sinusoidal_positions(num_positions: int, dim: int) -> torch.Tensor:
    """(num_positions, dim) fixed position vectors of "Attention Is All You Need": sin on even, cos on odd columns."""
    num_positions = check_size(num_positions, "num_positions", minimum=0)
    dim = check_size(dim, "dim")
    check_fits(num_positions, "num_positions", lambda n: FLOAT_BYTES * n * dim)
    check_fits(dim, "dim", lambda d: FLOAT_BYTES * num_positions * d)
    positions = torch.arange(num_positions, dtype=torch.float32)[:, None]  # (T, 1)
    frequencies = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)  # (ceil(dim/2),)
    angles = positions * frequencies  # (T, ceil(dim/2)): slow waves in the last columns
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table


def check_tokens(
    tokens: object, vocab_size: int, context_length: int, device: torch.device | None = None, name: str = "tokens"
) -> torch.Tensor:
    """Token ids must be an integer tensor (b, T) on the model's device, 0 <= id < vocab_size, T <= context_length."""
    integer = isinstance(tokens, torch.Tensor) and not tokens.is_floating_point() and not tokens.is_complex()
    if not integer or tokens.dtype == torch.bool:
        kind = tokens.dtype if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise TypeError(
            bilingual(
                f"{name} must be an integer tensor of token ids, got {kind}; use tasks.encode('abc', vocab_size).",
                f"{name} 必须是由词元编号组成的整数张量，实际是 {kind}；请用 tasks.encode('abc', vocab_size) 生成。",
            )
        )
    if device is not None and tokens.device != device:
        raise TypeError(
            bilingual(
                f"{name} are on {tokens.device} but the model is on {device}; move them with {name}.to('{device}').",
                f"{name} 在 {tokens.device} 上，而模型在 {device} 上；请用 {name}.to('{device}') 移过去。",
            )
        )
    if tokens.dim() != 2 or not tokens.shape[1] <= context_length:
        raise ValueError(
            bilingual(
                f"{name} must have shape (batch, T) with T <= context_length={context_length}, got {tuple(tokens.shape)}.",
                f"{name} 的形状应为 (batch, T)，且 T <= context_length={context_length}，实际是 {tuple(tokens.shape)}。",
            )
        )
    if tokens.numel() and not cannot_read(tokens) and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(
            bilingual(
                f"{name} must hold token ids from 0 to {vocab_size - 1} (vocab_size={vocab_size}), got values from "
                f"{int(tokens.min())} to {int(tokens.max())}.",
                f"{name} 里的词元编号应在 0 到 {vocab_size - 1} 之间（vocab_size={vocab_size}），实际范围是 "
                f"{int(tokens.min())} 到 {int(tokens.max())}。",
            )
        )
    return tokens.long()  # nn.Embedding reads int64 (or int32) ids; uint8 and int16 ids are fine too


class TinyAttentionModel(nn.Module):
    """Embeddings + positions, then `num_layers` residual attention layers (MultiHeadAttention unless told), a read-out."""

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        d_model: int = 32,
        num_heads: int = 2,
        num_layers: int = 1,
        positions: str = "learned",
        causal: bool = True,
        *,
        num_kv_heads: int | None = None,
        latent_dim: int | None = None,
    ) -> None:
        """`num_kv_heads` builds grouped-query layers (1 is MQA), `latent_dim` latent-attention layers (lesson 15);
        neither (the default) builds MultiHeadAttention layers."""
        super().__init__()
        self.vocab_size = vocab_size = check_size(vocab_size, "vocab_size")
        self.context_length = context_length = check_size(context_length, "context_length")
        d_model = check_size(d_model, "d_model")
        num_heads = check_size(num_heads, "num_heads")
        check_heads(d_model, num_heads, "d_model")
        num_layers = check_size(num_layers, "num_layers", maximum=MOST_MODULES)
        if not isinstance(positions, str) or positions not in POSITION_KINDS:
            raise (TypeError if not isinstance(positions, str) else ValueError)(
                bilingual(
                    f"positions must be one of {POSITION_KINDS}, got {shown(positions)}.",
                    f"positions 必须是 {POSITION_KINDS} 之一，实际是 {shown(positions, True)}。",
                )
            )
        self.positions = positions
        causal = check_flag(causal, "causal")
        check_model_fits(vocab_size, context_length, d_model, num_layers)
        self.num_kv_heads, self.latent_dim = check_layer_kind(num_heads, num_kv_heads, latent_dim, positions)
        if latent_dim is not None:
            check_fits(self.latent_dim, "latent_dim", lambda n: FLOAT_BYTES * num_layers * 3 * d_model * n)
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        if positions == "learned":
            self.position_embedding = nn.Parameter(0.1 * torch.randn(context_length, d_model))
        elif positions == "sinusoidal":
            self.register_buffer("position_embedding", sinusoidal_positions(context_length, d_model))
        else:
            self.position_embedding = None
        if positions == "rotary" and (d_model // num_heads) % 2:
            raise ValueError(
                bilingual(
                    f"positions='rotary' turns features in pairs, but d_model={d_model} / num_heads={num_heads} gives "
                    f"{d_model // num_heads} features per head; choose d_model as a multiple of {2 * num_heads}.",
                    f"positions='rotary' 把特征两两配对旋转，但 d_model={d_model} / num_heads={num_heads} 使每个头有 "
                    f"{d_model // num_heads} 个特征；请把 d_model 设为 {2 * num_heads} 的整数倍。",
                )
            )
        build = layer_builder(d_model, num_heads, context_length, positions, self.num_kv_heads, self.latent_dim)
        self.layers = nn.ModuleList(build() for _ in range(num_layers))  # in order: each draws its weights in turn
        self.causal = causal  # sets the layers' masks (see the property below)
        self.readout = nn.Linear(d_model, vocab_size)

    @property
    def cache_numbers_per_token(self) -> int:
        """Numbers one layer would cache per token: keys and values of its key/value heads, or the latent (MLA)."""
        if self.latent_dim is not None:
            return self.latent_dim
        layer = self.layers[0]
        return 2 * getattr(layer, "num_kv_heads", layer.num_heads) * layer.head_dim

    @property
    def causal(self) -> bool:
        """True when each token sees only itself and the tokens before it."""
        return self._causal

    @causal.setter
    def causal(self, causal: bool) -> None:
        self._causal = check_flag(causal, "causal")
        with torch.no_grad():  # the causal mask is a buffer; all zeros hides nothing: every token sees every token
            for layer in self.layers:
                layer.mask.copy_(future(layer.mask.shape[-1], layer.mask.device) if self._causal else 0.0)

    def run(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (b, T, vocab_size) and every layer's attention weights (layers, b, heads, T, T)."""
        tokens = check_tokens(tokens, self.vocab_size, self.context_length, self.token_embedding.weight.device)
        check_weights(self)  # a diverged training run leaves NaN weights: name them, not a layer's input
        hidden = self.token_embedding(tokens)  # (b, T, d_model)
        if self.position_embedding is not None:
            hidden = hidden + self.position_embedding[: tokens.shape[1]]  # the same vector for position t in every row
        maps = []
        try:
            for layer in self.layers:
                context, weights = layer(hidden, return_weights=True)
                hidden = hidden + context  # residual: each layer adds what it read to what was there
                maps.append(weights)
        except Overflowed:  # the weights are finite (checked above), so they are too large: name the model's largest
            raise overflow_error(self, hidden.dtype) from None
        return check_result(self, self.readout(hidden)), torch.stack(maps)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (b, T, vocab_size): a score for every possible answer at every position."""
        return self.run(tokens)[0]

    @torch.no_grad()
    def predict(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The most likely answer at every position (b, T) and the attention maps, without training effects."""
        was_training = self.training
        self.eval()
        try:
            logits, maps = self.run(tokens)
        finally:
            self.train(was_training)  # even when the tokens are refused, the model keeps its mode
        return logits.argmax(dim=-1), maps


def layer_builder(
    d_model: int, num_heads: int, context_length: int, positions: str, num_kv_heads: int | None, latent_dim: int | None
) -> Callable[[], nn.Module]:
    """What builds one attention layer of the kind the settings ask for: ALiBi, grouped-query, latent or multi-head.

    The kind is picked once; each call of the builder draws fresh weights from the global random state, so layers
    built in order after the embeddings give the same model for the same seed (lessons 10 and 15 rely on it).
    """
    rotary_base = ROTARY_BASE if positions == "rotary" else None  # rotary: nothing added to the input
    if positions == "alibi":
        return partial(ALiBiAttention, d_model, d_model, context_length, dropout=0.0, num_heads=num_heads,
                       slopes=[ALIBI_SLOPE] * num_heads)
    if num_kv_heads is not None:
        return partial(GroupedQueryAttention, d_model, d_model, context_length, 0.0, num_heads, num_kv_heads,
                       rotary_base=rotary_base)
    if latent_dim is not None:
        return partial(LatentAttention, d_model, context_length, num_heads, d_model // num_heads, latent_dim)
    return partial(MultiHeadAttention, d_model, d_model, context_length, dropout=0.0, num_heads=num_heads,
                   rotary_base=rotary_base)


def check_layer_kind(
    num_heads: int, num_kv_heads: object, latent_dim: object, positions: str
) -> tuple[int | None, int | None]:
    """At most one of num_kv_heads (which must divide num_heads) and latent_dim; MLA layers take no rotary or ALiBi."""
    if num_kv_heads is not None and latent_dim is not None:
        raise ValueError(
            bilingual(
                f"give num_kv_heads (grouped-query layers) or latent_dim (latent-attention layers), not both; got "
                f"num_kv_heads={shown(num_kv_heads)} and latent_dim={shown(latent_dim)}.",
                f"num_kv_heads（分组查询注意力层）和 latent_dim（多头潜在注意力层）只能给一个，实际两个都给了："
                f"num_kv_heads={shown(num_kv_heads, True)}，latent_dim={shown(latent_dim, True)}。",
            )
        )
    if num_kv_heads is not None:
        if positions == "alibi":
            raise ValueError(
                bilingual(
                    "num_kv_heads builds grouped-query layers, which have no ALiBi; use positions='learned', "
                    "'sinusoidal', 'rotary' or 'none'.",
                    "num_kv_heads 构建的是分组查询注意力层，它们没有 ALiBi；请用 positions='learned'、'sinusoidal'、"
                    "'rotary' 或 'none'。",
                )
            )
        return check_kv_heads(num_heads, num_kv_heads), None
    if latent_dim is not None:
        latent_dim = check_size(latent_dim, "latent_dim")
        if positions in ("rotary", "alibi"):
            raise ValueError(
                bilingual(
                    f"latent_dim builds latent-attention layers without positions of their own, so positions="
                    f"'{positions}' is not available; use positions='learned', 'sinusoidal' or 'none' (rotary MLA needs "
                    "the decoupled rotary key of LatentAttention's rope_dim).",
                    f"latent_dim 构建的多头潜在注意力层本身不带位置信息，所以不能用 positions='{positions}'；请用 "
                    "positions='learned'、'sinusoidal' 或 'none'（带旋转位置编码的 MLA 需要 LatentAttention 的 "
                    "rope_dim 所给的解耦旋转键）。",
                )
            )
        return None, latent_dim
    return None, None


def check_model_fits(vocab_size: int, context_length: int, d_model: int, num_layers: int) -> None:
    """Refuse sizes whose weights and masks cannot fit in memory, naming each size in turn."""

    def model_bytes(vocab_size: int, context_length: int, d_model: int, num_layers: int) -> int:
        per_layer = 4 * d_model * d_model + d_model + context_length**2  # W_query, W_key, W_value, out_proj; mask
        return FLOAT_BYTES * (2 * vocab_size * d_model + context_length * d_model + num_layers * per_layer)

    sizes = {"vocab_size": vocab_size, "context_length": context_length, "d_model": d_model, "num_layers": num_layers}
    for name, value in sizes.items():  # each size alone first (the others at 1), so the message names the culprit
        check_fits(value, name, lambda v, name=name: model_bytes(**{**dict.fromkeys(sizes, 1), name: v}))
    check_fits(d_model, "d_model", lambda d: model_bytes(**{**sizes, "d_model": d}))  # d_model multiplies every term


def check_multihead(model: TinyAttentionModel, name: str) -> None:
    """Refuse grouped-query and latent layers where each query head must own its rows of W_key and W_value."""
    if model.num_kv_heads is not None or model.latent_dim is not None:
        setting = "num_kv_heads" if model.num_kv_heads is not None else "latent_dim"
        raise ValueError(
            bilingual(
                f"{name} needs multi-head layers, where every head has its own keys and values; this model was built "
                f"with {setting}, so its heads share them. Build it without num_kv_heads and latent_dim.",
                f"{name} 需要多头注意力层，每个头都有自己的键和值；这个模型创建时给了 {setting}，它的头共用键和值。"
                "请不带 num_kv_heads 和 latent_dim 创建模型。",
            )
        )


@contextmanager
def silence_head(model: TinyAttentionModel, layer: int, head: int) -> Iterator[None]:
    """Inside the `with` block one head contributes nothing: the rows of W_value that feed it are zeros."""
    if not isinstance(model, TinyAttentionModel):
        raise TypeError(
            bilingual(
                f"silence_head needs a TinyAttentionModel, got {type(model).__name__}.",
                f"silence_head 需要 TinyAttentionModel，实际是 {type(model).__name__}。",
            )
        )
    check_multihead(model, "silence_head")
    attention = model.layers[check_index(layer, "layer", len(model.layers), "层数")]
    head = check_index(head, "head", attention.num_heads, "每层的头数")
    rows = slice(head * attention.head_dim, (head + 1) * attention.head_dim)  # this head's slice of d_out
    saved = attention.W_value.weight[rows].detach().clone()
    with torch.no_grad():
        attention.W_value.weight[rows] = 0.0  # its values are zero, so its context vectors are zero
    try:
        yield
    finally:
        with torch.no_grad():
            attention.W_value.weight[rows] = saved


class CachedTinyModel(nn.Module):
    """A trained TinyAttentionModel, ready to generate: a copy of its weights, each layer a FusedMultiHeadAttention.

    Those layers can keep a KV cache and take a sliding window (lesson 12): `model(tokens, cache=cache)`
    runs only the new tokens, at positions cache.position, cache.position + 1, ... Without a cache
    it recomputes every token, as the original does. It copies the weights: build it after training.
    """

    def __init__(self, model: TinyAttentionModel, window: int | None = None, sinks: int = 0) -> None:
        super().__init__()
        if not isinstance(model, TinyAttentionModel):
            raise TypeError(
                bilingual(
                    f"CachedTinyModel copies a TinyAttentionModel, got {type(model).__name__}.",
                    f"CachedTinyModel 复制的是 TinyAttentionModel，实际是 {type(model).__name__}。",
                )
            )
        check_multihead(model, "CachedTinyModel")
        if model.positions == "alibi":
            raise ValueError(
                bilingual(
                    "CachedTinyModel runs rotary, learned, sinusoidal or no positions; it has no ALiBi layers, so it "
                    "would drop the distance penalty. Generate with the model itself.",
                    "CachedTinyModel 只支持旋转位置编码、可学习的、正弦式位置嵌入或不用位置信息；它没有 ALiBi 层，"
                    "会丢掉距离惩罚。请直接用原模型生成。",
                )
            )
        self.vocab_size, self.context_length = model.vocab_size, model.context_length
        self.token_embedding = copy.deepcopy(model.token_embedding)
        table = model.position_embedding
        self.register_buffer("position_embedding", None if table is None else table.detach().clone())
        self.layers = nn.ModuleList(
            FusedMultiHeadAttention.from_multihead(layer, window=window, sinks=sinks) for layer in model.layers
        )
        self.readout = copy.deepcopy(model.readout)
        self.eval()

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Logits (b, T, vocab_size) for the new tokens; with a KVCache, they follow the tokens it has seen."""
        tokens = check_tokens(tokens, self.vocab_size, self.context_length, self.token_embedding.weight.device)
        start = 0 if cache is None else check_model_cache(cache, len(self.layers))
        check_length(start + tokens.shape[1], self.context_length)
        hidden = self.token_embedding(tokens)  # (b, T, d_model)
        if self.position_embedding is not None:  # learned or sinusoidal positions start where the cache ends
            hidden = hidden + self.position_embedding[start : start + tokens.shape[1]]
        for i, layer in enumerate(self.layers):
            hidden = hidden + layer(hidden, cache=None if cache is None else cache[i])  # the residual connection
        return check_result(self, self.readout(hidden))
