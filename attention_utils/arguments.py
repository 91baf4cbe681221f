"""Checks of plain arguments: whole numbers, sizes, seeds, real numbers, rates, flags and indices.

The rules are part of the package's contract, written out in the docstring of `checks.py`, which
re-exports every function here; this module holds the ones that look at a single Python, numpy
or 0-d torch value rather than at a tensor's contents, and the two-line message they all share.
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np
import torch

from .language import bilingual


def shown(value: object, chinese: bool = False) -> str:
    """A value as one short line for a message: tensors and arrays by shape and dtype, long text cut.

    The English line shows text with ascii(), so a Chinese string passed by mistake stays out of it.
    """
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim > 0:
        if chinese:
            kind = "张量" if isinstance(value, torch.Tensor) else "numpy 数组"
            return f"{value.dtype} {kind}，形状为 {tuple(value.shape)}"
        kind = "tensor" if isinstance(value, torch.Tensor) else "numpy array"
        return f"a {value.dtype} {kind} of shape {tuple(value.shape)}"
    text = " ".join((repr(value) if chinese else ascii(value)).split())
    text = text if len(text) <= 60 else text[:57] + "..."
    if isinstance(value, (str, torch.Tensor, np.ndarray)):
        return text
    return f"{text}（{type(value).__name__}）" if chinese else f"{text} ({type(value).__name__})"


def cannot_read(x: torch.Tensor) -> bool:
    """True where a check must not read values on the host: under torch.compile (it would split the
    graph), on the meta device (no values) and inside torch.vmap (no Python branch on batched values)."""
    if torch.compiler.is_compiling() or x.is_meta:
        return True
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(x):  # vmap, grad and jvp wrap tensors, maybe several times
        if functorch.is_batchedtensor(x):
            return True
        x = functorch.get_unwrapped(x)
    return False


def _whole_number(value: object, name: str, role_en: str = "sizes", role_zh: str = "大小") -> int:
    """A Python, numpy or 0-d torch integer as an int; TypeError for anything else, bools included."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        raise TypeError(
            bilingual(
                f"{name} must be an integer, got {shown(value)}; True and False are not {role_en}.",
                f"{name} 必须是整数，实际是 {shown(value, True)}；True 和 False 不能当作{role_zh}。",
            )
        )
    try:
        return operator.index(value)
    except (TypeError, RuntimeError):  # RuntimeError: a tensor of more than one value, or one on meta
        as_int = f"; write {int(value)}" if isinstance(value, float) and value.is_integer() else ""
        as_int_zh = f"；请写成 {int(value)}" if as_int else ""
        raise TypeError(
            bilingual(
                f"{name} must be an integer, got {shown(value)}{as_int}.",
                f"{name} 必须是整数，实际是 {shown(value, True)}{as_int_zh}。",
            )
        ) from None


def check_size(value: object, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """Check that a size is an integer of at least `minimum` (numpy and 0-d torch integers count).

    `maximum` bounds sizes that cost time rather than memory (steps, layers, heads built one by one),
    so that a slip of the finger gets an answer instead of a notebook that never finishes.
    """
    number = _whole_number(value, name)
    if number < minimum:
        at_least_zh = "正整数" if minimum == 1 else f"不小于 {minimum} 的整数"
        raise ValueError(
            bilingual(
                f"{name} must be an integer of at least {minimum}, got {number}.",
                f"{name} 必须是{at_least_zh}，实际是 {number}。",
            )
        )
    if maximum is not None and number > maximum:
        raise ValueError(
            bilingual(
                f"{name} must be at most {maximum:,} here, got {number:,}; more would take hours on a laptop.",
                f"{name} 在这里不能超过 {maximum:,}，实际是 {number:,}；再多在笔记本电脑上要算好几个小时。",
            )
        )
    return number


LARGEST_SEED = 2**64 - 1  # torch.manual_seed takes at most this


def check_seed(seed: object, name: str = "seed") -> int:
    """Check that a seed is a whole number from 0 to 2**64 - 1, the range torch.manual_seed takes."""
    seed = check_size(seed, name, minimum=0)
    if seed > LARGEST_SEED:
        raise ValueError(
            bilingual(
                f"{name} must be at most 2**64 - 1 = {LARGEST_SEED}, got {seed}; any smaller whole number will do.",
                f"{name} 不能超过 2**64 - 1 = {LARGEST_SEED}，实际是 {seed}；换一个更小的整数即可。",
            )
        )
    return seed


def check_real(value: object, name: str, example: str, positive: bool = False) -> float:
    """Check that `value` is a finite real number (numpy and 0-d torch numbers count), > 0 with `positive`."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype != torch.bool and not value.is_complex():
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(
            bilingual(
                f"{name} must be a number, got {shown(value)}; for example {name}={example}.",
                f"{name} 必须是一个数，实际是 {shown(value, True)}；例如 {name}={example}。",
            )
        )
    if not math.isfinite(value) or (positive and value <= 0):
        above_en, above_zh = (" greater than 0", "大于 0 的") if positive else ("", "")
        raise ValueError(
            bilingual(
                f"{name} must be a finite number{above_en}, got {value}; for example {name}={example}.",
                f"{name} 必须是{above_zh}有限的数，实际是 {value}；例如 {name}={example}。",
            )
        )
    return float(value)


def check_index(value: object, name: str, count: int, counted_zh: str, from_end: bool = False) -> int:
    """Check that `value` picks one of `count` things (0 .. count-1; with from_end, -count .. -1 too).

    `counted_zh` names the count in Chinese (层数, 头数); English says "out of {count}".
    """
    number = _whole_number(value, name, "indices", "索引")
    lowest = -count if from_end else 0
    if not lowest <= number < count:
        end_en = f", or -{count} to -1 counting from the end" if from_end else ""
        end_zh = f"，也可以用 -{count} 到 -1 从末尾数" if from_end else ""
        raise ValueError(
            bilingual(
                f"{name}={number} is out of range: with {count} to choose from, {name} must be from 0 to {count - 1}"
                f"{end_en}." if count else f"{name}={number} is out of range: there is nothing to choose from.",
                f"{name}={number} 超出了范围：{counted_zh}为 {count}，{name} 应在 0 到 {count - 1} 之间{end_zh}。"
                if count else f"{name}={number} 超出了范围：{counted_zh}为 0，没有可选的。",
            )
        )
    return number


def check_dim(dim: object, x: torch.Tensor, name: str = "scores") -> int:
    """Check that `dim` names one of the dimensions of `x` (negative counts from the end)."""
    rank = max(x.dim(), 1)
    number = _whole_number(dim, "dim", "dimensions", "维度")
    if not -rank <= number < rank:
        raise ValueError(
            bilingual(
                f"dim must be an integer from {-rank} to {rank - 1} for `{name}` of shape {tuple(x.shape)}, "
                f"got {number}; use dim=-1 to normalize each row.",
                f"对形状为 {tuple(x.shape)} 的 `{name}`，dim 必须是 {-rank} 到 {rank - 1} 之间的整数，"
                f"实际是 {number}；要按行归一化，请用 dim=-1。",
            )
        )
    return number


def check_rate(p: object, name: str = "dropout") -> float:
    """Check that a dropout rate is a real number in [0, 1); return it as a float."""
    if isinstance(p, torch.Tensor) and p.dim() == 0 and p.dtype != torch.bool and not p.is_complex() and not cannot_read(p):
        p = p.item()
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real):
        raise TypeError(
            bilingual(
                f"{name} must be a number in [0, 1), got {shown(p)}; for example {name}=0.1.",
                f"{name} 必须是 [0, 1) 区间内的数，实际是 {shown(p, True)}；例如 {name}=0.1。",
            )
        )
    if not 0.0 <= p < 1.0:
        raise ValueError(
            bilingual(
                f"{name} must be in [0, 1), got {p}; use 0.0 to switch it off and values like 0.1 to regularize.",
                f"{name} 必须在 [0, 1) 区间内，实际是 {p}；设为 0.0 表示关闭，做正则化时常用 0.1 左右。",
            )
        )
    return float(p)


def check_flag(value: object, name: str) -> bool:
    """Check that a switch such as `training` or `qkv_bias` is True or False (numpy and 0-d torch bools count)."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.bool and not cannot_read(value):
        value = value.item()
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(
            bilingual(
                f"{name} must be True or False, got {shown(value)}.",
                f"{name} 只能是 True 或 False，实际是 {shown(value, True)}。",
            )
        )
    return bool(value)


def check_same_length(named: dict[str, object]) -> None:
    """Lists (or tensors) drawn against each other: non-empty and of one length."""
    lengths = {name: len(value) if hasattr(value, "__len__") and not isinstance(value, (str, bytes)) else None
               for name, value in named.items()}
    if None in lengths.values() or len(set(lengths.values())) != 1 or 0 in lengths.values():
        listed = ", ".join(f"{name}: {shown(value)}" for name, value in named.items())
        listed_zh = "，".join(f"{name}：{shown(value, True)}" for name, value in named.items())
        raise ValueError(bilingual(
            f"{' and '.join(named)} must be non-empty lists of one length, one entry per point; got {listed}.",
            f"{' 和 '.join(named)} 必须是长度相同的非空列表，每个点一项；实际是 {listed_zh}。"))
