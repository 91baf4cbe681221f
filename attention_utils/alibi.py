"""ALiBi (Press et al. 2022): no position vectors, but a penalty on each score that grows with distance.

The paper is "Train Short, Test Long". Head h subtracts slope_h * |m - n| from the score of query m
and key n. The penalty depends only on the offset, as rotary positions do, but it only ever grows
with distance: a far key can never look like a near one, at any length. Lesson 11 measures it beside the other kinds of positions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .arguments import shown
from .checks import bilingual, cannot_read, check_flag, check_length, check_rate, check_size, check_tensor
from .devices import check_fits
from .modules import MultiHeadAttention
from .overflow import check_result


def alibi_slopes(num_heads: int) -> list[float]:
    """The paper's slopes: a geometric sequence that starts at 2 ** (-8 / n) with that same ratio (n a power of 2).

    8 heads get 1/2, 1/4, ..., 1/256. For other n the paper takes the slopes of the power of 2 just
    below n, then every other slope of twice that many heads.
    """
    num_heads = check_size(num_heads, "num_heads", maximum=1 << 20)  # a list of a billion slopes takes minutes
    below = 2 ** math.floor(math.log2(num_heads))

    def geometric(n: int) -> list[float]:
        return [2 ** (-8 * k / n) for k in range(1, n + 1)]

    return geometric(below) + geometric(2 * below)[0::2][: num_heads - below]


def check_slopes(slopes: object, num_heads: int) -> torch.Tensor:
    """One finite slope of 0 or more per head, as a float tensor (num_heads,)."""
    values = slopes.tolist() if isinstance(slopes, torch.Tensor) and slopes.dim() == 1 else slopes
    if not isinstance(values, Sequence) or isinstance(values, str) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise TypeError(
            bilingual(
                f"slopes must be a list of numbers, one per head, such as alibi_slopes({num_heads}), got {shown(slopes)}.",
                f"slopes 必须是由数组成的列表，每个头一个，例如 alibi_slopes({num_heads})，实际是 {shown(slopes, True)}。",
            )
        )
    if len(values) != num_heads or not all(0 <= v < math.inf for v in values):
        raise ValueError(
            bilingual(
                f"slopes must hold {num_heads} finite numbers of 0 or more (one per head), got {len(values)}: {list(values)}.",
                f"slopes 应包含 {num_heads} 个不小于 0 的有限数（每个头一个），实际有 {len(values)} 个：{list(values)}。",
            )
        )
    return torch.tensor([float(v) for v in values])


def alibi_bias(num_tokens: int, slopes: torch.Tensor) -> torch.Tensor:
    """(heads, T, T): -slope_h * |m - n| for query m and key n; 0 on the diagonal."""
    num_tokens = check_size(num_tokens, "num_tokens", minimum=0)
    check_tensor(slopes, "slopes", ranks=(1,))
    if not cannot_read(slopes) and bool((slopes < 0).any()):
        raise ValueError(bilingual(f"slopes must be at least 0 (a negative slope rewards distant keys), got {shown(slopes)}.",
                                   f"slopes 不能小于 0（负斜率会奖励远处的键），实际是 {shown(slopes, True)}。"))
    # the int64 distances, their copy in the slopes' dtype, and one (T, T) penalty per head
    check_fits(num_tokens, "num_tokens", lambda t: (8 + (len(slopes) + 1) * slopes.element_size()) * t * t, slopes.device)
    positions = torch.arange(num_tokens, device=slopes.device)
    distance = (positions[:, None] - positions[None, :]).abs().to(slopes.dtype)  # (T, T)
    return -slopes[:, None, None] * distance


class ALiBiAttention(MultiHeadAttention):
    """MultiHeadAttention with ALiBi's distance penalty added to every head's scores, and no rotation.

    Same weights, same state_dict keys, as MultiHeadAttention; `slopes` (one per head) defaults to
    alibi_slopes(num_heads). The penalty depends only on offsets, so start_position changes nothing.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False, *, slopes: Sequence[float] | None = None) -> None:
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        slopes = check_slopes(alibi_slopes(self.num_heads) if slopes is None else slopes, self.num_heads)
        self.register_buffer("slopes", slopes, persistent=False)  # fixed, never trained: not part of a checkpoint

    def forward(self, x: torch.Tensor, return_weights: bool = False, *, start_position: int = 0):
        """Context vectors (b, T, d_out); with return_weights, also the weights (b, h, T, T)."""
        return_weights = check_flag(return_weights, "return_weights")
        self._check_settings()
        check_size(start_position, "start_position", minimum=0)
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in, like=self.W_query.weight)
        b, num_tokens, _ = x.shape
        check_length(num_tokens, self.context_length)
        queries, keys, values = (self._split_heads(w(x)) for w in (self.W_query, self.W_key, self.W_value))
        scores = queries @ keys.transpose(-1, -2) / math.sqrt(self.head_dim)  # (b, h, T, T)
        scores = scores + alibi_bias(num_tokens, self.slopes.to(scores.dtype))  # far keys lose more
        scores = scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], float("-inf"))
        weights = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), check_rate(self.dropout.p), self.training)
        context = (weights @ values).transpose(1, 2).reshape(b, num_tokens, self.d_out)
        context = check_result(self, self.out_proj(context), x)
        return (context, weights) if return_weights else context
