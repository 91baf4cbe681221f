"""Grouped-query and multi-query attention: groups of query heads share one key/value head, so the KV cache shrinks.

With h query heads and g key/value heads (g divides h), query head i uses key/value head
i // (h / g): heads 0 .. h/g - 1 share head 0, and so on (Ainslie et al., 2023, "GQA").
g = h is ordinary multi-head attention, g = 1 multi-query attention (Shazeer, 2019).
"""

from __future__ import annotations

import torch
from torch import nn

from ..checks import bilingual, check_size, check_tensor
from ..modules import MultiHeadAttention


def check_kv_heads(num_heads: int, num_kv_heads: object) -> int:
    """num_kv_heads must be an integer >= 1 that divides num_heads, so the query heads form equal groups."""
    num_kv_heads = check_size(num_kv_heads, "num_kv_heads")
    if num_heads % num_kv_heads:
        divisors = [g for g in range(1, num_heads + 1) if num_heads % g == 0]
        raise ValueError(
            bilingual(
                f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}, so each key/value head serves the "
                f"same number of query heads; choose one of {divisors}.",
                f"num_kv_heads={num_kv_heads} 必须能整除 num_heads={num_heads}，这样每个键值头服务的查询头一样多；"
                f"请从 {divisors} 中选一个。",
            )
        )
    return num_kv_heads


def repeat_kv_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Keys or values (b, g, T, head_dim) with each head repeated h/g times next to itself: (b, h, T, head_dim).

    What scaled_dot_product_attention(..., enable_gqa=True) does without the copies; written out
    for reading and for the attention weights of a grouped layer.
    """
    check_tensor(x, "x", ranks=(4,))
    num_heads = check_size(num_heads, "num_heads")
    groups = num_heads // check_kv_heads(num_heads, x.shape[1])
    return x.repeat_interleave(groups, dim=1)  # head order 0, 0, ..., 1, 1, ...: query head i reads i // groups


class GroupedQueryAttention(MultiHeadAttention):
    """The book's multi-head attention with `num_kv_heads` key/value heads, each shared by a group of query heads.

    W_key and W_value make num_kv_heads * head_dim numbers per token: what a cache would keep, instead
    of num_heads * head_dim. Everything else is MultiHeadAttention's (mask, rotary, returned weights),
    so lesson 15 can train it inside the tiny model of lesson 10. num_kv_heads = num_heads is MHA.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 num_kv_heads: int, qkv_bias: bool = False, *, rotary_base: float | None = None) -> None:
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias, rotary_base=rotary_base)
        self.num_kv_heads = check_kv_heads(self.num_heads, num_kv_heads)
        self.W_key = nn.Linear(self.d_in, self.num_kv_heads * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(self.d_in, self.num_kv_heads * self.head_dim, bias=qkv_bias)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(b, T, heads * head_dim) -> (b, num_heads, T, head_dim): keys and values copied to every head of their group."""
        b, num_tokens, width = x.shape
        heads = x.view(b, num_tokens, width // self.head_dim, self.head_dim).transpose(1, 2)
        return heads.repeat_interleave(self.num_heads // heads.shape[1], dim=1)  # queries: 1 copy; keys: h / g copies
