"""Sliding-window attention with FlexAttention: a block mask lets the compiled kernel skip whole blocks of keys.

`torch.nn.attention.flex_attention` takes the mask as a small function of (batch, head, query,
key) and a block mask that records which (query block, key block) tiles hold anything visible.
Compiled, it visits only those tiles, so a window of W keys costs about T x W work instead of
T x T / 2. On the CPU in torch 2.13 it is forward only, compiling takes seconds, and it fails on
machines without a C++ compiler and under ATEN_CPU_CAPABILITY=default; `flex_window_attention`
then runs FlexAttention eagerly (same numbers, every score computed).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from collections.abc import Callable
from functools import cache

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from ..checks import bilingual, check_flag, check_same_dtype, check_size, check_tensor
from .sliding_window import check_window, sliding_window_mask


def window_mask_mod(window: int, sinks: int = 0) -> Callable[..., torch.Tensor]:
    """The mask as FlexAttention reads it: True = may attend (the opposite of the package's masks)."""
    if window is None:
        raise ValueError(
            bilingual(
                "window must be an integer of at least 1 for a sliding-window mask, got None; "
                "for plain causal attention use the package's scaled_dot_product_attention with causal_mask(T).",
                "滑动窗口掩码的 window 必须是不小于 1 的整数，实际是 None；"
                "普通的因果注意力请用辅助包的 scaled_dot_product_attention 配合 causal_mask(T)。",
            )
        )
    window, sinks = check_window(window, sinks)

    def may_attend(batch: torch.Tensor, head: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return (key <= query) & ((query - key < window) | (key < sinks))

    return may_attend


def visible_blocks(num_tokens: int, window: int, sinks: int = 0, block_size: int = 128) -> torch.Tensor:
    """(T / block, T / block) True where a tile of the sliding-window mask holds at least one visible key."""
    num_tokens, block_size = check_size(num_tokens, "num_tokens"), check_size(block_size, "block_size")
    if num_tokens % block_size:
        raise ValueError(
            bilingual(
                f"num_tokens={num_tokens} must be a multiple of block_size={block_size}, so the tiles cover the mask exactly.",
                f"num_tokens={num_tokens} 必须是 block_size={block_size} 的整数倍，这样分块才能正好铺满整个掩码。",
            )
        )
    blocks = num_tokens // block_size
    may_attend = ~sliding_window_mask(num_tokens, window, sinks)  # (T, T)
    return may_attend.view(blocks, block_size, blocks, block_size).any(dim=3).any(dim=1)


def window_block_mask(num_tokens: int, window: int, sinks: int = 0, block_size: int = 128) -> BlockMask:
    """FlexAttention's block mask for the window: per query block, the key blocks to visit; all others are skipped."""
    tiles = visible_blocks(num_tokens, window, sinks, block_size)  # (query blocks, key blocks)
    counts = tiles.sum(dim=-1).to(torch.int32)  # how many key blocks each query block visits
    visit_first = torch.argsort((~tiles).to(torch.int8), dim=-1, stable=True).to(torch.int32)  # their indices first
    return BlockMask.from_kv_blocks(counts[None, None], visit_first[None, None], BLOCK_SIZE=block_size,
                                    mask_mod=window_mask_mod(window, sinks))


def can_compile() -> bool:
    """True where torch.compile can build CPU kernels: a C++ compiler, and kernels other than the plain default ones."""
    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":  # ATEN_CPU_CAPABILITY=default
        return False
    compilers = ("cl",) if sys.platform == "win32" else ("g++", "clang++", "c++")
    return bool(os.environ.get("CXX")) or any(shutil.which(name) for name in compilers)


@cache
def _compiled() -> Callable[..., torch.Tensor]:
    """Compiled FlexAttention, without torch's saved-graph cache: that cache does not tell ATen's kernel
    sets apart, and a graph saved under one set gives wrong numbers under another (costs ~1 s per process)."""
    return torch.compile(flex_attention, options={"fx_graph_cache": False})


def flex_window_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, block_mask: BlockMask, compiled: bool | None = None
) -> torch.Tensor:
    """FlexAttention of (b, h, T, head_dim) tensors under `block_mask`: compiled where it can be, else eager.

    `compiled=None` decides with can_compile(). The block mask is required: without one FlexAttention
    would attend to every key, no window and not even causal, so window_block_mask(T, window) makes it. Eager FlexAttention warns that it computes every
    score (no block is skipped); that is the fallback we chose, so the warning is silenced here.
    """
    check_flex_inputs(queries, keys, values, block_mask)
    if compiled is not None:
        check_flag(compiled, "compiled")
    if can_compile() if compiled is None else compiled:
        return _compiled()(queries, keys, values, block_mask=block_mask)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return flex_attention(queries, keys, values, block_mask=block_mask)


def check_flex_inputs(queries: object, keys: object, values: object, block_mask: object) -> None:
    """(b, h, T, head_dim) queries, keys and values that agree with each other and with the block mask's size."""
    for name, tensor in (("queries", queries), ("keys", keys), ("values", values)):
        check_tensor(tensor, name, ranks=(4,))
    check_same_dtype({"queries": queries, "keys": keys, "values": values})
    if queries.device.type == "meta":
        raise ValueError(bilingual("FlexAttention needs values: queries on the meta device hold none; use CPU tensors.",
                                   "FlexAttention 需要真实的数值：meta 设备上的 queries 没有数值；请用 CPU 上的张量。"))
    if queries.device.type == "cpu" and torch.is_grad_enabled() and any(t.requires_grad for t in (queries, keys, values)):
        raise ValueError(bilingual(
            "FlexAttention runs forward only on the CPU (torch 2.13 has no backward there), but queries, keys or values "
            "require grad: call it under torch.no_grad(), or pass x.detach().",
            "FlexAttention 在 CPU 上只能做前向计算（torch 2.13 在 CPU 上没有反向传播），而 queries、keys 或 values 需要梯度："
            "请在 torch.no_grad() 下调用，或者传入 x.detach()。"))
    (b, h, t_q, d), (bk, hk, t_k, dk), (bv, hv, t_v, _) = queries.shape, keys.shape, values.shape
    if (bk, hk, t_k) != (bv, hv, t_v) or (b, h) != (bk, hk) or d != dk:
        raise ValueError(
            bilingual(
                f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)} and values {tuple(values.shape)} do not fit "
                "together: all three need the same batch and heads, keys and values the same tokens, and queries and "
                "keys the same head_dim.",
                f"queries {tuple(queries.shape)}、keys {tuple(keys.shape)} 与 values {tuple(values.shape)} 的形状对不上："
                "三者的 batch 和头数必须相同，keys 与 values 的词元数必须相同，queries 与 keys 的 head_dim 必须相同。",
            )
        )
    if not isinstance(block_mask, BlockMask):
        raise TypeError(
            bilingual(
                f"block_mask must be a BlockMask, got {type(block_mask).__name__}; build one with "
                f"window_block_mask({t_q}, window) (without it FlexAttention would attend to every key, no window, "
                "not even causal).",
                f"block_mask 必须是 BlockMask，实际是 {type(block_mask).__name__}；请用 window_block_mask({t_q}, window) "
                "创建（没有它，FlexAttention 会关注所有键：既没有窗口，也不是因果的）。",
            )
        )
    if tuple(block_mask.seq_lengths) != (t_q, t_k):
        raise ValueError(
            bilingual(
                f"block_mask was built for {tuple(block_mask.seq_lengths)} (queries, keys), but the inputs have "
                f"({t_q}, {t_k}); build it again with window_block_mask({t_q}, window).",
                f"block_mask 是按 (queries, keys) = {tuple(block_mask.seq_lengths)} 创建的，而输入是 ({t_q}, {t_k})；"
                f"请用 window_block_mask({t_q}, window) 重新创建。",
            )
        )
