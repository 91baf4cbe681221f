"""Lesson 12 checkers: right answers in every numeric form get ✅, typical mistakes their hint, nothing ends in a traceback."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.exercises import lesson12

# SmolLM2-135M from its config.json: 30 layers, 3 key/value heads of 64 features; float32 keys and values.
PER_TOKEN = 30 * 3 * 64 * 4 * 2  # one token: keys and values of every layer, 4 bytes each = 46,080
CACHE_BYTES = PER_TOKEN * 2048


def said(check, *answer) -> str:
    """What a checker prints for `answer` (captured here: Hypothesis runs many answers in one test)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        check(*answer)
    return printed.getvalue()


class Unreadable:
    """An answer whose every comparison or conversion raises, as a learner's half-written object might."""

    def __eq__(self, other):
        raise RuntimeError("no comparison")

    __lt__ = __gt__ = __le__ = __ge__ = __eq__
    __hash__ = None

    def __float__(self):
        raise RuntimeError("no float")

    __index__ = __int__ = __float__


NUMBER_FORMS = [int, float, np.int64, np.float64, torch.tensor, lambda x: torch.tensor(x, dtype=torch.float64)]


@pytest.mark.parametrize("form", NUMBER_FORMS)
def test_cache_bytes_right_in_every_form(form):
    assert CACHE_BYTES == 94_371_840
    assert "Correct" in said(lesson12.check_cache_bytes, form(CACHE_BYTES))


@pytest.mark.parametrize("wrong, hint", [
    (CACHE_BYTES * 3, "key/value heads"),  # 9 query heads instead of 3 key/value heads
    (CACHE_BYTES // 2048, "one token"),
    (CACHE_BYTES // 30, "one layer"),
    (CACHE_BYTES * 8, "bits"),
    (CACHE_BYTES // 2, "keys alone"),
    (CACHE_BYTES // 2, "2 bytes per number"),  # float16 gives the same number as the keys alone: both causes are named
    (CACHE_BYTES * 2, "not 8"),  # 8-byte float64
    (CACHE_BYTES // 4, "not 1"),
    (90.0, "MiB"),
    (12_345_678, "Multiply"),
])
def test_cache_bytes_mistakes_get_their_hint(wrong, hint):
    out = said(lesson12.check_cache_bytes, wrong)
    assert "Not yet" in out and hint in out


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(), st.none(), st.lists(st.integers(), max_size=3)))
def test_cache_bytes_never_raises(answer):
    out = said(lesson12.check_cache_bytes, answer)
    assert ("Correct" in out) == (answer in (CACHE_BYTES, [CACHE_BYTES]) and not isinstance(answer, bool))  # [x] is x


def test_cache_bytes_answers_odd_objects():
    for answer in (Unreadable(), ..., True, torch.tensor([True]), np.float64(CACHE_BYTES) + 0.5):
        assert "Not yet" in said(lesson12.check_cache_bytes, answer)


def test_a_one_element_answer_is_read_as_its_number():
    for answer in (torch.tensor([CACHE_BYTES]), [CACHE_BYTES], np.array([[CACHE_BYTES]])):
        assert "Correct" in said(lesson12.check_cache_bytes, answer)
    assert "Correct" in said(lesson12.check_layer_window, [2])


@pytest.mark.parametrize("form", NUMBER_FORMS)
def test_layer_window_right_in_every_form(form):
    # layer 0's previous-token head reads the key 1 step back: the query and that key, W = 2 (measured in the lesson)
    assert "Correct" in said(lesson12.check_layer_window, form(2))


@pytest.mark.parametrize("wrong, hint", [(1, "only the query"), (7, "layer 1"), (8, "layer 1"), (3, "smaller window"),
                                         (0, "at least 1"), (-2, "at least 1"), ("2", "whole number"),
                                         (2.5, "whole number")])
def test_layer_window_mistakes_get_their_hint(wrong, hint):
    out = said(lesson12.check_layer_window, wrong)
    assert "Not yet" in out and hint in out


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(-5, 40), st.floats(allow_nan=True), st.text(max_size=3), st.none()))
def test_layer_window_never_raises(answer):
    out = said(lesson12.check_layer_window, answer)
    assert ("Correct" in out) == (answer == 2 and not isinstance(answer, bool))


def test_layer_window_answers_odd_objects():
    for answer in (Unreadable(), ..., True, [2, 2]):
        assert "Not yet" in said(lesson12.check_layer_window, answer)


def rotary_model():
    """A random rotary tiny model with large weights (peaked attention), like the lesson's but untrained."""
    from attention_utils.tiny_model import TinyAttentionModel

    torch.manual_seed(11)
    model = TinyAttentionModel(16, 24, d_model=32, num_heads=1, num_layers=2, positions="rotary")
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(3.0)
    return model.eval()


def encode(letters: str) -> torch.Tensor:
    from attention_utils import tasks

    return tasks.encode(letters, 16)


def test_fixed_generation_accepts_a_cached_generator_and_restores_the_mode():
    from attention_utils.inference.generation import generate
    from attention_utils.inference.kv_cache import KVCache
    from attention_utils.tiny_model import CachedTinyModel

    model = rotary_model().train()

    def cached(model, prompt, new_tokens):
        return generate(CachedTinyModel(model), prompt, new_tokens, cache=KVCache(len(model.layers))).tokens

    assert "Correct" in said(lesson12.check_fixed_generation, cached, model, encode)
    assert model.training


def test_fixed_generation_explains_what_is_wrong():
    from attention_utils.tiny_model import CachedTinyModel
    from attention_utils.inference.kv_cache import KVCache

    model = rotary_model()

    def position_bug(model, prompt, new_tokens):
        """Prefill right, then every decode step starts a fresh cache: the new token sits at position 0."""
        fused, tokens = CachedTinyModel(model), prompt
        logits = fused(prompt, cache=KVCache(2))
        for _ in range(new_tokens):
            tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)
            logits = fused(tokens[:, -1:], cache=KVCache(2))
        return tokens[:, : prompt.shape[1] + new_tokens]

    out = said(lesson12.check_fixed_generation, position_bug, model, encode)
    assert "Not yet" in out and "decode steps" in out
    out = said(lesson12.check_fixed_generation, lesson12.generate_slowly, model, encode)
    assert "Not yet" in out and "key rows" in out  # right tokens, but every key recomputed at every step
    out = said(lesson12.check_fixed_generation, lambda m, p, n: p, model, encode)
    assert "Not yet" in out and "shape" in out
    assert "Not yet" in said(lesson12.check_fixed_generation, ..., model, encode)
    assert "Not yet" in said(lesson12.check_fixed_generation, "generate_fixed", model, encode)
    out = said(lesson12.check_fixed_generation, lambda m, p, n: 1 / 0, model, encode)
    assert "Not yet" in out and "ZeroDivisionError" in out
