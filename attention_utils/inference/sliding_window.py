"""Sliding-window attention: each query sees only the last `window` keys, plus a few first "sink" keys if asked.

A query at position p may attend to a key at position s when s <= p (the causal rule) and
p - s < window: itself and the window - 1 keys before it. StreamingLLM (Xiao et al., 2023,
"Efficient Streaming Language Models with Attention Sinks") also keeps the first `sinks` keys
visible to every query, because trained models park attention there.

Masks follow the package's convention: True = hide.
"""

from __future__ import annotations

import torch

from ..checks import bilingual, cannot_read, check_size
from ..devices import check_device, check_fits


def check_window(window: object, sinks: object = 0) -> tuple[int | None, int]:
    """A window is None (no window) or an integer >= 1; sinks an integer >= 0, and only with a window."""
    window = None if window is None else check_size(window, "window")
    sinks = check_size(sinks, "sinks", minimum=0)
    if sinks and window is None:
        raise ValueError(
            bilingual(
                f"sinks={sinks} only makes sense with a sliding window; pass window=... as well, or sinks=0.",
                f"只有使用滑动窗口时 sinks={sinks} 才有意义；请同时给出 window=...，或者设 sinks=0。",
            )
        )
    return window, sinks


def check_positions(positions: object, name: str) -> torch.Tensor:
    """Positions are a 1-D integer tensor of places in the sequence, each at least 0."""
    if not isinstance(positions, torch.Tensor) or positions.dim() != 1 or positions.is_floating_point() \
            or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(
            bilingual(
                f"{name} must be a 1-D integer tensor of positions, for example torch.arange(6); got {positions!r:.60}.",
                f"{name} 应为一维整数张量，每个元素是一个位置，例如 torch.arange(6)；实际是 {positions!r:.60}。",
            )
        )
    if positions.numel() and not cannot_read(positions) and positions.min() < 0:  # meta: no values to read
        raise ValueError(bilingual(f"{name} must be at least 0.", f"{name} 不能小于 0。"))
    return positions


def hidden_by_window(
    query_positions: torch.Tensor, key_positions: torch.Tensor, window: int | None = None, sinks: int = 0
) -> torch.Tensor:
    """(T_q, T_k) True where a query may not attend to a key: keys in its future, or older than the window.

    Positions are the tokens' places in the whole sequence, so the mask is right for keys kept in
    any order (a ring buffer stores them out of order) and for queries that start late (decoding).
    """
    window, sinks = check_window(window, sinks)
    query_positions, key_positions = check_positions(query_positions, "query_positions"), check_positions(key_positions, "key_positions")
    queries, keys = query_positions[:, None], key_positions[None, :]  # (T_q, 1), (1, T_k)
    hidden = keys > queries  # the future
    if window is not None:
        hidden = hidden | ((queries - keys >= window) & (keys >= sinks))  # too old, unless a sink
    return hidden


def sliding_window_mask(
    num_tokens: int, window: int | None, sinks: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """(T, T) mask for a whole sequence, True = hide: the causal mask with everything older than the window hidden too."""
    num_tokens, device = check_size(num_tokens, "num_tokens", minimum=0), check_device(device)
    check_fits(num_tokens, "num_tokens", lambda n: 9 * n * n, device)  # the mask, and the int64 distances behind it
    positions = torch.arange(num_tokens, device=device)
    return hidden_by_window(positions, positions, window, sinks)
