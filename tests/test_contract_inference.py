"""The input contract on lessons 11-13's helpers: every odd input gets a bilingual refusal that names the argument.

Each case here was found by throwing odd inputs (None, strings, floats, bools, NaN, wrong ranks,
numpy scalars) at the public helpers of the rotary, cache, window, generation and real-model
modules; before the fix each one raised torch's or Python's own error, or gave a silent answer.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attention_utils as au
from attention_utils.models import head_scores
from attention_utils.tiny_model import CachedTinyModel, TinyAttentionModel
from contract_helpers import assert_contract_error

NOT_A_SIZE = [None, "3", 3.5, True, float("nan"), torch.tensor([1, 2]), [1, 2]]
NOT_POSITIONS = [None, "3", 3, 2.5, np.int64(4), [0, 1, 2], torch.tensor([[0, 1]]), torch.tensor([0.0, 1.0]),
                 torch.tensor([True, False])]
NOT_MAPS = [None, 3.5, [1, 2], torch.tensor([1, 2]), torch.zeros(2, 3, dtype=torch.int64),
            torch.rand(2, 3, 4, 5), torch.full((1, 2, 4, 4), float("nan"))]


@pytest.mark.parametrize("bad", NOT_A_SIZE + [0, -1])
@pytest.mark.parametrize("name", ["num_layers", "num_kv_heads", "head_dim", "tokens", "bytes_per_value", "batch"])
def test_kv_cache_bytes_refuses_what_is_not_a_size(name, bad):
    sizes = dict(num_layers=2, num_kv_heads=3, head_dim=4, tokens=5, bytes_per_value=4, batch=1)
    if name == "tokens" and isinstance(bad, int) and bad == 0:
        assert au.kv_cache_bytes(**{**sizes, "tokens": 0}) == 0  # an empty cache is allowed and holds nothing
        return
    assert_contract_error(lambda: au.kv_cache_bytes(**{**sizes, name: bad}), name)


def test_kv_cache_bytes_takes_numpy_sizes_and_counts_by_hand():
    # 2 (keys and values) x 30 layers x 3 kv heads x 64 features x 1000 tokens x 4 bytes, worked out by hand
    assert au.kv_cache_bytes(np.int64(30), 3, torch.tensor(64), 1000) == 46_080_000


@pytest.mark.parametrize("bad", NOT_A_SIZE + [0, -2])
def test_repeat_kv_heads_refuses_a_bad_head_count(bad):
    assert_contract_error(lambda: au.repeat_kv_heads(torch.randn(1, 2, 5, 8), bad), "num_heads")


@pytest.mark.parametrize("bad", NOT_POSITIONS)
@pytest.mark.parametrize("which", ["query_positions", "key_positions"])
def test_hidden_by_window_refuses_what_are_not_positions(which, bad):
    good = torch.arange(4)
    positions = {"query_positions": good, "key_positions": good, which: bad}
    assert_contract_error(lambda: au.hidden_by_window(**positions, window=2), which)


def test_hidden_by_window_refuses_negative_positions():
    assert_contract_error(lambda: au.hidden_by_window(torch.tensor([-1, 0]), torch.arange(2)), "query_positions")


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return CachedTinyModel(TinyAttentionModel(vocab_size=10, context_length=32, d_model=16, num_heads=2,
                                              positions="rotary"))


@pytest.mark.parametrize("bad", [None, "model", 3, torch.zeros(2, 3), [1, 2]])
def test_generate_refuses_what_is_not_a_model(bad):
    assert_contract_error(lambda: au.generate(bad, torch.tensor([[1, 2, 3]]), 3), "model", kind=TypeError)


def test_generate_still_runs_a_module(tiny_model):
    assert au.generate(tiny_model, torch.tensor([[1, 2, 3]]), 2).tokens.shape == (1, 5)


@pytest.mark.parametrize("bad", NOT_MAPS)
@pytest.mark.parametrize("score", ["sink_share", "previous_token_score"])
def test_head_scores_refuse_what_are_not_maps(score, bad):
    assert_contract_error(lambda: getattr(head_scores, score)(bad), "maps")


@pytest.mark.parametrize("bad", NOT_MAPS)
def test_induction_score_refuses_what_are_not_maps(bad):
    assert_contract_error(lambda: head_scores.induction_score(bad, 2), "maps")


def test_induction_score_needs_two_copies_of_the_period():
    maps = torch.softmax(torch.randn(2, 3, 6, 6), dim=-1)
    assert_contract_error(lambda: head_scores.induction_score(maps, 4), "period", "8")


@pytest.mark.parametrize("bad", [None, 3.5, [1, 2], torch.tensor([1.0, 2.0]), torch.zeros(2, 2, 2)])
def test_strongest_refuses_what_is_not_a_table(bad):
    assert_contract_error(lambda: head_scores.strongest(bad), "scores")


def test_strongest_finds_the_largest_entry():
    table = torch.zeros(3, 4)
    table[2, 1] = 0.7
    assert head_scores.strongest(table) == (2, 1, pytest.approx(0.7))


@pytest.mark.parametrize(("low", "high", "name"), [(None, 10, "low"), (-1, 10, "low"), (5, 2.5, "high"), (9, 9, "low")])
def test_repeated_random_tokens_refuses_a_bad_range(low, high, name):
    assert_contract_error(lambda: head_scores.repeated_random_tokens(4, 0, low=low, high=high), name)


@pytest.mark.parametrize("bad", [None, "model", torch.zeros(2), "tiny"])
def test_head_measurements_refuse_a_model_that_is_not_lesson_13s(bad, tiny_model):
    model = tiny_model if bad == "tiny" else bad
    assert_contract_error(lambda: head_scores.attention_maps(model, torch.tensor([[1, 2]])), "model", kind=TypeError)
    assert_contract_error(lambda: head_scores.value_lengths(model, torch.tensor([[1, 2]])), "model", kind=TypeError)
    assert_contract_error(lambda: head_scores.silence_head(model, 0, 0).__enter__(), "model", kind=TypeError)


@pytest.mark.parametrize("bad", [None, 3, "halfs", ["halves"]])
@pytest.mark.parametrize("module", [au.MultiHeadAttention, au.FusedMultiHeadAttention])
def test_rotary_layout_is_checked_even_without_a_rotary_base(module, bad):
    assert_contract_error(lambda: module(8, 8, 10, 0.0, 4, rotary_layout=bad), "rotary_layout")
