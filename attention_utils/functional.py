"""Pure functions for attention: scores, normalizations, masks and scaled dot-product attention.

Each function does one step of the computation the lessons build by hand, so a lesson can
write the idea inline first and then show that the package gives the same numbers.
"""

from __future__ import annotations

import math

import torch

from .checks import bilingual, check_dropout, check_mask, check_tensor


def attention_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key: (..., T_q, d) x (..., T_k, d) -> (..., T_q, T_k)."""
    check_tensor(queries, "queries", ranks=(1, 2, 3, 4))
    check_tensor(keys, "keys", ranks=(1, 2, 3, 4))
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            bilingual(
                f"queries and keys must have the same last dimension, got {queries.shape[-1]} and "
                f"{keys.shape[-1]}; project both with matrices of the same d_out.",
                f"queries 与 keys 的最后一维必须相同，实际是 {queries.shape[-1]} 和 {keys.shape[-1]}；"
                f"请用输出维度 d_out 相同的矩阵来投影它们。",
            )
        )
    if keys.dim() == 1:
        return queries @ keys
    return queries @ keys.transpose(-2, -1)


def sum_normalize(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Divide by the sum so the values add up to 1; breaks with negative scores or a zero sum."""
    return scores / scores.sum(dim=dim, keepdim=True)


def naive_softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / sum(exp(x)) exactly as written on paper; overflows to inf/nan for scores above ~88."""
    exps = torch.exp(scores)
    return exps / exps.sum(dim=dim, keepdim=True)


def stable_softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax after subtracting the row maximum: same result, but exp never sees a large number."""
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)


def causal_mask(num_tokens: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (num_tokens, num_tokens) mask, True above the diagonal: the future a token must not see."""
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(diagonal=1)


def scaled_dot_product_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, returning (context vectors, attention weights).

    `mask` is boolean with True where a query must NOT look (the book's convention; note that
    torch's own SDPA uses the opposite meaning for boolean masks). Dropout is applied to the
    weights only when `training` is True.
    """
    check_dropout(dropout_p)
    scores = attention_scores(queries, keys)
    if mask is not None:
        scores = scores.masked_fill(check_mask(mask, scores.shape), float("-inf"))
    weights = torch.softmax(scores / math.sqrt(keys.shape[-1]), dim=-1)
    weights = torch.nn.functional.dropout(weights, p=dropout_p, training=training)
    return weights @ values, weights
