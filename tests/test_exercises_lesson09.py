"""Lesson 9 checkers: right answers in every form get ✅, wrong ones a ❌ that names the mistake, anything else a verdict.

Reference numbers are worked out here by other routes: the tile counts by hand, the update from a softmax over
all the scores at once, the tiled loop against torch's SDPA.
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.exercises import lesson09

RIGHT, WRONG = "✅ Correct", "❌ Not yet"


def verdict(check, *answers) -> str:
    """What a checker prints for these answers (it must print exactly one verdict and raise nothing)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check(*answers)
    printed = out.getvalue()
    assert printed.count(RIGHT) + printed.count(WRONG) == 1, printed
    return printed


class Unreadable:
    """An answer whose comparison and conversion raise: the checker must still answer with a verdict."""

    def __eq__(self, other):
        raise RuntimeError("no comparison")

    __hash__ = None

    def __index__(self):
        raise RuntimeError("no index")

    def __float__(self):
        raise RuntimeError("no float")


ODD_ANSWERS = st.one_of(
    st.none().map(lambda _: Unreadable()), st.text(max_size=5), st.booleans(), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2), st.complex_numbers(allow_nan=False),
    st.just(float("nan")), st.just(float("inf")), st.just(torch.tensor([1, 2])), st.just(np.array(["a", "b"])),
    st.just(torch.tensor(True)), st.just(object()),
)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 1: the update lines of the tiled loop


def update_right(running_max, running_sum, unnormalized, tile, tile_values):
    new_max = torch.maximum(running_max, tile.amax(dim=1, keepdim=True))
    rescale = torch.exp(running_max - new_max)
    weights = torch.exp(tile - new_max)
    return new_max, running_sum * rescale + weights.sum(1, keepdim=True), unnormalized * rescale + weights @ tile_values


def update_in_float32_numpy(running_max, running_sum, unnormalized, tile, tile_values):
    """Right, written another way: numpy, float32, in-place updates of the arguments."""
    m, s, o, t, v = (x.numpy().astype(np.float32) for x in (running_max, running_sum, unnormalized, tile, tile_values))
    new_max = np.maximum(m, t.max(axis=1, keepdims=True))
    weights = np.exp(t - new_max)
    s *= np.exp(m - new_max)
    s += weights.sum(axis=1, keepdims=True)
    o *= np.exp(m - new_max)
    o += weights @ v
    return new_max, s, o


def update_without_rescale(running_max, running_sum, unnormalized, tile, tile_values):
    new_max = torch.maximum(running_max, tile.amax(dim=1, keepdim=True))
    weights = torch.exp(tile - new_max)
    return new_max, running_sum + weights.sum(1, keepdim=True), unnormalized + weights @ tile_values


def update_output_not_rescaled(running_max, running_sum, unnormalized, tile, tile_values):
    new_max, new_sum, _ = update_right(running_max, running_sum, unnormalized, tile, tile_values)
    return new_max, new_sum, unnormalized + torch.exp(tile - new_max) @ tile_values


def update_divided_early(running_max, running_sum, unnormalized, tile, tile_values):
    new_max, new_sum, new_output = update_right(running_max, running_sum, unnormalized, tile, tile_values)
    return new_max, new_sum, new_output / new_sum


def update_keeps_old_max(running_max, running_sum, unnormalized, tile, tile_values):
    return running_max, *update_right(running_max, running_sum, unnormalized, tile, tile_values)[1:]


def update_one_max_for_all_rows_and_no_keepdim(running_max, running_sum, unnormalized, tile, tile_values):
    """Right on a single row; across rows the sums run over the wrong axis."""
    new_max = torch.maximum(running_max, tile.amax(dim=1, keepdim=True))
    rescale = torch.exp(running_max - new_max)
    weights = torch.exp(tile - new_max)
    return new_max, running_sum * rescale + weights.sum(), unnormalized * rescale + weights @ tile_values


def update_blank(running_max, running_sum, unnormalized, tile, tile_values):
    new_max = ...
    new_sum = ...
    new_unnormalized = ...
    return new_max, new_sum, new_unnormalized


def test_the_test_row_by_hand():
    """On the checker's row, a right update gives m = 2.9 and ℓ = the sum of exp(s - 2.9) over all five scores."""
    first, new = lesson09.FIRST_SCORES, lesson09.NEW_SCORES
    old_sum = sum(math.exp(s - 2.1) for s in first)  # 2.1 is the first tile's largest score
    old_output = sum(math.exp(s - 2.1) * torch.tensor(v, dtype=torch.float64) for s, v in zip(first, lesson09.FIRST_VALUES))
    state = (torch.tensor([[2.1]], dtype=torch.float64), torch.tensor([[old_sum]], dtype=torch.float64), old_output[None])
    new_max, new_sum, new_output = update_right(*state, torch.tensor([new], dtype=torch.float64),
                                                torch.tensor(lesson09.NEW_VALUES, dtype=torch.float64))
    scores, values = first + new, lesson09.FIRST_VALUES + lesson09.NEW_VALUES
    assert math.isclose(new_max.item(), 2.9) and math.isclose(new_sum.item(), sum(math.exp(s - 2.9) for s in scores))
    expected = sum(math.exp(s - 2.9) * torch.tensor(v, dtype=torch.float64) for s, v in zip(scores, values))
    assert torch.allclose(new_output[0], expected)


@pytest.mark.parametrize("update", [update_right, update_in_float32_numpy])
def test_right_updates_pass_against_sdpa(update):
    assert RIGHT in verdict(lesson09.check_update_tile, update)


@pytest.mark.parametrize("update, words", [
    (update_without_rescale, "exp(old max - new max)"),
    (update_output_not_rescaled, "same factor"),
    (update_divided_early, "already divided"),
    (update_keeps_old_max, "new_max should be 2.9"),
    (update_one_max_for_all_rows_and_no_keepdim, "differs from SDPA"),
    (update_blank, "Replace the ..."),
    (lambda *args: args[:2], "three things"),
    (lambda m, s, o, t, v: (m, s, o[0]), "new_unnormalized should have shape"),
    (lambda m, s, o, t, v: (m, s, o.to(torch.complex128)), "real numbers"),
    (lambda m, s, o, t, v: 1 / 0, "ZeroDivisionError"),
    (5, "function itself"),
    (..., "Replace the ..."),
])
def test_each_mistake_gets_its_hint(update, words):
    printed = verdict(lesson09.check_update_tile, update)
    assert WRONG in printed and words in printed, printed


@settings(max_examples=40, deadline=None)
@given(ODD_ANSWERS)
def test_any_object_gets_a_verdict(answer):
    assert WRONG in verdict(lesson09.check_update_tile, answer)


@settings(max_examples=30, deadline=None)
@given(ODD_ANSWERS)
def test_any_returned_object_gets_a_verdict(returned):
    assert WRONG in verdict(lesson09.check_update_tile, lambda *args: returned)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 2: tiles a causal kernel computes, T = 1000, tiles of 48

# 1000 = 20 × 48 + 40: 21 query blocks; the block with index i visits key blocks 0..i: 1 + 2 + ... + 21 = 231
VISITED = 231


def whole_number_forms(value: int) -> list:
    return [value, float(value), np.int32(value), np.int64(value), np.uint32(value), np.float32(value), np.array(value),
            torch.tensor(value), torch.tensor(value, dtype=torch.int32), torch.tensor(float(value), dtype=torch.float64)]


@pytest.mark.parametrize("form", whole_number_forms(VISITED), ids=lambda f: type(f).__name__)
def test_visited_tiles_in_every_form(form):
    printed = verdict(lesson09.check_visited_tiles, form)
    assert RIGHT in printed and "231 of the 441" in printed


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-10**12, max_value=10**12).filter(lambda n: n != VISITED))
def test_visited_tiles_any_other_number_is_wrong(value):
    assert WRONG in verdict(lesson09.check_visited_tiles, value)


@pytest.mark.parametrize("wrong, words", [
    (441, "every tile"), (210, "diagonal crosses"), (210, "shorter block"), (136, "tiles of 64"), (5, "0 to i"),
    ("231", "whole number"), (231.5, "whole number"), (True, "whole number"),
])
def test_visited_tiles_hints(wrong, words):
    printed = verdict(lesson09.check_visited_tiles, wrong)
    assert WRONG in printed and words in printed, printed


@settings(max_examples=40, deadline=None)
@given(ODD_ANSWERS)
def test_visited_tiles_odd_answers(answer):
    assert WRONG in verdict(lesson09.check_visited_tiles, answer)


# ---------------------------------------------------------------------------------------------------------------
# Exercise 3: one score tile for every sentence and head

TILE = 8 * 12 * 128 * 256  # batch × heads × block_q × block_k, by hand: 3,145,728


@pytest.mark.parametrize("form", whole_number_forms(TILE), ids=lambda f: type(f).__name__)
def test_tile_elements_in_every_form(form):
    printed = verdict(lesson09.check_tile_elements, form)
    assert RIGHT in printed and "3,145,728" in printed


def test_tile_elements_says_what_depends_on_t():
    printed = verdict(lesson09.check_tile_elements, TILE)
    # 8 × 12 × 4096² / 3,145,728 = 512 at T = 4096 only; the share shrinks as T grows
    assert "1/512" in printed and "T = 4096" in printed and "%" not in printed
    assert "whatever T is" not in printed and "与 T 无关，T 越长" in printed


@pytest.mark.parametrize("wrong, words", [
    (8 * 12 * 4096 * 4096, "whole (T, T)"), (128 * 256, "every sentence and head"), (TILE * 4, "not bytes"),
    (8 * 12 * 128 * 64, "running output"), (7, "T does not appear"), ("3145728", "whole number"),
])
def test_tile_elements_hints(wrong, words):
    printed = verdict(lesson09.check_tile_elements, wrong)
    assert WRONG in printed and words in printed, printed


@settings(max_examples=40, deadline=None)
@given(st.one_of(ODD_ANSWERS, st.integers().filter(lambda n: n != TILE)))
def test_tile_elements_anything_else_is_wrong(answer):
    assert WRONG in verdict(lesson09.check_tile_elements, answer)


# Exercise 4: scores that expose an update which forgets to rescale the running sum
WITNESS = [0.0, 0.0, 5.0, 5.0, 0.0, 0.0]
# by hand, tiles of two: the buggy sum is 1 + 1, then + 1 + 1 at the new maximum 5, then + 2e^-5, so the weight of key 2 is
# 1 / (4 + 2e^-5) = 0.2496, while softmax gives e^5 / (2e^5 + 4) = 0.4933
BUGGY_KEY2, TRUE_KEY2 = 1 / (4 + 2 * math.exp(-5)), math.exp(5) / (2 * math.exp(5) + 4)


def test_the_buggy_loop_gives_the_hand_worked_weight():
    scores = torch.tensor(WITNESS, dtype=torch.float64)
    assert lesson09._weights_without_sum_rescale(scores)[2].item() == pytest.approx(BUGGY_KEY2, abs=1e-12)
    assert torch.softmax(scores, dim=0)[2].item() == pytest.approx(TRUE_KEY2, abs=1e-12)


@pytest.mark.parametrize("form", [list, tuple, np.array, torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64),
                                  lambda v: np.array(v, dtype=np.float32), lambda v: torch.tensor(v).reshape(2, 3)])
def test_bug_witness_right_in_every_form(form):
    assert verdict(lesson09.check_bug_witness, form(WITNESS)).startswith(RIGHT)


@pytest.mark.parametrize("answer, hint", [
    ([5.0, 5.0, 0.0, 0.0, 0.0, 0.0], "first tile already holds the largest"),  # sorted from the largest down: the slip
    ([3.0, 1.0, 2.0, 0.0, 3.0, -1.0], "first tile already holds the largest"),  # a tie is no growth either
    ([0.0, 0.0, 0.001, 0.0, 0.0, 0.0], "only a little"),
    ([0.0, 0.0, 5.0], "six scores"), ("005500", "six scores"), (True, "six scores"),
    ([0.0, 0.0, math.inf, 0.0, 0.0, 0.0], "finite"), (..., "Replace the ..."),
])
def test_bug_witness_wrong(answer, hint):
    out = verdict(lesson09.check_bug_witness, answer)
    assert out.startswith(WRONG) and hint in out, out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-20, 20), min_size=6, max_size=6))
def test_bug_witness_agrees_with_a_direct_test_of_the_bug(scores):
    """Correct exactly when the buggy weights, computed in the checker, are more than 0.01 from softmax."""
    t = torch.tensor(scores, dtype=torch.float64)
    off = (lesson09._weights_without_sum_rescale(t) - torch.softmax(t, dim=0)).abs().max().item() > 0.01
    assert verdict(lesson09.check_bug_witness, scores).startswith(RIGHT) == off
    if max(scores[2:]) <= max(scores[:2]):
        assert not off  # the maximum never grows: the missing factor would have been 1
