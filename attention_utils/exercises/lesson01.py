"""Checkers for lesson 1: dot products and cosine similarity on the running example."""

from __future__ import annotations

import torch

from ..data import TOKENS, example_inputs
from . import check_tensor_answer, feedback, missing


def check_step_one_score(answer: object) -> None:
    """The dot product of "step" and "one", written as a loop over the three features."""
    inputs = example_inputs()
    expected = sum(a * b for a, b in zip(inputs[5].tolist(), inputs[4].tolist()))  # 0.05*0.77 + 0.80*0.25 + 0.55*0.10
    if missing(answer):
        return
    value = answer.item() if isinstance(answer, torch.Tensor) else answer
    if not isinstance(value, (int, float)):
        return feedback(False, "Give one number (a float or a 0-d tensor).", "请给出一个数（浮点数或 0 维张量）。")
    correct = abs(value - expected) < 1e-4
    feedback(
        correct,
        f"step · one = {expected:.4f}." if correct else "Multiply the three pairs of features and add the products.",
        f"step · one = {expected:.4f}。" if correct else "把三对特征分别相乘，再把乘积加起来。",
    )


def check_cosine_matrix(answer: object) -> None:
    """The 6x6 matrix of cosine similarities between all tokens."""
    inputs = example_inputs()
    unit = inputs / inputs.norm(dim=1, keepdim=True)
    check_tensor_answer(answer, unit @ unit.T, "The cosine matrix", "余弦相似度矩阵")


def check_closest_to_with(answer: object) -> None:
    """The token (other than "with" itself) whose direction is closest to "with"."""
    inputs = example_inputs()
    unit = inputs / inputs.norm(dim=1, keepdim=True)
    cosines = unit @ unit[3]
    cosines[3] = -1.0
    expected = TOKENS[int(cosines.argmax())]
    if missing(answer):
        return
    correct = isinstance(answer, str) and answer.strip().lower() == expected.lower()
    feedback(
        correct,
        f'"{expected}" points in almost the same direction as "with" (cosine {cosines.max():.4f}).'
        if correct else "Compare cosines, not raw dot products, and skip the token itself.",
        f"“{expected}”与“with”的方向几乎一致（余弦 {cosines.max():.4f}）。"
        if correct else "请比较余弦值而不是原始点积，并跳过它自己。",
    )
