"""Lesson 10 checkers: right answers in every form get ✅, wrong ones a ❌ that says why, anything else a verdict,
and a checker that runs the learner's model leaves its train/eval mode as it was.

The references come from other routes: the keys of exercise 1 by hand, the silenced accuracies through
`silence_head` (zeroed W_value rows) and `training.accuracy`, where the checker uses a hook of its own.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils import tasks, training
from attention_utils.exercises import lesson10
from attention_utils.tiny_model import TinyAttentionModel, silence_head

RIGHT, WRONG = "✅ Correct", "❌ Not yet"


def verdict(check, *answers) -> str:
    """What a checker prints (exactly one verdict, no exception)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check(*answers)
    printed = out.getvalue()
    assert printed.count(RIGHT) + printed.count(WRONG) == 1, printed
    return printed


class Unreadable:
    """An answer whose comparison and conversion raise."""

    def __eq__(self, other):
        raise RuntimeError("no comparison")

    __hash__ = None

    def __index__(self):
        raise RuntimeError("no index")

    def __float__(self):
        raise RuntimeError("no float")


ODD_ANSWERS = st.one_of(
    st.none().map(lambda _: Unreadable()), st.text(max_size=4), st.booleans(), st.lists(st.integers(), max_size=3),
    st.complex_numbers(allow_nan=False), st.just(float("nan")), st.just(torch.tensor([2, 6])),
    st.just(np.array(["b", "b"])), st.just(torch.tensor(True)), st.just(object()),
)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 1: predict the keys. By hand: "dgbf" repeats; position 3 is "f", one step back is 2; position 9 is "g",
# which sat at 1 and 5, followed by "b" at 2 and 6.


def key_forms(value: int) -> list:
    return [value, float(value), np.int64(value), np.int32(value), np.array(value), torch.tensor(value),
            torch.tensor(float(value))]


def letter_forms(letter: str) -> list:
    return [letter, letter.upper(), f" {letter} ", np.str_(letter), np.array(letter)]


@pytest.mark.parametrize("layer0", key_forms(2), ids=lambda f: type(f).__name__)
@pytest.mark.parametrize("layer1", [6, np.int64(2), torch.tensor(6)], ids=lambda f: type(f).__name__)
@pytest.mark.parametrize("letter", letter_forms("b"), ids=repr)
def test_predicted_keys_in_every_form(layer0, layer1, letter):
    assert RIGHT in verdict(lesson10.check_predicted_keys, layer0, layer1, letter)


@settings(max_examples=80, deadline=None)
@given(st.integers(-40, 40), st.integers(-40, 40), st.text(max_size=3))
def test_predicted_keys_any_numbers(layer0, layer1, letter):
    right = layer0 == 2 and layer1 in (2, 6) and letter.strip().lower() == "b"
    assert (RIGHT if right else WRONG) in verdict(lesson10.check_predicted_keys, layer0, layer1, letter)


@pytest.mark.parametrize("answers, words", [
    ((3, 2, "b"), "one step back"), ((8, 2, "b"), "one step back"), ((2, 5, "b"), "one step after"),
    ((2, 6, "g"), "keys are right"), ((2, -20, "b"), "run from 0 to 15"), ((2, 99, "b"), "run from 0 to 15"),
    ((2, 6, np.array(["b", "b"])), "string of one letter"), ((2, 6, "bb"), "string of one letter"),
    ((2, "6", "b"), "whole numbers"), ((..., 6, "b"), "Replace the ..."),
])
def test_predicted_keys_hints(answers, words):
    printed = verdict(lesson10.check_predicted_keys, *answers)
    assert WRONG in printed and words in printed, printed


@settings(max_examples=40, deadline=None)
@given(ODD_ANSWERS, ODD_ANSWERS)
def test_predicted_keys_odd_answers(key, letter):
    assert WRONG in verdict(lesson10.check_predicted_keys, key, 6, letter)
    assert WRONG in verdict(lesson10.check_predicted_keys, 2, key, "b")


# ---------------------------------------------------------------------------------------------------------------
# Exercises 2 and 3 run trained models: train each once for the module.


@pytest.fixture(scope="module")
def repeat_model():
    task = tasks.RepeatTask()
    torch.manual_seed(0)
    model = TinyAttentionModel(task.vocab_size, task.length, num_heads=1, num_layers=2)
    training.train(model, task, steps=600, seed=0, progress=False)
    return model, training.held_out_batch(task, 0, batch_size=200)


@pytest.fixture(scope="module")
def sinusoidal_model():
    task = tasks.ReverseTask(length=8, vocab_size=16)
    torch.manual_seed(0)
    model = TinyAttentionModel(16, 8, positions="sinusoidal", causal=False)
    training.train(model, task, steps=300, seed=0, progress=False)
    return model, training.held_out_batch(task, 0, batch_size=200)


def silenced_by_hand(model, batch) -> dict[int, float]:
    """The accuracies with each layer's head silenced through W_value (another route than the checker's hook)."""
    found = {}
    for layer in range(len(model.layers)):
        with silence_head(model, layer=layer, head=0):
            found[layer] = training.accuracy(model, batch)
    return found


def number_forms(value: float) -> list:
    return [value, np.float32(value), np.float64(value), torch.tensor(value), torch.tensor(value, dtype=torch.float64),
            np.array(value)]


def test_silenced_right_answer_in_every_form(repeat_model):
    model, batch = repeat_model
    right = silenced_by_hand(model, batch)
    assert max(right.values()) < 0.5 < training.accuracy(model, batch)  # each head is needed
    for key_form in (int, np.int64, torch.tensor, float):
        for index in range(len(number_forms(0.0))):
            answer = {key_form(layer): number_forms(value)[index] for layer, value in right.items()}
            printed = verdict(lesson10.check_silenced, answer, model, batch)
            assert RIGHT in printed and "both heads" in printed, (answer, printed)


def test_silenced_wrong_answers(repeat_model):
    model, batch = repeat_model
    right = silenced_by_hand(model, batch)
    full = training.accuracy(model, batch)
    cases = [
        ({0: full, 1: full}, "differs from what silencing gives"), ({0: right[0]}, "layer numbers"),
        ({0: right[0], "1": right[1]}, "layer numbers"), ({0: right[0], 1: right[1], 2: 0.5}, "layer numbers"),
        ({0: right[0], 1: "0.1"}, "between 0 and 1"), ({0: right[0], 1: 1.5}, "between 0 and 1"),
        ({0: True, 1: right[1]}, "between 0 and 1"), ({0: Unreadable(), 1: right[1]}, "between 0 and 1"),
        ([right[0], right[1]], "dict"), (..., "Replace the ..."), ({}, "layer numbers"),
    ]
    for answer, words in cases:
        printed = verdict(lesson10.check_silenced, answer, model, batch)
        assert WRONG in printed and words in printed, (answer, printed)


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(st.one_of(st.integers(-2, 3), st.text(max_size=2)), st.one_of(st.floats(), ODD_ANSWERS), max_size=3))
def test_silenced_any_dictionary_gets_a_verdict(repeat_model, answer):
    model, batch = repeat_model
    verdict(lesson10.check_silenced, answer, model, batch)


@pytest.mark.parametrize("training_mode", [True, False])
def test_silenced_leaves_the_mode_as_it_was(repeat_model, training_mode):
    model, batch = repeat_model
    model.train(training_mode)
    verdict(lesson10.check_silenced, silenced_by_hand(model, batch), model, batch)
    verdict(lesson10.check_silenced, {0: 0.3, 1: 0.2}, model, batch)
    assert model.training is training_mode
    model.eval()


def test_sinusoidal_accuracy_right_in_every_form(sinusoidal_model):
    model, batch = sinusoidal_model
    measured = training.accuracy(model, batch)
    assert measured > 0.9
    for form in number_forms(measured):
        assert RIGHT in verdict(lesson10.check_sinusoidal_accuracy, form, model, batch)


def test_sinusoidal_accuracy_wrong_answers(sinusoidal_model):
    model, batch = sinusoidal_model
    measured = training.accuracy(model, batch)
    torch.manual_seed(1)
    untrained = TinyAttentionModel(16, 8, positions="sinusoidal", causal=False)
    learned = TinyAttentionModel(16, 8, positions="learned", causal=False)
    cases = [
        ((measured - 0.2, model), "differs from this model's"), ((training.accuracy(untrained, batch), untrained), "train it first"),
        ((measured, learned), "positions='learned'"), ((measured, "model"), "the model you trained"),
        (("high", model), "between 0 and 1"), ((100 * measured, model), "between 0 and 1"), ((..., model), "Replace the ..."),
    ]
    for answers, words in cases:
        printed = verdict(lesson10.check_sinusoidal_accuracy, *answers, batch)
        assert WRONG in printed and words in printed, (answers, printed)


@settings(max_examples=25, deadline=None)
@given(ODD_ANSWERS)
def test_sinusoidal_accuracy_odd_answers(sinusoidal_model, answer):
    model, batch = sinusoidal_model
    assert WRONG in verdict(lesson10.check_sinusoidal_accuracy, answer, model, batch)


@pytest.mark.parametrize("training_mode", [True, False])
def test_sinusoidal_accuracy_leaves_the_mode_as_it_was(sinusoidal_model, training_mode):
    model, batch = sinusoidal_model
    model.train(training_mode)
    verdict(lesson10.check_sinusoidal_accuracy, training.accuracy(model, batch), model, batch)
    assert model.training is training_mode
    model.eval()
