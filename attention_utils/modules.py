"""The book's attention modules, from a single self-attention head to multi-head attention (lessons 4-7).

Constructor signatures, parameter names (`W_query`, `W_key`, `W_value`, `out_proj`) and the
order in which weights are created follow the book's chapter 3, so the same seed gives the
same numbers and a `state_dict` moves between the book's classes and these.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import bilingual, check_flag, check_heads, check_length, check_rate, check_size, check_tensor
from .devices import check_fits
from .functional import attend, causal_mask
from .overflow import check_result
from .rotary import apply_rotary, check_rotary_heads

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
        rotary_base, rotary_layout = check_rotary_heads(d_out, num_heads, rotary_base, rotary_layout)
        self.rotary_base, self.rotary_layout = rotary_base, rotary_layout
        self.rotary_interpolation = 1.0  # positions are divided by it (rotary.extended_context, lesson 11)
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
            turn = dict(base=self.rotary_base, layout=self.rotary_layout, interpolation=self.rotary_interpolation)
            queries, keys = apply_rotary(queries, start_position, **turn), apply_rotary(keys, start_position, **turn)
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
