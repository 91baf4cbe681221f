"""Lesson 13's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, anything else a ❌, never a traceback."""

from __future__ import annotations

import contextlib
import io
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_utils.models import head_scores
from attention_utils.exercises import as_whole_number, lesson13
from attention_utils.models.llama import LlamaConfig

pytestmark = pytest.mark.usefixtures("one_thread")

SMOLLM2 = SimpleNamespace(config=LlamaConfig(vocab_size=49152, context_length=8192, d_model=576, num_layers=30, num_heads=9,
                                             num_kv_heads=3, d_ff=1536, rotary_base=100000.0, norm_eps=1e-5))
# SmolLM2-135M's 134,515,008 parameters (printed in lesson 13), as one tensor on the meta device: counted, never allocated
SMOLLM2.parameters = lambda: [torch.empty(134_515_008, device="meta")]
PER_SEQUENCE = 2 * 30 * 3 * 64 * 2048 * 4  # by hand: keys and values, 30 layers, 3 heads of 64, 2,048 tokens, float32
BATCH = 6  # 538,060,032 weight bytes / 94,371,840 = 5.70, so 5 sequences stay below the weights and 6 pass them
FORMS = [int, float, np.int64, np.float64, np.float32, torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64), np.array]


class Awkward:
    """An answer whose comparisons raise: the checker must still answer with a verdict."""

    def __eq__(self, other):
        raise RuntimeError("no comparing me")

    __hash__ = None


def verdict(check, *args) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check(*args)
    return out.getvalue()


@pytest.fixture(scope="module")
def model(smollm2):
    return smollm2[0]


@given(st.sampled_from(FORMS))
def test_batch_for_cache_right_in_every_form(form):
    assert 5 * PER_SEQUENCE < 134_515_008 * 4 < 6 * PER_SEQUENCE
    assert "Correct" in verdict(lesson13.check_batch_for_cache, form(BATCH), SMOLLM2)


@pytest.mark.parametrize("answer, hint", [
    (5, "round up"),  # 5 x 94.4 MB = 472 MB, still below the weights
    (5.7, "round it up"), (torch.tensor(5.7015), "round it up"),  # the ratio itself
    (12, "only the keys"), (12, "2 bytes a number"), (12, "1,000 tokens"),  # half a sequence's cache: three causes named
    (2, "3 key/value heads"),  # every query head with its own keys and values
    (172, "30 layers"),  # one layer only
    ("6", "whole number"), ([BATCH, 1], "whole number"), (True, "whole number"), (float("nan"), "whole number"),
    (7, "Divide the weights"), (1, "Divide the weights"), (Awkward(), "Not yet"), (..., "Replace the ..."),
])
def test_batch_for_cache_wrong(answer, hint):
    out = verdict(lesson13.check_batch_for_cache, answer, SMOLLM2)
    assert "Not yet" in out and hint in out, out


@settings(max_examples=60)
@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(), st.none(), st.lists(st.integers(), max_size=3)))
def test_batch_for_cache_always_answers(answer):
    out = verdict(lesson13.check_batch_for_cache, answer, SMOLLM2)
    assert out.startswith(("✅", "❌"))
    assert ("Correct" in out) == (as_whole_number(answer) == BATCH)


@pytest.fixture(scope="module")
def repeated():
    return head_scores.repeated_random_tokens(20, 5)  # (1, 40)


def by_hand(maps: torch.Tensor, period: int, back: int) -> torch.Tensor:
    """(layers, heads): queries period..2 period - 1, each reading the key `back` steps behind it (written here by hand)."""
    rows = torch.arange(period, 2 * period)
    return maps[..., rows, rows - back].mean(dim=-1)


@pytest.fixture(scope="module")
def maps(model, repeated):
    return head_scores.attention_maps(model, repeated)[1]


def test_induction_scores_right_in_every_form(model, repeated, maps):
    right = by_hand(maps, 20, 19)  # key t - 20 + 1
    for answer in (right, right.double(), right.numpy(), right.tolist(), right + 1e-4):
        out = verdict(lesson13.check_induction_scores, answer, model, repeated, 20)
        assert "Correct" in out and "layer 18, head 6" in out, out


@pytest.mark.parametrize("change, hint", [
    (lambda m: by_hand(m, 20, 20), "earlier copy"),  # the same token, not the one after it
    (lambda m: by_hand(m, 20, 1), "previous-token"),
    (lambda m: by_hand(m, 20, 19) * 20, "sum"),
    (lambda m: by_hand(m, 20, 19) + 0.1, "Take the queries"),
    (lambda m: m[..., 20:, 1:21], "One number per head"),
    (lambda m: by_hand(m, 20, 19)[:10], "shape (30, 9)"),
    (lambda m: by_hand(m, 20, 19).T, "shape (30, 9)"),
    (lambda m: "scores", "tensor of numbers"), (lambda m: {"a": 1}, "tensor of numbers"), (lambda m: 0.5, "tensor of numbers"),
    (lambda m: ..., "Replace the ..."),
])
def test_induction_scores_wrong(model, repeated, maps, change, hint):
    out = verdict(lesson13.check_induction_scores, change(maps), model, repeated, 20)
    assert "Not yet" in out and hint in out, out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(), st.integers(), st.none(), st.lists(st.floats(), max_size=4), st.dictionaries(st.text(), st.integers())))
def test_induction_scores_always_answer(model, repeated, answer):
    out = verdict(lesson13.check_induction_scores, answer, model, repeated, 20)
    assert "Not yet" in out


def test_induction_table_is_independent_of_the_package(model, repeated, maps):
    """The checker's own computation (complex rotation, qkv rows) equals head_scores' (apply_rotary, project_heads)."""
    ours = lesson13._induction_table(model, repeated, 20)
    assert torch.allclose(ours.float(), head_scores.induction_score(maps, 20), atol=1e-4)


@pytest.fixture(scope="module")
def text_ids():
    return head_scores.repeated_random_tokens(30, 2)  # (1, 60): longer than the window of 32


@pytest.fixture(scope="module")
def sink_losses(model, text_ids):
    """The losses by hand: a window put on every layer's attention, the cross-entropy of the last 100 predictions."""
    found = {}
    for sinks in (0, 4):
        saved = [(block.attention.window, block.attention.sinks) for block in model.blocks]
        for block in model.blocks:
            block.attention.window, block.attention.sinks = 32, sinks
        try:
            logits = model(text_ids)[0, :-1]
        finally:
            for block, (window, kept) in zip(model.blocks, saved):
                block.attention.window, block.attention.sinks = window, kept
        found[sinks] = torch.nn.functional.cross_entropy(logits, text_ids[0, 1:], reduction="none")
    return found


def test_sink_losses_right_in_every_form(model, text_ids, sink_losses):
    right = {sinks: per_token[-100:].mean() for sinks, per_token in sink_losses.items()}
    for answer in ({0: right[0].item(), 4: right[1 * 4].item()}, right, {np.int64(4): np.float64(right[4]), 0: right[0].double()}):
        out = verdict(lesson13.check_sink_losses, answer, model, text_ids)
        assert "Correct" in out and "Full attention" in out, out
    assert all(block.attention.window is None for block in model.blocks)  # the checker puts the model back


@pytest.mark.parametrize("change, hint", [
    (lambda r: {0: r[4], 4: r[0]}, "swapped"),
    (lambda r: {0: math.exp(r[0]), 4: math.exp(r[4])}, "perplexity"),
    (lambda r: {0: r[0] + 0.5, 4: r[4]}, "cross-entropy"),
    (lambda r: {0: r[0]}, "a dict with two numbers"), (lambda r: [r[0], r[4]], "a dict with two numbers"),
    (lambda r: {0: "high", 4: r[4]}, "a dict with two numbers"), (lambda r: {1: r[0], 4: r[4]}, "a dict with two numbers"),
    (lambda r: {0: float("nan"), 4: r[4]}, "a dict with two numbers"), (lambda r: ..., "Replace the ..."),
])
def test_sink_losses_wrong(model, text_ids, sink_losses, change, hint):
    right = {sinks: per_token[-100:].mean().item() for sinks, per_token in sink_losses.items()}
    out = verdict(lesson13.check_sink_losses, change(right), model, text_ids)
    assert "Not yet" in out and hint in out, out


def test_sink_losses_over_every_prediction_get_their_hint(model):
    long = head_scores.repeated_random_tokens(80, 3)  # 160 tokens: the last 100 predictions are not all of them
    per_token = {}
    for sinks in (0, 4):
        with head_scores.windowed(model, 32, sinks):
            logits = model(long)[0, :-1]
        per_token[sinks] = torch.nn.functional.cross_entropy(logits, long[0, 1:]).item()
    out = verdict(lesson13.check_sink_losses, per_token, model, long)
    assert "Not yet" in out and "last 100" in out, out
