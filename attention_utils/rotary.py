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

Two ways to run a trained model on longer texts than it saw (lesson 11 measures both):
- position interpolation (Chen et al. 2023): every position is divided by a factor s, so a text
  s times longer meets only the angles training showed; `apply_rotary(..., interpolation=s)`;
- NTK-aware scaling: a larger base, `ntk_base`, slows the slowest pair by exactly s and leaves
  pair 0 as it was.
`extended_context` applies either to every rotary layer of a model, inside a `with` block.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from .arguments import shown
from .checks import bilingual, cannot_read, check_finite, check_size, check_tensor

LAYOUTS = ("interleaved", "halves")
EXTENSIONS = ("interpolation", "ntk")  # position interpolation, NTK-aware scaling of the base


def _check_head_dim(head_dim: object) -> int:
    """A head size must be an even integer: its features form pairs."""
    head_dim = check_size(head_dim, "head_dim", minimum=2, maximum=1 << 20)  # tables of a billion angles fill memory
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


def _check_factor(factor: object, name: str = "factor") -> float:
    """How many times longer the texts are than in training: a finite real number of at least 1."""
    if isinstance(factor, torch.Tensor) and factor.dim() == 0 and not (factor.is_complex() or factor.dtype == torch.bool):
        factor = factor.item()
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
        raise TypeError(
            bilingual(
                f"{name} must be a real number of at least 1 (4 for texts 4 times the training length), got "
                f"{shown(factor)}.",
                f"{name} 必须是不小于 1 的实数（文本长度是训练长度的 4 倍时取 4），实际是 {shown(factor, True)}。",
            )
        )
    if not 1.0 <= float(factor) < float("inf"):
        raise ValueError(
            bilingual(
                f"{name} must be a finite number of at least 1 (1 changes nothing; 4 for texts 4 times the training "
                f"length), got {factor!r}.",
                f"{name} 必须是不小于 1 的有限数（1 表示不做任何改变；文本长度是训练长度的 4 倍时取 4），实际是 {factor!r}。",
            )
        )
    return float(factor)


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
    if isinstance(positions, torch.Tensor) and positions.dim():  # a 0-d tensor is a start, as an int
        wrong_kind = positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool
        if wrong_kind or positions.shape != (num_tokens,):
            raise (TypeError if wrong_kind else ValueError)(
                bilingual(
                    f"positions must be an int (the first position) or an integer tensor of shape ({num_tokens},), "
                    f"got a {positions.dtype} tensor of shape {tuple(positions.shape)}.",
                    f"positions 应为整数（第一个位置），或形状为 ({num_tokens},) 的整数张量，"
                    f"实际是形状为 {tuple(positions.shape)} 的 {positions.dtype} 张量。",
                )
            )
        if positions.numel() and not cannot_read(positions) and positions.min() < 0:
            raise ValueError(bilingual("positions must be at least 0.", "positions 不能小于 0。"))
        return positions.long()
    start = check_size(positions, "positions", minimum=0, maximum=2**53)  # float64 holds every whole number up to here
    return torch.arange(start, start + num_tokens)


def rotary_frequencies(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """(head_dim / 2,) angles per position step, one per pair: base ** (-2i / head_dim), fastest first."""
    head_dim, base = _check_head_dim(head_dim), _check_base(base)
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


def ntk_base(base: float, head_dim: int, factor: float) -> float:
    """The base of NTK-aware scaling: base * factor ** (head_dim / (head_dim - 2)).

    Pair i turns base ** (-2i / head_dim) per position. With this base the slowest pair,
    i = head_dim/2 - 1, turns exactly `factor` times slower, so a text `factor` times longer turns
    it no further than training did; pair 0 keeps its speed of 1 radian per position.
    """
    head_dim, base, factor = _check_head_dim(head_dim), _check_base(base), _check_factor(factor)
    if head_dim == 2:
        raise ValueError(
            bilingual(
                "ntk_base needs head_dim of 4 or more: with one pair, the slowest pair is pair 0, whose speed no base changes.",
                "ntk_base 要求 head_dim 至少为 4：只有一个特征对时，最慢的就是特征对 0，而任何旋转底数都改变不了它的转速。",
            )
        )
    try:
        scaled = base * factor ** (head_dim / (head_dim - 2))
    except OverflowError:
        scaled = math.inf
    if not math.isfinite(scaled):
        raise ValueError(bilingual(
            f"ntk_base({base}, {head_dim}, factor={factor}) is beyond a float's range: choose a smaller factor.",
            f"ntk_base({base}, {head_dim}, factor={factor}) 超出了浮点数的范围：请把 factor 设小一些。"))
    return scaled


def rotary_cos_sin(
    positions: torch.Tensor, head_dim: int, base: float = 10000.0, interpolation: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every (position, pair) angle, each (..., T, head_dim / 2) for positions (..., T), in float64.

    With position interpolation each position counts as position / interpolation.
    """
    interpolation = _check_factor(interpolation, "interpolation")
    if not isinstance(positions, torch.Tensor) or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(bilingual(f"positions must be a tensor of positions such as torch.arange(T), got {shown(positions)}.",
                                  f"positions 必须是由位置组成的张量，例如 torch.arange(T)，实际是 {shown(positions, True)}。"))
    check_finite(positions, "positions")
    frequencies = rotary_frequencies(head_dim, base).to(positions.device)
    angles = positions.to(torch.float64)[..., None] / interpolation * frequencies  # (..., T, head_dim / 2)
    return torch.cos(angles), torch.sin(angles)


def apply_rotary(
    x: torch.Tensor,
    positions: int | torch.Tensor = 0,
    base: float = 10000.0,
    layout: str = "interleaved",
    *,
    interpolation: float = 1.0,
) -> torch.Tensor:
    """x (..., T, head_dim) with each feature pair turned by its angle at positions (an int start, or T positions).

    Queries and keys get it after projection, per head; values never do. `interpolation` s > 1 turns
    each token as if it sat at position / s (position interpolation, Chen et al. 2023).
    """
    check_tensor(x, "x", ranks=(2, 3, 4))
    num_tokens, head_dim = x.shape[-2], _check_head_dim(x.shape[-1])
    _check_layout(layout)
    positions = _positions(positions, num_tokens).to(x.device)
    cos, sin = (t.to(x.dtype) for t in rotary_cos_sin(positions, head_dim, base, interpolation))
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


@contextmanager
def extended_context(model: nn.Module, method: str, factor: float) -> Iterator[nn.Module]:
    """Inside the `with` block every rotary layer of `model` reads texts `factor` times longer than in training.

    method "interpolation": positions are divided by factor (Chen et al. 2023, position interpolation);
    method "ntk": the base becomes ntk_base(base, head_dim, factor) (NTK-aware scaling). No weight
    changes; on leaving the block every layer has its own base and positions back.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            bilingual(
                f"model must be a torch module with rotary layers, got {type(model).__name__}.",
                f"model 必须是带有旋转位置编码层的 torch 模块，实际是 {type(model).__name__}。",
            )
        )
    if not isinstance(method, str) or method not in EXTENSIONS:
        raise (ValueError if isinstance(method, str) else TypeError)(
            bilingual(
                f"method must be 'interpolation' (position interpolation) or 'ntk' (NTK-aware scaling), got {shown(method)}.",
                f"method 只能是 'interpolation'（位置插值）或 'ntk'（NTK 感知缩放），实际是 {shown(method, True)}。",
            )
        )
    factor = _check_factor(factor)
    layers = [m for m in model.modules() if getattr(m, "rotary_base", None) is not None]
    if not layers or not all(hasattr(m, "rotary_interpolation") and hasattr(m, "head_dim") for m in layers):
        raise ValueError(
            bilingual(
                "model has no rotary layer this can scale: build it with positions='rotary' (TinyAttentionModel) or "
                "rotary_base=10000.0 (MultiHeadAttention).",
                "model 里没有可以缩放的旋转位置编码层：请用 positions='rotary'（TinyAttentionModel）或 "
                "rotary_base=10000.0（MultiHeadAttention）创建它。",
            )
        )
    saved = [(m.rotary_base, m.rotary_interpolation) for m in layers]
    try:
        for m in layers:
            if method == "ntk":
                m.rotary_base = ntk_base(m.rotary_base, m.head_dim, factor)
            else:
                m.rotary_interpolation = factor
        yield model
    finally:
        for m, (base, interpolation) in zip(layers, saved):
            m.rotary_base, m.rotary_interpolation = base, interpolation
