"""Grouped-query and multi-query attention: groups of query heads share one key/value head, so the KV cache shrinks.

With h query heads and g key/value heads (g divides h), query head i uses key/value head
i // (h / g): heads 0 .. h/g - 1 share head 0, and so on (Ainslie et al., 2023, "GQA").
g = h is ordinary multi-head attention, g = 1 multi-query attention (Shazeer, 2019).
"""

from __future__ import annotations

import torch

from ..checks import bilingual, check_size, check_tensor


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
