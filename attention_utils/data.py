"""The running example of the series: six tokens with hand-picked 3-d embeddings.

The numbers are the ones printed in chapter 3 of "Build a Large Language Model From
Scratch", so a learner holding the book can check every step by hand.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from .checks import bilingual, check_size
from .devices import amount, check_fits, memory_of

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
    batch_size = check_size(batch_size, "batch_size", minimum=0)
    check_fits(batch_size, "batch_size", lambda b: 4 * b * len(_EMBEDDINGS) * 3)  # float32 numbers
    return example_inputs().repeat(batch_size, 1, 1)


def sliding_window_pairs(token_ids: list[int], context_length: int) -> list[tuple[list[int], list[int]]]:
    """Cut a token list into (input, target) pairs where the target is the input shifted by one.

    This is how a next-token predictor is trained, and why it must never see the future.
    """
    context_length = check_size(context_length, "context_length")
    readable = isinstance(token_ids, np.ndarray) or (isinstance(token_ids, torch.Tensor) and not token_ids.is_meta)
    ids = token_ids.tolist() if readable else token_ids
    whole = isinstance(ids, (list, tuple)) and all(
        isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_)) for t in ids)
    if not whole:
        raise TypeError(
            bilingual(
                "token_ids must be a list of integer token ids, for example [40, 367, 2885]; "
                "turn text into ids with a tokenizer first.",
                "token_ids 必须是由整数词元 ID 组成的列表，例如 [40, 367, 2885]；请先用分词器把文本转成 ID。",
            )
        )
    ids = [int(t) for t in ids]  # numpy integers print as np.int64(40): plain ints read better
    pairs_for = max(len(ids) - context_length, 0)
    needed, limit = 2 * 8 * context_length * pairs_for, memory_of(torch.device("cpu"))  # two lists of references a pair
    if limit is not None and needed > limit:
        raise ValueError(
            bilingual(
                f"{len(ids)} token_ids with context_length={context_length} make {pairs_for:,} pairs that need "
                f"{amount(needed)} of memory, more than the {amount(limit)} this machine has; use fewer tokens.",
                f"{len(ids)} 个 token_ids 在 context_length={context_length} 时会生成 {pairs_for:,} 对，需要 "
                f"{amount(needed)} 内存，超过了这台机器的 {amount(limit)}；请减少词元数。",
            )
        )
    pairs = []
    for start in range(pairs_for):
        window = ids[start : start + context_length + 1]
        pairs.append((window[:-1], window[1:]))
    return pairs
