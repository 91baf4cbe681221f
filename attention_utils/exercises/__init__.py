"""Exercise checkers: each lesson has a module here whose functions give bilingual feedback.

A checker prints a verdict with one line in English and one in Chinese (only the Chinese line in
a Chinese lesson), and returns nothing, so the notebook shows only the feedback; a learner can
try, read the hint, and try again.

Every checker is wrapped in `@checker`: whatever a learner passes (a numpy number, a float64
tensor, an object whose comparison raises), the checker answers with a verdict, never with a
traceback of its own. Numbers are read with `as_whole_number` / `as_real_number` (a Python or
numpy number, a 0-d or one-element tensor or array, a one-element list), tensors with `as_real_tensor`
(tensors, arrays and nested lists), so a right answer in any numeric form gets ✅.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable

import numpy as np
import torch

from ..language import get_language


def feedback(correct: bool, en: str, zh: str) -> None:
    """Print a verdict with a short explanation: in both languages, or only in Chinese in a Chinese lesson."""
    if get_language() == "zh":
        print(f"{'✅ 正确' if correct else '❌ 还不对'}\n{zh}")
        return
    mark = "✅ Correct / 正确" if correct else "❌ Not yet / 还不对"
    print(f"{mark}\n{en}\n{zh}")


def checker(function: Callable[..., None]) -> Callable[..., None]:
    """Turn any exception raised while checking into a bilingual ❌, so a checker never ends in a traceback.

    An exception raised inside the learner's own function is reported the same way, with its type
    and message, and a hint to run that function on its own to see where it fails.
    """

    @functools.wraps(function)
    def guarded(*args, **kwargs) -> None:
        try:
            return function(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - a checker must answer, whatever the answer was
            message = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
            feedback(
                False,
                f"Your answer could not be checked: {type(error).__name__}: {message}. "
                "If you passed a function, call it on its own to see where it fails.",
                f"无法检查你的答案：{type(error).__name__}: {message}。如果你传入的是函数，请单独调用它，看看在哪里出错。",
            )

    return guarded


def missing(answer: object) -> bool:
    """True (after printing a nudge) when the learner has not written an answer yet."""
    if answer is None or answer is Ellipsis:
        feedback(False, "Replace the ... with your answer and run the cell again.", "请把 ... 换成你的答案，再运行一次。")
        return True
    return False


def _holds_no_number(answer: torch.Tensor | np.ndarray) -> bool:
    """Booleans and complex numbers are not a count or a measurement; a meta tensor holds no value at all."""
    if isinstance(answer, np.ndarray):
        return answer.dtype.kind in "bc"
    return answer.dtype == torch.bool or answer.is_complex() or answer.is_meta


def _scalar(answer: object) -> object:
    """A one-number answer as that number: a 0-d or one-element torch tensor or numpy array, or a one-element list.

    Anything else comes back unchanged, as does a tensor that holds no number (see _holds_no_number).
    """
    if isinstance(answer, (list, tuple)) and len(answer) == 1:
        return _scalar(answer[0])
    if isinstance(answer, (torch.Tensor, np.ndarray)) and math.prod(answer.shape) == 1 and not _holds_no_number(answer):
        return answer.item()
    return answer


def as_whole_number(answer: object) -> int | None:
    """The answer as an int, or None: Python, numpy and 0-d torch integers, and whole floats (2.0), count."""
    value = _scalar(answer)
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(value).is_integer():
        return int(value)
    return None


def as_real_number(answer: object) -> float | None:
    """The answer as a finite float, or None: Python, numpy and 0-d torch real numbers count (not bools)."""
    value = _scalar(answer)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def as_real_tensor(answer: object) -> torch.Tensor | None:
    """A torch tensor, numpy array or (nested) list of real numbers as a float64 torch tensor, or None (bool, complex,
    meta, ragged, other)."""
    if isinstance(answer, (list, tuple)):
        try:
            answer = np.asarray(answer, dtype=np.float64)
        except (TypeError, ValueError, RuntimeError):  # ragged, or holding things that are not numbers
            return None
    if isinstance(answer, np.ndarray):
        if answer.dtype.kind not in "iuf":
            return None
        answer = torch.from_numpy(np.ascontiguousarray(answer))
    if not isinstance(answer, torch.Tensor) or answer.dtype == torch.bool or answer.is_complex() or answer.is_meta:
        return None  # a meta tensor has a shape but no values to compare
    return answer.detach().to("cpu", torch.float64)


def has_form(answer: object, shape: tuple[int, ...], what_en: str, what_zh: str) -> bool:
    """True when `answer` is a torch tensor (or numpy array) of `shape`; otherwise print what is wrong with its form."""
    if not isinstance(answer, (torch.Tensor, np.ndarray)):
        feedback(False, f"{what_en} should be a torch.Tensor, got {type(answer).__name__}.",
                 f"{what_zh}应该是 torch.Tensor，而你给出的是 {type(answer).__name__}。")
        return False
    if tuple(answer.shape) != tuple(shape):
        feedback(False, f"{what_en} should have shape {tuple(shape)}, got {tuple(answer.shape)}.",
                 f"{what_zh}的形状应为 {tuple(shape)}，你的是 {tuple(answer.shape)}。")
        return False
    return True


def check_tensor_answer(answer: object, expected: torch.Tensor, what_en: str, what_zh: str, atol: float = 1e-4) -> None:
    """Compare a tensor answer with the expected one: type, then shape, then values (in float64)."""
    if missing(answer) or not has_form(answer, expected.shape, what_en, what_zh):
        return
    if as_real_tensor(answer) is None:
        complex_numbers = answer.is_complex() if isinstance(answer, torch.Tensor) else answer.dtype.kind == "c"
        hint_en = "the answer has no imaginary part" if complex_numbers else "convert it with .float()"
        hint_zh = "正确答案没有虚部" if complex_numbers else "请用 .float() 转换"
        return feedback(False, f"{what_en} should hold real numbers, got {answer.dtype}; {hint_en}.",
                        f"{what_zh}应该由实数组成，而你给出的是 {answer.dtype}；{hint_zh}。")
    if not torch.allclose(as_real_tensor(answer), expected.detach().to(torch.float64), atol=atol):
        return feedback(False, f"{what_en} has the right shape but different values; check each step.",
                        f"{what_zh}形状正确，但数值不对；请逐步检查计算过程。")
    feedback(True, f"{what_en}: every value matches.", f"{what_zh}：每个数值都对上了。")
