"""Seeded request streams for the scheduler, and what a served stream measured: tokens per second, latency percentiles.

Two latencies matter to someone waiting for an answer (lesson 17): the time to the first token (TTFT:
queueing, then the prompt's prefill) and the time per output token after it (TPOT: one decode step
each, shared with everyone else in the batch). A server's throughput is all output tokens over the
wall time from the first arrival to the last token.
"""

from __future__ import annotations

import random

import torch

from ..checks import bilingual, check_size
from .scheduler import Request, Served, StepRecord


def random_stream(seed: int, count: int, prompt_lengths: tuple[int, int], new_tokens: tuple[int, int],
                  last_arrival: int, vocab_size: int, prefix: tuple[int, ...] = ()) -> list[Request]:
    """`count` requests with prompt lengths, output lengths and arrival steps drawn uniformly (inclusive ranges).

    Every prompt starts with `prefix` (a shared system prompt), then random token ids below vocab_size.
    """
    for name, (low, high) in (("prompt_lengths", prompt_lengths), ("new_tokens", new_tokens)):
        if check_size(low, f"{name}[0]") > check_size(high, f"{name}[1]"):
            raise ValueError(bilingual(f"{name} must be (shortest, longest) with shortest <= longest, got ({low}, {high}).",
                                       f"{name} 必须是 (最短, 最长)，且最短不超过最长，实际是 ({low}, {high})。"))
    draw = random.Random(check_size(seed, "seed", minimum=0))
    vocab_size = check_size(vocab_size, "vocab_size")
    return [Request(tuple(prefix) + tuple(draw.randrange(vocab_size) for _ in range(draw.randint(*prompt_lengths))),
                    draw.randint(*new_tokens), draw.randint(0, check_size(last_arrival, "last_arrival", minimum=0)))
            for _ in range(check_size(count, "count"))]


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of them lie (linear between neighbours, as numpy's default)."""
    return torch.tensor(values, dtype=torch.float64).quantile(share).item()


def summarize(served: list[Served], steps: list[StepRecord]) -> dict:
    """Throughput and latencies of a served stream (seconds), and what its steps did."""
    start = min(s.arrived_at for s in served)
    seconds = max(s.token_times[-1] for s in served) - start
    tokens = sum(len(s.tokens) for s in served)
    first = [s.time_to_first_token for s in served]
    per_token = [s.time_per_output_token for s in served if len(s.tokens) > 1]
    return {"requests": len(served), "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
            "ttft_p50": percentile(first, 0.5), "ttft_p95": percentile(first, 0.95),
            "tpot_p50": percentile(per_token, 0.5) if per_token else 0.0,
            "steps": len(steps), "most_running": max(len(record.fed) for record in steps),
            "preemptions": sum(s.preemptions for s in served),
            "prefill_tokens": sum(s.computed_tokens for s in served) - tokens + len(served),
            "cached_tokens": sum(s.cached_tokens for s in served)}


def longest_gap(served: Served) -> float:
    """The longest wait between two of a request's tokens (a prefill that stalls the batch shows here)."""
    times = served.token_times
    return max((later - earlier for earlier, later in zip(times, times[1:])), default=0.0)
