"""Rotary position embeddings (RoPE): each pair of query/key features is turned by an angle proportional to its position.

Pair i of a head of size d turns by position * base ** (-2i / d): the first pairs spin fast, the
last ones slowly. Because a rotation by angle a followed by the dot product with a vector turned
by angle b only sees b - a, the score between a query at position m and a key at position n
depends on m - n, never on m and n themselves (lesson 11 checks this).

Two layouts pair the features differently:
- "interleaved": pairs (0, 1), (2, 3), ... as in the RoFormer paper and in GGUF / llama.cpp files;
- "halves": pairs (i, i + d/2), as in many PyTorch code bases (Hugging Face's Llama among them).
A checkpoint trained in one layout runs in the other once the rows of W_query and W_key of each
head are permuted with `halves_order` (see `to_halves_layout`).
"""

from __future__ import annotations

import numbers

import torch

from .checks import bilingual, check_size, check_tensor

LAYOUTS = ("interleaved", "halves")


def _check_head_dim(head_dim: object) -> int:
    """A head size must be an even integer: its features form pairs."""
    head_dim = check_size(head_dim, "head_dim", minimum=2)
    if head_dim % 2:
        raise ValueError(
            bilingual(
                f"head_dim must be even for rotary positions (features are turned in pairs), got {head_dim}.",
                f"旋转位置编码要求 head_dim 为偶数（特征两两配对旋转），实际是 {head_dim}。",
            )
        )
    return head_dim


def _check_base(base: object, name: str = "base") -> float:
    """The base of the frequencies: a finite real number greater than 1."""
    if isinstance(base, bool) or not isinstance(base, numbers.Real):
        raise TypeError(
            bilingual(
                f"{name} must be a real number greater than 1 (10000 in the paper), got {base!r} ({type(base).__name__}).",
                f"{name} 必须是大于 1 的实数（论文中为 10000），实际是 {base!r}（{type(base).__name__}）。",
            )
        )
    if not 1.0 < float(base) < float("inf"):
        raise ValueError(
            bilingual(
                f"{name} must be a finite real number greater than 1 (10000 in the paper), got {base!r}.",
                f"{name} 必须是大于 1 的有限实数（论文中为 10000），实际是 {base!r}。",
            )
        )
    return float(base)


def _check_layout(layout: object, name: str = "layout") -> str:
    """One of LAYOUTS: "interleaved" (pairs of neighbours) or "halves" (feature i with i + head_dim/2)."""
    if not isinstance(layout, str):
        raise TypeError(
            bilingual(
                f"{name} must be the string 'interleaved' or 'halves', got {layout!r} ({type(layout).__name__}).",
                f"{name} 必须是字符串 'interleaved' 或 'halves'，实际是 {layout!r}（{type(layout).__name__}）。",
            )
        )
    if layout not in LAYOUTS:
        raise ValueError(
            bilingual(
                f"{name} must be 'interleaved' or 'halves', got {layout!r}.",
                f"{name} 只能是 'interleaved' 或 'halves'，实际是 {layout!r}。",
            )
        )
    return layout


def check_rotary_heads(d_out: int, num_heads: int, base: object, layout: object) -> tuple[float | None, str]:
    """The rotary settings of a multi-head module: each head's d_out / num_heads features must pair up.

    Returns (base, layout) checked, base None for no rotary positions; the messages name the module's
    own arguments (rotary_base, rotary_layout).
    """
    layout = _check_layout(layout, "rotary_layout")
    if base is None:
        return None, layout
    head_dim = d_out // num_heads
    if head_dim % 2:
        raise ValueError(
            bilingual(
                f"Rotary positions turn features in pairs, but d_out={d_out} / num_heads={num_heads} gives {head_dim} "
                f"features per head, an odd number; choose d_out as a multiple of 2 * num_heads = {2 * num_heads}.",
                f"旋转位置编码把特征两两配对旋转，但 d_out={d_out} / num_heads={num_heads} 使每个头有 {head_dim} 个特征，"
                f"是奇数；请把 d_out 设为 2 * num_heads = {2 * num_heads} 的整数倍。",
            )
        )
    return _check_base(base, "rotary_base"), layout


def _positions(positions: object, num_tokens: int) -> torch.Tensor:
    """An int start offset becomes start, start+1, ...; a 1-D integer tensor is taken as it is."""
    if isinstance(positions, torch.Tensor):
        if positions.dtype not in (torch.int64, torch.int32) or positions.shape != (num_tokens,):
            raise ValueError(
                bilingual(
                    f"positions must be an int (the first position) or an integer tensor of shape ({num_tokens},), "
                    f"got a {positions.dtype} tensor of shape {tuple(positions.shape)}.",
                    f"positions 应为整数（第一个位置），或形状为 ({num_tokens},) 的整数张量，"
                    f"实际是形状为 {tuple(positions.shape)} 的 {positions.dtype} 张量。",
                )
            )
        if positions.numel() and positions.min() < 0:
            raise ValueError(bilingual("positions must be at least 0.", "positions 不能小于 0。"))
        return positions
    start = check_size(positions, "positions", minimum=0)
    return torch.arange(start, start + num_tokens)


def rotary_frequencies(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """(head_dim / 2,) angles per position step, one per pair: base ** (-2i / head_dim), fastest first."""
    head_dim, base = _check_head_dim(head_dim), _check_base(base)
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


def rotary_cos_sin(positions: torch.Tensor, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every (position, pair) angle, each (..., T, head_dim / 2) for positions (..., T), in float64."""
    angles = positions.to(torch.float64)[..., None] * rotary_frequencies(head_dim, base)  # (..., T, head_dim / 2)
    return torch.cos(angles), torch.sin(angles)


def apply_rotary(
    x: torch.Tensor, positions: int | torch.Tensor = 0, base: float = 10000.0, layout: str = "interleaved"
) -> torch.Tensor:
    """x (..., T, head_dim) with each feature pair turned by its angle at positions (an int start, or T positions).

    Queries and keys get it after projection, per head; values never do.
    """
    check_tensor(x, "x", ranks=(2, 3, 4))
    num_tokens, head_dim = x.shape[-2], _check_head_dim(x.shape[-1])
    _check_layout(layout)
    cos, sin = (t.to(x.dtype) for t in rotary_cos_sin(_positions(positions, num_tokens).to(x.device), head_dim, base))
    return turn(x, cos, sin, layout)


def turn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "interleaved") -> torch.Tensor:
    """apply_rotary without its checks, with the cos and sin tables (..., T, head_dim / 2) computed once.

    A model turns the queries and keys of every layer by the same angles, so it computes the tables
    once per forward (rotary_cos_sin) and calls this in each layer.
    """
    if layout == "interleaved":
        first, second = x[..., 0::2], x[..., 1::2]  # features 0, 2, 4, ... and their partners 1, 3, 5, ...
        turned = torch.stack((first * cos - second * sin, first * sin + second * cos), dim=-1)
        return turned.flatten(-2)  # back to 0, 1, 2, 3, ...
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]  # feature i pairs with i + head_dim/2
    return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)


def halves_order(head_dim: int) -> torch.Tensor:
    """The permutation that takes interleaved pairs to halves: features 0, 2, 4, ..., then 1, 3, 5, ...

    apply_rotary(x[..., order], layout="halves") == apply_rotary(x, layout="interleaved")[..., order].
    """
    head_dim = _check_head_dim(head_dim)
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


def to_halves_layout(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Rows of a query or key projection (num_heads * head_dim, d_in) reordered, head by head, for the halves layout.

    A checkpoint stored for interleaved pairs gives the same scores in the halves layout after this.
    """
    check_tensor(weight, "weight", ranks=(2,))
    num_heads = check_size(num_heads, "num_heads")
    if weight.shape[0] % num_heads:
        raise ValueError(
            bilingual(
                f"weight has {weight.shape[0]} rows, which do not split into num_heads={num_heads} heads.",
                f"weight 有 {weight.shape[0]} 行，不能平均分给 num_heads={num_heads} 个头。",
            )
        )
    order = halves_order(weight.shape[0] // num_heads)
    return weight.view(num_heads, -1, weight.shape[1])[:, order].reshape(weight.shape)
