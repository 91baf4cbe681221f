"""Checkers for lesson 2: lengths, angles and the geometric form of the dot product."""

from __future__ import annotations

import itertools
import math

import torch

from ..data import TOKENS, example_inputs
from . import as_real_number, as_real_tensor, checker, feedback, has_form, missing
from .lesson01 import token_names


def _degrees(i: int, j: int) -> float:
    """The angle between tokens i and j in degrees, computed in float64 with plain Python."""
    a, b = example_inputs().double().tolist()[i], example_inputs().double().tolist()[j]
    dot = sum(x * y for x, y in zip(a, b))
    cosine = dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))
    return math.degrees(math.acos(max(-1.0, min(1.0, cosine))))


def _three_numbers(answer: object) -> torch.Tensor | None:
    """The answer as a float64 tensor of three finite real numbers: a tensor, an array, a list or a tuple; else None."""
    if isinstance(answer, (list, tuple)):
        values = [as_real_number(value) for value in answer]
        if any(value is None for value in values):
            return None
        answer = torch.tensor(values, dtype=torch.float64)
    vector = as_real_tensor(answer)
    if vector is None or vector.numel() != 3 or not torch.isfinite(vector).all():
        return None
    return vector.reshape(3)


@checker
def check_unseen_by_journey(answer: object) -> None:
    """A vector of length 1 that scores 0 against "journey" and more than 0 against "one"."""
    if missing(answer):
        return
    vector = _three_numbers(answer)
    if vector is None:
        return feedback(False, "Answer with three real numbers: a tensor, an array or a list such as [0.5, -0.5, 0.0].",
                        "答案请写成三个实数：张量、数组或列表都可以，例如 [0.5, -0.5, 0.0]。")
    journey, one = example_inputs().double()[1], example_inputs().double()[4]
    rest = one - (one @ journey) / (journey @ journey) * journey  # what is left of one without its shadow on journey
    best = rest.norm().item()  # the highest score against one that a unit vector perpendicular to journey can reach
    length, against_journey, against_one = vector.norm().item(), (vector @ journey).item(), (vector @ one).item()
    if length < 1e-9:
        return feedback(False, 'The zero vector scores 0 against everything, "one" included, and has no length to scale.',
                        "零向量与任何向量的点积都是 0，与“one”也一样，而且它没有长度可以缩放。")
    if abs(against_journey) > 1e-3:
        shadow = against_journey / journey.norm().item()
        return feedback(False, f'Your vector scores {against_journey:.4f} against "journey", not 0: its shadow on '
                               f'"journey" is {shadow:.4f} long. Take the whole shadow away, v - (v·j / j·j) j, and '
                               'what is left is perpendicular to "journey".',
                        f"你的向量与“journey”的点积是 {against_journey:.4f}，不是 0：它在“journey”上的影子长 "
                        f"{shadow:.4f}。把整个影子减掉，v - (v·j / j·j) j，剩下的部分就与“journey”垂直了。")
    if abs(length - 1) > 1e-3:
        return feedback(False, f'Perpendicular to "journey", but its length is {length:.4f}, not 1: divide it by its own '
                               "length, v / v.norm().",
                        f"它与“journey”垂直，但长度是 {length:.4f}，不是 1：请除以它自己的长度，v / v.norm()。")
    if abs(against_one) <= 1e-3:
        return feedback(False, 'It scores 0 against "one" as well: it is perpendicular to both (a cross product is). Keep '
                               'some of "one" in it: start from "one" and take away only its shadow on "journey".',
                        "它与“one”的点积也是 0：它同时垂直于两者（叉积就是这样）。要保留一部分“one”：从“one”出发，"
                        "只减掉它在“journey”上的影子。")
    if against_one < 0:
        return feedback(False, f'It scores {against_one:.4f} against "one", below 0. Flip its sign (-v): it stays '
                               'perpendicular to "journey" and keeps length 1.',
                        f"它与“one”的点积是 {against_one:.4f}，小于 0。把它取反（-v）：它仍然与“journey”垂直，长度仍然是 1。")
    feedback(True, f'Length 1, score 0 against "journey" and {against_one:.4f} against "one". No such vector scores more '
                   f'than {best:.4f} against "one": that is what is left of "one" without its shadow on "journey", '
                   "scaled to length 1.",
             f"长度为 1，与“journey”的点积为 0，与“one”的点积为 {against_one:.4f}。这类向量与“one”的点积最多是 "
             f"{best:.4f}：那就是“one”去掉它在“journey”上的影子之后剩下的部分，再缩放到长度 1。")


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
