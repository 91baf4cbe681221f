"""The attention modules of the series, from a single self-attention head to multi-head attention.

Constructor signatures, parameter names (`W_query`, `W_key`, `W_value`, `out_proj`) and the
order in which weights are created follow the book's chapter 3, so the same seed gives the
same numbers and a `state_dict` moves between the book's classes and these.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import check_dropout, check_heads, check_length, check_mask, check_positive, check_tensor
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


class FusedMultiHeadAttention(nn.Module):
    """Multi-head attention as fast as PyTorch allows: one QKV projection and one fused SDPA call.

    torch's scaled_dot_product_attention never stores the (T, T) attention weights and, told that
    the mask is causal, skips the blocks above the diagonal; the book's version computes every
    score, masks half of them and keeps the whole matrix in memory.
    """

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
        self.dropout = dropout  # a rate, not an nn.Dropout: SDPA applies it to the weights itself
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    @classmethod
    def from_multihead(cls, mha: MultiHeadAttention) -> FusedMultiHeadAttention:
        """Build the fused module with the weights of a book-style MultiHeadAttention (same outputs)."""
        has_bias = mha.W_query.bias is not None
        fused = cls(mha.d_in, mha.d_out, mha.context_length, mha.dropout.p, mha.num_heads, has_bias)
        projections = (mha.W_query, mha.W_key, mha.W_value)
        with torch.no_grad():
            fused.qkv.weight.copy_(torch.cat([p.weight for p in projections]))  # (3 * d_out, d_in)
            if has_bias:
                fused.qkv.bias.copy_(torch.cat([p.bias for p in projections]))
        fused.out_proj.load_state_dict(mha.out_proj.state_dict())
        return fused.to(mha.out_proj.weight)  # same device and dtype as the source

    def project_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values for every head from one matrix multiply instead of three."""
        b, num_tokens, _ = x.shape
        qkv = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim)  # (b, T, 3, h, head_dim)
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4)  # each (b, h, T, head_dim)
        return queries, keys, values

    def combine_heads(self, context: torch.Tensor) -> torch.Tensor:
        """Put the heads' context vectors side by side and mix them with out_proj."""
        b, _, num_tokens, _ = context.shape
        return self.out_proj(context.transpose(1, 2).reshape(b, num_tokens, self.d_out))  # (b, T, d_out)

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Causal attention over x (b, T, d_in); `padding_mask` (b, T) is True at padding tokens to ignore.

        The padding mask follows the package's convention (True = hide). SDPA's boolean attn_mask
        means the opposite (True = may attend), so we merge padding and causal masks in our
        convention and invert once. A query that can see no key at all (left padding) gets zeros.
        """
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in)
        b, num_tokens, _ = x.shape
        check_length(num_tokens, self.context_length)
        attn_mask = None
        if padding_mask is not None:
            check_tensor(padding_mask, "padding_mask", ranks=(2,))
            hidden_keys = padding_mask[:, None, None, :]  # (b, 1, 1, T): the same keys for every head and query
            check_mask(hidden_keys, torch.Size((b, self.num_heads, num_tokens, num_tokens)))
            attn_mask = ~(causal_mask(num_tokens, x.device) | hidden_keys)  # (b, 1, T, T), True = may attend
        queries, keys, values = self.project_heads(x)  # each (b, h, T, head_dim)
        context = nn.functional.scaled_dot_product_attention(
            queries,
            keys,
            values,
            attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=attn_mask is None,  # the flag lets the kernel skip the future instead of masking it
        )  # (b, h, T, head_dim)
        return self.combine_heads(context)
