"""The decode benchmark: time per new token with and without a KV cache (MHA, GQA, MQA, a window), and FlexAttention.

Every (variant, length) runs in a fresh process. Inside it, the model is built, the prompt is
prefilled into a cache, and then two ways of producing the next token are timed in alternating
order: the whole sequence run again without a cache, and one decode step with it. Their ratio
comes from one process and one moment of the machine, so it holds on a busy machine too.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from tqdm import tqdm

from ...inference.flex_window import can_compile, window_block_mask
from ...inference.kv_cache import KVCache, kv_cache_bytes
from ...fused import FusedMultiHeadAttention
from ...inference.sliding_window import sliding_window_mask
from .harness import run_in_child


@dataclass(frozen=True)
class DecodeWorkload:
    """The stack's size, the prompt lengths, the window, and how many calls of each kind to time."""

    d_model: int
    num_heads: int
    num_layers: int
    lengths: tuple[int, ...]
    window: int
    calls: int  # timed calls of each kind per (variant, length), alternating
    flex_length: int  # FlexAttention: one attention call over this many tokens...
    flex_window: int  # ...with this window...
    flex_block: int  # ...in tiles of this size
    flex_calls: int


DECODE_FULL = DecodeWorkload(768, 12, 12, (128, 256, 512, 1024), 128, 7, 4096, 256, 128, 5)
DECODE_QUICK = DecodeWorkload(64, 8, 2, (32, 64), 16, 3, 256, 32, 64, 2)


@dataclass(frozen=True)
class Variant:
    """One attention layout: its (English, Chinese) name, how many key/value heads, and whether it has a window."""

    name: tuple[str, str]
    kv_heads: str  # "all" (MHA), "quarter" (GQA: 4 query heads per key/value head), "one" (MQA)
    windowed: bool = False

    def num_kv_heads(self, workload: DecodeWorkload) -> int:
        return {"all": workload.num_heads, "quarter": max(1, workload.num_heads // 4), "one": 1}[self.kv_heads]


VARIANTS: dict[str, Variant] = {
    "mha": Variant(("MHA", "MHA"), "all"),
    "gqa": Variant(("GQA", "GQA"), "quarter"),
    "mqa": Variant(("MQA", "MQA"), "one"),
    "window": Variant(("MHA, sliding window", "MHA + 滑动窗口"), "all", windowed=True),
}


def label(row: dict, language: str = "en") -> str:
    """A row's variant in words, with its key/value heads (and window): "GQA, 3 key/value heads"."""
    name = VARIANTS[row["variant"]].name[language == "zh"]
    if language == "zh":
        return f"{name}，{row['kv_heads']} 个键值头" + (f"，W = {row['window']}" if row["window"] else "")
    heads = f"{row['kv_heads']} key/value head{'s' if row['kv_heads'] > 1 else ''}"
    return f"{name}, {heads}" + (f", W = {row['window']}" if row["window"] else "")


class AttentionStack(nn.Module):
    """The attention layers of a GPT-2-small-sized model: LayerNorm, attention, residual connection, num_layers times.

    Random weights and no feed-forward layers: the benchmark times attention and its cache. The
    LayerNorm keeps random activations from growing from layer to layer (without it they overflow).
    """

    def __init__(self, workload: DecodeWorkload, variant: Variant, context_length: int) -> None:
        super().__init__()
        d, heads = workload.d_model, workload.num_heads
        window = workload.window if variant.windowed else None
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(workload.num_layers))
        self.layers = nn.ModuleList(
            FusedMultiHeadAttention(d, d, context_length, 0.0, heads, num_kv_heads=variant.num_kv_heads(workload), window=window)
            for _ in range(workload.num_layers)
        )

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        for i, (norm, attention) in enumerate(zip(self.norms, self.layers)):
            x = x + attention(norm(x), cache=None if cache is None else cache[i])
        return x


def measure_decode(workload: DecodeWorkload, key: str, length: int, threads: int) -> dict:
    """In a fresh process: prefill `length` tokens, then time recomputing everything against one cached step."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    variant = VARIANTS[key]
    stack = AttentionStack(workload, variant, length + workload.calls + 1).eval()
    x = torch.randn(1, length + workload.calls + 1, workload.d_model)  # the inputs of every position, drawn up front
    with torch.inference_mode():
        cache = KVCache(workload.num_layers)
        start = time.perf_counter()
        stack(x[:, :length], cache=cache)  # prefill
        prefill = time.perf_counter() - start
        kept_after_prefill, cache_bytes = cache.tokens_kept, cache.nbytes
        stack(x[:, length : length + 1], cache=cache)  # one untimed step of each kind: one-off costs
        stack(x[:, :length])
        times: dict[str, list[float]] = {"cached": [], "full": []}
        for call in range(workload.calls):
            for kind in ("cached", "full") if call % 2 == 0 else ("full", "cached"):
                start = time.perf_counter()
                if kind == "cached":
                    position = cache.position
                    stack(x[:, position : position + 1], cache=cache)  # one new token, the rest from the cache
                else:
                    stack(x[:, :length])  # every token again, as without a cache
                times[kind].append(time.perf_counter() - start)
    cached, full = (1e3 * statistics.median(times[kind]) for kind in ("cached", "full"))
    kv_heads = variant.num_kv_heads(workload)
    return {
        "variant": key,
        "length": length,
        "kv_heads": kv_heads,
        "window": workload.window if variant.windowed else None,
        "prefill_ms": 1e3 * prefill,
        "cached_ms": cached,
        "full_ms": full,
        "speedup": full / cached,
        "cache_bytes": cache_bytes,
        "formula_bytes": kv_cache_bytes(workload.num_layers, kv_heads, workload.d_model // workload.num_heads,
                                        kept_after_prefill),
        "tokens_kept": kept_after_prefill,
        "weight_bytes": sum(p.numel() * p.element_size() for p in stack.parameters()),  # read once by every decode step
    }


def flex_contenders(workload: DecodeWorkload) -> dict[str, tuple[tuple[str, str], object]]:
    """The ways to run one sliding-window attention call, each (label, function of q, k, v)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    length, window, block = workload.flex_length, workload.flex_window, workload.flex_block
    flex = torch.compile(flex_attention)
    skipping = window_block_mask(length, window, block_size=block)
    causal_blocks = create_block_mask(lambda b, h, q, k: k <= q, None, None, length, length, device="cpu", BLOCK_SIZE=block)

    def outside_window(score, b, h, q, k):  # the window applied to the scores: no block is skipped for it
        return torch.where(q - k < window, score, -math.inf)

    may_attend = ~sliding_window_mask(length, window)
    return {
        "flex_window": (("FlexAttention, window block mask", "FlexAttention + 窗口分数块掩码"),
                        lambda q, k, v: flex(q, k, v, block_mask=skipping)),
        "flex_causal_blocks": (("FlexAttention, causal blocks only", "FlexAttention + 仅因果分数块"),
                               lambda q, k, v: flex(q, k, v, score_mod=outside_window, block_mask=causal_blocks)),
        "sdpa_mask": (("SDPA, boolean window mask", "SDPA + 布尔窗口掩码"),
                      lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=may_attend)),
        "sdpa_causal": (("SDPA, causal (no window)", "SDPA 因果（无窗口）"),
                        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
    }


FLEX_PAIRS = (("flex_window", "flex_causal_blocks"), ("flex_window", "sdpa_mask"), ("flex_window", "sdpa_causal"),
              ("flex_causal_blocks", "sdpa_causal"))  # each ratio timed as neighbours: first / second


def measure_flex(workload: DecodeWorkload, threads: int) -> dict:
    """In a fresh process: one window attention call, compiled FlexAttention against SDPA, as neighbouring pairs.

    Each pair of FLEX_PAIRS is timed back to back in alternating order (as lessons 8 and 9 time their
    steps), so both sides of a ratio share the input and the machine's moment; `ratios` holds each pair's
    ratio of medians, `median_ms` the median of every call of a way.
    """
    if not can_compile():
        return {"error": "torch.compile cannot build CPU kernels here (no C++ compiler, or ATEN_CPU_CAPABILITY=default)"}
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    shape = (1, workload.num_heads, workload.flex_length, workload.d_model // workload.num_heads)
    queries, keys, values = (torch.randn(shape) for _ in range(3))
    contenders = flex_contenders(workload)
    with torch.inference_mode():
        outputs = {key: attend(queries, keys, values) for key, (_, attend) in contenders.items()}  # compiles
        reference = outputs["sdpa_mask"]
        agree = {key: float((out - reference).abs().max()) for key, out in outputs.items() if key != "sdpa_causal"}
        times: dict[str, list[float]] = {key: [] for key in contenders}
        ratios = {}
        for first, second in FLEX_PAIRS:
            pair: dict[str, list[float]] = {first: [], second: []}
            for call in range(workload.flex_calls):
                for key in (first, second) if call % 2 == 0 else (second, first):
                    start = time.perf_counter()
                    contenders[key][1](queries, keys, values)
                    pair[key].append(time.perf_counter() - start)
            ratios[f"{first}/{second}"] = statistics.median(pair[first]) / statistics.median(pair[second])
            for key, found in pair.items():
                times[key] += found
    tiles = window_block_mask(workload.flex_length, workload.flex_window, block_size=workload.flex_block)
    blocks = workload.flex_length // workload.flex_block
    return {
        "shape": list(shape),
        "window": workload.flex_window,
        "block": workload.flex_block,
        "visited_tiles": int(tiles.kv_num_blocks.sum()),
        "causal_tiles": blocks * (blocks + 1) // 2,
        "max_difference": agree,
        "median_ms": {key: 1e3 * statistics.median(found) for key, found in times.items()},
        "ratios": ratios,
        "calls_per_pair": workload.flex_calls,
        "labels": {key: list(label) for key, (label, _) in contenders.items()},
    }


def measure_all_decode(workload: DecodeWorkload, threads: int) -> dict:
    """Every variant at every length, then FlexAttention, each in a fresh process; failures become notes."""
    rows, notes = [], []
    runs = [(key, length) for length in workload.lengths for key in VARIANTS]
    for key, length in tqdm(runs, desc="decode", unit="run"):
        found = run_in_child(measure_decode, workload, key, length, threads)
        if "error" in found:
            notes.append(f"{VARIANTS[key].name[0]} at T={length}: {found['error']}")
        else:
            rows.append(found)
    flex = run_in_child(measure_flex, workload, threads)
    if "error" in flex:
        notes.append(f"FlexAttention: {flex['error']}")
    return {"rows": rows, "flex": flex, "notes": notes}
