"""Lesson 13's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, anything else a ❌, never a traceback."""

from __future__ import annotations

import contextlib
import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.models import head_scores
from attention_utils.exercises import as_whole_number, lesson13
from attention_utils.models.llama import LlamaConfig

pytestmark = pytest.mark.usefixtures("one_thread")

SMOLLM2 = SimpleNamespace(config=LlamaConfig(vocab_size=49152, context_length=8192, d_model=576, num_layers=30, num_heads=9,
                                             num_kv_heads=3, d_ff=1536, rotary_base=100000.0, norm_eps=1e-5))
CACHE_BYTES = 2 * 30 * 3 * 64 * 1000 * 4  # by hand: keys and values, 30 layers, 3 heads of 64, 1,000 tokens, float32
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
def test_cache_bytes_right_in_every_form(form):
    assert CACHE_BYTES == 46_080_000
    assert "Correct" in verdict(lesson13.check_cache_bytes, form(CACHE_BYTES), SMOLLM2)


@pytest.mark.parametrize("answer, hint", [
    (3 * CACHE_BYTES, "3 key/value heads"),  # every query head with its own keys and values
    (CACHE_BYTES // 2, "half"),  # keys only
    (CACHE_BYTES // 4, "4 bytes"),  # numbers, not bytes
    (46.08, "megabytes"), (43.9, "megabytes"),  # MB and MiB
    ("46080000", "whole number"), ([CACHE_BYTES], "whole number"), (True, "whole number"), (float("nan"), "whole number"),
    (CACHE_BYTES + 1, "Multiply"), (Awkward(), "Not yet"), (..., "Replace the ..."),
])
def test_cache_bytes_wrong(answer, hint):
    out = verdict(lesson13.check_cache_bytes, answer, SMOLLM2)
    assert "Not yet" in out and hint in out, out


@settings(max_examples=60)
@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(), st.none(), st.lists(st.integers(), max_size=3)))
def test_cache_bytes_always_answers(answer):
    out = verdict(lesson13.check_cache_bytes, answer, SMOLLM2)
    assert out.startswith(("✅", "❌"))
    assert ("Correct" in out) == (as_whole_number(answer) == CACHE_BYTES)


@pytest.fixture(scope="module")
def repeated():
    return head_scores.repeated_random_tokens(20, 5)  # (1, 40)


def test_induction_head_right_in_every_form(model, repeated):
    ids = repeated[0].tolist()
    for sequence in (repeated, repeated[0], repeated.int(), ids, tuple(ids), [np.int64(i) for i in ids]):
        for layer, head in ((18, 6), (np.int64(18), np.int32(6)), (torch.tensor(18), 6.0)):
            out = verdict(lesson13.check_induction_head, sequence, layer, head, model)
            assert "Correct" in out and "18" in out, out


@pytest.mark.parametrize("change, hint", [
    (lambda s: s[:, :-1], "same tokens again"),  # odd length
    (lambda s: torch.cat([s[:, :20], s[:, :20].flip(1)], 1), "same tokens again"),  # second half is not a repeat
    (lambda s: s[:, :3].repeat(1, 2), "at least 4"),
    (lambda s: s.float(), "token ids"), (lambda s: s.bool(), "token ids"), (lambda s: "the cat the cat", "token ids"),
    (lambda s: s * 10, "Use ids"), (lambda s: -s, "Use ids"),
])
def test_induction_head_wrong_sequence(model, repeated, change, hint):
    out = verdict(lesson13.check_induction_head, change(repeated), 18, 6, model)
    assert "Not yet" in out and hint in out, out


@pytest.mark.parametrize("layer, head, hint", [(3, 3, "scores only"), (30, 0, "layer should be"), (18, 9, "layer should be"),
                                               (18.5, 6, "layer should be"), ("18", 6, "layer should be"),
                                               (Awkward(), 6, "Not yet"), (..., 6, "Replace the ...")])
def test_induction_head_wrong_head(model, repeated, layer, head, hint):
    out = verdict(lesson13.check_induction_head, repeated, layer, head, model)
    assert "Not yet" in out and hint in out, out


def test_induction_table_is_independent_of_the_package(model, repeated):
    """The checker's own computation (complex rotation, qkv rows) equals head_scores' (apply_rotary, project_heads)."""
    _, maps = head_scores.attention_maps(model, repeated)
    ours = lesson13._induction_table(model, repeated, 20)
    assert torch.allclose(ours.float(), head_scores.induction_score(maps, 20), atol=1e-4)


def test_induction_head_follows_the_learners_own_sequence(model):
    """On a short sequence another head may lead; the checker accepts the head the package measures there."""
    short = head_scores.repeated_random_tokens(6, 3)
    _, maps = head_scores.attention_maps(model, short)
    layer, head, _ = head_scores.strongest(head_scores.induction_score(maps, 6))
    assert "Correct" in verdict(lesson13.check_induction_head, short, layer, head, model)


@given(st.sampled_from(["b", "B", " b ", "b\n"]))
def test_sink_reason_right(choice):
    assert "Correct" in verdict(lesson13.check_sink_reason, choice)


@pytest.mark.parametrize("choice, hint", [("a", "first word"), ("c", "distance"), ("d", "full-precision"),
                                          ("e", "one letter"), (2, "one letter"), (["b"], "one letter"), (..., "Replace")])
def test_sink_reason_wrong(choice, hint):
    out = verdict(lesson13.check_sink_reason, choice)
    assert "Not yet" in out and hint in out, out


@given(st.one_of(st.text(), st.integers(), st.none(), st.binary()))
def test_sink_reason_always_answers(choice):
    out = verdict(lesson13.check_sink_reason, choice)
    assert ("Correct" in out) == (isinstance(choice, str) and choice.strip().lower() == "b")
    assert "Not yet" in out or "Correct" in out
