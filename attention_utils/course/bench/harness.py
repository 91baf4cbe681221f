"""The harness: every measurement in a freshly forked process, its time and its extra peak memory.

Every measurement (implementation, mode, length, round) runs in a child process forked from this
one before it has run any torch operation, so each child starts clean and its peak resident
memory (ru_maxrss, which sees torch's allocations, unlike tracemalloc) is its own. Each round
visits every configuration once, the implementations of each in a rotated order, so a machine
that gets busier for a while slows them all alike and spoils at most one sample of each.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import multiprocessing
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import torch

# The first backward makes torch.autograd import sympy (via symbolic_shapes); importing it here, before
# the forks, keeps about a second and 40 MiB of imports out of every training measurement.
import torch.fx.experimental.symbolic_shapes  # noqa: F401
from tqdm import tqdm

from ...modules import MultiHeadAttention
from ...results import loglog_slope
from ...tiled import tiled_attention
from .implementations import (
    IMPLEMENTATIONS,
    KERNEL_BLOCK,
    KERNEL_EXPLICIT_LIMIT,
    KERNEL_LENGTHS,
    KERNEL_ROUNDS,
    KERNEL_SHAPE,
    KERNEL_TILE_SIZES,
    KERNELS,
    MODES,
    SAME_PROCESS,
    SAME_PROCESS_PAIRS,
    SAME_PROCESS_REPEATS,
    Workload,
)

MIB = 2**20


def peak_rss() -> int:
    """Highest resident memory of this process so far, in bytes (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def restart_peak_rss() -> int | None:
    """Start the peak over from the current resident memory and return it (Linux only, else None).

    Memory the process freed but still holds would be reused without raising the peak, so glibc is first
    asked to give it back (a forked child of a long-lived process, such as a test worker, holds plenty)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
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


def measure_interleaved(workload: Workload, length: int, calls: int, threads: int, repeats: int = SAME_PROCESS_REPEATS) -> dict:
    """The steps from the book's module to the bare floor, timed in one process, inference.

    Separate processes differ by more than the few percent the module's checks may cost, and a busy
    machine slows one process more than another. So each step is timed as a pair of neighbours in one
    process, back to back and in alternating order (the book's module against one QKV matmul, that
    against the fused module, the fused module against the bare floor and against a boolean mask):
    both sides of a ratio share the input, the machine's moment and what ran just before. The whole
    sequence of pairs runs `repeats` times, and every pair's own two medians are kept, so that the
    spread of a ratio across repeats shows how far one pair can be trusted.
    """
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    book = MultiHeadAttention(workload.d_model, workload.d_model, length, 0.0, workload.num_heads)
    modules = {key: IMPLEMENTATIONS[key].build(book).eval() for key in SAME_PROCESS}
    x = torch.randn(workload.batch, length, workload.d_model)
    times: dict[str, list[float]] = {key: [] for key in modules}
    pairs = []
    with torch.inference_mode():
        for module in modules.values():
            module(x)  # warm-up
        for repeat in range(repeats):
            for first, second in SAME_PROCESS_PAIRS:
                pair = time_pair(modules, first, second, x, calls)
                pairs.append({"repeat": repeat, "first": first, "second": second,
                              "first_ms": 1e3 * statistics.median(pair[first]),
                              "second_ms": 1e3 * statistics.median(pair[second])})
                pairs[-1]["ratio"] = pairs[-1]["first_ms"] / pairs[-1]["second_ms"]
                for key, found in pair.items():
                    times[key] += found
    ratios = {f"{a}/{b}": statistics.median(p["ratio"] for p in pairs if (p["first"], p["second"]) == (a, b))
              for a, b in SAME_PROCESS_PAIRS}
    median_ms = {key: 1e3 * statistics.median(found) for key, found in times.items()}
    return {"length": length, "calls": calls, "repeats": repeats, "date": time.strftime("%Y-%m-%d"),
            "median_ms": median_ms, "pairs": pairs, "ratios": ratios, "fused_over_bare": ratios["fused/bare"]}


def time_pair(modules: dict, first: str, second: str, x: torch.Tensor, calls: int) -> dict[str, list[float]]:
    """`calls` timed calls of each of two modules, back to back, the order alternating from call to call."""
    pair: dict[str, list[float]] = {first: [], second: []}
    for call in range(calls):
        for key in (first, second) if call % 2 == 0 else (second, first):
            start = time.perf_counter()
            modules[key](x)
            pair[key].append(time.perf_counter() - start)
    return pair


def measure_kernel(key: str, length: int, threads: int) -> dict:
    """In a fresh process: the extra peak memory of one causal attention call at length T, then its time."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    attend = KERNELS[key][1]
    shape = (KERNEL_SHAPE["batch"], KERNEL_SHAPE["heads"], length, KERNEL_SHAPE["head_dim"])
    with torch.inference_mode():
        attend(*(torch.randn(1, 1, 8, KERNEL_SHAPE["head_dim"]) for _ in range(3)))  # one-off costs first
        queries, keys, values = (torch.randn(shape) for _ in range(3))
        baseline = restart_peak_rss()  # a forked child starts with its parent's peak, which may be higher
        attend(queries, keys, values)
        memory = math.nan if baseline is None else (peak_rss() - baseline) / MIB
        times: list[float] = []
        while not times or (len(times) < 3 and sum(times) < 0.5):
            start = time.perf_counter()
            attend(queries, keys, values)
            times.append(time.perf_counter() - start)
    return {"memory_mib": memory, "median_ms": 1e3 * statistics.median(times)}


def time_kernels_together(length: int, calls: int, threads: int) -> dict:
    """The three kernels in one process at one length, as neighbouring pairs in alternating order (as lesson 8's steps).

    The explicit version is timed against the tiled loop, the tiled loop against SDPA: the two kernels of a pair are
    called back to back, first one then the other, so both sides of a ratio share the input, the machine's moment
    and what ran just before. (A fixed rotation always ran one kernel right after the explicit version's (T, T)
    buffers were freed.) `ratios` holds each pair's ratio of medians; `median_ms` every call of a kernel.
    """
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    shape = (KERNEL_SHAPE["batch"], KERNEL_SHAPE["heads"], length, KERNEL_SHAPE["head_dim"])
    queries, keys, values = (torch.randn(shape) for _ in range(3))
    times: dict[str, list[float]] = {key: [] for key in KERNELS}
    ratios = {}
    with torch.inference_mode():
        for key in KERNELS:
            KERNELS[key][1](queries, keys, values)  # warm-up
        for first, second in (("explicit", "tiled"), ("tiled", "sdpa")):
            pair: dict[str, list[float]] = {first: [], second: []}
            for call in range(calls):
                for key in (first, second) if call % 2 == 0 else (second, first):
                    start = time.perf_counter()
                    KERNELS[key][1](queries, keys, values)
                    pair[key].append(time.perf_counter() - start)
            ratios[f"{first}/{second}"] = statistics.median(pair[first]) / statistics.median(pair[second])
            for key, found in pair.items():
                times[key] += found
    return {"length": length, "calls": calls, "median_ms": {key: 1e3 * statistics.median(t) for key, t in times.items()},
            "ratios": ratios}


def time_tile_sizes(length: int, calls: int, threads: int, sizes: tuple[int, int] = KERNEL_TILE_SIZES) -> dict:
    """The tiled loop at a small and a large tile, and the large one against SDPA, as neighbouring pairs in one process.

    Lesson 9's test of why the loop is slower than SDPA: larger tiles mean fewer PyTorch calls for about the same
    bytes written and read back, so a fixed cost per call shows as a loop that gets faster with larger tiles.
    """
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    shape = (KERNEL_SHAPE["batch"], KERNEL_SHAPE["heads"], length, KERNEL_SHAPE["head_dim"])
    queries, keys, values = (torch.randn(shape) for _ in range(3))
    small, large = sizes
    kernels = {f"tiled_{size}": functools.partial(tiled_attention, block_size=size, causal=True) for size in sizes}
    kernels["sdpa"] = KERNELS["sdpa"][1]
    times: dict[str, list[float]] = {key: [] for key in kernels}
    ratios = {}
    with torch.inference_mode():
        for attend in kernels.values():
            attend(queries, keys, values)  # warm-up
        for first, second in ((f"tiled_{small}", f"tiled_{large}"), (f"tiled_{large}", "sdpa")):
            for call in range(calls):
                for key in (first, second) if call % 2 == 0 else (second, first):
                    start = time.perf_counter()
                    kernels[key](queries, keys, values)
                    times[key].append(time.perf_counter() - start)
            ratios[f"{first}/{second}"] = statistics.median(times[first][-calls:]) / statistics.median(times[second][-calls:])
    return {"length": length, "calls": calls, "sizes": list(sizes),
            "median_ms": {key: 1e3 * statistics.median(t) for key, t in times.items()}, "ratios": ratios}


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
        "tile_sizes": run_in_child(time_tile_sizes, 2048, 7, threads),
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

