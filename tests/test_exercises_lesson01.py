"""Lesson 1's exercise checkers accept the right answer in any form and explain a wrong one, in both languages."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import (CORRECT, UNCHECKABLE, any_wrong_type, is_bilingual_no, plain_wrong_types,
                            real_number_forms, tensor_forms, verdict_of)

import attention_utils as au
from attention_utils.exercises import lesson01


def verdict(capsys) -> str:
    return capsys.readouterr().out


def loop_dot(a, b):
    total = 0.0
    for x, y in zip(a, b):
        total += x * y
    return total


# cosines with step from torch's own cosine_similarity: with 0.9611, journey 0.9141, starts 0.9038, Your 0.6493, one 0.3701
STEP_ORDER = ["with", "journey", "starts", "Your", "one"]


def cosine_matrix() -> torch.Tensor:
    x = au.example_inputs().double()
    return torch.nn.functional.cosine_similarity(x[:, None], x[None], dim=-1)


def test_dot_loop_accepts_a_loop_and_reports_step_one(capsys):
    lesson01.check_dot_loop(loop_dot)
    out = verdict(capsys)
    assert "Correct" in out and "0.2935" in out  # 0.05*0.77 + 0.80*0.25 + 0.55*0.10, by hand


def test_dot_loop_explains_each_likely_mistake(capsys):
    lesson01.check_dot_loop(...)
    assert "Replace the ..." in verdict(capsys)

    def unfinished(a, b):
        ...

    lesson01.check_dot_loop(unfinished)
    assert "returns None" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: [x * y for x, y in zip(a, b)])  # forgot to add the products
    out = verdict(capsys)
    assert "add the products" in out and "加起来" in out
    lesson01.check_dot_loop(lambda a, b: torch.tensor(a) * torch.tensor(b))  # the same slip with a tensor
    assert "add the products" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: np.array(a) * np.array(b))  # and with numpy
    assert "add the products" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: a @ b)  # the forbidden shortcut fails on plain lists
    assert "plain Python lists" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: torch.dot(a, b))
    assert "plain Python lists" in verdict(capsys)
    # the review's loopholes: ready-made products that accept lists; each is refused and named
    for shortcut in (lambda a, b: float(np.dot(a, b)), lambda a, b: torch.dot(torch.tensor(a), torch.tensor(b)),
                     lambda a, b: np.array(a) @ np.array(b), lambda a, b: float(np.sum(np.multiply(a, b))),
                     lambda a, b: torch.tensor(a, dtype=torch.float64) @ torch.tensor(b, dtype=torch.float64)):
        out = verdict(capsys) if lesson01.check_dot_loop(shortcut) is None else ""
        assert "Not yet" in out and "np.dot" in out and "现成的乘积" in out, out
    lesson01.check_dot_loop(lambda a, b: sum(a[i] * b[i] for i in range(3)))  # fixed at three features
    assert "Not yet" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: sum(a[i] * b[i] for i in range(4)))
    assert "range(len(a))" in verdict(capsys)
    lesson01.check_dot_loop(0.2935)
    assert "Define a function" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: complex(loop_dot(a, b), 1))  # not a real number
    assert "one real number" in verdict(capsys)


@settings(max_examples=40, deadline=None)
@given(form=st.sampled_from([float, np.float32, np.float64, torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64),
                             lambda v: torch.tensor([v]), np.array, lambda v: np.array([v])]))
def test_dot_loop_accepts_a_sum_returned_in_any_numeric_form(form):
    # the loop's total as the loop left it, or through float() first and then in any numeric form
    assert verdict_of(lesson01.check_dot_loop, lambda a, b: form(float(loop_dot(a, b)))).startswith(CORRECT)


def test_dot_loop_accepts_every_way_of_writing_the_loop(capsys):
    def by_index(a, b):
        total = 0
        for i in range(len(a)):
            total = total + a[i] * b[i]
        return total

    for loop in (loop_dot, by_index, lambda a, b: sum(x * y for x, y in zip(a, b)),
                 lambda a, b: float(loop_dot(a, b)), lambda a, b: np.float64(loop_dot(a, b))):
        lesson01.check_dot_loop(loop)
        assert "Correct" in verdict(capsys)


@settings(max_examples=40, deadline=None)
@given(result=any_wrong_type)
def test_dot_loop_answers_any_return_value_with_a_bilingual_no(result):
    out = verdict_of(lesson01.check_dot_loop, lambda a, b: result)
    assert is_bilingual_no(out), out


@settings(max_examples=40, deadline=None)
@given(answer=tensor_forms(cosine_matrix()))
def test_cosine_matrix_accepts_every_form(answer):
    assert verdict_of(lesson01.check_cosine_matrix, answer).startswith(CORRECT)


def test_cosine_matrix(capsys):
    x = au.example_inputs()
    lesson01.check_cosine_matrix(x @ x.T)  # dot products, not cosines
    assert "different values" in verdict(capsys)
    lesson01.check_cosine_matrix(torch.nn.functional.cosine_similarity(x[:, None], x[None], dim=-1))
    assert "Correct" in verdict(capsys)
    lesson01.check_cosine_matrix(cosine_matrix().cfloat() + 1j)  # the review's case: the real part alone is right
    out = verdict(capsys)
    assert "complex" in out and "复数" in out and "Correct" not in out
    lesson01.check_cosine_matrix(cosine_matrix().numpy().astype(np.complex128))
    assert "complex" in verdict(capsys)
    lesson01.check_cosine_matrix(cosine_matrix()[:5])
    assert "shape" in verdict(capsys)


@settings(max_examples=60, deadline=None)
@given(answer=any_wrong_type)
def test_cosine_matrix_answers_any_wrong_type_with_a_bilingual_no(answer):
    out = verdict_of(lesson01.check_cosine_matrix, answer)
    assert is_bilingual_no(out), out


def test_ranking_for_step(capsys):
    x = au.example_inputs()
    cos = torch.nn.functional.cosine_similarity(x, x[5:6], dim=-1)
    order = [au.TOKENS[i] for i in cos.argsort(descending=True).tolist() if i != 5]
    assert order == STEP_ORDER
    lesson01.check_ranking_for_step(order)
    assert "Correct" in verdict(capsys)
    lesson01.check_ranking_for_step(["journey", "starts", "with", "Your", "one"])
    assert "order of the dot products" in verdict(capsys)
    lesson01.check_ranking_for_step(list(reversed(order)))
    assert "reversed" in verdict(capsys)
    lesson01.check_ranking_for_step(["step", *order[:4]])
    assert "Leave \"step\" itself out" in verdict(capsys)
    lesson01.check_ranking_for_step(["with", "with", "starts", "Your", "one"])
    assert "exactly once" in verdict(capsys)
    lesson01.check_ranking_for_step(["journey", "with", "starts", "Your", "one"])
    assert "Not yet" in verdict(capsys)
    lesson01.check_ranking_for_step("with")
    assert "list of token strings" in verdict(capsys)
    lesson01.check_ranking_for_step(frozenset(order))  # a set has no order
    assert "no order" in verdict(capsys)


@settings(max_examples=30, deadline=None)
@given(form=st.sampled_from([list, tuple, np.array, lambda o: [t.upper() for t in o], lambda o: [f" {t} " for t in o]]))
def test_ranking_accepts_any_ordered_collection_of_the_names(form):
    assert verdict_of(lesson01.check_ranking_for_step, form(STEP_ORDER)).startswith(CORRECT)


@settings(max_examples=60, deadline=None)
@given(answer=any_wrong_type)
def test_ranking_answers_any_wrong_type_with_a_bilingual_no(answer):
    out = verdict_of(lesson01.check_ranking_for_step, answer)
    assert is_bilingual_no(out), out


@settings(max_examples=40, deadline=None)
@given(answer=plain_wrong_types)
def test_plain_wrong_types_get_a_hint_not_an_error_report(answer):
    for check in (lesson01.check_dot_loop, lesson01.check_cosine_matrix, lesson01.check_ranking_for_step):
        assert UNCHECKABLE not in verdict_of(check, answer)


@settings(max_examples=20, deadline=None)
@given(value=real_number_forms(0.2935))
def test_a_number_is_not_a_function(value):
    assert "Define a function" in verdict_of(lesson01.check_dot_loop, value)
