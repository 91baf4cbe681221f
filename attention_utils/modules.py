"""The attention modules of the series, from a single self-attention head to multi-head attention.

Constructor signatures, parameter names (`W_query`, `W_key`, `W_value`, `out_proj`) and the
order in which weights are created follow the book's chapter 3, so the same seed gives the
same numbers and a `state_dict` moves between the book's classes and these.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import check_dropout, check_heads, check_length, check_positive, check_tensor
from .functional import causal_mask, scaled_dot_product_attention


class SelfAttentionV1(nn.Module):
    """Self-attention with raw weight matrices: x @ W, weights drawn with torch.rand as in the book."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.d_in = d_in
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor(x, "x", ranks=(2, 3), last_dim=self.d_in)
        queries = x @ self.W_query  # (..., T, d_out)
        keys = x @ self.W_key
        values = x @ self.W_value
        context, _ = scaled_dot_product_attention(queries, keys, values)
        return context


class SelfAttentionV2(nn.Module):
    """Self-attention with nn.Linear layers; nn.Linear stores W transposed and computes x @ W.T (+ b)."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_in = d_in
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor(x, "x", ranks=(2, 3), last_dim=self.d_in)
        context, _ = scaled_dot_product_attention(self.W_query(x), self.W_key(x), self.W_value(x))
        return context


class CausalAttention(nn.Module):
    """One causal head on batches: scores above the diagonal are hidden, then dropout on the weights."""

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False
    ) -> None:
        super().__init__()
        check_dropout(dropout)
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
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in)
        num_tokens = x.shape[1]
        check_length(num_tokens, self.context_length)
        context, weights = scaled_dot_product_attention(
            self.W_query(x),  # (b, T, d_out)
            self.W_key(x),
            self.W_value(x),
            mask=self.mask.bool()[:num_tokens, :num_tokens],
            dropout_p=self.dropout.p,
            training=self.training,
        )
        return (context, weights) if return_weights else context


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
        check_positive(num_heads, "num_heads")
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([head(x) for head in self.heads], dim=-1)  # (b, T, num_heads * d_out)


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
    ) -> None:
        super().__init__()
        check_heads(d_out, num_heads)
        check_dropout(dropout)
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
        b, num_tokens, _ = x.shape
        return x.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in)
        b, num_tokens, _ = x.shape
        check_length(num_tokens, self.context_length)
        queries = self.split_heads(self.W_query(x))  # (b, h, T, head_dim)
        keys = self.split_heads(self.W_key(x))
        values = self.split_heads(self.W_value(x))
        context, weights = scaled_dot_product_attention(
            queries,
            keys,
            values,
            mask=self.mask.bool()[:num_tokens, :num_tokens],
            dropout_p=self.dropout.p,
            training=self.training,
        )  # context: (b, h, T, head_dim), weights: (b, h, T, T)
        context = context.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)  # (b, T, d_out)
        context = self.out_proj(context)
        return (context, weights) if return_weights else context
