"""Checkers for lesson 1: dot products and cosine similarity on the running example."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..data import TOKENS, example_inputs
from . import as_real_number, check_tensor_answer, checker, feedback, missing

# Plain Python lists on which the learner's dot(a, b) is tried: `@` and torch.dot need tensors, and the lengths
# 3 and 4 catch a loop fixed at range(3).
TRIALS = (([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), ([0.5, -1.0, 2.0, 4.0], [2.0, 3.0, -0.5, 0.25]))


class Entry:
    """A number that can only be multiplied and added: a loop handles it, np.dot, torch.dot and torch.tensor cannot.

    Only a result (a product or a sum) turns into a float, so a loop may return float(total), while a ready-made
    product that converts the entries themselves fails.
    """

    __slots__ = ("value", "is_result")

    def __init__(self, value: float, is_result: bool = False) -> None:
        self.value, self.is_result = value, is_result

    def __mul__(self, other: object) -> Entry:
        return Entry(self.value * other.value, True) if isinstance(other, Entry) else NotImplemented

    def __add__(self, other: object) -> Entry:
        if isinstance(other, Entry):
            return Entry(self.value + other.value, True)
        plain = isinstance(other, (int, float)) and not isinstance(other, bool)
        return Entry(self.value + other, True) if plain else NotImplemented  # a loop's total may start at 0 or 0.0

    __radd__ = __add__

    def __float__(self) -> float:
        if not self.is_result:
            raise TypeError("an entry of the vector cannot be converted, only multiplied and added")
        return float(self.value)

    def __array__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("an Entry is not an array")  # numpy would otherwise wrap it in an object array


def _size(answer: object) -> int | None:
    """How many numbers a tensor or array holds; None for anything else."""
    if isinstance(answer, torch.Tensor):
        return answer.numel()
    return answer.size if isinstance(answer, np.ndarray) else None


def one_number(result: object) -> float | None:
    """The result as a float when it is one real number: Python, numpy or torch, a one-element tensor or array too."""
    return as_real_number(result.reshape(()) if _size(result) == 1 else result)


def is_complex(answer: object) -> bool:
    """True for a complex torch tensor or numpy array."""
    return (isinstance(answer, torch.Tensor) and answer.is_complex()) or (
        isinstance(answer, np.ndarray) and answer.dtype.kind == "c")


def _count(result: object) -> int | None:
    """How many numbers a list, tuple, tensor or array holds; None for anything else."""
    return len(result) if isinstance(result, (list, tuple)) else _size(result)


@checker
def check_dot_loop(dot: object) -> None:
    """The learner's dot(a, b): a loop over matching entries that adds up their products."""
    if missing(dot):
        return
    if not callable(dot):
        return feedback(False, "Define a function dot(a, b) and pass the function itself: check.check_dot_loop(dot).",
                        "请定义函数 dot(a, b)，并把函数本身传进来：check.check_dot_loop(dot)。")
    step, one = example_inputs()[5].tolist(), example_inputs()[4].tolist()
    for a, b in (*TRIALS, (step, one)):
        expected = sum(x * y for x, y in zip(a, b))
        try:
            result = dot(list(a), list(b))
        except TypeError:
            return feedback(False, "dot(a, b) must also work on plain Python lists: loop over the entries with zip(a, b) "
                                   "instead of using @ or torch.dot.",
                            "dot(a, b) 也要能处理普通的 Python 列表：请用 zip(a, b) 逐个遍历元素，不要用 @ 或 torch.dot。")
        except IndexError:
            return feedback(False, "dot(a, b) reads past the end of a vector: loop with zip(a, b) or range(len(a)), "
                                   "not a fixed range(3).",
                            "dot(a, b) 越过了向量的末尾：请用 zip(a, b) 或 range(len(a)) 来循环，不要写死 range(3)。")
        if result is None:
            return feedback(False, "dot(a, b) returns None: finish the loop and return the total.",
                            "dot(a, b) 返回了 None：请把循环写完，并用 return 返回总和。")
        value = one_number(result)
        if value is None and _count(result) == len(a):
            return feedback(False, f"dot(a, b) returns {len(a)} numbers, the products one by one: add the products "
                                   "and return their sum.",
                            f"dot(a, b) 返回了 {len(a)} 个数，也就是逐个的乘积：请把这些乘积加起来，返回它们的和。")
        if value is None:
            got = repr(result) if isinstance(result, float) else type(result).__name__  # nan and inf by name
            return feedback(False, f"dot(a, b) should return one real number, got {got}.",
                            f"dot(a, b) 应该返回一个实数，而你的函数返回的是 {got}。")
        if not math.isclose(value, expected, abs_tol=1e-4):
            return feedback(False, f"dot({a}, {b}) should be {expected:.4f}, got {value:.4f}. Multiply every pair of "
                                   "matching entries (all of them, however long the vectors are) and add the products.",
                            f"dot({a}, {b}) 应为 {expected:.4f}，你的结果是 {value:.4f}。请把每一对对应元素相乘"
                            "（不管向量有多长，一个都不能漏），再把乘积加起来。")
    entries = [Entry(x) for x in step], [Entry(y) for y in one]
    try:
        result = dot(*entries)
    except Exception:  # noqa: BLE001 - np.dot, torch.dot, @ and float() all fail on Entry, each in its own way
        result = None
    value = result.value if isinstance(result, Entry) else one_number(result)
    if value is None or not math.isclose(value, expected, abs_tol=1e-4):
        return feedback(False, "Your function is right on lists of floats, but not on entries that can only be multiplied "
                               "and added: it hands the work to a ready-made product (np.dot, torch.dot, @) or turns "
                               "the entries into a tensor or an array. Write the loop: multiply matching entries, add "
                               "the products, and return the total (float(total) is fine).",
                        "你的函数对浮点数列表算得对，但换成只能相乘和相加的元素就不行了：它把计算交给了现成的乘积"
                        "（np.dot、torch.dot、@），或者先把元素变成了张量或数组。请自己写循环：把对应元素相乘，"
                        "把乘积加起来，返回总和（写成 float(total) 也可以）。")
    feedback(True, f"Your loop works on any length; step · one = {expected:.4f}.",
             f"你的循环适用于任意长度的向量；step · one = {expected:.4f}。")


@checker
def check_cosine_matrix(answer: object) -> None:
    """The 6x6 matrix of cosine similarities between all tokens."""
    if is_complex(answer):
        return feedback(False, f"A cosine is a real number, but your matrix is complex ({answer.dtype}): build it from "
                               "the real embeddings, without complex numbers.",
                        f"余弦值是实数，而你的矩阵是复数（{answer.dtype}）：请直接用实数的嵌入向量来计算，不要引入复数。")
    inputs = example_inputs().double()
    unit = inputs / inputs.norm(dim=1, keepdim=True)
    check_tensor_answer(answer, unit @ unit.T, "The cosine matrix", "余弦相似度矩阵")


def _ranking(scores: list[float], skip: int) -> list[str]:
    """The tokens other than `skip`, sorted from the highest score to the lowest."""
    order = sorted((i for i in range(len(TOKENS)) if i != skip), key=lambda i: scores[i], reverse=True)
    return [TOKENS[i] for i in order]


def token_names(answer: object) -> list[str] | None:
    """Token strings from a list, tuple, set or 1-d numpy array, trimmed and lower-cased; None for anything else."""
    if isinstance(answer, np.ndarray) and answer.ndim == 1:
        answer = answer.tolist()
    if not isinstance(answer, (list, tuple, set, frozenset)) or not all(isinstance(a, str) for a in answer):
        return None
    return [a.strip().lower() for a in answer]


@checker
def check_ranking_for_step(answer: object) -> None:
    """The five other tokens ranked by cosine similarity with "step", closest direction first."""
    rows = example_inputs().double().tolist()
    step = rows[5]
    dots = [sum(x * y for x, y in zip(row, step)) for row in rows]
    lengths = [math.sqrt(sum(x * x for x in row)) for row in rows]
    cosines = [dot / (length * lengths[5]) for dot, length in zip(dots, lengths)]
    expected = [t.lower() for t in _ranking(cosines, skip=5)]
    if missing(answer):
        return
    if isinstance(answer, (set, frozenset)):
        return feedback(False, "A set has no order: give the five tokens as a list, closest direction first.",
                        "集合没有先后顺序：请把五个词元写成列表，方向最接近的排在最前面。")
    given = token_names(answer)
    if given is None:
        return feedback(False, 'Answer with a list of token strings, e.g. ["journey", "Your", ...].',
                        '答案请写成由词元字符串构成的列表，例如 ["journey", "Your", ...]。')
    if "step" in given:
        return feedback(False, 'Leave "step" itself out: rank only the five other tokens.',
                        "请去掉“step”本身，只给其余五个词元排序。")
    if sorted(given) != sorted(expected):
        return feedback(False, "Give each of the five other tokens exactly once.", "其余五个词元每个都要出现，而且只出现一次。")
    if given == [t.lower() for t in _ranking(dots, skip=5)]:
        return feedback(False, "That is the order of the dot products: long vectors jump ahead. Rank by cosine instead.",
                        "这是按点积排出的顺序，长向量会排到前面。请改为按余弦值排序。")
    if given == list(reversed(expected)):
        return feedback(False, "The right order, but reversed: put the closest direction first.",
                        "顺序整个排反了：请把余弦值最大（方向最接近）的词元放在最前面。")
    correct = given == expected
    pairs = [f"{TOKENS[i]} {cosines[i]:.4f}" for i in sorted(range(5), key=lambda i: -cosines[i])]
    feedback(
        correct,
        f"Ranked by cosine with step: {', '.join(pairs)}." if correct else
        "Not the cosine order yet: sort the row of the cosine matrix for step, highest first.",
        f"按与“step”的余弦值排序：{'，'.join(pairs)}。" if correct else
        "还不是按余弦值排出的顺序：请把余弦相似度矩阵中“step”那一行从大到小排序。",
    )
