"""Checkers for lesson 4: query, key and value projections on the running example.

Every expected answer is recomputed here from the book's recipe (same seeds, same order of
weight creation) inside `torch.random.fork_rng`, so checking never disturbs the notebook's
random state.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..data import example_inputs
from . import as_real_tensor, check_tensor_answer, checker, feedback, missing


def _book_matrices() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W_query, W_key, W_value of the step-by-step example: torch.rand(3, 2) three times after seed 123."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        return torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)


def _attend(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    weights = torch.softmax(queries @ keys.T / math.sqrt(keys.shape[-1]), dim=-1)
    return weights @ values, weights


@checker
def check_step_context(answer: object) -> None:
    """The context vector of "step" (the sixth token) with the step-by-step matrices."""
    x = example_inputs()
    w_q, w_k, w_v = _book_matrices()
    context, _ = _attend(x[5] @ w_q, x @ w_k, x @ w_v)
    check_tensor_answer(answer, context, "The context vector of 'step'", "“step”的上下文向量")


def _linear_weights_789() -> list[torch.Tensor]:
    """The weights of the book's SelfAttentionV2 under seed 789, each stored as (d_out, d_in) = (2, 3)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(789)
        return [nn.Linear(3, 2, bias=False).weight.detach() for _ in range(3)]


@checker
def check_v1_from_v2(answer: object) -> None:
    """A V1-style module (raw W_query, W_key, W_value of shape (d_in, d_out)) holding V2's weights."""
    if missing(answer):
        return
    names = ("W_query", "W_key", "W_value")
    if not all(isinstance(getattr(answer, name, None), torch.Tensor) for name in names):
        return feedback(False, "Give the module itself: it needs tensors W_query, W_key and W_value, like SelfAttentionV1.",
                        "请给出模块本身：它需要像 SelfAttentionV1 那样带有 W_query、W_key、W_value 三个张量。")
    matrices = [as_real_tensor(getattr(answer, name)) for name in names]
    if any(matrix is None for matrix in matrices):
        return feedback(False, "W_query, W_key and W_value should hold real numbers (float32, as nn.Parameter makes them).",
                        "W_query、W_key、W_value 应该由实数组成（nn.Parameter 默认就是 float32）。")
    shapes = [tuple(matrix.shape) for matrix in matrices]
    if any(shape == (2, 3) for shape in shapes):
        return feedback(False, "A weight has shape (2, 3): that is nn.Linear's layout. V1 multiplies x @ W, so copy weight.T.",
                        "其中有一个权重的形状是 (2, 3)，这是 nn.Linear 的存储方式；V1 计算的是 x @ W，所以要复制 weight.T。")
    if any(shape != (3, 2) for shape in shapes):
        return feedback(False, f"V1's matrices should have shape (3, 2), got {shapes}.",
                        f"V1 的三个矩阵形状应为 (3, 2)，你的是 {shapes}。")
    x = example_inputs().double()
    w_q, w_k, w_v = (w.double() for w in _linear_weights_789())
    expected, _ = _attend(x @ w_q.T, x @ w_k.T, x @ w_v.T)
    got, _ = _attend(*(x @ matrix for matrix in matrices))
    correct = torch.allclose(got, expected, atol=1e-5)
    feedback(
        correct,
        "V1 now gives V2's numbers: the same weights, each the transpose of the other."
        if correct else "The shapes fit but the outputs differ: copy each weight of sa_v2 into the matching W_* of V1, transposed.",
        "现在 V1 和 V2 的输出完全一致：权重相同，只是互为转置。"
        if correct else "形状对了但输出不同：请把 sa_v2 的每个权重转置后复制到 V1 中对应的 W_*。",
    )


@checker
def check_cross_weights(answer: object) -> None:
    """Attention weights of "with one step" (queries) over "Your journey starts" (keys and values)."""
    x = example_inputs()
    w_q, w_k, w_v = _book_matrices()
    _, weights = _attend(x[3:] @ w_q, x[:3] @ w_k, x[:3] @ w_v)
    check_tensor_answer(answer, weights, "The matrix of cross-attention weights", "交叉注意力权重矩阵")
