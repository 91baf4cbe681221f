"""Checkers for lesson 3: a stable softmax, the right `dim`, and scaled context vectors."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable

import torch
from torch.overrides import TorchFunctionMode

from ..data import example_batch, example_inputs
from . import as_real_number, as_real_tensor, check_tensor_answer, checker, feedback, missing

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


# Torch functions whose name says they compute a softmax for the learner (softmax, log_softmax, softmin,
# special_softmax, _softmax, scaled_dot_product_attention, ...), however they are reached.
READY_MADE = re.compile(r"softmax|softmin|scaled_dot_product")


class _ShortcutWatch(TorchFunctionMode):
    """While active, notes every call of a ready-made softmax, even one the learner holds under another name.

    Torch's are seen through torch's function handling (so `from torch import softmax as f`, a partial
    or an nn.Softmax are seen too); the package's through their code objects and the profiler hook.
    """

    def __init__(self) -> None:
        super().__init__()
        from .. import functional, tiled

        self.used = False
        self.package_code = {function.__code__ for function in (
            functional.stable_softmax, functional.naive_softmax, functional.scaled_dot_product_attention,
            tiled.online_softmax, tiled.tiled_attention)}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if READY_MADE.search(getattr(func, "__name__", "")):
            self.used = True
        return func(*args, **(kwargs or {}))

    def _profile(self, frame, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code in self.package_code:
            self.used = True

    def __enter__(self):
        self._previous_profile = sys.getprofile()
        sys.setprofile(self._profile)
        return super().__enter__()

    def __exit__(self, *exc_info):
        sys.setprofile(self._previous_profile)
        return super().__exit__(*exc_info)


def _as_weights(result: object) -> torch.Tensor | None:
    """The learner's weights as a float64 tensor: a tensor, a numpy array, or a list of real numbers; else None."""
    if isinstance(result, (list, tuple)):
        numbers = [as_real_number(value) for value in result]
        return None if any(n is None for n in numbers) else torch.tensor(numbers, dtype=torch.float64)
    return as_real_tensor(result)


def _run_learner_softmax(softmax: Callable, scores: list) -> torch.Tensor | str:
    """The learner's softmax of `scores` as a float64 tensor, or the feedback key of what went wrong."""
    watch = _ShortcutWatch()
    try:
        with watch:
            result = softmax(torch.tensor(scores))
    except Exception as error:
        if watch.used:
            return "shortcut"
        if isinstance(error, RuntimeError) and "must match the size of tensor" in str(error):
            return "keepdim"  # a max or sum over dim=-1 without keepdim no longer lines up with the rows
        raise  # @checker reports the learner's own error
    if watch.used:
        return "shortcut"
    if result is None:
        return "none"
    weights = _as_weights(result)
    if weights is None:
        return "real"
    if tuple(weights.shape) != tuple(torch.tensor(scores).shape):
        return "shape"
    return weights


PROBLEMS = {
    "shortcut": ("Your function calls a ready-made softmax (torch.softmax, F.softmax, .softmax, nn.Softmax or one of "
                 "the package's): write it with torch.exp, a maximum and a sum.",
                 "你的函数调用了现成的 softmax（torch.softmax、F.softmax、.softmax、nn.Softmax 或辅助包里的）："
                 "请用 torch.exp、最大值和求和自己写。"),
    "keepdim": ("Your function fails with a size mismatch: a max or a sum over dim=-1 drops that dimension, so the "
                "result no longer lines up with the rows. Add keepdim=True: s.max(dim=-1, keepdim=True).values and "
                "exps.sum(dim=-1, keepdim=True).",
                "你的函数因为形状对不上而出错：在 dim=-1 上取最大值或求和，会把这个维度去掉，结果就和各行对不齐了。"
                "请加上 keepdim=True：s.max(dim=-1, keepdim=True).values 和 exps.sum(dim=-1, keepdim=True)。"),
    "none": ("Your function returns None: finish it and return the weights.", "你的函数返回了 None：请把它写完，并返回权重。"),
    "real": ("Your function should return the weights as a tensor of real numbers.",
             "你的函数应该以实数张量的形式返回权重。"),
    "shape": ("Your function should return a tensor with the same shape as the scores.",
              "你的函数应该返回一个与分数形状相同的张量。"),
}


@checker
def check_stable_softmax(softmax: object) -> None:
    """The learner's my_softmax(s) for a 1-d tensor: right on scores that overflow exp(), with no softmax shortcut."""
    if missing(softmax):
        return
    if not callable(softmax):
        return feedback(False, "Define a function my_softmax(s) and pass the function itself.",
                        "请定义函数 my_softmax(s)，并把函数本身传进来。")
    for scores in (list(BIG_SCORES), [-1000.0, -1001.0, -1003.0], [0.5, -1.0, 2.0, 0.0]):
        result = _run_learner_softmax(softmax, scores)
        if isinstance(result, str):
            return feedback(False, *PROBLEMS[result])
        if not torch.isfinite(result).all():
            return feedback(False, f"For the scores {scores} your weights contain inf or nan: exp(250) overflows float32 "
                                   "and exp(-1000) rounds to 0. Subtract the maximum score first.",
                            f"对分数 {scores}，你的权重里有 inf 或 nan：exp(250) 超出了 float32 的范围，exp(-1000) 会舍入成 0。"
                            "请先把每个分数减去其中的最大值。")
        expected = torch.tensor(_softmax_rows([scores])[0], dtype=torch.float64)
        if not torch.allclose(result, expected, atol=1e-4):
            return feedback(False, f"For the scores {scores} the weights should be "
                                   f"{[round(w, 4) for w in expected.tolist()]}; check each step.",
                            f"对分数 {scores}，权重应为 {[round(w, 4) for w in expected.tolist()]}；请逐步检查计算过程。")
    weights = "[" + ", ".join(f"{w:.4f}" for w in _softmax_rows([list(BIG_SCORES)])[0]) + "]"  # 4 decimals each
    feedback(True, f"Your softmax survives huge and very negative scores; for {list(BIG_SCORES)} it gives {weights}.",
             f"你的 softmax 经得起很大的分数和绝对值很大的负分数；对 {list(BIG_SCORES)}，它给出 {weights}。")


@checker
def check_softmax_rows(softmax: object) -> None:
    """The learner's my_softmax for any shape: normalized over the last dim, each row shifted by its own maximum."""
    if missing(softmax):
        return
    if not callable(softmax):
        return feedback(False, "Define a function my_softmax(s) and pass the function itself.",
                        "请定义函数 my_softmax(s)，并把函数本身传进来。")
    batch = example_batch(2).tolist()
    batch_scores = [[[sum(x * y for x, y in zip(q, k)) for k in rows] for q in rows] for rows in batch]  # (2, 6, 6)
    far_apart = [[[0.0, 1.0, 2.0], [1000.0, 1001.0, 1002.0]]]  # (1, 2, 3): two rows 1000 apart
    heads = [[[[0.1 * (h + 1) * (i - j) for j in range(4)] for i in range(4)] for h in range(3)] for _ in range(2)]  # (2, 3, 4, 4)
    for scores in (batch_scores, far_apart, heads):
        result = _run_learner_softmax(softmax, scores)
        if isinstance(result, str):
            return feedback(False, *PROBLEMS[result])
        rows = result.reshape(-1, result.shape[-1])
        expected = torch.tensor(_softmax_rows(torch.tensor(scores).reshape(-1, rows.shape[-1]).tolist()), dtype=torch.float64)
        if scores is batch_scores and torch.allclose(result, torch.full_like(result, 0.5), atol=1e-4):
            return feedback(False, "Every weight is 0.5: you normalized across the two sentences of the batch (dim=0). Use dim=-1.",
                            "每个权重都是 0.5：你是在批次的两个句子之间做了归一化（dim=0）。请用 dim=-1。")
        if not torch.isfinite(result).all():
            return feedback(False, "Two rows 1000 apart give nan: subtracting one maximum for the whole tensor sends the "
                                   "lower row to exp(-1000) = 0. Subtract each row's own maximum, "
                                   "s.max(dim=-1, keepdim=True).values.",
                            "两行分数相差 1000 时出现了 nan：整个张量只减去一个最大值，会让较低的那一行变成 exp(-1000) = 0。"
                            "请让每一行减去它自己的最大值：s.max(dim=-1, keepdim=True).values。")
        if not torch.allclose(rows.sum(dim=-1), torch.ones(rows.shape[0], dtype=torch.float64), atol=1e-4):
            return feedback(False, "The weights of one query (a row) must add up to 1: sum over the last dimension with "
                                   "keepdim=True, so the division lines up with each row.",
                            "同一个查询（一行）的权重之和必须为 1：请在最后一个维度上求和并加上 keepdim=True，这样除法才会与每一行对齐。")
        if not torch.allclose(rows, expected, atol=1e-4):
            return feedback(False, "The rows add up to 1 but the values differ: normalize over the last dimension (the keys).",
                            "每行之和为 1，但数值不对：请在最后一个维度（键）上归一化。")
    feedback(True, "Your softmax works on any shape: each row over the keys, even for rows 1000 apart and for (b, h, T, T) heads.",
             "你的 softmax 适用于任意形状：每一行都在键的维度上归一化，即使两行相差 1000，或者是 (b, h, T, T) 的多头分数也没问题。")


@checker
def check_scaled_context(answer: object) -> None:
    """All six context vectors with scores divided by sqrt(d_k) = sqrt(3) before the softmax."""
    rows = example_inputs().tolist()
    d_k = len(rows[0])
    scores = [[sum(x * y for x, y in zip(q, k)) / math.sqrt(d_k) for k in rows] for q in rows]
    weights = _softmax_rows(scores)
    expected = torch.tensor([[sum(w * row[f] for w, row in zip(ws, rows)) for f in range(d_k)] for ws in weights])
    inputs = example_inputs()
    unscaled = torch.softmax(inputs @ inputs.T, dim=-1) @ inputs
    real = as_real_tensor(answer)
    if real is not None and real.shape == expected.shape and torch.allclose(real, unscaled.double(), atol=1e-4):
        return feedback(False, "These are the unscaled context vectors: divide the scores by math.sqrt(3) before the softmax.",
                        "这是未缩放的上下文向量：请在 softmax 之前把分数除以 math.sqrt(3)。")
    check_tensor_answer(answer, expected, "The matrix of scaled context vectors", "缩放后的上下文向量矩阵")


def _largest_distance(context: torch.Tensor) -> float:
    """The largest distance between two of the context vectors (rows)."""
    return torch.cdist(context, context).max().item()


@checker
def check_scaled_spread(prediction: object) -> None:
    """The prediction, made before computing: scaling by 1/sqrt(3) brings the six context vectors closer together."""
    if missing(prediction):
        return
    words = prediction.strip().lower().split() if isinstance(prediction, str) else []
    if not words or words[0] not in ("closer", "further", "farther"):
        return feedback(False, 'Answer with one word in quotes: "closer" or "further".',
                        "请用一个英文单词作答，写成字符串：closer（更近）或 further（更远）。")
    x = example_inputs().double()
    spreads = [_largest_distance(torch.softmax(x @ x.T / scale, dim=-1) @ x) for scale in (1.0, math.sqrt(3))]
    measured = f"the largest distance between two context vectors goes from {spreads[0]:.4f} to {spreads[1]:.4f}"
    measured_zh = f"两个上下文向量之间的最大距离从 {spreads[0]:.4f} 变为 {spreads[1]:.4f}"
    if words[0] == "closer":
        return feedback(True, f"Closer: dividing by sqrt(3) is a temperature above 1, so every row of weights moves towards "
                              f"1/6 and every context vector towards the plain average of the six arrows; {measured}.",
                        f"更近：除以 sqrt(3) 相当于温度大于 1，每一行权重都向 1/6 靠拢，每个上下文向量也都向六支箭头的"
                        f"简单平均靠拢；{measured_zh}。")
    feedback(False, "Not further: dividing the scores by sqrt(3) is a temperature T = sqrt(3) > 1, which flattens every "
                    "row of weights towards 1/6. What happens to six weighted averages whose weights all move towards "
                    "the same even mix?",
             "不是更远：把分数除以 sqrt(3) 相当于温度 T = sqrt(3) > 1，会把每一行权重都压向 1/6。"
             "六个加权平均的权重都向同一个平均分配靠拢时，它们彼此之间会怎样？")

