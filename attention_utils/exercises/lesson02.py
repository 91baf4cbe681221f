"""Checkers for lesson 2: lengths, angles and the geometric form of the dot product."""

from __future__ import annotations

import itertools
import math

import torch

from ..data import TOKENS, example_inputs
from . import as_real_tensor, checker, feedback, has_form, missing
from .lesson01 import one_number, token_names


def _degrees(i: int, j: int) -> float:
    """The angle between tokens i and j in degrees, computed in float64 with plain Python."""
    a, b = example_inputs().double().tolist()[i], example_inputs().double().tolist()[j]
    dot = sum(x * y for x, y in zip(a, b))
    cosine = dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))
    return math.degrees(math.acos(max(-1.0, min(1.0, cosine))))


@checker
def check_angle_your_step(answer: object) -> None:
    """The angle between "Your" and "step", in degrees."""
    expected = _degrees(0, 5)
    if missing(answer):
        return
    value = one_number(answer)
    if value is None:
        return feedback(False, "Give one real number (a float or a 0-d tensor), in degrees.",
                        "请给出一个实数（浮点数或 0 维张量），单位是度。")
    if abs(value - expected) < 0.05:
        return feedback(True, f'The angle between "Your" and "step" is {expected:.2f}°.', f"“Your”与“step”的夹角是 {expected:.2f}°。")
    if abs(value - math.radians(expected)) < 1e-3:
        return feedback(False, "That is the angle in radians; convert it with torch.rad2deg (or multiply by 180/π).",
                        "这是弧度值；请用 torch.rad2deg 转换（或乘以 180/π）。")
    if abs(value - math.cos(math.radians(expected))) < 1e-3:
        return feedback(False, "That is the cosine; take its arccos to get the angle.", "这是余弦值；再取 arccos 才是夹角。")
    feedback(False, "Divide the dot product by both lengths, take arccos, then convert to degrees.",
             "先用点积除以两个向量的长度，再取 arccos，最后换算成度。")


@checker
def check_widest_pair(answer: object) -> None:
    """The two different tokens whose vectors are furthest apart in angle."""
    pairs = itertools.combinations(range(len(TOKENS)), 2)
    i, j = max(pairs, key=lambda pair: _degrees(*pair))
    expected = {TOKENS[i].lower(), TOKENS[j].lower()}
    if missing(answer):
        return
    given = token_names(answer) or []
    if len(given) != 2 or len(set(given)) != 2:
        return feedback(False, 'Answer with two different tokens, e.g. ("Your", "with").', '请给出两个不同的词元，例如 ("Your", "with")。')
    correct = set(given) == expected
    feedback(
        correct,
        f'"{TOKENS[i]}" and "{TOKENS[j]}" are {_degrees(i, j):.1f}° apart, the widest angle in the sentence.'
        if correct else "Compute the angle for every pair (a 6 × 6 matrix), skip the diagonal, and find the largest.",
        f"“{TOKENS[i]}”与“{TOKENS[j]}”相差 {_degrees(i, j):.1f}°，是整句话中夹角最大的一对。"
        if correct else "先算出所有词对的夹角（6 × 6 矩阵），跳过对角线，再找最大值。",
    )


# Made-up vectors with negative entries: the learner's rebuild() must work for them too, so returning
# `inputs @ inputs.T` (which ignores the lengths and angles it is given) cannot pass.
OTHER_VECTORS = ((1.0, -2.0, 0.5), (-0.5, 0.25, 1.5), (2.0, 1.0, -1.0), (-1.0, -1.0, -0.5), (0.5, 0.5, 0.5), (-2.0, 0.5, 0.0))


def _lengths_and_angles(rows: list[list[float]]) -> tuple[list[float], list[list[float]]]:
    """Lengths and the matrix of angles in degrees, in float64 with plain Python."""
    lengths = [math.sqrt(sum(x * x for x in a)) for a in rows]
    angles = [[math.degrees(math.acos(max(-1.0, min(1.0, sum(x * y for x, y in zip(a, b)) / (la * lb)))))
               for b, lb in zip(rows, lengths)] for a, la in zip(rows, lengths)]
    return lengths, angles


@checker
def check_rebuild_from_angles(rebuild: object) -> None:
    """The learner's rebuild(lengths, angles): |a| |b| cos θ for every pair, equal to every dot product."""
    if missing(rebuild):
        return
    if not callable(rebuild):
        return feedback(False, "Define a function rebuild(lengths, angles) and pass the function itself.",
                        "请定义函数 rebuild(lengths, angles)，并把函数本身传进来。")
    sets = (("our six tokens", "例句的六个词元", example_inputs().double().tolist()),
            ("made-up vectors", "另外构造的向量", [list(v) for v in OTHER_VECTORS]))
    for name_en, name_zh, rows in sets:
        lengths, angles = _lengths_and_angles(rows)
        expected = torch.tensor([[sum(x * y for x, y in zip(a, b)) for b in rows] for a in rows], dtype=torch.float64)
        degrees_as_radians = torch.tensor([[la * lb * math.cos(angle) for lb, angle in zip(lengths, row)]
                                           for la, row in zip(lengths, angles)], dtype=torch.float64)  # the usual slip
        answer = rebuild(torch.tensor(lengths), torch.tensor(angles))  # float32, as a learner's tensors are
        if missing(answer) or not has_form(answer, expected.shape, "rebuild(lengths, angles)", "rebuild 的返回值"):
            return
        answer = as_real_tensor(answer)
        if answer is None:
            return feedback(False, "rebuild(lengths, angles) should return a tensor of real numbers.",
                            "rebuild 的返回值应该是由实数构成的张量。")
        if torch.allclose(answer, degrees_as_radians, atol=1e-3):
            return feedback(False, "torch.cos expects radians: convert the angles with torch.deg2rad first.",
                            "torch.cos 需要弧度：请先用 torch.deg2rad 把角度换算成弧度。")
        if not torch.allclose(answer, expected, atol=1e-4):
            return feedback(False, f"For {name_en} your matrix differs from their dot products. Build it only from the "
                                   "lengths and angles you are given.",
                            f"对于{name_zh}，你的矩阵和它们的点积不一致。请只用传进来的长度和夹角来计算。")
    feedback(True, "|a| |b| cos θ equals the dot product for every pair, for our six tokens and for made-up vectors.",
             "对例句的六个词元和另外构造的向量，每一对的 |a| |b| cos θ 都等于点积。")
