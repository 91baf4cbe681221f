"""Input validation: every bad input gets one English and one Chinese sentence that say what to do.

The contract of the package, argument by argument. Each rule is checked before any work or side
effect; a broken rule raises `TypeError` (wrong kind of thing) or `ValueError` (right kind, wrong
size or value), and the message has two lines, English then Chinese, both naming the argument.

Tensors (`x`, `queries`, `keys`, `values`, `scores`):
    a `torch.Tensor`, else TypeError ("convert it with torch.tensor(..., dtype=torch.float32)");
    floating point, else TypeError: integers (`torch.tensor([[1, 2, 3]])`) get "x.float()";
    bool and complex tensors are refused too;
    in a module, the same dtype and device as the module's weights, else TypeError ("x.float()",
    "module.double()", "x.to(...)"); in the functional API, queries, keys and values share one dtype;
    of an allowed rank, else ValueError (modules: `x` is (batch, num_tokens, d_in); the single-head
    V1/V2 also take (num_tokens, d_in)); with last dimension d_in, else ValueError;
    finite, else ValueError. Attention scores may hold -inf (a hidden position) but not NaN or +inf.
    Empty sizes are valid: batch 0, 0 tokens, 1 token and num_tokens == context_length all work.
Sizes (`d_in`, `d_out`, `context_length`, `num_heads`, `batch_size`, `num_tokens`, `block_size`):
    an integer (Python, numpy or 0-d torch integer), else TypeError; `True`/`False` are refused;
    at least 1 (0 where an empty result makes sense: `num_tokens`, `batch_size`), else ValueError;
    `d_out` must be a multiple of `num_heads`, else ValueError.
Rates (`dropout`, `dropout_p`): a real number, else TypeError (strings, None and bools are
    refused); in [0, 1), else ValueError. A module checks its rate again in every forward, so a
    rate changed after construction is caught where it is used.
Flags (`qkv_bias`, `training`, `causal`, `return_weights`): `True` or `False`, else TypeError.
Masks: a boolean tensor, True = hide, else TypeError. `mask` must broadcast TO the scores' shape
    without enlarging it, else ValueError. `padding_mask` must be exactly (batch, num_tokens).
Fully masked rows: a query that may look at no key gets zero attention weights and a zero context
    vector, in every function and module of the package (the same as torch's
    `scaled_dot_product_attention`). A row of NaN would spread to every gradient through the
    shared weights; zeros keep the output defined and every gradient finite. Lesson 5 shows the
    NaN the plain softmax gives and why; lesson 8 shows SDPA doing the same as the package.
Overflow: finite inputs can still give scores beyond the dtype's range (float16 inputs of a few
    hundred, float32 inputs near 1e19); `scaled_dot_product_attention`, and so every book-style
    module, then raises ValueError naming the dtype instead of returning NaN.
Speed: the finite check is one `sum` reduction (a finite sum proves every entry finite); only when
    that sum is not finite does an exact pass decide. Under `torch.compile` the check is skipped,
    because it has to read the value on the host, which would split the graph.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence

import torch


def bilingual(english: str, chinese: str) -> str:
    """Join an English and a Chinese sentence into the two-line message used across the package."""
    return f"{english}\n{chinese}"


def _dimensions_en(ranks: Sequence[int]) -> str:
    """'3 dimensions', '2 or 3 dimensions', '1 dimension' (English, singular and plural right)."""
    words = " or ".join(str(r) for r in ranks)
    return f"{words} dimension" + ("" if tuple(ranks) == (1,) else "s")


def _dimensions_zh(ranks: Sequence[int]) -> str:
    """'3 维', '2 维或 3 维' (Chinese, composed with 或)."""
    return "或 ".join(f"{r} 维" for r in ranks)


def check_tensor(
    x: object,
    name: str,
    ranks: Sequence[int],
    last_dim: int | None = None,
    like: torch.Tensor | None = None,
    allow_neg_inf: bool = False,
) -> torch.Tensor:
    """Check that `x` is a finite floating-point tensor of an allowed rank and last dimension.

    `like` is a module's weight: `x` must then have its dtype and sit on its device.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            bilingual(
                f"`{name}` must be a torch.Tensor, got {type(x).__name__}; "
                "convert it with torch.tensor(data, dtype=torch.float32).",
                f"`{name}` 必须是 torch.Tensor，你传入的是 {type(x).__name__}；"
                "请用 torch.tensor(data, dtype=torch.float32) 转成张量。",
            )
        )
    _check_floating(x, name, None if like is None else like.dtype)
    if like is not None and x.device != like.device:
        raise TypeError(
            bilingual(
                f"`{name}` is on {x.device} but the module's weights are on {like.device}; move the input with "
                f"{name}.to('{like.device}') or the module with module.to('{x.device}').",
                f"`{name}` 在 {x.device} 上，而模块权重在 {like.device} 上；请用 {name}.to('{like.device}') 移动输入，"
                f"或用 module.to('{x.device}') 移动模块。",
            )
        )
    if x.dim() not in ranks:
        _wrong_rank(x, name, ranks)
    if last_dim is not None and x.shape[-1] != last_dim:
        raise ValueError(
            bilingual(
                f"The last dimension of `{name}` must be d_in={last_dim}, got {x.shape[-1]} "
                f"(shape {tuple(x.shape)}); build the module with d_in={x.shape[-1]} or fix the input.",
                f"`{name}` 的最后一维应等于 d_in={last_dim}，实际是 {x.shape[-1]}（形状为 {tuple(x.shape)}）；"
                f"请用 d_in={x.shape[-1]} 创建模块，或者修正输入。",
            )
        )
    check_finite(x, name, allow_neg_inf)
    return x


def _check_floating(x: torch.Tensor, name: str, dtype: torch.dtype | None) -> None:
    """Refuse integer, bool and complex tensors, and a float dtype other than the module's."""
    if x.dtype == torch.bool or x.is_complex() or not x.is_floating_point():
        kind_en, kind_zh = (
            ("booleans", "布尔值") if x.dtype == torch.bool
            else ("complex numbers", "复数") if x.is_complex()
            else ("integers", "整数")
        )
        hint_en = " (torch.tensor([[1, 2, 3]]) stores integers; write 1.0, 2.0, 3.0 or add dtype=torch.float32)"
        hint_zh = "（torch.tensor([[1, 2, 3]]) 存的是整数；请写成 1.0、2.0、3.0，或加上 dtype=torch.float32）"
        integer = kind_en == "integers"
        raise TypeError(
            bilingual(
                f"`{name}` holds {kind_en} ({x.dtype}), but attention needs floating-point numbers; "
                f"convert it with {name}.float(){hint_en if integer else ''}.",
                f"`{name}` 存的是{kind_zh}（{x.dtype}），而注意力需要浮点数；"
                f"请用 {name}.float() 转换{hint_zh if integer else ''}。",
            )
        )
    if dtype is not None and x.dtype != dtype:
        raise TypeError(
            bilingual(
                f"`{name}` is {x.dtype} but the module's weights are {dtype}; convert the input with "
                f"{name}.to({dtype}) or the module with module.to({x.dtype}).",
                f"`{name}` 的类型是 {x.dtype}，而模块权重的类型是 {dtype}；请用 {name}.to({dtype}) 转换输入，"
                f"或用 module.to({x.dtype}) 转换模块。",
            )
        )


def _wrong_rank(x: torch.Tensor, name: str, ranks: Sequence[int]) -> None:
    """Raise the rank error, with an unsqueeze hint only when one missing dimension explains it."""
    hint_en = hint_zh = ""
    if x.dim() >= 1 and x.dim() + 1 in ranks:
        hint_en = f" Add a batch dimension with {name}.unsqueeze(0)."
        hint_zh = f"可以用 {name}.unsqueeze(0) 补上批次维度。"
    got = "1 dimension" if x.dim() == 1 else f"{x.dim()} dimensions"
    raise ValueError(
        bilingual(
            f"`{name}` must have {_dimensions_en(ranks)}, got shape {tuple(x.shape)} ({got}).{hint_en}",
            f"`{name}` 应为 {_dimensions_zh(ranks)}张量，实际形状是 {tuple(x.shape)}（{x.dim()} 维）。{hint_zh}",
        )
    )


def check_finite(x: torch.Tensor, name: str, allow_neg_inf: bool = False) -> None:
    """Refuse NaN and inf (and +inf only, with allow_neg_inf) with one cheap reduction on the fast path."""
    if torch.compiler.is_compiling() or x.numel() == 0 or x.is_meta:
        return  # reading a value on the host would break the compiled graph; meta tensors hold no values
    if torch.isfinite(x.sum()):
        return  # a finite sum proves every entry finite: inf and NaN never cancel out
    bad = torch.isnan(x) | (x == float("inf")) if allow_neg_inf else ~torch.isfinite(x)
    if not bad.any():
        return  # the sum overflowed, or only -inf entries were allowed
    allowed_en, allowed_zh = (" (-inf, a hidden position, is allowed)", "（-inf 表示遮住的位置，是允许的）") if allow_neg_inf else ("", "")
    raise ValueError(
        bilingual(
            f"`{name}` contains NaN or inf values{allowed_en}; find where they first appear "
            f"(torch.isnan({name}).any()) before calling attention.",
            f"`{name}` 里有 NaN 或 inf{allowed_zh}；请先用 torch.isnan({name}).any() 找到它们最早出现的地方，再调用注意力。",
        )
    )


def check_size(value: object, name: str, minimum: int = 1) -> int:
    """Check that a size is an integer of at least `minimum` (numpy and 0-d torch integers count)."""
    if isinstance(value, (bool, torch.Tensor)) and (isinstance(value, bool) or value.dtype == torch.bool):
        raise TypeError(
            bilingual(
                f"{name} must be an integer, got {value!r}; True and False are not sizes.",
                f"{name} 必须是整数，实际是 {value!r}；True 和 False 不能当作大小。",
            )
        )
    try:
        number = operator.index(value)
    except TypeError:
        as_int = f"; write {int(value)}" if isinstance(value, float) and value.is_integer() else ""
        as_int_zh = f"；请写成 {int(value)}" if as_int else ""
        raise TypeError(
            bilingual(
                f"{name} must be an integer, got {value!r} ({type(value).__name__}){as_int}.",
                f"{name} 必须是整数，实际是 {value!r}（{type(value).__name__}）{as_int_zh}。",
            )
        ) from None
    if number < minimum:
        at_least_zh = "正整数" if minimum == 1 else f"不小于 {minimum} 的整数"
        raise ValueError(
            bilingual(
                f"{name} must be an integer of at least {minimum}, got {number}.",
                f"{name} 必须是{at_least_zh}，实际是 {number}。",
            )
        )
    return number


def check_no_overflow(context: torch.Tensor) -> None:
    """Refuse a result that overflowed: from finite inputs, NaN or inf appear only when the scores overflowed."""
    if torch.compiler.is_compiling() or context.numel() == 0 or torch.isfinite(context.sum()):
        return
    if torch.isfinite(context).all():
        return  # only the sum overflowed
    limit = torch.finfo(context.dtype).max
    wider, to_wider = ("float32", "x.float(), module.float()") if context.element_size() < 4 else ("float64", "x.double(), module.double()")
    raise ValueError(
        bilingual(
            f"The attention scores overflowed {context.dtype} (a dot product beyond {limit:.3g}); the queries and "
            f"keys are too large for this dtype: scale the input down, or compute in {wider} ({to_wider}).",
            f"注意力分数超出了 {context.dtype} 的表示范围（有点积大于 {limit:.3g}）；查询和键的数值对这种类型来说太大了："
            f"请把输入缩小，或改用 {wider} 计算（{to_wider}）。",
        )
    )


def check_heads(d_out: int, num_heads: int) -> None:
    """Check that `d_out` splits evenly into `num_heads` heads."""
    if d_out % num_heads != 0:
        raise ValueError(
            bilingual(
                f"d_out={d_out} must be divisible by num_heads={num_heads}; choose d_out as a multiple of num_heads.",
                f"d_out={d_out} 必须能被 num_heads={num_heads} 整除；请把 d_out 设为 num_heads 的整数倍。",
            )
        )


def check_rate(p: object, name: str = "dropout") -> float:
    """Check that a dropout rate is a real number in [0, 1); return it as a float."""
    if isinstance(p, torch.Tensor) and p.dim() == 0 and p.is_floating_point():
        p = p.item()
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(
            bilingual(
                f"{name} must be a number in [0, 1), got {p!r} ({type(p).__name__}); for example {name}=0.1.",
                f"{name} 必须是 [0, 1) 区间内的数，实际是 {p!r}（{type(p).__name__}）；例如 {name}=0.1。",
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
    """Check that a switch such as `training` or `qkv_bias` is True or False."""
    if not isinstance(value, bool):
        raise TypeError(
            bilingual(
                f"{name} must be True or False, got {value!r}.",
                f"{name} 只能是 True 或 False，实际是 {value!r}。",
            )
        )
    return value


def check_length(num_tokens: int, context_length: int) -> None:
    """Check that a sequence fits into the causal mask built for `context_length` tokens."""
    if num_tokens > context_length:
        raise ValueError(
            bilingual(
                f"The input has {num_tokens} tokens but the module was built with context_length={context_length}; "
                f"shorten the input or build the module with context_length>={num_tokens}.",
                f"输入有 {num_tokens} 个词元，但模块的 context_length={context_length}；"
                f"请截短输入，或用 context_length>={num_tokens} 重新创建模块。",
            )
        )


def _boolean(mask: object, name: str) -> torch.Tensor:
    """Refuse anything but a boolean tensor, saying which convention the package uses."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = f"a {mask.dtype} tensor" if isinstance(mask, torch.Tensor) else type(mask).__name__
        got_zh = f"{mask.dtype} 张量" if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(
            bilingual(
                f"`{name}` must be a boolean tensor where True marks a position to hide, got {got}; "
                f"convert it with {name}.bool().",
                f"`{name}` 必须是布尔张量，True 表示要遮住的位置，你传入的是 {got_zh}；请用 {name}.bool() 转换。",
            )
        )
    return mask


def check_mask(mask: object, scores_shape: torch.Size, name: str = "mask") -> torch.Tensor:
    """Check that a boolean mask (True = hide) broadcasts to the scores' shape without enlarging it."""
    _boolean(mask, name)
    try:
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except RuntimeError:
        fits = False
    if not fits:
        queries, keys = (scores_shape[-2], scores_shape[-1]) if len(scores_shape) >= 2 else (1, scores_shape[-1])
        raise ValueError(
            bilingual(
                f"`{name}` of shape {tuple(mask.shape)} does not fit the attention scores of shape "
                f"{tuple(scores_shape)}; it must broadcast to that shape without adding to it, "
                f"for example shape ({queries}, {keys}).",
                f"形状为 {tuple(mask.shape)} 的 `{name}` 与形状为 {tuple(scores_shape)} 的注意力分数不匹配；"
                f"它必须能广播成这个形状且不能把它变大，例如使用形状 ({queries}, {keys})。",
            )
        )
    return mask


def check_padding_mask(padding_mask: object, batch: int, num_tokens: int) -> torch.Tensor:
    """Check that a padding mask is boolean (True = padding) and exactly (batch, num_tokens)."""
    _boolean(padding_mask, "padding_mask")
    if tuple(padding_mask.shape) != (batch, num_tokens):
        raise ValueError(
            bilingual(
                f"`padding_mask` must have shape (batch, num_tokens) = ({batch}, {num_tokens}), one flag per "
                f"token of x, got {tuple(padding_mask.shape)}.",
                f"`padding_mask` 的形状必须是 (batch, num_tokens) = ({batch}, {num_tokens})，"
                f"即 x 的每个词元对应一个布尔值，实际是 {tuple(padding_mask.shape)}。",
            )
        )
    return padding_mask


def check_same_dtype(tensors: dict[str, torch.Tensor]) -> None:
    """Check that tensors multiplied together share one dtype (queries, keys, values)."""
    dtypes = {name: t.dtype for name, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"`{name}` {dtype}" for name, dtype in dtypes.items())
        first = next(iter(dtypes.values()))
        raise TypeError(
            bilingual(
                f"{listed}: all must have the same dtype; convert them, for example with .to({first}).",
                f"{listed}：它们的类型必须相同；请统一转换，例如使用 .to({first})。",
            )
        )
