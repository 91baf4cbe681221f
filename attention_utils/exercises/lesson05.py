"""Checkers for lesson 5: a local causal mask, a padding mask, and the rows that padding leaves empty.

Expected answers are rebuilt here in plain torch: the book's seed-789 head (weights created in the
order query, key, value) inside `torch.random.fork_rng`, so a check never changes the notebook's
random state, and the masks from their definitions.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..data import example_inputs
from . import as_real_tensor, as_whole_number, check_tensor_answer, checker, feedback, has_form, missing
from .padding import padding_slip


def _projections(seed: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values from three bias-free nn.Linear(3, 2) layers created after `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = [nn.Linear(3, 2, bias=False) for _ in range(3)]
    with torch.no_grad():
        return tuple(layer(x) for layer in layers)


def _masked_softmax(scores: torch.Tensor, hide: torch.Tensor, d_k: int) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(hide, float("-inf")) / math.sqrt(d_k), dim=-1)


@checker
def check_local_window(answer: object) -> None:
    """Weights (6, 6) where each token sees itself and at most the two tokens before it (seed 789)."""
    queries, keys, _ = _projections(789, example_inputs())
    rows = torch.arange(6)[:, None]
    cols = torch.arange(6)[None, :]
    hide = (cols > rows) | (cols < rows - 2)  # the future, and anything more than 2 steps back
    expected = _masked_softmax(queries @ keys.T, hide, keys.shape[-1])
    real = as_real_tensor(answer)
    if real is not None and real.shape == expected.shape:
        causal_only = _masked_softmax(queries @ keys.T, cols > rows, keys.shape[-1])
        if torch.allclose(real, causal_only.double(), atol=1e-4):
            return feedback(False, "These are the plain causal weights: also hide keys more than 2 positions back (j < i - 2).",
                            "这是普通因果掩码的权重：还要遮住比当前位置早 2 个以上的键（j < i - 2）。")
        if not torch.allclose(real.sum(dim=-1), torch.ones(6, dtype=torch.float64), atol=1e-4):
            return feedback(False, "Each row should sum to 1: mask the scores with -inf before the softmax.",
                            "每一行的和应为 1：请在 softmax 之前用 -inf 遮住分数。")
    check_tensor_answer(answer, expected, "The local causal weight matrix", "局部因果权重矩阵")


@checker
def check_padding_mask(answer: object) -> None:
    """Boolean (2, 6, 6) mask, True = hide: the causal mask plus the 2 pad keys of sequence 2 (lengths 6 and 4)."""
    if missing(answer):
        return
    causal = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)
    is_pad = torch.arange(6)[None, :] >= torch.tensor([6, 4])[:, None]  # (2, 6)
    expected = causal | is_pad[:, None, :]  # (2, 6, 6)
    if isinstance(answer, np.ndarray) and answer.dtype == np.bool_:
        answer = torch.from_numpy(answer)
    if isinstance(answer, torch.Tensor) and tuple(answer.shape) != (2, 6, 6):
        return feedback(False, f"The mask should have shape (2, 6, 6), got {tuple(answer.shape)}; combine the (6, 6) "
                        "causal mask with a (2, 1, 6) padding mask.",
                        f"掩码的形状应为 (2, 6, 6)，你的是 {tuple(answer.shape)}；可以把 (6, 6) 的因果掩码与 (2, 1, 6) 的填充掩码组合起来。")
    if not has_form(answer, (2, 6, 6), "The mask", "掩码"):
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
    slip = padding_slip(answer, causal, is_pad)
    if slip is not None:
        return feedback(False, *slip)
    correct = torch.equal(answer, expected)
    feedback(
        correct,
        "The future and the padding keys are hidden; the pad queries still see real tokens, so no row is empty."
        if correct else "Some entries differ: hide key j when j > i or when key j is padding.",
        "未来位置和填充的键都被遮住了；填充位置的查询仍能看到真实词元，所以没有哪一行是全空的。"
        if correct else "有些位置不对：当 j > i，或者键 j 是填充时，都要遮住它。",
    )


def _empty_rows(pad: torch.Tensor) -> list[int]:
    """Per sentence, the number of query rows whose every key is hidden (the future, or a pad key)."""
    hide = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1) | pad[:, None, :]  # (3, 6, 6)
    return hide.all(dim=-1).sum(dim=-1).tolist()


def _as_counts(answer: object) -> list[int] | None:
    """A list of three whole numbers from a list, tuple, tensor or numpy array; None when it is not one."""
    values = list(answer) if isinstance(answer, (torch.Tensor, np.ndarray)) and answer.ndim == 1 else answer
    if not isinstance(values, (list, tuple)) or len(values) != 3:
        return None
    counts = [as_whole_number(value) for value in values]
    return None if any(count is None for count in counts) else counts


@checker
def check_empty_rows(empty_left: object, empty_right: object) -> None:
    """Rows that see no key for sentences of 6, 4 and 1 real tokens padded to 6, on the left and on the right."""
    if missing(empty_left) or missing(empty_right):
        return
    lengths = torch.tensor([6, 4, 1])
    position = torch.arange(6)[None, :]
    expected_left = _empty_rows(position < 6 - lengths[:, None])
    expected_right = _empty_rows(position >= lengths[:, None])
    left, right = _as_counts(empty_left), _as_counts(empty_right)
    if left is None or right is None:
        return feedback(False, "Give each answer as a list of three whole numbers, one per sentence, e.g. [0, 1, 2].",
                        "请把每个答案写成包含三个整数的列表，每个句子一个数，例如 [0, 1, 2]。")
    if left == lengths.tolist() or right == lengths.tolist():
        return feedback(False, "You counted the real tokens. Count the query rows in which every key is hidden.",
                        "你数的是真实词元的个数。要数的是所有键都被遮住的查询行。")
    if left != expected_left:
        return feedback(False, "Left padding: the pad queries come first, and the causal mask lets them see only "
                        "earlier positions, which are all padding. How many pad queries does each sentence have?",
                        "左填充：填充位置的查询排在最前面，因果掩码只让它们看到更早的位置，而那些位置全是填充。每个句子有几个填充位置的查询？")
    if right != expected_right:
        return feedback(False, "Right padding: every pad query comes after the real tokens and may still see them, "
                        "so no row is empty.",
                        "右填充：每个填充位置的查询都排在真实词元之后，仍然能看到它们，所以没有空行。")
    feedback(True, f"Left padding empties one row per pad token {expected_left}; right padding empties none "
             f"{expected_right}. Left padding is where the NaN rows come from.",
             f"左填充时每个填充词元都带来一个空行 {expected_left}；右填充时没有空行 {expected_right}。NaN 行正是左填充带来的。")
