"""Checkers for lesson 4: query, key and value projections on the running example.

Every expected answer is recomputed here from the book's recipe (same seeds, same order of
weight creation) inside `torch.random.fork_rng`, so checking never disturbs the notebook's
random state.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..data import TOKENS, example_inputs
from . import as_real_tensor, check_tensor_answer, checker, feedback, missing


def _book_matrices() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W_query, W_key, W_value of the step-by-step example: torch.rand(3, 2) three times after seed 123."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        return torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)


def _attend(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    weights = torch.softmax(queries @ keys.T / math.sqrt(keys.shape[-1]), dim=-1)
    return weights @ values, weights


def _matrix(answer: object) -> torch.Tensor | None:
    """A tensor, an array or a nested list of real numbers as a float64 tensor; None for anything else."""
    if isinstance(answer, (list, tuple)):
        try:
            answer = torch.tensor(answer, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return None
    matrix = as_real_tensor(answer)
    return matrix if matrix is not None and torch.isfinite(matrix).all() else None


@checker
def check_one_way(w_query: object, w_key: object = None) -> None:
    """Hand-set W_query and W_key (3 x 2): "one" weighs "Your" most, while "Your" weighs "journey" most."""
    if missing(w_query) or missing(w_key):
        return
    matrices = [_matrix(w) for w in (w_query, w_key)]
    if any(m is None for m in matrices):
        return feedback(False, "Give two matrices of real numbers, W_query and W_key: check.check_one_way(W_query_mine, "
                               "W_key_mine).",
                        "请给出两个由实数组成的矩阵 W_query 和 W_key：check.check_one_way(W_query_mine, W_key_mine)。")
    shapes = [tuple(m.shape) for m in matrices]
    if any(shape == (2, 3) for shape in shapes):
        return feedback(False, "A matrix has shape (2, 3), nn.Linear's layout. Here the queries are x @ W_query, so each "
                               "matrix is (3, 2): one row per input feature.",
                        "有一个矩阵的形状是 (2, 3)，这是 nn.Linear 的存储方式。这里查询是 x @ W_query，所以每个矩阵都是 "
                        "(3, 2)：每个输入特征一行。")
    if any(shape != (3, 2) for shape in shapes):
        return feedback(False, f"Each matrix should have shape (3, 2), got {shapes}.", f"每个矩阵的形状都应为 (3, 2)，你的是 {shapes}。")
    x = example_inputs().double()
    _, weights = _attend(x @ matrices[0], x @ matrices[1], x)
    your, journey, one = TOKENS.index("Your"), TOKENS.index("journey"), TOKENS.index("one")
    for row in (one, your):
        top = weights[row].max()
        if (weights[row] > top - 1e-6).sum() > 1:
            return feedback(False, f'Several keys tie for the largest weight of "{TOKENS[row]}" ({top:.4f}): make one of '
                                   "them stand out.",
                            f"“{TOKENS[row]}”这一行有几个键并列最大权重（{top:.4f}）：请让其中一个明显更大。")
    picks = {row: TOKENS[int(weights[row].argmax())] for row in (one, your)}
    if picks[one] == "Your" and picks[your] == "journey":
        return feedback(True, f'"one" puts its largest weight on "Your" ({weights[one, your]:.4f}) and "Your" on "journey" '
                              f'({weights[your, journey]:.4f}): a one-way relation, since "Your" does not answer "one" '
                              f"({weights[your, one]:.4f}).",
                        f"“one”把最大的权重给了“Your”（{weights[one, your]:.4f}），“Your”把最大的权重给了“journey”"
                        f"（{weights[your, journey]:.4f}）：这是单向的关系，因为“Your”并不回应“one”（{weights[your, one]:.4f}）。")
    feedback(False, f'With your matrices "one" puts its largest weight on "{picks[one]}" and "Your" on "{picks[your]}". '
                    'Choose what each key offers first (which features make the key of "Your" and of "journey" stand '
                    "out?), then let each query ask for the feature its target offers.",
             f"用你的矩阵，“one”把最大的权重给了“{picks[one]}”，“Your”给了“{picks[your]}”。先想好每个键提供什么"
             "（哪些特征能让“Your”和“journey”的键突出？），再让每个查询去找它的目标所提供的那个特征。")


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
    if all(isinstance(getattr(answer, name, None), nn.Linear) for name in names):
        return feedback(False, "That is a V2-style module (its W_query is an nn.Linear layer). Build a new SelfAttentionV1 "
                               "and copy each layer's weight of sa_v2 into it, transposed.",
                        "你交的是一个 V2 式的模块（它的 W_query 是 nn.Linear 层）。请新建一个 SelfAttentionV1，"
                        "把 sa_v2 每一层的 weight 转置后复制进去。")
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
    unscaled = torch.softmax((x[3:] @ w_q) @ (x[:3] @ w_k).T, dim=-1)
    given = as_real_tensor(answer)
    if given is not None and given.shape == unscaled.shape and torch.allclose(given, unscaled.double(), atol=1e-4):
        return feedback(False, "These are the unscaled weights: divide the scores by math.sqrt(d_k) (here d_k = 2) "
                               "before the softmax.",
                        "这是没有缩放的结果：softmax 之前要把分数除以 math.sqrt(d_k)（这里 d_k = 2）。")
    check_tensor_answer(answer, weights, "The matrix of cross-attention weights", "交叉注意力权重矩阵")
