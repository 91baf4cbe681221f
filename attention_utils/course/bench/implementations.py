"""The contenders of the benchmark: every attention implementation compared, and what each run measures.

Each implementation is built from the book's `MultiHeadAttention` (the same weights), so the
test suite can prove they all compute the same numbers before anything is timed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ...functional import causal_mask
from ...fused import FusedMultiHeadAttention
from ...modules import MultiHeadAttention, MultiHeadAttentionWrapper
from ...tiled import tiled_attention

MODES = ("inference", "training")
DROPOUT = 0.1


class ExplicitSoftmaxAttention(FusedMultiHeadAttention):
    """One QKV projection, then the (T, T) scores written out, masked and softmaxed by hand."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        queries, keys, values = self.project_heads(x)  # each (b, h, T, head_dim)
        scores = queries @ keys.transpose(-2, -1) / math.sqrt(self.head_dim)  # (b, h, T, T), all in memory
        scores = scores.masked_fill(causal_mask(x.shape[1], x.device), float("-inf"))
        return self.combine_heads(torch.softmax(scores, dim=-1) @ values)


class EinsumAttention(FusedMultiHeadAttention):
    """Every product as an einsum: the index letters split and join the heads, no view or transpose."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.qkv.weight.view(3, self.num_heads, self.head_dim, self.d_in)
        qkv = torch.einsum("bti,shei->sbhte", x, weight)  # (3, b, h, T, head_dim)
        if self.qkv.bias is not None:
            qkv = qkv + self.qkv.bias.view(3, 1, self.num_heads, 1, self.head_dim)
        queries, keys, values = qkv
        scores = torch.einsum("bhqe,bhke->bhqk", queries, keys) / math.sqrt(self.head_dim)  # (b, h, T, T)
        scores = scores.masked_fill(causal_mask(x.shape[1], x.device), float("-inf"))
        context = torch.einsum("bhqk,bhke->bhqe", torch.softmax(scores, dim=-1), values)  # (b, h, T, head_dim)
        out_weight = self.out_proj.weight.view(self.d_out, self.num_heads, self.head_dim)
        return torch.einsum("bhte,ohe->bto", context, out_weight) + self.out_proj.bias  # (b, T, d_out)


class BareReference(FusedMultiHeadAttention):
    """The floor: Linear, one causal SDPA call, Linear; no input checks, no padding option."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        queries, keys, values = self.project_heads(x)
        return self.combine_heads(F.scaled_dot_product_attention(queries, keys, values, is_causal=True))


class BoolMaskAttention(FusedMultiHeadAttention):
    """SDPA given the causal mask as a tensor: same numbers, but the kernel can no longer skip the future."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        queries, keys, values = self.project_heads(x)
        may_attend = ~causal_mask(x.shape[1], x.device)  # SDPA's convention: True = may attend
        return self.combine_heads(F.scaled_dot_product_attention(queries, keys, values, attn_mask=may_attend))


class TorchMultiheadAttention(nn.Module):
    """torch.nn.MultiheadAttention holding the book's weights, called for causal self-attention.

    In inference it takes its "fast path" (torch._native_multi_head_attention), which drops the
    is_causal hint and applies attn_mask as a full (T, T) mask; in training it calls causal SDPA.
    """

    def __init__(self, mha: MultiHeadAttention) -> None:
        super().__init__()
        fused = FusedMultiHeadAttention.from_multihead(mha)
        # bias=True (zeros when the book has none): the fast path is only taken with an in_proj_bias
        self.attention = nn.MultiheadAttention(mha.d_out, mha.num_heads, batch_first=True)
        with torch.no_grad():
            self.attention.in_proj_weight.copy_(fused.qkv.weight)
            if fused.qkv.bias is not None:
                self.attention.in_proj_bias.copy_(fused.qkv.bias)
        self.attention.out_proj.load_state_dict(fused.out_proj.state_dict())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        future = causal_mask(x.shape[1], x.device)  # nn.MultiheadAttention's convention: True = hide
        return self.attention(x, x, x, attn_mask=future, is_causal=True, need_weights=False)[0]


def wrapper_of_heads(mha: MultiHeadAttention) -> nn.Module:
    """The book's wrapper with one CausalAttention of width head_dim per head, plus the same out_proj."""
    wrapper = MultiHeadAttentionWrapper(
        mha.d_in, mha.head_dim, mha.context_length, mha.dropout.p, mha.num_heads, mha.W_query.bias is not None
    )
    for i, head in enumerate(wrapper.heads):
        rows = slice(i * mha.head_dim, (i + 1) * mha.head_dim)  # head i's rows of each projection
        for name in ("W_query", "W_key", "W_value"):
            source = getattr(mha, name).state_dict()
            getattr(head, name).load_state_dict({key: value[rows] for key, value in source.items()})
    out_proj = nn.Linear(mha.d_out, mha.d_out)
    out_proj.load_state_dict(mha.out_proj.state_dict())
    return nn.Sequential(wrapper, out_proj)


def fused_with_dropout(mha: MultiHeadAttention) -> nn.Module:
    """The fused module with dropout on: CPU SDPA then leaves its flash kernel for the math fallback."""
    fused = FusedMultiHeadAttention.from_multihead(mha)
    fused.dropout = DROPOUT
    return fused


@dataclass(frozen=True)
class Implementation:
    """One contender: its (English, Chinese) label and how to build it from the book's module."""

    label: tuple[str, str]
    build: Callable[[MultiHeadAttention], nn.Module]
    modes: tuple[str, ...] = MODES
    explicit: bool = False  # stores (T, T) matrices: slow enough to skip at the longest training lengths
    compiles: bool = False


IMPLEMENTATIONS: dict[str, Implementation] = {
    "wrapper": Implementation(("wrapper of single heads", "包装器（wrapper）"), wrapper_of_heads, explicit=True),
    "book": Implementation(("MultiHeadAttention (book)", "书中的 MultiHeadAttention"), lambda mha: mha, explicit=True),
    "explicit": Implementation(
        ("one QKV projection, explicit softmax", "合并 QKV 投影 + 显式 softmax"),
        ExplicitSoftmaxAttention.from_multihead,
        explicit=True,
    ),
    "einsum": Implementation(("einsum", "einsum 版本"), EinsumAttention.from_multihead, explicit=True),
    "fused": Implementation(
        ("FusedMultiHeadAttention", "融合模块 FusedMultiHeadAttention"), FusedMultiHeadAttention.from_multihead
    ),
    "torch_mha": Implementation(("nn.MultiheadAttention", "PyTorch 的 nn.MultiheadAttention"), TorchMultiheadAttention),
    "bare": Implementation(("bare SDPA (floor)", "裸 SDPA（下限）"), BareReference.from_multihead),
    "fused_dropout": Implementation(
        (f"fused, dropout {DROPOUT} (math fallback)", f"融合模块 + dropout {DROPOUT}（改走数学实现）"),
        fused_with_dropout,
        modes=("training",),  # dropout only acts in training
        explicit=True,
    ),
    "bool_mask": Implementation(("SDPA, boolean causal mask", "SDPA + 布尔因果掩码"), BoolMaskAttention.from_multihead),
    "compiled": Implementation(
        ("torch.compile(book)", "torch.compile（书中模块）"),
        torch.compile,
        modes=("inference",),  # compiling the backward again in every fresh process would dominate the run
        explicit=True,
        compiles=True,
    ),
}


@dataclass(frozen=True)
class Workload:
    """What to run: the layer's size, the sequence lengths, and how long to time each measurement."""

    batch: int
    d_model: int
    num_heads: int
    lengths: tuple[int, ...]
    rounds: int  # processes per configuration, interleaved with the other implementations
    seconds: float  # each process repeats timed calls until this much time has passed...
    max_calls: int  # ...or this many calls were made
    explicit_training_limit: int | None  # longest training length for explicit implementations
    compile: bool


FULL = Workload(8, 768, 12, (128, 256, 512, 1024, 2048), 3, 1.0, 10, 1024, compile=True)
QUICK = Workload(2, 64, 4, (32, 128), 2, 0.02, 3, None, compile=False)


SAME_PROCESS = ("book", "explicit", "fused", "bare", "bool_mask")  # the steps lesson 8 attributes the speed-up to
SAME_PROCESS_PAIRS = (("book", "explicit"), ("explicit", "fused"), ("fused", "bare"), ("bool_mask", "fused"))
SAME_PROCESS_CALLS = 15
SAME_PROCESS_REPEATS = 3  # the whole sequence of pairs, run again: the spread of each ratio


# Lesson 9's kernel comparison: one causal attention call on (batch, heads, T, head_dim) tensors.
KERNEL_SHAPE = dict(batch=1, heads=8, head_dim=64)
KERNEL_LENGTHS = (1024, 2048, 4096, 8192)
KERNEL_EXPLICIT_LIMIT = 4096  # the explicit (T, T) scores at 8192 would need several GiB
KERNEL_BLOCK = 128
KERNEL_TILE_SIZES = (64, 256)  # lesson 9's test of the loop's cost per call: the same loop at a small and a large tile
KERNEL_ROUNDS = 2


def explicit_attention(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Causal attention with every (T, T) matrix written out: scores, masked scores, weights."""
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])  # (b, h, T, T)
    scores = scores.masked_fill(causal_mask(queries.shape[-2], queries.device), float("-inf"))
    return torch.softmax(scores, dim=-1) @ values


KERNELS: dict[str, tuple[tuple[str, str], Callable[..., torch.Tensor]]] = {
    "explicit": (("explicit softmax", "显式 softmax"), explicit_attention),
    "tiled": (
        (f"tiled_attention (blocks of {KERNEL_BLOCK})", f"tiled_attention（分块大小 {KERNEL_BLOCK}）"),
        lambda q, k, v: tiled_attention(q, k, v, block_size=KERNEL_BLOCK, causal=True),
    ),
    "sdpa": (("SDPA (C++ kernel)", "SDPA（C++ 内核）"), lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
}
