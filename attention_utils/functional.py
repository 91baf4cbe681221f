"""Pure functions for attention: scores, normalizations, masks and scaled dot-product attention.

Each function does one step of the computation the lessons build by hand, so a lesson can
write the idea inline first and then show that the package gives the same numbers.
"""

from __future__ import annotations

import math

import torch

from .checks import (
    bilingual,
    cannot_read,
    check_dim,
    check_flag,
    check_mask,
    check_rate,
    check_same_dtype,
    check_size,
    check_tensor,
)
from .devices import check_device, check_fits
from .overflow import check_no_overflow

RANKS = (1, 2, 3, 4)


def _batch_shape(a: torch.Size, b: torch.Size, names: tuple[str, str]) -> torch.Size:
    """The leading (batch, head) sizes of two operands broadcast together; ValueError when they cannot."""
    try:
        return torch.broadcast_shapes(a[:-2], b[:-2])
    except RuntimeError:
        raise ValueError(
            bilingual(
                f"The leading dimensions of `{names[0]}` {tuple(a)} and `{names[1]}` {tuple(b)} "
                "do not match; give both the same batch (and head) sizes.",
                f"`{names[0]}` {tuple(a)} 和 `{names[1]}` {tuple(b)} 的前几维（批次、头）不一致；"
                "请让两者的批大小（和头数）相同。",
            )
        ) from None


def _scores_shape(queries: torch.Tensor, keys: torch.Tensor) -> torch.Size:
    """Check queries and keys (floating, finite, one dtype and device, one width) and return the scores' shape."""
    check_tensor(queries, "queries", ranks=RANKS)
    check_tensor(keys, "keys", ranks=RANKS)
    check_same_dtype({"queries": queries, "keys": keys})
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            bilingual(
                f"queries and keys must have the same last dimension, got {queries.shape[-1]} and "
                f"{keys.shape[-1]}; project both with matrices of the same d_out.",
                f"queries 与 keys 的最后一维必须相同，实际是 {queries.shape[-1]} 和 {keys.shape[-1]}；"
                f"请用输出维数 d_out 相同的矩阵来投影它们。",
            )
        )
    if keys.dim() == 1:
        return queries.shape[:-1]
    if queries.dim() == 1:
        return torch.Size((*keys.shape[:-2], keys.shape[-2]))
    return torch.Size((*_batch_shape(queries.shape, keys.shape, ("queries", "keys")), queries.shape[-2], keys.shape[-2]))


def attention_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key: (..., T_q, d) x (..., T_k, d) -> (..., T_q, T_k)."""
    _scores_shape(queries, keys)
    scores = queries @ keys if keys.dim() == 1 else queries @ keys.transpose(-2, -1)
    check_no_overflow(scores, names=("queries", "keys"))  # finite inputs, so inf here is an overflow
    return scores


def sum_normalize(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Divide by the sum so the values add up to 1; lesson 3 shows it failing, on purpose, for
    negative scores or a sum near zero (a sum of 0 gives inf or NaN, as the formula says)."""
    check_tensor(scores, "scores", ranks=RANKS)
    return scores / scores.sum(dim=check_dim(dim, scores), keepdim=True)


def naive_softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / sum(exp(x)) exactly as written on paper; lesson 3 shows it overflowing, on purpose,
    to inf/NaN for scores above about 88 (and a row that is all -inf gives NaN): the one place
    where the package returns NaN, because showing it is the point."""
    check_tensor(scores, "scores", ranks=RANKS, allow_neg_inf=True)
    dim = check_dim(dim, scores)
    exps = torch.exp(scores)
    return exps / exps.sum(dim=dim, keepdim=True)


def stable_softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax after subtracting the row maximum: same result, but exp never sees a large number.

    -inf marks a hidden position; a row that is -inf everywhere gets zeros (the package's policy
    for a query that may look at no key).
    """
    check_tensor(scores, "scores", ranks=RANKS, allow_neg_inf=True)
    dim = check_dim(dim, scores)
    if scores.shape[dim] == 0:
        return scores.clone()
    row_max = scores.amax(dim=dim, keepdim=True)
    exps = torch.exp(scores - row_max.masked_fill(row_max == float("-inf"), 0.0))
    sums = exps.sum(dim=dim, keepdim=True)
    return exps / sums.masked_fill(sums == 0, 1.0)


def causal_mask(num_tokens: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (num_tokens, num_tokens) mask, True above the diagonal: the future a token must not see."""
    num_tokens = check_size(num_tokens, "num_tokens", minimum=0)
    device = check_device(device)
    check_fits(num_tokens, "num_tokens", lambda n: n * n, device)  # one byte per entry
    return future(num_tokens, device)


def future(num_tokens: int, device: torch.device | None = None) -> torch.Tensor:
    """causal_mask without its checks, for modules that build it from sizes they have checked."""
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(diagonal=1)


def attend(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    hidden: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The computation of scaled_dot_product_attention without its checks, for modules whose inputs are checked.

    `hidden` is a boolean mask, True = hide. Head size 0 gives scores of 0 and so uniform weights,
    as in torch's SDPA (the scale 1/sqrt(0) is never used).
    """
    scores = queries @ keys.transpose(-2, -1)
    if keys.shape[-1]:
        scores = scores / math.sqrt(keys.shape[-1])
    if hidden is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        nothing_visible = hidden.all(dim=-1, keepdim=True)  # mask-sized: cheap to look at
        if cannot_read(nothing_visible) or nothing_visible.any():
            # such a row may look everywhere, so softmax stays finite; its weights are then set to 0
            weights = torch.softmax(scores.masked_fill(hidden & ~nothing_visible, float("-inf")), dim=-1)
            weights = weights.masked_fill(nothing_visible, 0.0)
        else:
            weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    weights = torch.nn.functional.dropout(weights, p=dropout_p, training=training)
    return weights @ values, weights


def scaled_dot_product_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, returning (context vectors, attention weights).

    `mask` is boolean with True where a query must NOT look (the book's convention; torch's own
    SDPA uses the opposite meaning for boolean masks). A query whose whole row is hidden gets zero
    weights and a zero context vector, as in torch's SDPA, so no NaN reaches the output or the
    gradients. Dropout is applied to the weights only when `training` is True; the weights returned
    are the ones used, so with dropout their rows no longer sum to 1.
    """
    dropout_p = check_rate(dropout_p, "dropout_p")
    training = check_flag(training, "training")
    scores_shape = _scores_shape(queries, keys)
    check_tensor(values, "values", ranks=(2, 3, 4))
    check_same_dtype({"queries": queries, "values": values})
    if keys.dim() == 1 or values.shape[-2] != keys.shape[-2]:
        raise ValueError(
            bilingual(
                f"`values` must have one row per key: keys {tuple(keys.shape)} and values {tuple(values.shape)} "
                "differ in the number of tokens (the second-to-last dimension).",
                f"`values` 必须每个键对应一行：keys {tuple(keys.shape)} 和 values {tuple(values.shape)} "
                "的词元数（倒数第二维）不同。",
            )
        )
    if len(scores_shape) > 1:
        _batch_shape_fits(scores_shape, values.shape)
    hidden = None if mask is None else check_mask(mask, scores_shape, device=queries.device)
    context, weights = attend(queries, keys, values, hidden, dropout_p, training)
    check_no_overflow(context)  # inputs are finite, so NaN or inf here means the scores overflowed
    return context, weights


def _batch_shape_fits(scores: torch.Size, values: torch.Size) -> None:
    """Check that values' batch dimensions broadcast to the scores' without enlarging them."""
    if _batch_shape(scores, values, ("scores", "values")) != scores[:-2]:
        raise ValueError(
            bilingual(
                f"`values` {tuple(values)} has more batch dimensions than the queries and keys "
                f"(scores {tuple(scores)}); give values the same leading dimensions as keys.",
                f"`values` {tuple(values)} 的批次维度比查询和键（分数 {tuple(scores)}）多；"
                "请让 values 的前几维与 keys 相同。",
            )
        )
