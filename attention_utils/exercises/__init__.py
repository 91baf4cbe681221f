"""Exercise checkers: each lesson has a module here whose functions give bilingual feedback.

A checker prints a verdict with one line in English and one in Chinese (and returns nothing, so
the notebook shows only the feedback); a learner can try, read the hint, and try again.
"""

from __future__ import annotations

import torch


def feedback(correct: bool, en: str, zh: str) -> None:
    """Print a verdict with a short explanation in both languages."""
    mark = "✅ Correct / 正确" if correct else "❌ Not yet / 还不对"
    print(f"{mark}\n{en}\n{zh}")


def missing(answer: object) -> bool:
    """True (after printing a nudge) when the learner has not written an answer yet."""
    if answer is None or answer is Ellipsis:
        feedback(False, "Replace the ... with your answer and run the cell again.", "请把 ... 换成你的答案，再运行一次。")
        return True
    return False


def as_whole_number(answer: object) -> int | None:
    """The answer as an int (2.0 and 0-d tensors count), or None when it is not a whole number."""
    value = answer.item() if isinstance(answer, torch.Tensor) else answer
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def has_form(answer: object, shape: tuple[int, ...], what_en: str, what_zh: str) -> bool:
    """True when `answer` is a tensor of `shape`; otherwise print what is wrong with its form."""
    if not isinstance(answer, torch.Tensor):
        feedback(False, f"{what_en} should be a torch.Tensor, got {type(answer).__name__}.",
                 f"{what_zh}应该是 torch.Tensor，而你给出的是 {type(answer).__name__}。")
        return False
    if tuple(answer.shape) != tuple(shape):
        feedback(False, f"{what_en} should have shape {tuple(shape)}, got {tuple(answer.shape)}.",
                 f"{what_zh}的形状应为 {tuple(shape)}，你的是 {tuple(answer.shape)}。")
        return False
    return True


def check_tensor_answer(answer: object, expected: torch.Tensor, what_en: str, what_zh: str, atol: float = 1e-4) -> None:
    """Compare a tensor answer with the expected one: type, then shape, then values."""
    if missing(answer) or not has_form(answer, expected.shape, what_en, what_zh):
        return
    if not torch.allclose(answer.detach().float(), expected.float(), atol=atol):
        return feedback(False, f"{what_en} has the right shape but different values; check each step.",
                        f"{what_zh}形状正确，但数值不对；请逐步检查计算过程。")
    feedback(True, f"{what_en}: every value matches.", f"{what_zh}：每个数值都对上了。")
