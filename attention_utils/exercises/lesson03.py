"""Checkers for lesson 3: a stable softmax, the right `dim`, and scaled context vectors."""

from __future__ import annotations

import math

import torch

from ..data import example_batch, example_inputs
from . import check_tensor_answer, feedback

# The scores of exercise 1: big enough that exp() overflows in float32.
BIG_SCORES = (250.0, 252.0, 249.0, 100.0)


def _softmax_rows(rows: list[list[float]]) -> list[list[float]]:
    """Softmax of each row in plain float64 Python, subtracting the row maximum first."""
    result = []
    for row in rows:
        top = max(row)
        exps = [math.exp(value - top) for value in row]
        result.append([e / sum(exps) for e in exps])
    return result


def check_stable_softmax(answer: object) -> None:
    """A softmax of BIG_SCORES that neither overflows nor returns nan."""
    expected = torch.tensor(_softmax_rows([list(BIG_SCORES)])[0])
    if isinstance(answer, torch.Tensor) and not torch.isfinite(answer).all():
        return feedback(False, "Your weights contain inf or nan: exp(250) overflows float32. Subtract the maximum score first.",
                        "你的权重里有 inf 或 nan：exp(250) 超出了 float32 的范围。请先减去最大分数。")
    check_tensor_answer(answer, expected, "The stable softmax", "数值稳定的 softmax 结果")


def check_batch_weights(answer: object) -> None:
    """Attention weights for a (2, 6, 6) batch of scores, normalized over the keys (the last dim)."""
    batch = example_batch(2).tolist()
    scores = [[[sum(x * y for x, y in zip(q, k)) for k in rows] for q in rows] for rows in batch]
    expected = torch.tensor([_softmax_rows(matrix) for matrix in scores])
    if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
        sums = answer.detach().float().sum(dim=-1)
        if torch.allclose(answer.detach().float(), torch.full_like(expected, 0.5), atol=1e-4):
            return feedback(False, "Every weight is 0.5: you normalized across the two sentences of the batch (dim=0). Use dim=-1.",
                            "每个权重都是 0.5：你是在批次的两个句子之间做了归一化（dim=0）。请用 dim=-1。")
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
            return feedback(False, "The weights of one query (a row) must add up to 1; normalize over the keys with dim=-1.",
                            "同一个查询（一行）的权重之和必须为 1；请用 dim=-1 在键的维度上归一化。")
    check_tensor_answer(answer, expected, "The batch of attention weights", "这一批注意力权重")


def check_scaled_context(answer: object) -> None:
    """All six context vectors with scores divided by sqrt(d_k) = sqrt(3) before the softmax."""
    rows = example_inputs().tolist()
    d_k = len(rows[0])
    scores = [[sum(x * y for x, y in zip(q, k)) / math.sqrt(d_k) for k in rows] for q in rows]
    weights = _softmax_rows(scores)
    expected = torch.tensor([[sum(w * row[f] for w, row in zip(ws, rows)) for f in range(d_k)] for ws in weights])
    inputs = example_inputs()
    unscaled = torch.softmax(inputs @ inputs.T, dim=-1) @ inputs
    if isinstance(answer, torch.Tensor) and answer.shape == expected.shape and torch.allclose(
        answer.detach().float(), unscaled, atol=1e-4
    ):
        return feedback(False, "These are the unscaled context vectors: divide the scores by math.sqrt(3) before the softmax.",
                        "这是未缩放的上下文向量：请在 softmax 之前把分数除以 math.sqrt(3)。")
    check_tensor_answer(answer, expected, "The matrix of scaled context vectors", "缩放后的上下文向量矩阵")
