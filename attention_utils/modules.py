"""The attention modules of the series, from a single self-attention head to multi-head attention.

Constructor signatures, parameter names (`W_query`, `W_key`, `W_value`, `out_proj`) and the
order in which weights are created follow the book's chapter 3, so the same seed gives the
same numbers and a `state_dict` moves between the book's classes and these.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import (
    bilingual,
    cannot_read,
    check_flag,
    check_heads,
    check_length,
    check_padding_mask,
    check_rate,
    check_result,
    check_size,
    check_tensor,
)
from .devices import check_fits
from .functional import attend, causal_mask, future
from .grouped_query import check_kv_heads
from .kv_cache import LayerCache, check_layer_cache
from .rotary import apply_rotary, check_rotary_heads
from .sliding_window import check_window, hidden_by_window

FLOAT_BYTES = 4  # the default dtype, float32
MOST_MODULES = 1024  # heads of a wrapper, layers of a model: each is built one by one (about 10 s for 1000)


def check_sizes(**sizes: object) -> list[int]:
    """Check each constructor size (d_in, d_out, context_length, num_heads) is a positive integer that fits in memory."""
    checked = {name: check_size(value, name) for name, value in sizes.items()}
    d_in, d_out = checked["d_in"], checked["d_out"]
    # three projections and an out_proj of d_out x d_out at most, and a (context_length, context_length) mask;
    # each size alone first, so the message names the one that is too large
    check_fits(d_in, "d_in", lambda d: FLOAT_BYTES * 3 * d)
    check_fits(checked.get("context_length", 0), "context_length", lambda n: FLOAT_BYTES * n * n)
    check_fits(d_out, "d_out", lambda d: FLOAT_BYTES * (3 * d_in * d + d * d))
    return list(checked.values())


def check_settings(module: nn.Module, **fits: bool) -> None:
    """Refuse a module whose size attributes were changed after it was built and no longer fit its weights."""
    changed = [name for name, ok in fits.items() if not ok]
    if changed:
        kind = type(module).__name__
        raise ValueError(
            bilingual(
                f"{kind} was changed after it was built: its weights and mask no longer fit {', '.join(changed)}; "
                "build a new module with the sizes you want instead of changing attributes.",
                f"{kind} 在创建之后被改动过：{'、'.join(changed)} 与它的权重和掩码不再匹配；"
                "请用想要的大小重新创建模块，不要直接改属性。",
            )
        )


class SelfAttentionV1(nn.Module):
    """Self-attention with raw weight matrices: x @ W, weights drawn with torch.rand as in the book."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        d_in, d_out = check_sizes(d_in=d_in, d_out=d_out)
        self.d_in = d_in
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        return_weights = check_flag(return_weights, "return_weights")
        check_tensor(x, "x", ranks=(2, 3), last_dim=self.d_in, like=self.W_query)
        queries = x @ self.W_query  # (..., T, d_out)
        keys = x @ self.W_key
        values = x @ self.W_value
        context, weights = attend(queries, keys, values)
        context = check_result(self, context, x)  # NaN from finite x: the weights hold NaN, or the scores overflowed
        return (context, weights) if return_weights else context


class SelfAttentionV2(nn.Module):
    """Self-attention with nn.Linear layers; nn.Linear stores W transposed and computes x @ W.T (+ b)."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        d_in, d_out = check_sizes(d_in=d_in, d_out=d_out)
        qkv_bias = check_flag(qkv_bias, "qkv_bias")
        self.d_in = d_in
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        return_weights = check_flag(return_weights, "return_weights")
        check_tensor(x, "x", ranks=(2, 3), last_dim=self.d_in, like=self.W_query.weight)
        context, weights = attend(self.W_query(x), self.W_key(x), self.W_value(x))
        context = check_result(self, context, x)
        return (context, weights) if return_weights else context


class CausalAttention(nn.Module):
    """One causal head on batches: scores above the diagonal are hidden, then dropout on the weights."""

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False
    ) -> None:
        super().__init__()
        d_in, d_out, context_length = check_sizes(d_in=d_in, d_out=d_out, context_length=context_length)
        dropout = check_rate(dropout)
        qkv_bias = check_flag(qkv_bias, "qkv_bias")
        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # A buffer moves with .to(device) and is saved in state_dict, but is never trained.
        self.register_buffer("mask", causal_mask(context_length).float())

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        """Context vectors (b, T, d_out); with return_weights, also the weights used (after dropout)."""
        return_weights = check_flag(return_weights, "return_weights")
        check_settings(self, d_in=self.W_query.in_features == self.d_in,
                       context_length=self.mask.shape[-1] >= self.context_length)
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in, like=self.W_query.weight)
        check_length(x.shape[1], self.context_length)
        context, weights = self._attend(x)
        context = check_result(self, context, x)  # NaN from finite x: the weights hold NaN, or the scores overflowed
        return (context, weights) if return_weights else context

    def _attend(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """forward without its checks: MultiHeadAttentionWrapper checks x once for all its heads."""
        num_tokens = x.shape[1]
        return attend(
            self.W_query(x),  # (b, T, d_out)
            self.W_key(x),
            self.W_value(x),
            hidden=self.mask.bool()[:num_tokens, :num_tokens],
            dropout_p=check_rate(self.dropout.p),  # checked again: the rate may have been changed since
            training=self.training,
        )


class MultiHeadAttentionWrapper(nn.Module):
    """num_heads independent CausalAttention heads whose outputs are concatenated: d_out per head."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        num_heads = check_size(num_heads, "num_heads", maximum=MOST_MODULES)
        check_sizes(d_in=d_in, d_out=d_out, context_length=context_length)
        check_fits(num_heads, "num_heads", lambda h: h * FLOAT_BYTES * (3 * d_in * d_out + context_length**2))
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)
        )

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        """Concatenated context vectors (b, T, num_heads * d_out); with return_weights, also (b, h, T, T)."""
        return_weights = check_flag(return_weights, "return_weights")
        first = self.heads[0]
        check_tensor(x, "x", ranks=(3,), last_dim=first.d_in, like=first.W_query.weight)
        check_length(x.shape[1], first.context_length)
        outputs = [head._attend(x) for head in self.heads]
        context = torch.cat([c for c, _ in outputs], dim=-1)  # (b, T, num_heads * d_out)
        context = check_result(self, context, x)  # a NaN weight is named with its head: heads.1.W_key.weight
        if return_weights:
            return context, torch.stack([w for _, w in outputs], dim=1)
        return context


class MultiHeadAttention(nn.Module):
    """The book's multi-head attention: one projection of width d_out split into num_heads heads."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        rotary_base: float | None = None,
        rotary_layout: str = "interleaved",
    ) -> None:
        """`rotary_base` (10000 in the RoFormer paper) turns queries and keys by their positions (lesson 11);
        None, the default, leaves them as the book computes them. `rotary_layout` is "interleaved" or "halves"."""
        super().__init__()
        d_in, d_out, context_length, num_heads = check_sizes(
            d_in=d_in, d_out=d_out, context_length=context_length, num_heads=num_heads
        )
        check_heads(d_out, num_heads)
        dropout = check_rate(dropout)
        qkv_bias = check_flag(qkv_bias, "qkv_bias")
        if rotary_base is not None:
            rotary_base, rotary_layout = check_rotary_heads(d_out, num_heads, rotary_base, rotary_layout)
        self.rotary_base, self.rotary_layout = rotary_base, rotary_layout
        self.d_in = d_in
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length).float())

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(b, T, d_out) -> (b, T, num_heads, head_dim) -> (b, num_heads, T, head_dim)."""
        self._check_settings()
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_out, like=self.W_query.weight, last_name="d_out")
        return self._split_heads(x.contiguous())  # view needs the memory in order; a learner's x may be transposed

    def _check_settings(self) -> None:
        check_settings(self, num_heads=self.num_heads * self.head_dim == self.d_out == self.W_query.out_features,
                       d_in=self.W_query.in_features == self.d_in, context_length=self.mask.shape[-1] >= self.context_length)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """split_heads without its checks, for the projections forward has just made."""
        b, num_tokens, _ = x.shape
        return x.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, return_weights: bool = False, *, start_position: int = 0):
        """Context vectors (b, T, d_out); with return_weights, also the weights used (b, h, T, T).

        In training mode with dropout the weights returned are the ones after dropout, so their
        rows no longer sum to 1: those are the weights that made the output. With rotary positions
        the tokens of x sit at start_position, start_position + 1, ... (a KV cache builds on this).
        """
        return_weights = check_flag(return_weights, "return_weights")
        self._check_settings()
        start_position = check_size(start_position, "start_position", minimum=0)
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in, like=self.W_query.weight)
        b, num_tokens, _ = x.shape
        check_length(num_tokens, self.context_length)
        queries = self._split_heads(self.W_query(x))  # (b, h, T, head_dim)
        keys = self._split_heads(self.W_key(x))
        values = self._split_heads(self.W_value(x))  # values are never turned
        if self.rotary_base is not None:  # each head's queries and keys turned at their positions (lesson 11)
            queries = apply_rotary(queries, start_position, self.rotary_base, self.rotary_layout)
            keys = apply_rotary(keys, start_position, self.rotary_base, self.rotary_layout)
        context, weights = attend(
            queries,
            keys,
            values,
            hidden=self.mask.bool()[:num_tokens, :num_tokens],
            dropout_p=check_rate(self.dropout.p),  # checked again: the rate may have been changed since
            training=self.training,
        )  # context: (b, h, T, head_dim), weights: (b, h, T, T)
        context = context.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)  # (b, T, d_out)
        context = check_result(self, self.out_proj(context), x)  # NaN from finite x: NaN weights, or an overflow
        return (context, weights) if return_weights else context


class FusedMultiHeadAttention(nn.Module):
    """Multi-head attention as fast as PyTorch allows: one QKV projection and one fused SDPA call.

    torch's scaled_dot_product_attention never stores the (T, T) attention weights and, told that
    the mask is causal, skips the blocks above the diagonal; the book's version computes every
    score, masks half of them and keeps the whole matrix in memory.

    For generation (lesson 12) it also takes, keyword-only: `num_kv_heads` key/value heads shared by
    groups of query heads (GQA; 1 is MQA), rotary positions (`rotary_base`, `rotary_layout`), a
    sliding `window` with `sinks`; and in forward a `cache` (one LayerCache of a KVCache) that keeps
    the keys and values of earlier calls. With the defaults it is lesson 8's module.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        num_kv_heads: int | None = None,
        rotary_base: float | None = None,
        rotary_layout: str = "interleaved",
        window: int | None = None,
        sinks: int = 0,
    ) -> None:
        super().__init__()
        d_in, d_out, context_length, num_heads = check_sizes(
            d_in=d_in, d_out=d_out, context_length=context_length, num_heads=num_heads
        )
        check_heads(d_out, num_heads)
        qkv_bias = check_flag(qkv_bias, "qkv_bias")
        self.d_in = d_in
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.dropout = check_rate(dropout)  # a rate, not an nn.Dropout: SDPA applies it to the weights itself
        self.num_kv_heads = num_heads if num_kv_heads is None else check_kv_heads(num_heads, num_kv_heads)
        if rotary_base is not None:  # pairs of features per head, a base above 1, a known layout
            rotary_base, rotary_layout = check_rotary_heads(d_out, num_heads, rotary_base, rotary_layout)
        self.rotary_base, self.rotary_layout = rotary_base, rotary_layout
        self.window, self.sinks = check_window(window, sinks)
        # rows: the queries of every head, then the keys and the values of the key/value heads (3 * d_out without groups)
        self.qkv = nn.Linear(d_in, (num_heads + 2 * self.num_kv_heads) * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    @classmethod
    def from_multihead(cls, mha: nn.Module, *, window: int | None = None, sinks: int = 0) -> FusedMultiHeadAttention:
        """The fused module with the weights, train/eval mode and requires_grad of a MultiHeadAttention.

        Works for the package's class and the book's own (the same parameter names); in eval mode,
        or with dropout 0, both give the same outputs. The fused module is always causal, so a source
        whose mask is not the causal one (lesson 10's reverse model clears it) is refused. Rotary
        positions come along; `window` and `sinks` add a sliding window (lesson 12).
        """
        parts = ("W_query", "W_key", "W_value", "out_proj")
        if not all(isinstance(getattr(mha, name, None), nn.Linear) for name in parts) or not hasattr(mha, "num_heads"):
            raise TypeError(
                bilingual(
                    f"from_multihead copies a MultiHeadAttention (W_query, W_key, W_value, out_proj, num_heads), "
                    f"got {type(mha).__name__}; build FusedMultiHeadAttention(...) directly for anything else.",
                    f"from_multihead 只能复制 MultiHeadAttention（含 W_query、W_key、W_value、out_proj、num_heads），"
                    f"你传入的是 {type(mha).__name__}；其他模块请直接创建 FusedMultiHeadAttention(...)。",
                )
            )
        _check_causal_source(mha)
        projections = [getattr(mha, name) for name in parts[:3]]
        has_bias = mha.W_query.bias is not None
        context_length = mha.mask.shape[-1] if hasattr(mha, "mask") else mha.context_length
        fused = cls(mha.W_query.in_features, mha.W_query.out_features, context_length,
                    getattr(mha.dropout, "p", mha.dropout), mha.num_heads, has_bias,
                    rotary_base=getattr(mha, "rotary_base", None),
                    rotary_layout=getattr(mha, "rotary_layout", "interleaved"), window=window, sinks=sinks)
        fused = fused.to(mha.out_proj.weight)  # same device and dtype first: float64 weights are copied exactly
        with torch.no_grad():
            fused.qkv.weight.copy_(torch.cat([p.weight for p in projections]))  # (3 * d_out, d_in)
            if has_bias:
                fused.qkv.bias.copy_(torch.cat([p.bias for p in projections]))
        fused.out_proj.load_state_dict(mha.out_proj.state_dict())
        for fused_param, source in ((fused.qkv.weight, [p.weight for p in projections]),
                                    (fused.qkv.bias, [p.bias for p in projections]),
                                    (fused.out_proj.weight, [mha.out_proj.weight]),
                                    (fused.out_proj.bias, [mha.out_proj.bias])):
            if fused_param is not None:
                fused_param.requires_grad_(all(p.requires_grad for p in source))
        return fused.to(mha.out_proj.weight).train(mha.training)  # same device, dtype and mode

    def _check_settings(self) -> None:
        check_settings(self, num_heads=self.num_heads * self.head_dim == self.d_out == self.out_proj.in_features,
                       d_in=self.qkv.in_features == self.d_in)

    def project_heads(self, x: torch.Tensor, start: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries (b, h, T, head_dim), keys and values (b, kv_heads, T, head_dim) from one matrix multiply.

        With rotary positions, queries and keys are turned for positions start, start + 1, ...
        """
        self._check_settings()
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in, like=self.qkv.weight)
        return self._project_heads(x, check_size(start, "start", minimum=0))

    def _project_heads(self, x: torch.Tensor, start: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """project_heads without the input check, for forward, which has checked x already."""
        b, num_tokens, _ = x.shape
        qkv = self.qkv(x)  # (b, T, (h + 2 * kv_heads) * head_dim)
        # torch's fused kernels may turn a NaN projection into zeros instead of passing it on, so NaN weights are
        # looked for here; a NaN or inf weight spoils that column for every token, so the first token is enough
        check_result(self, qkv[:, :1], x)
        sizes = [self.num_heads * self.head_dim] + [self.num_kv_heads * self.head_dim] * 2
        heads = (self.num_heads, self.num_kv_heads, self.num_kv_heads)
        queries, keys, values = (
            part.view(b, num_tokens, n, self.head_dim).transpose(1, 2) for part, n in zip(qkv.split(sizes, dim=-1), heads)
        )  # (b, h, T, head_dim), then (b, kv_heads, T, head_dim) twice
        if self.rotary_base is not None:  # queries and keys turned at their positions; values never
            queries = apply_rotary(queries, start, self.rotary_base, self.rotary_layout)
            keys = apply_rotary(keys, start, self.rotary_base, self.rotary_layout)
        return queries, keys, values

    def combine_heads(self, context: torch.Tensor) -> torch.Tensor:
        """Put the heads' context vectors side by side and mix them with out_proj."""
        self._check_settings()
        check_tensor(context, "context", ranks=(4,), last_dim=self.head_dim, like=self.out_proj.weight,
                     last_name="head_dim")
        if context.shape[1] != self.num_heads:
            raise ValueError(
                bilingual(
                    f"`context` must have shape (batch, num_heads={self.num_heads}, num_tokens, head_dim), "
                    f"got {tuple(context.shape)}; its second dimension counts the heads.",
                    f"`context` 的形状应为 (batch, num_heads={self.num_heads}, num_tokens, head_dim)，"
                    f"实际是 {tuple(context.shape)}；第二维是头的个数。",
                )
            )
        return check_result(self, self._combine_heads(context), context, "context")

    def _combine_heads(self, context: torch.Tensor) -> torch.Tensor:
        """combine_heads without its checks, for forward."""
        b, _, num_tokens, _ = context.shape
        return self.out_proj(context.transpose(1, 2).reshape(b, num_tokens, self.d_out))  # (b, T, d_out)

    def forward(
        self, x: torch.Tensor, padding_mask: torch.Tensor | None = None, *, cache: LayerCache | None = None
    ) -> torch.Tensor:
        """Causal attention over x (b, T, d_in); `padding_mask` (b, T) is True at padding tokens to ignore.

        The padding mask follows the package's convention (True = hide). SDPA's boolean attn_mask
        means the opposite (True = may attend), so we merge padding and causal masks in our
        convention and invert once. A query that can see no key at all (left padding) gets a zero
        context vector, in eager mode and under torch.compile alike.

        With a `cache` (lesson 12), x holds only the new tokens: they sit at positions cache.position,
        cache.position + 1, ..., their keys and values join the cache, and their queries attend to
        everything the cache keeps for them.
        """
        self._check_settings()
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in, like=self.qkv.weight)
        b, num_tokens, _ = x.shape
        start = 0 if cache is None else check_layer_cache(cache, padding_mask)  # the position of x's first token
        check_length(start + num_tokens, self.context_length)
        dropout_p = check_rate(self.dropout) if self.training else 0.0
        queries, keys, values = self._project_heads(x, start)  # (b, h, T, head_dim), (b, kv_heads, T, head_dim)
        positions = key_positions = torch.arange(start, start + num_tokens, device=x.device)
        if cache is not None:
            keys, values, key_positions = cache.update(keys, values, self.window, self.sinks)
        # SDPA's causal flag only where queries and keys start together and nothing more is hidden;
        # a single new token sees everything a cache returns, so it needs no mask at all
        causal = start == 0 and self.window is None
        hidden = None if causal or num_tokens == 1 else hidden_by_window(positions, key_positions, self.window, self.sinks)
        attn_mask = sees_nothing = None
        if padding_mask is not None:
            hidden_keys = check_padding_mask(padding_mask, b, num_tokens, x.device)[:, None, None, :]  # (b, 1, 1, T)
            hidden = (future(num_tokens, x.device) if hidden is None else hidden) | hidden_keys  # (b, 1, T, T)
            # A query that sees no key (left padding) may look everywhere, so no kernel ever meets a row
            # of -inf; its context is set to zero below, the package's policy for such rows.
            sees_nothing = hidden.all(dim=-1, keepdim=True)  # (b, 1, T, 1)
            attn_mask = ~hidden | sees_nothing  # SDPA's convention: True = may attend
        elif hidden is not None:
            attn_mask = ~hidden
        context = nn.functional.scaled_dot_product_attention(
            queries,
            keys,
            values,
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=causal and attn_mask is None,  # the flag lets the kernel skip the future instead of masking it
            enable_gqa=self.num_kv_heads != self.num_heads,  # query heads share key/value heads in groups
        )  # (b, h, T, head_dim)
        if sees_nothing is not None:
            context = context.masked_fill(sees_nothing, 0.0)
        return check_result(self, self._combine_heads(context), x)  # NaN from finite x: an overflow, or NaN weights


def _check_causal_source(mha: nn.Module) -> None:
    """Refuse a source whose mask hides something other than the future: the fused module is always causal."""
    mask = getattr(mha, "mask", None)
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or cannot_read(mask):
        return
    if not torch.equal(mask.bool(), future(mask.shape[-1], mask.device)):
        raise ValueError(
            bilingual(
                f"from_multihead copies causal attention, but this {type(mha).__name__}'s mask is not the causal "
                "mask (a model built with causal=False clears it); FusedMultiHeadAttention always hides the "
                "future, so it would compute something else.",
                f"from_multihead 只复制因果注意力，而这个 {type(mha).__name__} 的掩码不是因果掩码"
                "（用 causal=False 创建的模型会把它清空）；FusedMultiHeadAttention 总是遮住未来，算出的结果会不一样。",
            )
        )
