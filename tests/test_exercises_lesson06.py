"""Lesson 6 checkers accept right answers in any form and explain typical wrong ones (dropout scale, train/eval)."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import CORRECT, NOT_YET, any_wrong_type, is_bilingual_no, tensor_forms, verdict_of

import attention_utils as au
from attention_utils.exercises import lesson06


def verdict(capsys) -> str:
    return capsys.readouterr().out


def right_dropout(x, p):
    return x * (torch.rand_like(x) >= p) / (1 - p)


def test_dropout_function(capsys):
    lesson06.check_dropout_function(...)
    assert "Not yet" in verdict(capsys)

    def unfinished(x, p):
        ...

    lesson06.check_dropout_function(unfinished)
    assert "returns nothing" in verdict(capsys)

    lesson06.check_dropout_function(lambda x, p: x * (torch.rand_like(x) >= p) / p)  # the 1/p mistake
    out = verdict(capsys)
    assert "Not yet" in out and "1/p" in out
    lesson06.check_dropout_function(lambda x, p: x * (torch.rand_like(x) < p) / (1 - p))  # keeps with probability p
    out = verdict(capsys)
    assert "Not yet" in out and "DROP" in out
    lesson06.check_dropout_function(lambda x, p: x * (torch.rand_like(x) >= p))  # no scaling
    assert "Not yet" in verdict(capsys)

    def in_place(x, p):
        return x.mul_((torch.rand_like(x) >= p) / (1 - p))

    lesson06.check_dropout_function(in_place)
    assert "in place" in verdict(capsys)

    lesson06.check_dropout_function(right_dropout)
    assert "Correct" in verdict(capsys)
    # the review's loophole: torch's own dropout, under any name, draws the mask for the learner
    for ready_made in (lambda x, p: torch.nn.functional.dropout(x, p, training=True),
                       lambda x, p: torch.nn.Dropout(p)(x), lambda x, p: torch.dropout(x, p, True),
                       lambda x, p: x * torch.bernoulli(torch.full_like(x, 1 - p)) / (1 - p),
                       lambda x, p: x * torch.empty_like(x).bernoulli_(1 - p) / (1 - p)):
        lesson06.check_dropout_function(ready_made)
        out = verdict(capsys)
        assert out.startswith("❌") and "torch.rand_like(x) >= p" in out and "现成的 dropout" in out, out


def test_checker_leaves_the_random_stream_alone(capsys):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    lesson06.check_dropout_function(right_dropout)
    assert torch.equal(torch.rand(3), expected)
    verdict(capsys)


def test_eval_context(capsys):
    torch.manual_seed(123)
    module = au.CausalAttention(3, 2, 6, 0.5)
    lesson06.check_eval_context(module(au.example_batch()))  # still in training mode
    out = verdict(capsys)
    assert "Not yet" in out and ".eval()" in out
    lesson06.check_eval_context(module.eval()(au.example_batch()))
    assert "Correct" in verdict(capsys)
    # the book's printed context vectors for seed 123 (first sentence), typed from the book
    printed = torch.tensor([[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
                            [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081]])
    lesson06.check_eval_context(torch.stack([printed, printed]))
    assert "Correct" in verdict(capsys)


def test_eval_context_and_training_average(capsys):
    torch.manual_seed(123)
    module = au.CausalAttention(3, 2, 6, 0.5)
    batch = au.example_batch()
    with torch.no_grad():
        eval_context = module.eval()(batch)
        lesson06.check_eval_context(eval_context, ...)
        assert "Not yet" in verdict(capsys)
        lesson06.check_eval_context(eval_context, eval_context)  # forgot to switch dropout back on
        assert ".train()" in verdict(capsys)
        module.train()
        lesson06.check_eval_context(eval_context, module(batch))  # a single pass is far from its expectation
        assert "more training passes" in verdict(capsys)
        average = torch.stack([module(batch) for _ in range(2000)]).mean(dim=0)
        lesson06.check_eval_context(eval_context, average)
        assert "Correct" in verdict(capsys)
        lesson06.check_eval_context(average, average)  # (a) answered in training mode
        assert ".eval()" in verdict(capsys)


def test_zero_row_probability(capsys):
    lesson06.check_zero_row_probability(...)
    assert "Not yet" in verdict(capsys)
    lesson06.check_zero_row_probability(torch.tensor([0.8, 0.64, 0.512, 0.4096, 0.32768, 0.262144]))
    out = verdict(capsys)
    assert "Not yet" in out and "SURVIVES" in out
    lesson06.check_zero_row_probability(torch.full((6,), 0.2))
    assert "Not yet" in verdict(capsys)
    for one_short in (0.2 ** torch.arange(0, 6), [0.2 ** t for t in range(6)], np.array([0.2 ** t for t in range(6)])):
        lesson06.check_zero_row_probability(one_short)  # the review's slip: p^t instead of p^(t+1)
        out = verdict(capsys)
        assert "Not yet" in out and "t + 1" in out and "指数少了 1" in out, out
    lesson06.check_zero_row_probability(torch.tensor([0.2, 0.04, 0.008, 0.0016, 0.00032, 0.000064]))
    assert "Correct" in verdict(capsys)


# ---------------------------------------------------------------------------------------------
# Generated answers: a right answer in every form gets ✅, anything else a bilingual ❌, never an error

FEW = settings(max_examples=20, deadline=None)


def eval_context() -> torch.Tensor:
    """The book's seed-123 CausalAttention, evaluated: the context vectors of exercise 2 (a)."""
    torch.manual_seed(123)
    module = au.CausalAttention(3, 2, 6, 0.5).eval()
    with torch.no_grad():
        return module(au.example_batch())


ZERO_ROWS = torch.tensor([0.2 ** (t + 1) for t in range(6)], dtype=torch.float64)  # query t sees t + 1 keys


RIGHT_DROPOUTS = [
    right_dropout,
    lambda x, p: x.double() * (torch.rand_like(x) >= p) / (1 - p),  # the review's float64 case
    lambda x, p: (x * (torch.rand_like(x) >= p) / (1 - p)).numpy(),
    lambda x, p: torch.where(torch.rand_like(x) < p, torch.zeros_like(x), x / (1 - p)),
    lambda x, p: x * (torch.rand(x.shape) >= p).float() / (1 - p),  # rand of the same shape does the same
]


@FEW
@given(dropout=st.sampled_from(RIGHT_DROPOUTS))
def test_dropout_function_accepts_every_right_dropout(dropout):
    assert verdict_of(lesson06.check_dropout_function, dropout).startswith(CORRECT)


@FEW
@given(scale=st.floats(0.1, 10).filter(lambda s: abs(s - 1.25) > 1e-3))
def test_dropout_function_refuses_any_other_scale(scale):
    out = verdict_of(lesson06.check_dropout_function, lambda x, p: x * (torch.rand_like(x) >= p) * scale)
    assert is_bilingual_no(out), out


@FEW
@given(threshold=st.floats(0.0, 0.95).filter(lambda q: abs(q - 0.2) > 0.03))
def test_dropout_function_refuses_another_rate(threshold):
    out = verdict_of(lesson06.check_dropout_function, lambda x, p: x * (torch.rand_like(x) >= threshold) / (1 - threshold))
    assert is_bilingual_no(out), out


@FEW
@given(result=any_wrong_type)
def test_dropout_function_answers_any_return_value_with_a_bilingual_no(result):
    out = verdict_of(lesson06.check_dropout_function, lambda x, p: result)
    assert is_bilingual_no(out), out


@FEW
@given(answer=any_wrong_type)
def test_dropout_function_answers_any_non_function_with_a_bilingual_no(answer):
    assert is_bilingual_no(verdict_of(lesson06.check_dropout_function, answer))


def test_a_dropout_that_raises_is_named(capsys):
    lesson06.check_dropout_function(lambda x, p: x / (p - p))  # a tensor divided by 0.0: no error in torch
    assert "Not yet" in verdict(capsys)
    lesson06.check_dropout_function(lambda x, p: 1 / 0)
    out = verdict(capsys)
    assert out.startswith(NOT_YET) and "ZeroDivisionError" in out


@FEW
@given(context=tensor_forms(eval_context()))
def test_eval_context_accepts_every_form(context):
    assert verdict_of(lesson06.check_eval_context, context).startswith(CORRECT)


@FEW
@given(context=tensor_forms(eval_context()), noise=st.floats(1e-4, 0.09), seed=st.integers(0, 2**16),
       form=st.sampled_from([torch.Tensor.float, torch.Tensor.double, lambda t: t.numpy()]))
def test_eval_context_accepts_an_average_near_the_eval_output(context, noise, seed, form):
    exact = eval_context().double()
    wiggle = noise * (2 * torch.rand(exact.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 1)
    wiggle.view(-1)[0] = noise  # at least one entry is `noise` away: the average is not the eval output itself
    assert verdict_of(lesson06.check_eval_context, context, form(exact + wiggle)).startswith(CORRECT)


@FEW
@given(offset=st.floats(0.11, 5.0), position=st.integers(0, 23))
def test_eval_context_refuses_an_average_far_from_the_eval_output(offset, position):
    average = eval_context().clone()
    average.view(-1)[position] += offset
    out = verdict_of(lesson06.check_eval_context, eval_context(), average)
    assert is_bilingual_no(out) and "more training passes" in out, out


@FEW
@given(offset=st.floats(1e-3, 5.0), position=st.integers(0, 23))
def test_eval_context_refuses_any_other_context(offset, position):
    context = eval_context().clone()
    context.view(-1)[position] -= offset
    assert is_bilingual_no(verdict_of(lesson06.check_eval_context, context))


@FEW
@given(answer=any_wrong_type, average=st.one_of(st.just(None), any_wrong_type))
def test_eval_context_answers_any_wrong_type_with_a_bilingual_no(answer, average):
    assert is_bilingual_no(verdict_of(lesson06.check_eval_context, answer, average))
    assert is_bilingual_no(verdict_of(lesson06.check_eval_context, eval_context(), average if average is not None else 1))


def test_eval_context_nudges_once_when_nothing_is_answered():
    out = verdict_of(lesson06.check_eval_context, ..., ...)
    assert out.count(NOT_YET) == 1 and "Replace the ..." in out


@FEW
@given(answer=st.one_of(tensor_forms(ZERO_ROWS), st.sampled_from([
    ZERO_ROWS.tolist(), tuple(ZERO_ROWS.tolist()), [np.float64(v) for v in ZERO_ROWS.tolist()],
    [torch.tensor(v) for v in ZERO_ROWS.tolist()]])))
def test_zero_row_probability_accepts_every_form(answer):
    assert verdict_of(lesson06.check_zero_row_probability, answer).startswith(CORRECT)


@FEW
@given(offset=st.floats(1e-4, 1.0), position=st.integers(0, 5))
def test_zero_row_probability_refuses_any_other_numbers(offset, position):
    wrong = ZERO_ROWS.clone()
    wrong[position] += offset
    assert is_bilingual_no(verdict_of(lesson06.check_zero_row_probability, wrong))


@FEW
@given(answer=any_wrong_type)
def test_zero_row_probability_answers_any_wrong_type_with_a_bilingual_no(answer):
    assert is_bilingual_no(verdict_of(lesson06.check_zero_row_probability, answer))
