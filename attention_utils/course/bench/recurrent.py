"""Lesson 16's benchmark: one decode step of one layer, softmax attention with a KV cache against a fixed state.

For each context length T, one fresh process builds three layers of the same size (d_model, heads):
softmax attention reading a KV cache of T tokens (the package's FusedMultiHeadAttention; the cache is
filled with random keys and values, which cost the same to read as computed ones and spare a
quadratic prefill), linear attention and the delta rule, each holding a d_v × d_k state per head
filled by T tokens. It then times one new token through each layer, in rotated order, `calls` times; medians
come from one process and one moment of the machine, so their ratio holds on a busy machine too.
The memory is what each layer keeps between tokens: the cache's bytes, or the state's.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from torch import nn

from ...fused import FusedMultiHeadAttention
from ...inference.kv_cache import KVCache
from ...recurrent.delta_rule import delta_rule_recurrent, delta_rule_step
from ...recurrent.linear_attention import feature_map
from .harness import run_in_child

LAYERS = ("softmax", "linear", "delta")
NAMES = {"softmax": ("softmax attention + KV cache", "softmax 注意力 + KV 缓存"),
         "linear": ("linear attention (state)", "线性注意力（状态）"),
         "delta": ("delta rule (state)", "delta 规则（状态）")}


@dataclass(frozen=True)
class RecurrentWorkload:
    """The layer's size, the context lengths, and how many decode steps of each layer to time per length."""

    d_model: int
    num_heads: int
    lengths: tuple[int, ...]
    calls: int


RECURRENT_FULL = RecurrentWorkload(768, 12, (64, 256, 1024, 4096, 16384, 65536), 30)
RECURRENT_QUICK = RecurrentWorkload(64, 4, (16, 64, 256), 5)


class StateLayer(nn.Module):
    """One layer with a fixed state: the QKV and output projections of the softmax layer, a state per head."""

    def __init__(self, d_model: int, num_heads: int, delta: bool) -> None:
        super().__init__()
        self.num_heads, self.head_dim, self.delta = num_heads, d_model // num_heads, delta
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.beta = nn.Linear(d_model, num_heads) if delta else None
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(1, T, d) -> queries, keys, values (heads, T, head_dim), and β (heads, T) for the delta rule."""
        q, k, v = self.qkv(x[0]).view(-1, 3, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
        if self.delta:
            beta = torch.sigmoid(self.beta(x[0])).T
            return nn.functional.normalize(q, dim=-1), nn.functional.normalize(k, dim=-1), v, beta
        return feature_map(q), feature_map(k), v, None

    def prefill(self, x: torch.Tensor) -> torch.Tensor:
        """The state after the tokens x (1, T, d): (heads, head_dim, head_dim)."""
        q, k, v, beta = self.split(x)
        if self.delta:
            return delta_rule_recurrent(q, k, v, beta, return_state=True)[1]
        return v.transpose(-2, -1) @ k  # Σ v kᵀ, all at once

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One new token x (1, 1, d): update the state, read it with the query; return (output, state)."""
        q, k, v, beta = (t[:, 0] if t is not None else None for t in self.split(x))
        state = delta_rule_step(state, k, v, beta) if self.delta else state + v[:, :, None] * k[:, None, :]
        out = (state @ q[:, :, None])[:, :, 0].reshape(1, 1, -1)
        return self.out_proj(out), state


def measure_length(workload: RecurrentWorkload, length: int, threads: int) -> dict:
    """In a fresh process: fill each layer with `length` tokens, then time one decode step of each, rotated."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    d, heads = workload.d_model, workload.num_heads
    softmax = FusedMultiHeadAttention(d, d, length + workload.calls + 2, 0.0, heads).eval()
    linear, delta = StateLayer(d, heads, delta=False).eval(), StateLayer(d, heads, delta=True).eval()
    x = torch.randn(1, length + workload.calls + 2, d) / d**0.5
    with torch.inference_mode():
        cache = KVCache(1)
        head_dim = d // heads  # the cache holds T keys and values; random ones cost the same to read as real ones
        cache[0].update(torch.randn(1, heads, length, head_dim), torch.randn(1, heads, length, head_dim))
        states = {"linear": linear.prefill(x[:, :length]), "delta": delta.prefill(x[:, :length])}
        kept = {"softmax": cache.nbytes, **{key: s.numel() * s.element_size() for key, s in states.items()}}

        def run(key: str, token: torch.Tensor) -> None:
            if key == "softmax":
                softmax(token, cache=cache[0])
            else:
                _, states[key] = (linear if key == "linear" else delta).step(token, states[key])

        times: dict[str, list[float]] = {key: [] for key in LAYERS}
        for call in range(workload.calls + 1):  # the first round is untimed: one-off costs
            token = x[:, length + call : length + call + 1]
            for key in LAYERS[call % 3:] + LAYERS[: call % 3]:
                start = time.perf_counter()
                run(key, token)
                if call:
                    times[key].append(time.perf_counter() - start)
    return {"length": length, **{f"{key}_ms": 1e3 * statistics.median(times[key]) for key in LAYERS},
            **{f"{key}_bytes": kept[key] for key in LAYERS}}


def measure_all_recurrent(workload: RecurrentWorkload, threads: int) -> dict:
    """Every length in its own process; rows and notes (a length whose process died is noted, not fatal)."""
    rows, notes = [], []
    for length in workload.lengths:
        found = run_in_child(measure_length, workload, length, threads)
        if "error" in found:
            notes.append(f"T={length}: {found['error']}")
        else:
            rows.append(found)
    return {"rows": rows, "notes": notes}
