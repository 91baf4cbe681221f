"""Checkers for lesson 6: dropout, its scale, train/eval mode and what it does to attention rows."""

from __future__ import annotations

import re

import torch
from torch.overrides import TorchFunctionMode

from ..data import example_batch
from ..functional import causal_mask
from ..modules import CausalAttention
from . import as_real_number, as_real_tensor, check_tensor_answer, checker, feedback, has_form, missing

P = 0.2  # the rate exercises 1 and 3 use

# Torch functions that draw a dropout mask for the learner (F.dropout and nn.Dropout, dropout1d, alpha_dropout,
# torch.bernoulli, .bernoulli_): exercise 1 asks for the mask built from torch.rand_like instead.
READY_MADE = re.compile(r"dropout|bernoulli")


class _DropoutWatch(TorchFunctionMode):
    """While active, notes whether any ready-made dropout or Bernoulli draw is called, under whatever name."""

    def __init__(self) -> None:
        super().__init__()
        self.used = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if READY_MADE.search(getattr(func, "__name__", "")):
            self.used = True
        return func(*args, **(kwargs or {}))


@checker
def check_dropout_function(answer: object) -> None:
    """A dropout function my_dropout(x, p), judged by properties that hold for any random mask."""
    if missing(answer):
        return
    if not callable(answer):
        return feedback(False, "Give the function itself: my_dropout, without parentheses.",
                        "请传入函数本身：写 my_dropout，不要加括号。")
    watch = _DropoutWatch()
    with torch.random.fork_rng(devices=[]):  # leave the learner's random stream as it was
        torch.manual_seed(0)
        x = torch.rand(200, 500) + 0.5  # positive values, so a kept entry is never 0
        original = x.clone()
        with watch:
            y = answer(x, P)  # an error in the learner's code: @checker names it
            y_zero = answer(x, 0.0)
    if watch.used:
        return feedback(False, "Your function calls torch's own dropout (F.dropout, nn.Dropout, torch.bernoulli or "
                               ".bernoulli_), which draws the mask for you: build the mask yourself from "
                               "torch.rand_like(x) >= p.",
                        "你的函数调用了 torch 现成的 dropout（F.dropout、nn.Dropout、torch.bernoulli 或 .bernoulli_），"
                        "掩码是它替你抽的：请自己用 torch.rand_like(x) >= p 构造掩码。")
    if y is None:
        return feedback(False, "my_dropout returns nothing yet: replace the ... with your code and `return` the result.",
                        "my_dropout 还没有返回任何东西：请把 ... 换成你的代码，并用 return 返回结果。")
    result = as_real_tensor(y)
    if result is None or result.shape != x.shape:
        return feedback(False, "my_dropout must return a tensor of real numbers of the same shape as x "
                        "(did you forget `return`?).",
                        "my_dropout 必须返回一个与 x 形状相同、由实数组成的张量（是不是忘了写 return？）。")
    if not torch.equal(x, original):
        return feedback(False, "my_dropout changed x in place; build a new tensor instead.",
                        "my_dropout 原地修改了 x；请返回一个新的张量。")
    x = x.double()
    kept = result != 0
    fraction = kept.double().mean().item()
    if abs(fraction - (1 - P)) > 0.01:
        if abs(fraction - P) < 0.01:
            return feedback(False, f"Only {fraction:.0%} of the entries survived: you kept an entry with probability p. "
                            "p is the probability to DROP; keep where the uniform number is >= p.",
                            f"只有 {fraction:.0%} 的元素被保留：你是以概率 p 保留的。p 是丢弃的概率；"
                            "随机数不小于 p 时才保留。")
        return feedback(False, f"{fraction:.0%} of the entries survived; with p = {P} about {1 - P:.0%} should.",
                        f"保留了 {fraction:.0%} 的元素；p = {P} 时应保留约 {1 - P:.0%}。")
    ratio = result[kept] / x[kept]
    if not torch.allclose(ratio, torch.full_like(ratio, 1 / (1 - P)), atol=1e-4):
        if torch.allclose(ratio, torch.full_like(ratio, 1 / P), atol=1e-4):
            return feedback(False, "You scaled by 1/p = 5: the mean becomes 0.8 × 5 = 4. Scale by 1/(1 - p).",
                            "你乘的是 1/p = 5：均值会变成 0.8 × 5 = 4。应当乘以 1/(1 - p)。")
        if torch.allclose(ratio, torch.ones_like(ratio), atol=1e-4):
            return feedback(False, "The kept values are unchanged, so the mean drops to 0.8. Scale them by 1/(1 - p).",
                            "保留的值没有缩放，均值会降到 0.8。请把它们乘以 1/(1 - p)。")
        return feedback(False, "Each kept value should be x / (1 - p), the rest exactly 0.",
                        "每个保留的值应等于 x / (1 - p)，其余的值应恰好为 0。")
    unchanged = as_real_tensor(y_zero)
    if unchanged is None or unchanged.shape != x.shape or not torch.allclose(unchanged, x):
        return feedback(False, "With p = 0 nothing should be dropped and nothing scaled.",
                        "p = 0 时不应丢弃任何元素，也不应缩放。")
    mean = (result / x).mean().item()
    feedback(True, f"{fraction:.1%} of the entries survived, each multiplied by {1 / (1 - P):.2f}; "
             f"the mean of the output over the input, y/x with y = my_dropout(x, {P}), is {mean:.3f}.",
             f"保留了 {fraction:.1%} 的元素，每个都乘以 {1 / (1 - P):.2f}；输出与输入之比 y/x（y = my_dropout(x, {P})）的均值为 {mean:.3f}。")


def _eval_reference() -> torch.Tensor:
    """Context vectors of CausalAttention(3, 2, 6, 0.5) built with seed 123, with dropout switched off."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        reference = CausalAttention(3, 2, 6, 0.0)  # same weights: dropout does not change initialization
    with torch.no_grad():
        return reference(example_batch())


@checker
def check_eval_context(answer: object, average_train: object = None) -> None:
    """(a) The eval-mode context vectors; (b) optionally, the average of many training-mode outputs."""
    expected = _eval_reference()
    context = as_real_tensor(answer)
    if context is not None and context.shape == expected.shape and not torch.allclose(context, expected.double(), atol=1e-4):
        return feedback(False, "Right shape, different values: is dropout still on? Call .eval() on the module first.",
                        "形状对了，数值不对：dropout 是不是还开着？先对模块调用 .eval()。")
    if average_train is None or context is None or context.shape != expected.shape:
        return check_tensor_answer(answer, expected, "Your context tensor", "你的上下文向量")
    if missing(average_train) or not has_form(average_train, expected.shape, "The average", "平均值"):
        return
    average = as_real_tensor(average_train)
    if average is None:
        return feedback(False, f"The average should hold real numbers, got {average_train.dtype}.",
                        f"平均值应该由实数组成，而你给出的是 {average_train.dtype}。")
    if torch.allclose(average, expected.double(), atol=1e-6):
        return feedback(False, "This is exactly the eval output: dropout was still off. Call .train() before averaging.",
                        "这恰好就是评估模式的输出：dropout 还关着。取平均之前先调用 .train()。")
    if not (average - expected.double()).abs().max() <= 0.1:  # also catches NaN
        return feedback(False, "The average is still far from the eval output: average more training passes "
                        "(1,000 or more), each with a fresh dropout mask.",
                        "平均值离评估模式的输出还很远：请对更多次训练模式的前向计算取平均（1000 次或更多），每次都用新的 dropout 掩码。")
    feedback(True, "Both right. The average of the training passes approaches the eval output: dropout keeps the "
             "expected value of every weight, and the context vectors are linear in the weights.",
             "两问都对。训练模式下多次输出的平均值逼近评估模式的输出：dropout 保持每个权重的期望值不变，而上下文向量是权重的线性函数。")


@checker
def check_zero_row_probability(answer: object) -> None:
    """Probability that each row of the 6x6 causal weights is all zero after dropout with p = 0.2."""
    visible = (~causal_mask(6)).sum(dim=1).double()  # keys each query may look at
    expected = P**visible
    if isinstance(answer, (list, tuple)) and answer and all(as_real_number(v) is not None for v in answer):
        answer = torch.tensor([as_real_number(v) for v in answer], dtype=torch.float64)  # six numbers in a list do too
    given = as_real_tensor(answer)
    if given is not None and given.shape == expected.shape and torch.allclose(given, (1 - P) ** visible, atol=1e-6):
        return feedback(False, "That is the probability that every weight in the row SURVIVES. A zero row needs every "
                        "weight dropped.", "这是整行权重全部被保留的概率。整行为 0 需要每个权重都被丢弃。")
    if given is not None and given.shape == expected.shape and torch.allclose(given, P ** (visible - 1), atol=1e-6):
        return feedback(False, "One power short: the query at index t sees t + 1 keys (itself included), so its row is "
                               "all zero with probability p to the power t + 1.",
                        "指数少了 1：索引为 t 的查询能看到 t + 1 个键（包括它自己），所以整行为 0 的概率是 p 的 t + 1 次方。")
    check_tensor_answer(answer, expected, "Your probability tensor", "你给出的概率", atol=1e-6)
