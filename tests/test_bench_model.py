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


class Sizes:  # SmolLM2-135M, as its GGUF header states
    d_model, num_layers, num_heads, num_kv_heads, head_dim, d_ff, vocab_size = 576, 30, 9, 3, 64, 1536, 49152


def test_roofline_points_and_the_table_by_hand():
    from attention_utils.course.bench.model_formats import roofline_points
    from attention_utils.results import model_table

    results = {"prompt_length": 64, "batches": {"float32": {"1": 100.0, "8": 125.0}, "bfloat16": {"1": 50.0}},
               "bytes": {"float32": 538_060_032, "bfloat16": 269_030_016, "int8": 163_483_776},
               "decode_ms": {"package_float32": 100.0, "package_int8": 80.0, "matmul_floor": 60.0},
               "prefill_ms": {"package_float32": 400.0},
               "quality": {"float32": {"tokens_agreeing": 1.0, "perplexity_vs_float32": 1.0},
                           "int8": {"tokens_agreeing": 0.95, "perplexity_vs_float32": 1.01}}}
    points = {p["label"]: p for p in roofline_points(results, Sizes)}
    flops_b1 = 2 * (30 * 3_538_944 + 576 * 49152) + 30 * 4 * 9 * 64 * 65  # the 65th token sees 65 keys
    assert points["decode float32 B=1"]["gflop_s"] == pytest.approx(flops_b1 / 0.1 / 1e9)
    assert points["decode float32 B=8"]["intensity"] == pytest.approx(8 * points["decode float32 B=1"]["intensity"], rel=0.05)
    assert points["decode bfloat16 B=1"]["intensity"] == pytest.approx(2 * points["decode float32 B=1"]["intensity"], rel=0.01)
    shown = model_table(results)
    assert "package_int8" in shown and "1.25x" in shown and "95%" in shown
    assert "解码一步" in model_table(results, "zh")
