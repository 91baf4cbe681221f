"""Lesson 3 checkers accept the right answer in any form, refuse every ready-made softmax, and explain a wrong one."""

import functools
import math
import sys

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exercises import (CORRECT, UNCHECKABLE, any_wrong_type, is_bilingual_no, plain_wrong_types, tensor_forms,
                            verdict_of)
from torch import softmax as imported_torch_softmax

import attention_utils as au
from attention_utils import online_softmax as imported_online
from attention_utils import stable_softmax as imported_stable
from attention_utils.exercises import lesson03


def verdict(capsys) -> str:
    return capsys.readouterr().out


def stable_1d(s):
    exps = torch.exp(s - s.max())
    return exps / exps.sum()


def stable_rows(s):
    exps = torch.exp(s - s.max(dim=-1, keepdim=True).values)
    return exps / exps.sum(dim=-1, keepdim=True)


def test_stable_softmax(capsys):
    lesson03.check_stable_softmax(...)
    assert "Not yet" in verdict(capsys)
    lesson03.check_stable_softmax(lambda s: torch.exp(s) / torch.exp(s).sum())  # the naive one: nan
    out = verdict(capsys)
    assert "Not yet" in out and "Subtract the maximum" in out
    lesson03.check_stable_softmax(lambda s: s / s.sum())
    assert "should be" in verdict(capsys)
    lesson03.check_stable_softmax(stable_1d)
    out = verdict(capsys)
    assert "Correct" in out
    # by hand: 250, 252, 249 differ by 2 and 1, so the weights are e^-2, 1, e^-3 (and ~0) over their sum
    total = math.exp(-2) + 1 + math.exp(-3)
    assert f"{1 / total:.4f}" in out and f"{math.exp(-2) / total:.4f}" in out


def test_stable_softmax_refuses_every_shortcut_and_restores_them(capsys):
    for shortcut in (lambda s: torch.softmax(s, dim=-1), lambda s: torch.nn.functional.softmax(s, dim=-1),
                     lambda s: s.softmax(-1), lambda s: torch.special.softmax(s, -1), lambda s: au.stable_softmax(s),
                     lambda s: torch.log_softmax(s, dim=-1).exp(), lambda s: s.log_softmax(-1).exp()):
        lesson03.check_stable_softmax(shortcut)
        out = verdict(capsys)
        assert "Not yet" in out and "ready-made softmax" in out
    x = torch.tensor([1.0, 2.0])
    assert torch.allclose(x.softmax(-1), torch.softmax(x, dim=-1))  # everything works again afterwards
    assert torch.allclose(au.stable_softmax(x), torch.nn.functional.softmax(x, dim=-1))
    assert "softmax" not in torch.Tensor.__dict__ and "log_softmax" not in torch.Tensor.__dict__
    assert sys.getprofile() is None


# Every ready-made softmax, held under another name before the checker runs (the reliability review's D3):
# imported under an alias, wrapped in a lambda or a functools.partial, or as a module.
F = torch.nn.functional
SHORTCUTS = {
    "torch.softmax": functools.partial(torch.softmax, dim=-1),
    "imported torch.softmax": lambda s: imported_torch_softmax(s, -1),
    "F.softmax": functools.partial(F.softmax, dim=-1),
    "Tensor.softmax": lambda s: torch.Tensor.softmax(s, -1),
    "nn.Softmax": torch.nn.Softmax(dim=-1),
    "F.softmin": lambda s: F.softmin(-s, dim=-1),
    "torch._softmax": lambda s: torch._softmax(s, -1, False),
    "au.stable_softmax": au.stable_softmax,
    "imported stable_softmax": lambda s: imported_stable(s),
    "partial stable_softmax": functools.partial(imported_stable, dim=-1),
    "au.naive_softmax": au.naive_softmax,
    "au.online_softmax": au.online_softmax,
    "imported online_softmax": lambda s: imported_online(s),
    # one query of ones against keys s[:, None] with d_k = 1: the weights are softmax(s)
    "au.scaled_dot_product_attention": lambda s: au.scaled_dot_product_attention(
        torch.ones(1, 1), s[:, None], torch.eye(len(s)))[1][0],
}


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(SHORTCUTS)), exercise=st.sampled_from(["check_stable_softmax", "check_softmax_rows"]))
def test_every_ready_made_softmax_is_refused_under_any_name(name, exercise):
    out = verdict_of(getattr(lesson03, exercise), SHORTCUTS[name])
    assert is_bilingual_no(out) and "ready-made softmax" in out, (name, out)
    assert sys.getprofile() is None


def test_a_profiler_that_was_running_keeps_running():
    calls = []

    def profiler(frame, event, arg):
        calls.append(event)

    sys.setprofile(profiler)
    try:
        verdict_of(lesson03.check_stable_softmax, stable_1d)
        assert sys.getprofile() is profiler
    finally:
        sys.setprofile(None)


def stable_forms():
    """A right 1-d stable softmax whose result comes back as float32, float64, numpy or a list of floats."""
    return st.sampled_from([lambda w: w, torch.Tensor.double, lambda w: w.numpy(), lambda w: w.tolist(),
                            lambda w: [np.float32(v) for v in w.tolist()], lambda w: w.clone().requires_grad_(True)])


@settings(max_examples=30, deadline=None)
@given(form=stable_forms())
def test_stable_softmax_accepts_weights_in_any_form(form):
    assert verdict_of(lesson03.check_stable_softmax, lambda s: form(stable_1d(s))).startswith(CORRECT)


@settings(max_examples=30, deadline=None)
@given(form=st.sampled_from([lambda w: w, torch.Tensor.double, lambda w: w.numpy(), lambda w: w.double().numpy()]))
def test_softmax_rows_accepts_weights_in_any_form(form):
    assert verdict_of(lesson03.check_softmax_rows, lambda s: form(stable_rows(s))).startswith(CORRECT)


def test_a_softmax_written_with_logsumexp_is_the_learners_own(capsys):
    lesson03.check_stable_softmax(lambda s: torch.exp(s - torch.logsumexp(s, dim=-1)))
    assert "Correct" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)))
    assert "Correct" in verdict(capsys)


@settings(max_examples=60, deadline=None)
@given(result=any_wrong_type, exercise=st.sampled_from(["check_stable_softmax", "check_softmax_rows"]))
def test_any_return_value_gets_a_bilingual_no(result, exercise):
    out = verdict_of(getattr(lesson03, exercise), lambda s: result)
    assert is_bilingual_no(out), out


@settings(max_examples=40, deadline=None)
@given(answer=plain_wrong_types)
def test_plain_wrong_types_get_a_hint_not_an_error_report(answer):
    for check in (lesson03.check_stable_softmax, lesson03.check_softmax_rows, lesson03.check_scaled_context,
                  lesson03.check_scaled_spread):
        assert UNCHECKABLE not in verdict_of(check, answer)


def test_a_failing_function_is_reported_with_its_own_error(capsys):
    def broken(s):
        raise ZeroDivisionError("my bug")

    lesson03.check_stable_softmax(broken)
    out = verdict(capsys)
    assert out.startswith("❌") and "ZeroDivisionError: my bug" in out and "无法检查" in out


def test_softmax_rows(capsys):
    lesson03.check_softmax_rows(stable_rows)
    assert "Correct" in verdict(capsys)
    lesson03.check_softmax_rows(stable_1d)  # one maximum and one sum for the whole tensor
    assert "add up to 1" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: torch.exp(s - s.max()) / torch.exp(s - s.max()).sum(dim=-1, keepdim=True))
    assert "each row's own maximum" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: torch.exp(s - s.max(dim=0, keepdim=True).values)
                                / torch.exp(s - s.max(dim=0, keepdim=True).values).sum(dim=0, keepdim=True))
    assert "dim=0" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: torch.softmax(s, dim=-1))
    assert "ready-made softmax" in verdict(capsys)
    lesson03.check_softmax_rows(lambda s: stable_rows(s)[0])
    assert "same shape" in verdict(capsys)


def test_softmax_rows_names_a_missing_keepdim(capsys):
    def sum_without_keepdim(s):  # the review's slip: the sum drops the last dimension
        exps = torch.exp(s - s.max(dim=-1, keepdim=True).values)
        return exps / exps.sum(dim=-1)

    def max_without_keepdim(s):
        exps = torch.exp(s - s.max(dim=-1).values)
        return exps / exps.sum(dim=-1, keepdim=True)

    for slip in (sum_without_keepdim, max_without_keepdim):
        lesson03.check_softmax_rows(slip)
        out = verdict(capsys)
        assert out.startswith("❌") and "keepdim=True" in out and "形状对不上" in out and "could not be checked" not in out


def test_scaled_context(capsys):
    x = au.example_inputs()
    lesson03.check_scaled_context(torch.softmax(x @ x.T, dim=-1) @ x)
    out = verdict(capsys)
    assert "Not yet" in out and "sqrt(3)" in out
    lesson03.check_scaled_context(torch.softmax(x @ x.T / 3, dim=-1) @ x)  # divided by d_k, not its root
    assert "different values" in verdict(capsys)
    lesson03.check_scaled_context(torch.softmax(x @ x.T / math.sqrt(3), dim=-1) @ x)
    assert "Correct" in verdict(capsys)
    context, _ = au.scaled_dot_product_attention(x, x, x)
    lesson03.check_scaled_context(context)
    assert "Correct" in verdict(capsys)


def scaled_context_by_hand() -> torch.Tensor:
    x = au.example_inputs().double()
    return torch.softmax(x @ x.T / math.sqrt(3), dim=-1) @ x


@settings(max_examples=30, deadline=None)
@given(answer=tensor_forms(scaled_context_by_hand()))
def test_scaled_context_accepts_every_form(answer):
    assert verdict_of(lesson03.check_scaled_context, answer).startswith(CORRECT)


@settings(max_examples=30, deadline=None)
@given(answer=tensor_forms(torch.softmax(au.example_inputs() @ au.example_inputs().T, dim=-1) @ au.example_inputs()))
def test_unscaled_context_gets_its_hint_in_every_form(answer):
    assert "sqrt(3)" in verdict_of(lesson03.check_scaled_context, answer)


@settings(max_examples=60, deadline=None)
@given(answer=any_wrong_type)
def test_scaled_context_answers_any_wrong_type_with_a_bilingual_no(answer):
    assert is_bilingual_no(verdict_of(lesson03.check_scaled_context, answer))


def largest_distance_by_hand(scale: float) -> float:
    """The largest distance between two of the six context vectors, with plain Python loops."""
    rows = au.example_inputs().double().tolist()
    context = []
    for q in rows:
        scores = [sum(a * b for a, b in zip(q, k)) / scale for k in rows]
        exps = [math.exp(s - max(scores)) for s in scores]
        context.append([sum(e / sum(exps) * k[f] for e, k in zip(exps, rows)) for f in range(3)])
    return max(math.dist(a, b) for a in context for b in context)


def test_scaled_spread_prediction(capsys):
    unscaled, scaled = largest_distance_by_hand(1.0), largest_distance_by_hand(math.sqrt(3))
    assert scaled < unscaled  # the right prediction, measured independently: 0.0525 < 0.0860
    for right in ("closer", "Closer", " closer together "):
        lesson03.check_scaled_spread(right)
        out = verdict(capsys)
        assert "Correct" in out and f"{unscaled:.4f} to {scaled:.4f}" in out, out
    for slip in ("further", "Farther apart"):
        lesson03.check_scaled_spread(slip)
        out = verdict(capsys)
        assert "Not yet" in out and "T = sqrt(3) > 1" in out and "温度" in out
    lesson03.check_scaled_spread(...)
    assert "Replace the ..." in verdict(capsys)
    lesson03.check_scaled_spread("nearer")
    assert '"closer" or "further"' in verdict(capsys)


@settings(max_examples=40, deadline=None)
@given(answer=any_wrong_type)
def test_scaled_spread_answers_any_wrong_type_with_a_bilingual_no(answer):
    assert is_bilingual_no(verdict_of(lesson03.check_scaled_spread, answer))
