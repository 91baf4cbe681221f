"""Lesson 5 checkers: wrong answers get a hint, right ones are accepted in any form, in both languages."""

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import (CORRECT, UNCHECKABLE, any_wrong_type, is_bilingual_no, plain_wrong_types, tensor_forms,
                            verdict_of, whole_number_forms)

import attention_utils as au
from attention_utils.exercises import lesson05


def verdict(capsys) -> str:
    return capsys.readouterr().out


def book_scores():
    torch.manual_seed(789)
    sa_v2 = au.SelfAttentionV2(3, 2)
    x = au.example_inputs()
    with torch.no_grad():
        return sa_v2.W_query(x) @ sa_v2.W_key(x).T


def test_local_window(capsys):
    scores = book_scores()
    lesson05.check_local_window(...)
    assert "Not yet" in verdict(capsys)
    causal = torch.softmax(scores.masked_fill(au.causal_mask(6), float("-inf")) / math.sqrt(2), dim=-1)
    lesson05.check_local_window(causal)
    out = verdict(capsys)
    assert "Not yet" in out and "j < i - 2" in out
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    hide = (j > i) | (j < i - 2)
    zeroed = torch.softmax(scores / math.sqrt(2), dim=-1).masked_fill(hide, 0.0)  # not renormalized
    lesson05.check_local_window(zeroed)
    assert "sum to 1" in verdict(capsys)
    local = torch.softmax(scores.masked_fill(hide, float("-inf")) / math.sqrt(2), dim=-1)
    assert local[5, :3].sum() == 0 and torch.allclose(local.sum(dim=-1), torch.ones(6))
    lesson05.check_local_window(local)
    assert "Correct" in verdict(capsys)


def test_padding_mask(capsys):
    causal = au.causal_mask(6)
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    right = causal | pad[:, None, :]
    lesson05.check_padding_mask(...)
    assert "Not yet" in verdict(capsys)
    lesson05.check_padding_mask(causal)  # (6, 6): no batch dimension
    assert "(2, 6, 6)" in verdict(capsys)
    lesson05.check_padding_mask(right.float())
    assert "boolean" in verdict(capsys)
    lesson05.check_padding_mask(~right)
    assert "inverted" in verdict(capsys)
    lesson05.check_padding_mask(causal.expand(2, 6, 6))
    assert "causal mask only" in verdict(capsys)
    whole_rows = right | pad[:, :, None]  # the pad keys and the pad queries' whole rows
    assert whole_rows[1, 4:].all()  # by hand: rows 4 and 5 of sentence 2 then see no key at all
    lesson05.check_padding_mask(whole_rows)
    out = verdict(capsys)
    assert "Not yet" in out and "Hide only the pad keys" in out and "NaN" in out and "整行" in out
    # with right padding, hiding the pad queries instead of the pad keys is the same mask (the future hides the rest)
    assert torch.equal(causal | pad[:, :, None], whole_rows)
    lesson05.check_padding_mask(causal | pad[:, :, None])
    assert "Hide only the pad keys" in verdict(capsys)
    lesson05.check_padding_mask(right)
    assert "Correct" in verdict(capsys)


def test_empty_rows(capsys):
    # by hand: left padding puts 0, 2 and 5 pads first, and each pad query sees only pads; right padding empties nothing
    lesson05.check_empty_rows(..., [0, 0, 0])
    assert "Not yet" in verdict(capsys)
    lesson05.check_empty_rows([6, 4, 1], [0, 0, 0])  # counted the real tokens
    assert "real tokens" in verdict(capsys)
    lesson05.check_empty_rows([0, 0, 0], [0, 0, 0])
    assert "Left padding" in verdict(capsys)
    lesson05.check_empty_rows([0, 2, 5], [0, 2, 5])  # thought right padding behaves like left padding
    assert "Right padding" in verdict(capsys)
    lesson05.check_empty_rows([0, 2], [0, 0, 0])
    assert "three whole numbers" in verdict(capsys)
    lesson05.check_empty_rows([0, 2, 5], [0, 0, 0])
    assert "Correct" in verdict(capsys)
    lesson05.check_empty_rows(torch.tensor([0, 2, 5]), (0.0, 0.0, 0.0))
    assert "Correct" in verdict(capsys)


def test_padding_mask_shape_hint(capsys):
    lesson05.check_padding_mask(au.causal_mask(6))
    out = verdict(capsys)
    assert "(2, 1, 6)" in out and "掩码的形状应为 (2, 6, 6)，你的是 (6, 6)；" in out


# ---------------------------------------------------------------------------------------------
# Every form of a right answer, every wrong type (Hypothesis)


def local_weights_by_hand() -> torch.Tensor:
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    return torch.softmax(book_scores().masked_fill((j > i) | (j < i - 2), float("-inf")) / math.sqrt(2), dim=-1)


def right_padding_mask() -> torch.Tensor:
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    return au.causal_mask(6) | pad[:, None, :]


@settings(max_examples=30, deadline=None)
@given(answer=tensor_forms(local_weights_by_hand()))
def test_local_window_accepts_every_form(answer):
    assert verdict_of(lesson05.check_local_window, answer).startswith(CORRECT)


@settings(max_examples=20, deadline=None)
@given(form=st.sampled_from([lambda m: m, lambda m: m.numpy(), lambda m: m.clone().contiguous(),
                             lambda m: m.transpose(1, 2).contiguous().transpose(1, 2)]))
def test_padding_mask_accepts_a_boolean_tensor_or_array(form):
    assert verdict_of(lesson05.check_padding_mask, form(right_padding_mask())).startswith(CORRECT)


@settings(max_examples=60, deadline=None)
@given(left=st.tuples(whole_number_forms(0), whole_number_forms(2), whole_number_forms(5)),
       right=st.tuples(whole_number_forms(0), whole_number_forms(0), whole_number_forms(0)),
       container=st.sampled_from([list, tuple]))
def test_empty_rows_accept_any_whole_numbers_in_a_list_or_tuple(left, right, container):
    assert verdict_of(lesson05.check_empty_rows, container(left), container(right)).startswith(CORRECT)


@settings(max_examples=20, deadline=None)
@given(form=st.sampled_from([np.array, torch.tensor, lambda v: np.array(v, dtype=np.float64),
                             lambda v: [np.int64(x) for x in v], lambda v: torch.tensor(v).tolist()]))
def test_empty_rows_accept_arrays_tensors_and_numpy_ints(form):
    assert verdict_of(lesson05.check_empty_rows, form([0, 2, 5]), form([0, 0, 0])).startswith(CORRECT)


@settings(max_examples=60, deadline=None)
@given(answer=any_wrong_type, check=st.sampled_from(["check_local_window", "check_padding_mask"]))
def test_any_wrong_type_gets_a_bilingual_no(answer, check):
    out = verdict_of(getattr(lesson05, check), answer)
    assert is_bilingual_no(out), out


@settings(max_examples=60, deadline=None)
@given(left=st.one_of(any_wrong_type, st.lists(st.integers(0, 6), min_size=3, max_size=3).filter(lambda v: v != [0, 2, 5])),
       right=st.one_of(any_wrong_type, st.lists(st.integers(0, 6), min_size=3, max_size=3)))
def test_empty_rows_answer_anything_else_with_a_bilingual_no(left, right):
    out = verdict_of(lesson05.check_empty_rows, left, right)
    assert is_bilingual_no(out), out


@settings(max_examples=40, deadline=None)
@given(answer=plain_wrong_types)
def test_plain_wrong_types_get_a_hint_not_an_error_report(answer):
    for check in (lesson05.check_local_window, lesson05.check_padding_mask):
        assert UNCHECKABLE not in verdict_of(check, answer)
    assert UNCHECKABLE not in verdict_of(lesson05.check_empty_rows, answer, answer)


def test_the_checker_uses_the_glossarys_padding_terms(capsys):
    lesson05.check_empty_rows([0, 2, 5], [0, 0, 0])
    out = verdict(capsys)
    assert "左填充" in out and "右填充" in out and "右侧" not in out and "左侧" not in out
    lesson05.check_padding_mask(right_padding_mask())
    assert verdict(capsys).count("正确") == 1  # the verdict line says it once
