"""Input validation with one clear sentence in English and in Chinese.

Every public function and module in the package calls these before doing any work, so a
learner sees what went wrong and what to do, instead of a bare shape error from deep in torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def bilingual(english: str, chinese: str) -> str:
    """Join an English and a Chinese sentence into the message format used across the package."""
    return f"{english}\n{chinese}"


def check_tensor(x: object, name: str, ranks: Sequence[int], last_dim: int | None = None) -> torch.Tensor:
    """Check that `x` is a finite tensor of one of the allowed ranks (and last dimension)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            bilingual(
                f"`{name}` must be a torch.Tensor, got {type(x).__name__}; wrap your data with torch.tensor(...).",
                f"`{name}` 必须是 torch.Tensor，而你传入的是 {type(x).__name__}；请先用 torch.tensor(...) 把数据转成张量。",
            )
        )
    if x.dim() not in ranks:
        wanted = " or ".join(str(r) for r in ranks)
        hint_en, hint_zh = "", ""
        if x.dim() + 1 in ranks:
            hint_en, hint_zh = " Add a batch dimension with x.unsqueeze(0).", "可以用 x.unsqueeze(0) 补上批次维度。"
        raise ValueError(
            bilingual(
                f"`{name}` must have {wanted} dimensions, got shape {tuple(x.shape)} ({x.dim()} dimensions).{hint_en}",
                f"`{name}` 应该是 {wanted} 维张量，实际形状是 {tuple(x.shape)}（{x.dim()} 维）。{hint_zh}",
            )
        )
    if last_dim is not None and x.shape[-1] != last_dim:
        raise ValueError(
            bilingual(
                f"The last dimension of `{name}` must be d_in={last_dim}, got {x.shape[-1]} "
                f"(shape {tuple(x.shape)}); build the module with d_in={x.shape[-1]} or fix the input.",
                f"`{name}` 的最后一维应等于 d_in={last_dim}，实际是 {x.shape[-1]}（形状 {tuple(x.shape)}）；"
                f"请用 d_in={x.shape[-1]} 创建模块，或者检查输入。",
            )
        )
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise ValueError(
            bilingual(
                f"`{name}` contains NaN or inf values; find where they first appear (torch.isnan(x).any()) before calling attention.",
                f"`{name}` 里有 NaN 或 inf；请先用 torch.isnan(x).any() 找到它们最早出现的地方，再调用注意力。",
            )
        )
    return x


def check_positive(value: int, name: str) -> None:
    """Check that a size such as `num_heads` or `context_length` is a positive integer."""
    if not isinstance(value, int) or value < 1:
        raise ValueError(
            bilingual(
                f"{name} must be a positive integer, got {value!r}.",
                f"{name} 必须是正整数，实际是 {value!r}。",
            )
        )


def check_heads(d_out: int, num_heads: int) -> None:
    """Check that `d_out` splits evenly into `num_heads` heads."""
    check_positive(num_heads, "num_heads")
    if d_out % num_heads != 0:
        raise ValueError(
            bilingual(
                f"d_out={d_out} must be divisible by num_heads={num_heads}; choose d_out as a multiple of num_heads.",
                f"d_out={d_out} 必须能被 num_heads={num_heads} 整除；请把 d_out 设为 num_heads 的整数倍。",
            )
        )


def check_dropout(p: float) -> None:
    """Check that a dropout rate lies in [0, 1)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(
            bilingual(
                f"dropout must be in [0, 1), got {p}; use 0.0 to switch it off and values like 0.1 to regularize.",
                f"dropout 必须在 [0, 1) 区间内，实际是 {p}；设为 0.0 表示关闭，常用值约为 0.1。",
            )
        )


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


def check_mask(mask: object, scores_shape: torch.Size) -> torch.Tensor:
    """Check that a boolean mask broadcasts to the attention scores' shape (True = hide)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(
            bilingual(
                "`mask` must be a boolean tensor where True marks a position to hide; convert it with mask.bool().",
                "`mask` 必须是布尔张量，True 表示要遮住的位置；可以用 mask.bool() 转换。",
            )
        )
    try:
        torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        raise ValueError(
            bilingual(
                f"`mask` of shape {tuple(mask.shape)} does not broadcast to the attention scores of shape "
                f"{tuple(scores_shape)}; give it shape (num_tokens, num_tokens) or (batch, 1, 1, num_tokens).",
                f"形状为 {tuple(mask.shape)} 的 `mask` 无法广播到注意力分数的形状 {tuple(scores_shape)}；"
                f"请使用 (num_tokens, num_tokens) 或 (batch, 1, 1, num_tokens) 形状的掩码。",
            )
        ) from None
    return mask
