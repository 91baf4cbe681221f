"""Lesson 14's kernel rows in the bench's process: a compute roof per format, int8's kernel alone, a profile, threads.

- format roofs: an n × n matmul in float32 and in bfloat16 (F.linear), and torch's int8 weight kernel on
  n bfloat16 rows against an n × n int8 matrix, each in GFLOP/s: the flat roof each format can reach;
- int8 against bfloat16: every weight matrix of the model once, multiplied by one vector and by two with
  the int8 kernel alone and with a bfloat16 F.linear of the same shape, all four in one loop; the sums
  in ms (what a second row adds is paid per row, the rest once per weight read);
- a profile of a few float32 decode steps, taken here where the other timings are taken: the matrix
  products' share of the steps' own CPU time and the operators that took the most (and the same for
  bfloat16's steps, where the bench has them);
- attention by length: the float32 step profiled at each of lesson 13's prompt lengths, the lengths taking
  turns: the attention kernel's own ms a step and every operator's, so a step's growth with T can be split;
- one query's attention alone: a step's 30 SDPA calls over each layer's cache, over one layer's cache (kept
  in the core's own caches) and written as products without copies, so that growth can be split into reading and working;
- threads: the batch-1 matmul floors and the bandwidth roof on one thread and on all of them, taking turns.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from ...inference.decode_profile import attention_ms, matmul_share, profile_calls
from ...inference.weight_formats import quantize_rows


def seconds(call: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def timed_rounds(calls: dict, rounds: int) -> dict:
    """Every ms of each call: one warm call each, then `rounds` rounds of one call each, order reversed every other round."""
    for call in calls.values():
        call()
    times = {key: [] for key in calls}
    for index in range(rounds):
        for key in (list(calls) if index % 2 == 0 else list(calls)[::-1]):
            times[key].append(1e3 * seconds(calls[key]))
    return times


def alternate(calls: dict, rounds: int) -> dict:
    """Median ms of each call, timed as `timed_rounds` times them."""
    return {key: statistics.median(found) for key, found in timed_rounds(calls, rounds).items()}


def quartiles(found: list[float]) -> list[float]:
    """The first and third quartile of some timings: the spread of the middle half, which one slow round cannot move."""
    if len(found) == 1:  # a quick run's single round
        return [found[0], found[0]]
    first, _, third = statistics.quantiles(found, n=4, method="inclusive")
    return [first, third]


def on_threads(call: Callable[[], object], count: int) -> Callable[[], None]:
    """`call` run on `count` threads (set before each call, so calls on different counts can take turns)."""
    def run() -> None:
        torch.set_num_threads(count)
        call()
    return run


def thread_rows(calls: dict, read_bytes: int, rounds: int) -> dict:
    """Each call's median ms on one thread and on all of them, and the bandwidth roof (a sum over `read_bytes`) on each.

    A one-row product may gain nothing from more threads where a sum does, so a share of the bandwidth roof means
    most against a roof read with the same threads; the counts take turns in one loop.
    """
    threads = torch.get_num_threads()
    counts = sorted({1, threads})
    big = torch.ones(read_bytes // 4)
    turns = {(name, n): on_threads(call, n) for name, call in calls.items() for n in counts}
    turns |= {("bandwidth", n): on_threads(big.sum, n) for n in counts}
    try:
        ms = alternate(turns, rounds)
    finally:
        torch.set_num_threads(threads)
    found = {name: {str(n): ms[name, n] for n in counts} for name in calls}
    return found | {"bandwidth_gb_s": {str(n): read_bytes / ms["bandwidth", n] / 1e6 for n in counts}, "threads": counts}


def format_roofs(n: int, rounds: int) -> dict:
    """GFLOP/s of an n × n matmul in float32 and bfloat16 and of the int8 weight kernel on n bfloat16 rows."""
    a, w = torch.randn(n, n), torch.randn(n, n)
    values, scale = quantize_rows(w, torch.bfloat16)
    a16, w16, scale16 = a.bfloat16(), w.bfloat16(), scale.bfloat16()
    ms = alternate({"float32": lambda: F.linear(a, w), "bfloat16": lambda: F.linear(a16, w16),
                    "int8": lambda: torch._weight_int8pack_mm(a16, values, scale16)}, rounds)
    return {name: 2 * n**3 / (t / 1e3) / 1e9 for name, t in ms.items()} | {"n": n}


def int8_against_bfloat16(matrices: list[torch.Tensor], rounds: int) -> dict:
    """ms of every matrix times one vector, and times two, in one loop: torch's int8 kernel alone against a bfloat16
    F.linear of the same shapes (one row's times as before; two rows' under "two_rows")."""
    packed = [(*quantize_rows(w, torch.bfloat16), w.bfloat16()) for w in matrices]
    calls = {}
    for rows in (1, 2):
        vectors = {width: torch.randn(rows, width).bfloat16() for width in {w.shape[1] for w in matrices}}

        def int8(vectors: dict = vectors) -> None:
            for values, scale, _ in packed:
                torch._weight_int8pack_mm(vectors[values.shape[1]], values, scale.bfloat16())

        def bfloat16(vectors: dict = vectors) -> None:
            for _, _, weight in packed:
                F.linear(vectors[weight.shape[1]], weight)
        calls["int8_kernel_ms", rows], calls["bfloat16_linear_ms", rows] = int8, bfloat16
    ms = alternate(calls, rounds)
    names = ("int8_kernel_ms", "bfloat16_linear_ms")
    return {name: ms[name, 1] for name in names} | {"two_rows": {name: ms[name, 2] for name in names},
                                                     "int8_bytes": sum(v.numel() + 2 * s.numel() for v, s, _ in packed),
                                                     "bfloat16_bytes": sum(2 * w.numel() for *_, w in packed)}


@contextlib.contextmanager
def on_one_thread() -> Iterator[None]:
    """Run the block on one thread, then give torch back the threads it had."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def profile_step(step, repeats: int = 3, rows: int = 8) -> dict:
    """The matrix products' share of `repeats` decode steps' own CPU time and the `rows` operators that took most.

    One thread: with several, each small parallel region waits for the others and the profiler charges the
    wait to the operator running (SDPA, mostly), not to its work.
    """
    with on_one_thread():
        events = profile_calls(step, repeats)
    total = sum(event.self_cpu_time_total for event in events)
    top = sorted(events, key=lambda event: event.self_cpu_time_total, reverse=True)[:rows]
    return {"repeats": repeats, "threads": 1, "matmul_share": matmul_share(events), "total_ms": total / 1e3,
            "operators": [{"name": e.key, "share": e.self_cpu_time_total / total, "calls": e.count} for e in top]}


def attention_as_products(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """SDPA's result for one query written as products (q @ K.T, softmax, @ V): each key-value head's group of query
    heads as rows of one product, so no key or value is copied (a fair match for SDPA's grouped heads)."""
    batch, heads, _, width = query.shape
    rows = query.reshape(batch, keys.shape[1], heads // keys.shape[1], width)  # (b, kv_heads, group, width)
    weights = ((rows @ keys.transpose(-1, -2)) / width**0.5).softmax(-1)
    return (weights @ values).reshape(batch, heads, 1, width)


def one_query_attention(config: object, lengths: list[int], turns: int) -> dict:
    """One decode step's attention alone, 30 calls for one query, on one thread, the lengths and three ways taking turns:
    SDPA over each layer's own cache (as in the model), SDPA over one layer's cache every time (small enough to stay in
    the core's own caches) and the same attention written as products (q @ K.T, softmax, @ V); ms a step, medians and quartiles."""
    heads, kv_heads, width, layers = config.num_heads, config.num_kv_heads, config.head_dim, config.num_layers
    query = torch.randn(1, heads, 1, width)

    def sdpa(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(query, keys, values, enable_gqa=True)

    def products(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return attention_as_products(query, keys, values)

    def step(way: Callable, caches: list) -> Callable[[], None]:
        return lambda: [way(keys, values) for keys, values in caches]

    calls = {}
    for length in lengths:
        caches = [(torch.randn(1, kv_heads, length, width), torch.randn(1, kv_heads, length, width)) for _ in range(layers)]
        calls |= {("sdpa", length): step(sdpa, caches), ("sdpa, one layer's cache", length): step(sdpa, caches[:1] * layers),
                  ("products", length): step(products, caches)}
    with on_one_thread():
        times = timed_rounds(calls, turns)
    found = {}
    for (way, length), ms in times.items():
        found.setdefault(way, {})[str(length)] = {"ms": statistics.median(ms), "ms_quartiles": quartiles(ms)}
    return {"threads": 1, "turns": turns, "calls_a_step": layers, "ways": found}


def attention_by_length(steps: dict[int, Callable[[], object]], turns: int = 3, repeats: int = 3) -> dict:
    """For each prompt length T (a decode step against T cached tokens), on one thread, the lengths taking turns: the
    medians over `turns` of SDPA's own ms a step and of every operator's (with their quartiles), so the step's growth
    with T can be split."""
    found = {length: {"attention_ms": [], "all_operators_ms": []} for length in steps}
    with on_one_thread():
        for _ in range(turns):
            for length, step in steps.items():
                events = profile_calls(step, repeats)
                own = {event.key: event.self_cpu_time_total / repeats / 1e3 for event in events}
                found[length]["attention_ms"].append(attention_ms(own))
                found[length]["all_operators_ms"].append(sum(own.values()))
    return {"threads": 1, "turns": turns, "repeats": repeats,
            "by_length": {str(length): {key: statistics.median(values) for key, values in row.items()}
                          | {f"{key}_quartiles": quartiles(values) for key, values in row.items()}
                          for length, row in found.items()}}
