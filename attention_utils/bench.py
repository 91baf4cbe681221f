"""Benchmark of the series' attention implementations on one GPT-2-small attention layer.

    python -m attention_utils.bench            # full run: build/bench/, figures/bench_*.png, README table
    python -m attention_utils.bench --quick    # 30-second smoke run into build/bench/quick/
    python -m attention_utils.bench --check    # full run that fails unless the fused module meets its targets
    python -m attention_utils.bench --kernel   # only lesson 9's kernel memory: explicit vs tiled vs SDPA
    python -m attention_utils.bench --same-process --check   # only redo the same-process comparison

A full run saves what the lessons and the README quote in figures/bench_results.json and
figures/bench_kernel.json (committed), and draws every figure in English and in Chinese.

Every measurement (implementation, mode, length, round) runs in a child process forked from this
one before it has run any torch operation, so each child starts clean and its peak resident
memory (ru_maxrss, which sees torch's allocations, unlike tracemalloc) is its own. Each round
visits every configuration once, the implementations of each in a rotated order, so a machine
that gets busier for a while slows them all alike and spoils at most one sample of each.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import torch

# The first backward makes torch.autograd import sympy (via symbolic_shapes); importing it here, before
# the forks, keeps about a second and 40 MiB of imports out of every training measurement.
import torch.fx.experimental.symbolic_shapes  # noqa: F401
from torch import nn
from torch.nn import functional as F
from tqdm import tqdm

from .functional import causal_mask
from .modules import FusedMultiHeadAttention, MultiHeadAttention, MultiHeadAttentionWrapper
from .tiled import tiled_attention

ROOT = Path(__file__).resolve().parents[1]
SAVED = ROOT / "figures" / "bench_results.json"  # what lesson 8 and the README quote
SAVED_KERNEL = ROOT / "figures" / "bench_kernel.json"  # what lesson 9 quotes
LANGUAGES = ("en", "zh")
MODES = ("inference", "training")
DROPOUT = 0.1
MIB = 2**20


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
    "wrapper": Implementation(("wrapper of single heads", "单头拼接（wrapper）"), wrapper_of_heads, explicit=True),
    "book": Implementation(("MultiHeadAttention (book)", "书中的 MultiHeadAttention"), lambda mha: mha, explicit=True),
    "explicit": Implementation(
        ("one QKV matmul, explicit softmax", "合并 QKV + 显式 softmax"),
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
        (f"fused, dropout {DROPOUT} (math fallback)", f"融合 + dropout {DROPOUT}（退回数学实现）"),
        fused_with_dropout,
        modes=("training",),  # dropout only acts in training
        explicit=True,
    ),
    "bool_mask": Implementation(("SDPA, boolean causal mask", "SDPA + 布尔因果掩码"), BoolMaskAttention.from_multihead),
    "compiled": Implementation(
        ("torch.compile(book)", "torch.compile（书中版本）"),
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


def peak_rss() -> int:
    """Highest resident memory of this process so far, in bytes (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def restart_peak_rss() -> int | None:
    """Start the peak over from the current resident memory and return it (Linux only, else None)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return peak_rss()


def measure(key: str, mode: str, length: int, workload: Workload, threads: int) -> dict:
    """Build one implementation in this fresh process, take the peak memory of one call, then time calls."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    implementation = IMPLEMENTATIONS[key]
    training = mode == "training"
    book = MultiHeadAttention(workload.d_model, workload.d_model, length, 0.0, workload.num_heads)
    module = implementation.build(book).train(training)

    def inputs(batch: int, num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch, num_tokens, workload.d_model, requires_grad=training)
        return x, torch.randn_like(x)  # the input and the gradient that arrives from the layers above

    def step(x: torch.Tensor, grad: torch.Tensor) -> None:
        if training:  # forward and backward, with fresh gradients as after optimizer.zero_grad()
            module.zero_grad(set_to_none=True)
            x.grad = None
            module(x).backward(grad)
        else:
            with torch.inference_mode():
                module(x)

    full = inputs(workload.batch, length)
    # One-off costs (thread pools, lazy kernels, compilation) should land before the baseline. A tiny
    # call pays them, except for compilation, which is shape specific and needs the full-size call.
    step(*(full if implementation.compiles else inputs(1, 8)))
    baseline = restart_peak_rss() if implementation.compiles else peak_rss()
    step(*full)  # memory: the peak of one full-size call above the baseline
    memory = math.nan if baseline is None else (peak_rss() - baseline) / MIB
    times: list[float] = []
    while not times or (len(times) < workload.max_calls and sum(times) < workload.seconds):
        start = time.perf_counter()
        step(*full)
        times.append(time.perf_counter() - start)
    return {"times": times, "memory_mib": memory}


SAME_PROCESS = ("book", "explicit", "fused", "bare", "bool_mask")  # the steps lesson 8 attributes the speed-up to
SAME_PROCESS_PAIRS = (("book", "explicit"), ("explicit", "fused"), ("fused", "bare"), ("bool_mask", "fused"))
SAME_PROCESS_CALLS = 15


def measure_interleaved(workload: Workload, length: int, calls: int, threads: int) -> dict:
    """The steps from the book's module to the bare floor, timed in one process, inference.

    Separate processes differ by more than the few percent the module's checks may cost, and a busy
    machine slows one process more than another. So each step is timed as a pair of neighbours in one
    process, back to back and in alternating order (the book's module against one QKV matmul, that
    against the fused module, the fused module against the bare floor and against a boolean mask):
    both sides of a ratio share the input, the machine's moment and what ran just before.
    """
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    book = MultiHeadAttention(workload.d_model, workload.d_model, length, 0.0, workload.num_heads)
    modules = {key: IMPLEMENTATIONS[key].build(book).eval() for key in SAME_PROCESS}
    x = torch.randn(workload.batch, length, workload.d_model)
    times: dict[str, list[float]] = {key: [] for key in modules}
    ratios = {}
    with torch.inference_mode():
        for module in modules.values():
            module(x)  # warm-up
        for first, second in SAME_PROCESS_PAIRS:
            pair: dict[str, list[float]] = {first: [], second: []}
            for call in range(calls):
                for key in (first, second) if call % 2 == 0 else (second, first):
                    start = time.perf_counter()
                    modules[key](x)
                    pair[key].append(time.perf_counter() - start)
            ratios[f"{first}/{second}"] = statistics.median(pair[first]) / statistics.median(pair[second])
            for key, found in pair.items():
                times[key] += found
    median_ms = {key: 1e3 * statistics.median(found) for key, found in times.items()}
    return {"length": length, "calls": calls, "median_ms": median_ms, "ratios": ratios,
            "fused_over_bare": ratios["fused/bare"]}


# Lesson 9's kernel comparison: one causal attention call on (batch, heads, T, head_dim) tensors.
KERNEL_SHAPE = dict(batch=1, heads=8, head_dim=64)
KERNEL_LENGTHS = (1024, 2048, 4096, 8192)
KERNEL_EXPLICIT_LIMIT = 4096  # the explicit (T, T) scores at 8192 would need several GiB
KERNEL_BLOCK = 128
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


def measure_kernel(key: str, length: int, threads: int) -> dict:
    """In a fresh process: the extra peak memory of one causal attention call at length T, then its time."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    attend = KERNELS[key][1]
    shape = (KERNEL_SHAPE["batch"], KERNEL_SHAPE["heads"], length, KERNEL_SHAPE["head_dim"])
    with torch.inference_mode():
        attend(*(torch.randn(1, 1, 8, KERNEL_SHAPE["head_dim"]) for _ in range(3)))  # one-off costs first
        queries, keys, values = (torch.randn(shape) for _ in range(3))
        baseline = peak_rss()
        attend(queries, keys, values)
        memory = (peak_rss() - baseline) / MIB
        times: list[float] = []
        while not times or (len(times) < 3 and sum(times) < 0.5):
            start = time.perf_counter()
            attend(queries, keys, values)
            times.append(time.perf_counter() - start)
    return {"memory_mib": memory, "median_ms": 1e3 * statistics.median(times)}


def time_kernels_together(length: int, calls: int, threads: int) -> dict:
    """The three kernels timed in one process at one length, the order rotated every round: fair under load."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    shape = (KERNEL_SHAPE["batch"], KERNEL_SHAPE["heads"], length, KERNEL_SHAPE["head_dim"])
    queries, keys, values = (torch.randn(shape) for _ in range(3))
    order = list(KERNELS)
    times: dict[str, list[float]] = {key: [] for key in order}
    with torch.inference_mode():
        for key in order:
            KERNELS[key][1](queries, keys, values)  # warm-up
        for call in range(calls):
            for key in order[call % len(order):] + order[: call % len(order)]:
                start = time.perf_counter()
                KERNELS[key][1](queries, keys, values)
                times[key].append(time.perf_counter() - start)
    return {"length": length, "calls": calls, "median_ms": {key: 1e3 * statistics.median(t) for key, t in times.items()}}


def measure_kernels(threads: int, rounds: int = KERNEL_ROUNDS) -> dict:
    """Every kernel at every length, each in `rounds` fresh processes; medians and fitted slopes."""
    runs = [(key, t) for t in KERNEL_LENGTHS for key in KERNELS if key != "explicit" or t <= KERNEL_EXPLICIT_LIMIT]
    samples: dict[tuple[str, int], list[dict]] = {run: [] for run in runs}
    for _ in tqdm(range(rounds), desc="kernels", unit="round"):
        for key, length in runs:
            result = run_in_child(measure_kernel, key, length, threads)
            if "error" not in result:
                samples[key, length].append(result)
    rows = [
        {
            "kernel": key,
            "label": KERNELS[key][0],
            "length": length,
            "memory_mib": statistics.median(r["memory_mib"] for r in found),
            "median_ms": statistics.median(r["median_ms"] for r in found),
        }
        for (key, length), found in samples.items()
        if found
    ]
    slopes = {}
    for key in KERNELS:
        own = sorted((r for r in rows if r["kernel"] == key), key=lambda r: r["length"])
        upper = [r for r in own if r["length"] >= 2048]  # the range where fixed costs no longer dominate
        slopes[key] = {
            "memory": loglog_slope([r["length"] for r in upper], [r["memory_mib"] for r in upper]),
            "time": loglog_slope([r["length"] for r in upper], [r["median_ms"] for r in upper]),
        }
    return {
        "environment": environment(threads),
        "shape": KERNEL_SHAPE,
        "block_size": KERNEL_BLOCK,
        "rounds": rounds,
        "rows": rows,
        "slopes_from_2048": slopes,
        "same_process": run_in_child(time_kernels_together, 2048, 7, threads),
    }


def _child(send: Connection, function: Callable[..., dict], *args) -> None:
    """Entry point of a forked process: send back the measurement, or the error instead of a traceback."""
    try:
        send.send(function(*args))
    except Exception as error:  # any failure becomes a note in the results, e.g. torch.compile without a compiler
        send.send({"error": f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"})


def run_in_child(function: Callable[..., dict], *args) -> dict:
    """Run function(*args) in a freshly forked process and return the dict it made."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(send, function, *args))
    process.start()
    send.close()
    try:
        result = receive.recv()
    except EOFError:
        result = None
    process.join()
    return result or {"error": f"the process died with exit code {process.exitcode} (out of memory?)"}


def plan(workload: Workload) -> dict[tuple[str, int], list[str]]:
    """The implementations to run for each (mode, length), leaving out the ones notes() explains."""
    groups: dict[tuple[str, int], list[str]] = {}
    limit = workload.explicit_training_limit
    for mode in MODES:
        for length in workload.lengths:
            groups[mode, length] = [
                key
                for key, implementation in IMPLEMENTATIONS.items()
                if mode in implementation.modes
                and (workload.compile or not implementation.compiles)
                and not (mode == "training" and implementation.explicit and limit is not None and length > limit)
            ]
    return groups


def notes(workload: Workload) -> list[str]:
    """What plan() leaves out, and why."""
    found = []
    if workload.explicit_training_limit is not None and max(workload.lengths) > workload.explicit_training_limit:
        found.append(
            f"Implementations that store (T, T) matrices are not trained beyond T={workload.explicit_training_limit}, "
            "to keep the full run under 15 minutes on 2 cores."
        )
    if workload.compile:
        found.append(
            "torch.compile is measured for inference only: compiling the backward in every process would dominate the run."
        )
    else:
        found.append("torch.compile is left out of --quick: compiling takes longer than the whole quick run.")
    return found


def measure_all(workload: Workload, threads: int) -> tuple[dict, list[str]]:
    """Run each configuration `workload.rounds` times, each time in a new process, implementations interleaved."""
    groups = plan(workload)
    runs = [(key, mode, length) for (mode, length), keys in groups.items() for key in keys]
    samples: dict[tuple[str, str, int], dict] = {run: {"times": [], "memory_mib": []} for run in runs}
    problems, failed = [], set()
    with tqdm(total=len(samples) * workload.rounds, desc="bench", unit="run") as bar:
        for round_ in range(workload.rounds):  # rounds lie minutes apart, so one burst of load spoils one round
            for (mode, length), keys in groups.items():
                shift = round_ % len(keys)
                for key in keys[shift:] + keys[:shift]:  # a different implementation goes first each round
                    bar.set_postfix_str(f"{mode} T={length} {key}")
                    bar.update()
                    if key in failed:
                        continue
                    result = run_in_child(measure, key, mode, length, workload, threads)
                    if "error" in result:
                        failed.add(key)
                        label = IMPLEMENTATIONS[key].label[0]
                        problems.append(f"{label} stopped at {mode}, T={length}: {result['error']}")
                        continue
                    samples[key, mode, length]["times"] += result["times"]
                    samples[key, mode, length]["memory_mib"].append(result["memory_mib"])
    return {run: sample for run, sample in samples.items() if sample["times"]}, notes(workload) + problems


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Exponent k of y ~ x^k: least-squares slope on log-log axes (nan with fewer than two points)."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y > 0]
    if len(points) < 2:
        return math.nan
    return statistics.linear_regression(*zip(*points)).slope


def reference_length(lengths: Sequence[int]) -> int:
    """The length the README table, the traps and the same-process check report: 1024 when measured."""
    return 1024 if 1024 in lengths else max(lengths)


def by_run(rows: list[dict]) -> dict[tuple[str, str, int], dict]:
    """Index summary rows by (implementation, mode, length)."""
    return {(row["implementation"], row["mode"], row["length"]): row for row in rows}


def series(rows: list[dict], key: str, mode: str) -> list[dict]:
    """One implementation's rows in one mode, shortest sequence first."""
    return sorted((r for r in rows if r["implementation"] == key and r["mode"] == mode), key=lambda r: r["length"])


def summarize(samples: dict, workload: Workload) -> dict:
    """Medians, speed-ups, fused/floor ratios and fitted exponents from the raw samples."""
    rows = [
        {
            "implementation": key,
            "label": IMPLEMENTATIONS[key].label[0],
            "mode": mode,
            "length": length,
            "median_ms": 1e3 * statistics.median(sample["times"]),
            "min_ms": 1e3 * min(sample["times"]),
            "max_ms": 1e3 * max(sample["times"]),
            "calls": len(sample["times"]),
            "memory_mib": statistics.median(sample["memory_mib"]),
        }
        for (key, mode, length), sample in samples.items()
    ]
    index = by_run(rows)
    for row in rows:
        wrapper = index.get(("wrapper", row["mode"], row["length"]))
        row["speedup_vs_wrapper"] = wrapper["median_ms"] / row["median_ms"] if wrapper else math.nan
    ratios = [
        {"mode": mode, "length": length, "fused_over_bare": fused["median_ms"] / index["bare", mode, length]["median_ms"]}
        for (key, mode, length), fused in index.items()
        if key == "fused" and ("bare", mode, length) in index
    ]
    fits = [
        {
            "implementation": key,
            "mode": mode,
            "time_exponent": loglog_slope([r["length"] for r in own], [r["median_ms"] for r in own]),
            "memory_exponent": loglog_slope([r["length"] for r in own], [r["memory_mib"] for r in own]),
        }
        for key in IMPLEMENTATIONS
        for mode in MODES
        if (own := series(rows, key, mode))
    ]
    return {"workload": asdict(workload), "rows": rows, "ratios": ratios, "fits": fits}


def environment(threads: int) -> dict:
    """Versions and machine facts that the numbers depend on."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        models = [line.split(":", 1)[1] for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        cpu = models[0].strip() if models else cpu
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": threads,
        "cpu": cpu,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "date": time.strftime("%Y-%m-%d"),
    }


def check(results: dict) -> list[tuple[str, bool]]:
    """The targets, as ratios of medians from this run: (description, passed) pairs.

    The check cost is judged in one process with interleaved calls: fused/bare ratios from separate
    processes are still printed, but on a shared machine they swing by more than the 3% at stake.
    """
    index = by_run(results["rows"])
    fused, book = index["fused", "inference", 1024], index["book", "inference", 1024]
    speedup = book["median_ms"] / fused["median_ms"]
    memory = fused["memory_mib"] / book["memory_mib"]
    same_process = results["interleaved"]
    return [
        (f"fused at least 2.5x faster than the book's module, inference T=1024: {speedup:.2f}x", speedup >= 2.5),
        (f"fused needs at most 15% of the book's extra peak memory, inference T=1024: {memory:.1%}", memory <= 0.15),
        (
            f"fused at most 1.03x the bare floor, one process, {same_process['calls']} interleaved calls each, "
            f"inference T={same_process['length']}: {same_process['fused_over_bare']:.3f}",
            same_process["fused_over_bare"] <= 1.03,
        ),
    ]


def markdown(results: dict) -> str:
    """The README section: setup line, a table at one length, notes, the traps in both languages, figures."""
    env, work = results["environment"], results["workload"]
    length = reference_length(work["lengths"])
    index = by_run(results["rows"])
    fits = {(f["implementation"], f["mode"]): f for f in results["fits"]}
    lines = [
        f"Written by `make bench` on {env['date']}: {env['cpu']}, {env['threads']} threads, torch {env['torch']}; "
        f"batch {work['batch']}, d_model {work['d_model']}, {work['num_heads']} heads (GPT-2 small), T = {length}. "
        "Times are medians of all timed calls (min–max), each configuration measured in "
        f"{work['rounds']} fresh process{'' if work['rounds'] == 1 else 'es'}; memory is the extra peak resident memory of one call; "
        f"exponents are least-squares slopes on log-log axes over T = {', '.join(map(str, work['lengths']))}.",
        "",
        "| implementation | inference ms | × wrapper | MiB | training ms | × wrapper | MiB | time ~ T^k | memory ~ T^k |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, implementation in IMPLEMENTATIONS.items():
        rows = [index.get((key, mode, length)) for mode in MODES]
        if not any(rows):
            continue
        cells = [implementation.label[0]]
        for row in rows:
            cells += (
                [
                    f"{row['median_ms']:.0f} ({row['min_ms']:.0f}–{row['max_ms']:.0f})",
                    f"{row['speedup_vs_wrapper']:.1f}",
                    f"{row['memory_mib']:.0f}",
                ]
                if row
                else ["–"] * 3
            )
        fit = fits.get((key, "inference")) or fits[key, "training"]
        cells += [f"{fit['time_exponent']:.2f} ({fit['mode']})", f"{fit['memory_exponent']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *(f"- {note}" for note in results["notes"]), "", *traps(index, length)]
    same_process = results["interleaved"]
    ms = same_process["median_ms"]
    steps_en = ", ".join(f"{IMPLEMENTATIONS[key].label[0]} {ms[key]:.0f} ms" for key in SAME_PROCESS)
    steps_zh = "，".join(f"{IMPLEMENTATIONS[key].label[1]} {ms[key]:.0f} 毫秒" for key in SAME_PROCESS)
    lines += [
        "",
        f"Timed in one process, as pairs of neighbouring steps called back to back in alternating order "
        f"({same_process['calls']} calls each side, inference, T={same_process['length']}; fair even on a busy machine): "
        f"{steps_en}. The fused module took {same_process['fused_over_bare']:.3f}x the time of the bare floor.",
        "",
        f"在同一进程内把相邻的两步配成一对，紧挨着、交替先后地计时（每边调用 {same_process['calls']} 次，推理，"
        f"T={same_process['length']}；即使机器繁忙，比较也是公平的）：{steps_zh}。"
        f"融合模块的耗时是裸 SDPA 下限的 {same_process['fused_over_bare']:.3f} 倍。",
    ]
    lines += ["", "![time](figures/bench_time_en.png)", "", "![memory](figures/bench_memory_en.png)"]
    return "\n".join(lines)


def traps(index: dict, length: int) -> list[str]:
    """The traps, in English and in Chinese, each with what it cost in this run."""

    def cost(key: str, mode: str) -> str:
        slow, fused = index.get((key, mode, length)), index.get(("fused", mode, length))
        return f"{slow['median_ms'] / fused['median_ms']:.1f}" if slow and fused else "?"

    mask, native = cost("bool_mask", "inference"), cost("torch_mha", "inference")
    dropout = cost("fused_dropout", "training")
    return [
        "Traps: SDPA reads a boolean `attn_mask` as True = may attend, the opposite of this package and of "
        "`nn.MultiheadAttention`, so an inverted mask silently looks into the future; a causal mask passed as a "
        f"tensor instead of `is_causal=True` takes {mask}x as long (the kernel must visit the upper triangle); any "
        f"`dropout_p > 0` sends CPU SDPA to its math fallback ({dropout}x as long in training); and the inference "
        f"fast path of `nn.MultiheadAttention` drops `is_causal` and applies the full mask ({native}x as long). "
        f"Times at T={length}, relative to the fused module.",
        "",
        "陷阱：SDPA 的布尔 `attn_mask` 中 True 表示“可以关注”，与辅助包和 `nn.MultiheadAttention` 的约定正好相反，"
        f"掩码写反就会悄悄看到未来；用张量传因果掩码而不用 `is_causal=True`，耗时是融合模块的 {mask} 倍"
        "（内核必须计算上三角）；只要 `dropout_p > 0`，CPU 上的 SDPA 就会退回通用的数学实现（math 后端，"
        f"即按公式逐步计算、存下完整矩阵），训练时耗时是融合模块的 {dropout} 倍；"
        f"`nn.MultiheadAttention` 推理时的快速路径会丢掉 `is_causal`、改用完整掩码，耗时是融合模块的 {native} 倍。"
        f"以上均为 T={length} 时的测量结果。",
    ]


def update_readme(section: str, readme: Path = ROOT / "README.md") -> None:
    """Replace what lies between the bench markers of the README, keeping the markers."""
    start, end = "<!-- bench:start -->", "<!-- bench:end -->"
    head, rest = readme.read_text(encoding="utf-8").split(start, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(f"{head}{start}\n{section}\n{end}{tail}", encoding="utf-8")


def plot(results: dict, folder: Path, language: str) -> list[Path]:
    """Time and memory against length, log-log, one line per implementation; return the PNG paths."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from .plotting import set_language, text

    set_language(language)
    fits = {(f["implementation"], f["mode"]): f for f in results["fits"]}
    work, env = results["workload"], results["environment"]
    emphasis = {
        "fused": dict(color="crimson", linewidth=5, alpha=0.6, zorder=4),
        "bare": dict(color="black", linestyle="--", linewidth=1.8, zorder=5),
    }
    titles = {
        "inference": text("inference (forward)", "推理（前向）"),
        "training": text("training (forward + backward)", "训练（前向 + 反向）"),
    }
    paths = []
    for quantity, column, ylabel in (
        ("time", "median_ms", text("time per call (ms)", "每次调用耗时（毫秒）")),
        ("memory", "memory_mib", text("extra peak memory (MiB)", "额外峰值内存（MiB）")),
    ):
        figure = Figure(figsize=(13, 5.5), layout="constrained")
        FigureCanvasAgg(figure)  # render with Agg, whatever backend pyplot is using
        for ax, mode in zip(figure.subplots(1, 2), MODES):
            for index, (key, implementation) in enumerate(IMPLEMENTATIONS.items()):
                own = series(results["rows"], key, mode)
                if not own:
                    continue
                x = [r["length"] for r in own]
                style = emphasis.get(key, dict(color=f"C{index}", linewidth=1.2))
                label = f"{text(*implementation.label)}  (T^{fits[key, mode][quantity + '_exponent']:.2f})"
                ax.plot(x, [r[column] for r in own], marker="o", markersize=3, label=label, **style)
                if quantity == "time":  # the spread of the timed calls
                    low, high = [r["min_ms"] for r in own], [r["max_ms"] for r in own]
                    ax.fill_between(x, low, high, color=style["color"], alpha=0.08)
            if quantity == "memory":  # slopes 1 and 2, drawn from the floor's and the book's first points
                for power, key, label, linestyle in ((1, "bare", "guide ∝ T", ":"), (2, "book", "guide ∝ T²", "-.")):
                    own = series(results["rows"], key, mode)
                    x = [r["length"] for r in own]
                    guide = [own[0][column] * (t / x[0]) ** power for t in x]
                    ax.plot(x, guide, color="dimgrey", linestyle=linestyle, linewidth=1.6,
                            label=text(label, label.replace("guide", "参考线")))
            ax.set(xscale="log", yscale="log", title=titles[mode], ylabel=ylabel)
            ax.set_xlabel(text("sequence length T", "序列长度 T"))
            ax.set_xticks(work["lengths"], [str(t) for t in work["lengths"]])
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
        figure.suptitle(
            text(
                f"GPT-2-small attention: batch {work['batch']}, d_model {work['d_model']}, {work['num_heads']} heads; "
                f"{env['threads']} threads, torch {env['torch']}",
                f"GPT-2 small 注意力层：批大小 {work['batch']}，d_model {work['d_model']}，{work['num_heads']} 个头；"
                f"{env['threads']} 个线程，torch {env['torch']}",
            )
        )
        path = folder / f"bench_{quantity}_{language}.png"
        figure.savefig(path, dpi=110)
        paths.append(path)
    return paths


def report(results: dict) -> str:
    """A plain-text summary for the terminal."""
    lines = [f"{key}: {value}" for key, value in results["environment"].items()]
    for row in sorted(results["rows"], key=lambda r: (r["mode"], r["length"], r["median_ms"])):
        lines.append(
            f"{row['mode']:9} T={row['length']:<5} {row['label']:38} {row['median_ms']:9.1f} ms "
            f"({row['min_ms']:.1f}–{row['max_ms']:.1f}, {row['calls']} calls) {row['memory_mib']:8.1f} MiB "
            + ("" if math.isnan(row["speedup_vs_wrapper"]) else f"{row['speedup_vs_wrapper']:6.2f}x the wrapper")
        )
    lines += [f"fused/bare {r['mode']:9} T={r['length']:<5} {r['fused_over_bare']:.3f}" for r in results["ratios"]]
    lines += [
        f"exponents {f['implementation']:13} {f['mode']:9} time {f['time_exponent']:.2f}, memory {f['memory_exponent']:.2f}"
        for f in results["fits"]
    ]
    return "\n".join(lines + results["notes"])


def write(results: dict, folder: Path) -> None:
    """Save the results as JSON (everything) and CSV (one row per implementation, mode and length)."""
    folder.mkdir(parents=True, exist_ok=True)
    save_json(results, folder / "results.json")
    with open(folder / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(results["rows"][0]))
        writer.writeheader()
        writer.writerows(results["rows"])


def save_json(results: dict, path: Path) -> None:
    """Write results as indented UTF-8 JSON."""
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_saved(path: Path = SAVED) -> dict:
    """The results of the last full `make bench`, as committed next to the figures."""
    return json.loads(path.read_text(encoding="utf-8"))


def headline(results: dict, language: str = "en") -> list[str]:
    """The numbers lesson 8 quotes, one line each, in English or Chinese, all at T=1024."""
    index = by_run(results["rows"])
    same = results["interleaved"]
    ms = same["median_ms"]

    def training(key: str) -> dict:
        return index[key, "training", 1024]

    values = dict(
        calls=same["calls"], book=ms["book"], explicit=ms["explicit"], fused=ms["fused"], bare=ms["bare"],
        one_qkv=same["ratios"]["book/explicit"], sdpa=same["ratios"]["explicit/fused"], floor=same["fused_over_bare"],
        mask_ratio=same["ratios"]["bool_mask/fused"],
        train=training("fused")["median_ms"], train_mib=training("fused")["memory_mib"],
        drop=training("fused_dropout")["median_ms"], drop_mib=training("fused_dropout")["memory_mib"],
        book_train=training("book")["median_ms"], book_train_mib=training("book")["memory_mib"],
        drop_ratio=training("fused_dropout")["median_ms"] / training("fused")["median_ms"],
    )
    english = [
        "inference, one process, timed in alternating pairs ({calls} calls each side): book {book:.0f} ms, one QKV matmul {explicit:.0f} ms, "
        "fused module {fused:.0f} ms, bare floor {bare:.0f} ms",
        "  one QKV matmul: {one_qkv:.2f}x as fast as the book; SDPA on top: {sdpa:.2f}x as fast again",
        "  fused module / bare floor: {floor:.3f}",
        "training, separate processes: fused {train:.0f} ms, {train_mib:.0f} MiB; fused with dropout {drop:.0f} ms, "
        "{drop_mib:.0f} MiB ({drop_ratio:.1f}x the time); book {book_train:.0f} ms, {book_train_mib:.0f} MiB",
        "boolean causal mask instead of is_causal=True (one process): {mask_ratio:.2f}x the time",
    ]
    chinese = [
        "推理，同一进程内两两交替计时（每边 {calls} 次）：书中模块 {book:.0f} 毫秒，合并 QKV 后 {explicit:.0f} 毫秒，"
        "融合模块 {fused:.0f} 毫秒，裸 SDPA 下限 {bare:.0f} 毫秒",
        "  合并 QKV：速度是书中模块的 {one_qkv:.2f} 倍；再换 SDPA：速度又是前者的 {sdpa:.2f} 倍",
        "  融合模块与裸 SDPA 下限的耗时之比：{floor:.3f}",
        "训练，各自独立的进程：融合模块 {train:.0f} 毫秒、{train_mib:.0f} MiB；带 dropout 的融合模块 {drop:.0f} 毫秒、"
        "{drop_mib:.0f} MiB（耗时是前者的 {drop_ratio:.1f} 倍）；书中模块 {book_train:.0f} 毫秒、{book_train_mib:.0f} MiB",
        "用布尔因果掩码代替 is_causal=True（同一进程）：耗时是融合模块的 {mask_ratio:.2f} 倍",
    ]
    return [line.format(**values) for line in (chinese if language == "zh" else english)]


def main(argv: list[str] | None = None) -> int:
    """Command line: measure (or --replot), write results, figures and README; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m attention_utils.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, no compile; writes only build/bench/quick/")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the fused module meets its targets")
    parser.add_argument("--replot", action="store_true", help="redraw figures and README from the saved results")
    parser.add_argument("--same-process", action="store_true",
                        help="only redo the same-process comparison into the saved results, then redraw and update the README")
    parser.add_argument("--kernel", action="store_true", help="only measure lesson 9's kernels into figures/bench_kernel.json")
    parser.add_argument("--rounds", type=int, help="fresh processes per configuration (default: 3, or 2 for --kernel)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: all cores)")
    parser.add_argument("--out", type=Path, help="results folder (default build/bench/, or build/bench/quick/)")
    args = parser.parse_args(argv)
    if args.check and args.quick:
        parser.error("--check needs the full workload; leave out --quick")
    out = args.out or ROOT / "build" / "bench" / ("quick" if args.quick else "")
    began = time.perf_counter()
    if args.kernel:
        save_json(measure_kernels(args.threads, args.rounds or KERNEL_ROUNDS), SAVED_KERNEL)
        print(f"kernel results in {SAVED_KERNEL}; {time.perf_counter() - began:.0f} s")
        return 0
    workload = QUICK if args.quick else FULL
    if args.rounds:
        workload = dataclasses.replace(workload, rounds=args.rounds)
    if args.replot or args.same_process:
        results = load_saved()
        if args.same_process:
            length = reference_length(workload.lengths)
            results["interleaved"] = run_in_child(measure_interleaved, workload, length, SAME_PROCESS_CALLS, args.threads)
    else:
        samples, found = measure_all(workload, args.threads)
        length = reference_length(workload.lengths)
        interleaved = run_in_child(measure_interleaved, workload, length, 5 if args.quick else SAME_PROCESS_CALLS, args.threads)
        found.append(f"The measurements took {time.perf_counter() - began:.0f} s.")
        results = {
            "environment": environment(args.threads),
            **summarize(samples, workload),
            "interleaved": interleaved,
            "notes": found,
        }
    if args.check:
        results["checks"] = [{"target": target, "passed": passed} for target, passed in check(results)]
    write(results, out)
    figures = out if args.quick else ROOT / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    for language in LANGUAGES:
        plot(results, figures, language)
    if not args.quick:
        save_json(results, SAVED)
        update_readme(markdown(results))
        if not (args.replot or args.same_process):
            save_json(measure_kernels(args.threads, args.rounds or KERNEL_ROUNDS), SAVED_KERNEL)
    print(report(results))
    for item in results.get("checks", []):
        print(("PASS " if item["passed"] else "FAIL ") + item["target"])
    print(f"results in {out}, figures in {figures}; {time.perf_counter() - began:.0f} s in all")
    return 0 if all(item["passed"] for item in results.get("checks", [])) else 1


if __name__ == "__main__":
    sys.exit(main())
