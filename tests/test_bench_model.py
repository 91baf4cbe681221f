"""Lesson 14's bench: the summary's ratios from hand-made timings, and the alternating order of the timed variants."""

from __future__ import annotations

import pytest

from attention_utils.course.bench.model_formats import interleave, summary


def test_summary_ratios_by_hand():
    results = {"decode_ms": {"package_float32": 50.0, "package_bfloat16": 25.0, "package_int8": 40.0,
                             "transformers_float32": 60.0, "matmul_floor": 45.0},
               "batches": {"float32": {"1": 50.0, "8": 80.0}}}
    found = summary(results)
    assert found["package_over_floor_speed"] == pytest.approx(0.9)
    assert found["package_over_transformers_speed"] == pytest.approx(1.2)
    assert found["best_format"] == "bfloat16" and found["best_format_speedup"] == pytest.approx(2.0)
    assert found["batch8_over_batch1_tokens_per_s"] == pytest.approx((8 / 80) / (1 / 50))


def test_rounds_alternate_the_order():
    calls = []

    def variant(name):
        return lambda: (lambda: calls.append(name))

    timed = interleave({"a": variant("a"), "b": variant("b")}, rounds=2, steps=1)
    assert set(timed) == {"a", "b"}
    assert calls == ["a", "a", "b", "b", "b", "b", "a", "a"]  # warm-up and timed call; the second round reversed
