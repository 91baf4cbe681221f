"""Checkers for lesson 5: causal masks, padding masks and causal attention on the running example.

Expected answers are rebuilt here in plain torch from the book's recipe (seeds 789 and 123, weights
created in the order query, key, value) inside `torch.random.fork_rng`, so a check never changes
the notebook's random state.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..data import example_inputs
from . import check_tensor_answer, feedback, has_form, missing


def _projections(seed: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values from three bias-free nn.Linear(3, 2) layers created after `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = [nn.Linear(3, 2, bias=False) for _ in range(3)]
    with torch.no_grad():
        return tuple(layer(x) for layer in layers)


def _masked_softmax(scores: torch.Tensor, hide: torch.Tensor, d_k: int) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(hide, float("-inf")) / math.sqrt(d_k), dim=-1)


def check_local_window(answer: object) -> None:
    """Weights (6, 6) where each token sees itself and at most the two tokens before it (seed 789)."""
    queries, keys, _ = _projections(789, example_inputs())
    rows = torch.arange(6)[:, None]
    cols = torch.arange(6)[None, :]
    hide = (cols > rows) | (cols < rows - 2)  # the future, and anything more than 2 steps back
    expected = _masked_softmax(queries @ keys.T, hide, keys.shape[-1])
    if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
        causal_only = _masked_softmax(queries @ keys.T, cols > rows, keys.shape[-1])
        if torch.allclose(answer.detach().float(), causal_only, atol=1e-4):
            return feedback(False, "These are the plain causal weights: also hide keys more than 2 positions back (j < i - 2).",
                            "这是普通因果掩码的权重：还要遮住比当前位置早 2 个以上的键（j < i - 2）。")
        if not torch.allclose(answer.detach().float().sum(dim=-1), torch.ones(6), atol=1e-4):
            return feedback(False, "Each row should sum to 1: mask the scores with -inf before the softmax.",
                            "每一行的和应为 1：请在 softmax 之前用 -inf 遮住分数。")
    check_tensor_answer(answer, expected, "The local causal weight matrix", "局部因果权重矩阵")


def check_padding_mask(answer: object) -> None:
    """Boolean (2, 6, 6) mask, True = hide: the causal mask plus the 2 pad keys of sequence 2 (lengths 6 and 4)."""
    if missing(answer):
        return
    causal = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)
    is_pad = torch.arange(6)[None, :] >= torch.tensor([6, 4])[:, None]  # (2, 6)
    expected = causal | is_pad[:, None, :]  # (2, 6, 6)
    if not has_form(answer, (2, 6, 6), "The mask (combine (6, 6) with (2, 1, 6))", "掩码（可以把 (6, 6) 与 (2, 1, 6) 组合起来）"):
        return
    if answer.dtype != torch.bool:
        return feedback(False, "Use a boolean mask (True = hide), for example with | between boolean tensors.",
                        "请使用布尔掩码（True 表示遮住），例如用 | 连接两个布尔张量。")
    if torch.equal(answer, ~expected):
        return feedback(False, "The mask is inverted: True must mark what a query may NOT see.",
                        "掩码正好反了：True 应该标出查询不能看到的位置。")
    if torch.equal(answer, causal.expand(2, 6, 6)):
        return feedback(False, "This is the causal mask only: also hide the last two keys of the second sequence.",
                        "这只是因果掩码：还要遮住第二个序列的最后两个键。")
    correct = torch.equal(answer, expected)
    feedback(
        correct,
        "Right: the future and the padding keys are hidden; the pad queries still see real tokens, so no row is empty."
        if correct else "Some entries differ: hide key j when j > i or when key j is padding.",
        "正确：未来位置和填充的键都被遮住了；填充位置的查询仍能看到真实词元，所以没有哪一行是全空的。"
        if correct else "有些位置不对：当 j > i，或者第 j 个键是填充时，才需要遮住它。",
    )


def check_short_context(answer: object) -> None:
    """The book's CausalAttention (seed 123, no dropout) on only the first 3 tokens of the batch: (2, 3, 2)."""
    x = example_inputs()[:3].expand(2, 3, 3)
    queries, keys, values = _projections(123, x)
    hide = torch.ones(3, 3, dtype=torch.bool).triu(diagonal=1)
    expected = _masked_softmax(queries @ keys.transpose(1, 2), hide, keys.shape[-1]) @ values
    check_tensor_answer(answer, expected, "The output for the 3-token batch", "3 个词元的批次的输出")
