"""What speculative decoding should gain, before it runs: the cost of checking k + 1 tokens, and the tokens a pass yields.

If each drafted token is kept with probability alpha, independently, a pass of k drafted tokens yields
1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha) tokens (the last one is the model's own).
It costs one pass of the model over k + 1 tokens, c(k) decode steps, plus k steps of the draft at d
decode steps each. So the speed-up over plain decoding is tokens per pass / (c(k) + k d): a draft
helps only when it is cheap (d small), right often (alpha near 1), and c(k) stays near 1, which lesson 14's
roofline predicts for a step that waits for its weights (Leviathan et al. 2023, section 3).
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from ..checks import bilingual, check_real, check_size
from .decode_cost import forward_cost
from .generation import check_prompt, takes_keywords
from .kv_cache import KVCache
from .speculative import Speculation


def expected_tokens(alpha: float, k: int) -> float:
    """Tokens one pass of k drafted tokens yields on average when each is kept with probability alpha."""
    alpha, k = _probability(alpha), check_size(k, "k", minimum=0)
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def acceptance_rate(run: Speculation) -> float:
    """Alpha measured from a run: tokens kept over tokens checked (kept ones, and the first refused one of each pass)."""
    if not isinstance(run, Speculation):
        raise TypeError(bilingual(f"run must be a Speculation (what speculative_greedy returns), got {type(run).__name__}.",
                                  f"run 必须是 Speculation（speculative_greedy 的返回值），实际是 {type(run).__name__}。"))
    refused = sum(1 for proposed, kept in run.history if kept < proposed)
    checked = run.accepted + refused
    return run.accepted / checked if checked else 0.0


def predicted_speedup(alpha: float, k: int, pass_cost: float, draft_cost: float) -> float:
    """Plain decoding's time per token over speculation's: expected tokens per pass / (c(k) + k d), both in decode steps."""
    pass_cost = check_real(pass_cost, "pass_cost", "1.1", positive=True)
    draft_cost = check_real(draft_cost, "draft_cost", "0.5")
    if draft_cost < 0:
        raise ValueError(bilingual(f"draft_cost must be ≥ 0 (decode steps per drafted token), got {draft_cost:g}.",
                                   f"draft_cost 必须 ≥ 0（每个草稿词元折合多少步解码），实际是 {draft_cost:g}。"))
    return expected_tokens(alpha, k) / (pass_cost + k * draft_cost)


def roofline_pass_cost(config: object, k: int, earlier_tokens: int, bandwidth: float, flops_per_second: float,
                       bytes_per_weight: float = 4) -> float:
    """c(k) from lesson 14's roofline: a pass over k + 1 tokens takes the longer of its bytes' time and its FLOPs' time,
    divided by the same for one token."""
    bandwidth = check_real(bandwidth, "bandwidth", "15e9", positive=True)
    flops_per_second = check_real(flops_per_second, "flops_per_second", "100e9", positive=True)

    def seconds(tokens: int) -> float:
        cost = forward_cost(config, tokens, earlier_tokens, bytes_per_weight=bytes_per_weight)
        return max(cost.bytes / bandwidth, cost.flops / flops_per_second)

    return seconds(check_size(k, "k", minimum=0) + 1) / seconds(1)


@torch.no_grad()
def verification_cost(model: nn.Module, prompt: torch.Tensor, most: int = 8, calls: int = 5) -> dict[int, float]:
    """Median ms of one pass over k + 1 new tokens after the prompt's cache, k = 0..most, timed in alternating order.

    The cache is cut back to the prompt after every pass, so each pass sees the same context.
    """
    most, calls = check_size(most, "most", minimum=0), check_size(calls, "calls")
    check_prompt(prompt)
    layers = getattr(getattr(model, "config", None), "num_layers", None)
    if not isinstance(model, nn.Module) or not isinstance(layers, int) or not takes_keywords(model, "cache"):
        raise TypeError(bilingual(f"model must be a LlamaModel called as model(tokens, cache=cache), got {type(model).__name__}.",
                                  f"model 必须是可以这样调用的 LlamaModel：model(tokens, cache=cache)，实际是 {type(model).__name__}。"))
    cache = KVCache(layers)
    model(prompt, cache=cache)
    start = cache.position
    blocks = {k: prompt[:, -1:].repeat(1, k + 1) for k in range(most + 1)}
    times: dict[int, list[float]] = {k: [] for k in blocks}
    for index in range(calls + 1):  # the first round warms up and is not kept
        for k in (list(blocks) if index % 2 == 0 else list(blocks)[::-1]):
            began = time.perf_counter()
            model(blocks[k], cache=cache)
            if index:
                times[k].append(1e3 * (time.perf_counter() - began))
            cache.truncate(start)
    return {k: statistics.median(found) for k, found in times.items()}


def _probability(alpha: object) -> float:
    alpha = check_real(alpha, "alpha", "0.8")
    if not 0 <= alpha <= 1:
        raise ValueError(bilingual(f"alpha must be a probability between 0 and 1, got {alpha:g}.",
                                   f"alpha 必须是 0 到 1 之间的概率，实际是 {alpha:g}。"))
    return alpha
