"""The checkers' shared helpers read answers in every form a learner may produce; the forms the lesson tests draw from.

Every lesson's checker tests (`test_exercises_lessonNN.py`) import the Hypothesis strategies below:
a right answer written as a Python, numpy or torch number, a float64 tensor or a numpy array, and
wrong answers of every type, including objects whose comparison raises.
"""

from __future__ import annotations

import fractions
import re

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.data import example_inputs
from attention_utils.exercises import as_real_number, as_real_tensor, as_whole_number, checker

CORRECT = "✅ Correct / 正确"
NOT_YET = "❌ Not yet / 还不对"
UNCHECKABLE = "could not be checked"


# ---------------------------------------------------------------------------------------------
# Forms of a right answer


def real_number_forms(value: float) -> st.SearchStrategy:
    """The number as a learner may hold it: Python, numpy, 0-d or one-element torch, float32 or float64."""
    return st.sampled_from([
        float, np.float64, np.float32, np.array, lambda v: np.array([v]),
        torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64), lambda v: torch.tensor([v]),
        lambda v: torch.tensor(v, requires_grad=True), lambda v: torch.tensor(v).numpy(),
    ]).map(lambda form: form(value))


def whole_number_forms(value: int) -> st.SearchStrategy:
    """A count as a learner may hold it: int, numpy int or float, 0-d torch integer or float, a whole float."""
    return st.sampled_from([
        int, float, np.int64, np.int32, np.float64, np.float32, np.array, torch.tensor,
        lambda v: torch.tensor(v, dtype=torch.float64), lambda v: torch.tensor(v, dtype=torch.int32),
        lambda v: fractions.Fraction(2 * v, 2),
    ]).map(lambda form: form(value))


def tensor_forms(value: torch.Tensor) -> st.SearchStrategy:
    """A tensor answer as a learner may hold it: float32 or float64, numpy, needing grad, not contiguous."""
    return st.sampled_from([
        lambda t: t.float(), lambda t: t.double(), lambda t: t.float().numpy(), lambda t: t.double().numpy(),
        lambda t: t.float().clone().requires_grad_(True), lambda t: t.float().T.contiguous().T if t.dim() == 2 else t,
        lambda t: t.float() + 0 * torch.ones_like(t.float()),
    ]).map(lambda form: form(value.detach().clone()))


# ---------------------------------------------------------------------------------------------
# Wrong answers


class Awkward:
    """An answer that fails whatever a checker does with it: compare, convert, measure, iterate."""

    def __eq__(self, other):
        raise RuntimeError("no comparing me")

    __lt__ = __gt__ = __le__ = __ge__ = __ne__ = __eq__
    __hash__ = None

    def __bool__(self):
        raise RuntimeError("no truth value")

    def __float__(self):
        raise RuntimeError("no float")

    def __len__(self):
        raise RuntimeError("no length")

    def __iter__(self):
        raise RuntimeError("no iterating")


class AwkwardTensor(torch.Tensor):
    """A tensor subclass whose comparisons raise, as a learner's odd object might."""

    def __eq__(self, other):
        raise RuntimeError("no comparing me")

    __hash__ = torch.Tensor.__hash__


plain_wrong_types = st.one_of(
    st.none(), st.booleans(), st.text(max_size=8), st.complex_numbers(allow_nan=False, allow_infinity=False, min_magnitude=1),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), st.lists(st.integers(), max_size=4),
    st.just(object()), st.just(float("nan")), st.just(float("inf")), st.just(np.array(["a", "b"])),
    st.just(torch.ones(2, 2, dtype=torch.bool)), st.just(torch.ones(3, dtype=torch.cfloat)),
)
awkward = st.sampled_from([Awkward(), torch.ones(2).as_subclass(AwkwardTensor), [Awkward()], (Awkward(), Awkward())])
any_wrong_type = st.one_of(plain_wrong_types, awkward)


def verdict_of(check, *answers) -> str:
    """Call a checker and return what it printed; it must not raise, whatever the answers."""
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        check(*answers)
    return printed.getvalue()


def is_bilingual_no(out: str) -> bool:
    """A ❌ verdict followed by an English and a Chinese line."""
    lines = out.strip().splitlines()
    return lines[0] == NOT_YET and len(lines) >= 3 and any("\u4e00" <= ch <= "\u9fff" for ch in lines[-1])


# ---------------------------------------------------------------------------------------------
# The helpers themselves


def test_numbers_are_read_in_every_form_a_learner_may_produce():
    for whole in (136, 136.0, np.int64(136), np.float32(136), torch.tensor(136), torch.tensor(136.0, dtype=torch.float64),
                  np.array(136), fractions.Fraction(272, 2), [136], np.array([136]), torch.tensor([[136]])):  # one element
        assert as_whole_number(whole) == 136, whole
    for not_whole in (True, np.bool_(True), 136.5, float("nan"), "136", [136, 1], torch.tensor([136, 1]), torch.tensor(136j),
                      None, np.array([136, 1])):
        assert as_whole_number(not_whole) is None, not_whole
    assert as_real_number(np.float32(0.5)) == 0.5 and as_real_number(torch.tensor(0.5)) == 0.5
    assert as_real_number(float("inf")) is None and as_real_number(False) is None and as_real_number(1j) is None
    assert as_real_tensor(np.ones((2, 2))).dtype == torch.float64
    assert as_real_tensor(torch.ones(2, dtype=torch.cfloat)) is None and as_real_tensor(torch.ones(2).bool()) is None


def test_a_checker_answers_with_a_verdict_whatever_goes_wrong_inside_it(capsys):
    @checker
    def check_something(answer):
        assert answer == 3

    check_something(Awkward())
    out = capsys.readouterr().out
    assert out.startswith(NOT_YET) and "RuntimeError: no comparing me" in out and "无法检查" in out


@settings(max_examples=30, deadline=None)
@given(number=real_number_forms(0.25), count=whole_number_forms(136), matrix=tensor_forms(torch.eye(2)))
def test_the_forms_hold_the_same_value(number, count, matrix):
    assert float(torch.as_tensor(np.asarray(number.detach() if isinstance(number, torch.Tensor) else number))) == 0.25
    assert as_whole_number(count) == 136
    assert torch.equal(as_real_tensor(matrix), torch.eye(2, dtype=torch.float64))


def test_a_complex_answer_is_not_told_to_drop_its_imaginary_part(capsys):
    from attention_utils.exercises import check_tensor_answer

    check_tensor_answer(torch.ones(2, dtype=torch.cfloat) + 1j, torch.ones(2), "The answer", "答案")
    said = capsys.readouterr().out
    assert said.startswith("❌") and ".float()" not in said and "imaginary" in said and "虚部" in said


def test_a_chinese_lesson_gets_its_verdict_in_chinese_only(capsys):
    from attention_utils.exercises.lesson01 import check_cosine_matrix, check_ranking_for_step
    from attention_utils.language import choose_language

    rows = example_inputs().double()
    cosines = torch.nn.functional.cosine_similarity(rows[:, None], rows[None, :], dim=-1)  # torch's own route
    choose_language("zh")
    try:
        check_ranking_for_step(None)
        check_ranking_for_step({"journey"})
        check_cosine_matrix(cosines)
    finally:
        choose_language("en")
    said = capsys.readouterr().out
    assert said.count("❌ 还不对") == 2 and said.count("✅ 正确") == 1 and "集合没有先后顺序" in said
    assert not re.search(r"[A-Za-z]{3,} [A-Za-z]{3,}", said), said  # no English sentence (a token name may appear)
