"""The running example of the series: six tokens with hand-picked 3-d embeddings.

The numbers are the ones printed in chapter 3 of "Build a Large Language Model From
Scratch", so a learner holding the book can check every step by hand.
"""

from __future__ import annotations

import torch

TOKENS: tuple[str, ...] = ("Your", "journey", "starts", "with", "one", "step")

# One row per token, three features per row. Row 1 ("journey") ends in 0.66, as in the
# book; one of our seed notes printed 0.64, which does not reproduce the book's scores.
_EMBEDDINGS = [
    [0.43, 0.15, 0.89],  # Your
    [0.55, 0.87, 0.66],  # journey
    [0.57, 0.85, 0.64],  # starts
    [0.22, 0.58, 0.33],  # with
    [0.77, 0.25, 0.10],  # one
    [0.05, 0.80, 0.55],  # step
]


def example_inputs() -> torch.Tensor:
    """Return a fresh (6, 3) float32 tensor of the running example's embeddings."""
    return torch.tensor(_EMBEDDINGS, dtype=torch.float32)


def example_batch(batch_size: int = 2) -> torch.Tensor:
    """Stack the running example `batch_size` times: shape (batch_size, 6, 3), as in the book."""
    inputs = example_inputs()
    return torch.stack([inputs] * batch_size, dim=0)


def sliding_window_pairs(token_ids: list[int], context_length: int) -> list[tuple[list[int], list[int]]]:
    """Cut a token list into (input, target) pairs where the target is the input shifted by one.

    This is how a next-token predictor is trained, and why it must never see the future.
    """
    pairs = []
    for start in range(len(token_ids) - context_length):
        window = token_ids[start : start + context_length + 1]
        pairs.append((window[:-1], window[1:]))
    return pairs
