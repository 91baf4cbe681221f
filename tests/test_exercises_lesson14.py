"""Lesson 14's checkers: right answers in every numeric form get ✅, typical mistakes get their hint, odd input a ❌, never a traceback."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from attention_utils.exercises import lesson14
from attention_utils.results import SAVED_MODEL, SAVED_MODEL_BF16
from test_exercises_lesson13 import Awkward, verdict  # the same odd answer and verdict capture


def _saved_step(fmt: str) -> tuple[float, float]:
    """(MB, ms) of one format's batch-1 decode row, read from the JSON with plain json, not the package's readers."""
    rows = json.loads(SAVED_MODEL.read_text())["timings"]
    row = next(r for r in rows if (r["format"], r["batch"], r["phase"]) == (fmt, 1, "decode"))
    return row["weight_bytes"] / 1e6, row["ms"]


# Exercise 1 by hand: W / B + t0 = t for float32 and bfloat16, two equations in 1 / B and t0 (numpy's solver).
(W32, T32), (W16, T16), (W8, T8) = (_saved_step(f) for f in ("float32", "bfloat16", "int8"))
INVERSE_B, T0 = np.linalg.solve(np.array([[W32, 1.0], [W16, 1.0]]), np.array([T32, T16]))
BANDWIDTH = 1 / INVERSE_B  # MB per ms = GB/s
INT8_MS = W8 * INVERSE_B + T0
OUTSIDE_MS = T32 - _saved_step("matmul floor")[1]  # exercise 1d by hand: float32's step minus its bare products
_SAVED, _SECOND = json.loads(SAVED_MODEL.read_text()), json.loads(SAVED_MODEL_BF16.read_text())
FLOAT32_ROOF = _SAVED["format_roofs"]["float32"]  # float32's F.linear roof, measured beside bfloat16's and int8's
RIDGE_BATCH = 2 * FLOAT32_ROOF / _SAVED["roofs"]["bandwidth_gb_s"]  # by hand: b / 2 FLOPs per byte = the ridge
FIRST_RIDGE = _SAVED["format_roofs"]["bfloat16"] / _SAVED["roofs"]["bandwidth_gb_s"]  # section 7's: GFLOP/s over GB/s
BF16_RIDGE = _SECOND["format_roofs"]["bfloat16"] / _SECOND["roofs"]["bandwidth_gb_s"]  # exercise 3a: the second machine's
BF16_ROOF_GAIN = _SECOND["format_roofs"]["bfloat16"] / _SAVED["format_roofs"]["bfloat16"]  # the roofs' ratio: a mistake in 3b


def _bound_ms(run: dict) -> float:
    """By hand: bfloat16 one-row products of W bytes do W FLOPs (2 per 2-byte weight); least time max(FLOPs/roof, bytes/bw)."""
    megabytes = run["int8_kernel"]["bfloat16_bytes"] / 1e6
    return max(megabytes / run["format_roofs"]["bfloat16"], megabytes / run["roofs"]["bandwidth_gb_s"])


ROOFLINE_GAIN = _bound_ms(_SAVED) / _bound_ms(_SECOND)  # exercise 3b
INT8_OUTSIDE = T8 - _SAVED["int8_kernel"]["int8_kernel_ms"]  # exercise 1c by hand: each step minus its one-row products
BFLOAT16_OUTSIDE = T16 - _SAVED["int8_kernel"]["bfloat16_linear_ms"]
ONE_ROW_GAIN = _SAVED["int8_kernel"]["bfloat16_linear_ms"] / _SECOND["int8_kernel"]["bfloat16_linear_ms"]  # what was measured
_FLOOR_16 = next(r for r in _SAVED["timings"] if (r["format"], r["batch"], r["phase"]) == ("matmul floor", 16, "decode"))
FLOOR_GFLOP_S = 2 * 134_479_872 * 16 / _FLOOR_16["ms"] / 1e6  # exercise 2b by hand: the model's matrices counted in lesson 14
FLOOR_SHARE = FLOOR_GFLOP_S / FLOAT32_ROOF
FORMS = [float, np.float64, torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64), np.array,
         lambda v: torch.tensor([v]), lambda v: [v], lambda v: np.array([[v]]), lambda v: torch.tensor([[v]], dtype=torch.float64)]  # one-element forms too


@pytest.mark.parametrize("form", FORMS)
def test_right_answers_in_every_form(form):
    assert "Correct" in verdict(lesson14.check_fit, form(BANDWIDTH), form(T0))
    assert "Correct" in verdict(lesson14.check_int8_prediction, form(INT8_MS))
    assert "Correct" in verdict(lesson14.check_ridge_batch, form(RIDGE_BATCH))
    assert "Correct" in verdict(lesson14.check_outside, form(OUTSIDE_MS))
    assert "Correct" in verdict(lesson14.check_bfloat16_ridge, form(BF16_RIDGE), form(ROOFLINE_GAIN))
    assert "Correct" in verdict(lesson14.check_int8_outside, form(INT8_OUTSIDE), form(BFLOAT16_OUTSIDE))
    assert "Correct" in verdict(lesson14.check_floor_share, form(FLOOR_SHARE))


def test_exercise_3a_asks_for_the_second_machines_ridge_not_section_7s():
    """Section 7 reads the first machine's ridge (below 1 FLOP per byte); exercise 3 (a) asks for the second machine's, far
    above 1, and the first machine's answer gets its own hint."""
    assert FIRST_RIDGE < 1 < BF16_RIDGE  # by hand from the saved roofs: a 1-FLOP-per-byte step is right of one, left of the other
    out = verdict(lesson14.check_bfloat16_ridge, BF16_RIDGE, ROOFLINE_GAIN)
    assert "Correct" in out and "far left of it, bound by its bytes" in out and "远在它左边，受带宽限制" in out
    out = verdict(lesson14.check_bfloat16_ridge, FIRST_RIDGE, ROOFLINE_GAIN)
    assert "Not yet" in out and "first machine's ridge" in out, out


def test_exercise_1c_right_option_answers_option_1_and_points_at_the_test_of_3():
    """The right option's feedback says why option 1 (the table) does not hold and that the subtraction tests option 3."""
    out = verdict(lesson14.check_int8_miss, 2)
    assert "Correct" in out and "Option 1 does not hold" in out and "Option 3 is what the subtraction below tests" in out
    assert f"the {W8:.0f} MB already count the bfloat16 table" in out
    assert "选项 1 站不住" in out


def test_the_steps_themselves_get_the_subtraction_hint():
    out = verdict(lesson14.check_int8_outside, T8, T16)  # the steps, not what is left outside their products
    assert "Not yet" in out and "section 7's kernel lines" in out


@pytest.mark.parametrize("check, wrong, hint", [
    (lesson14.check_int8_prediction, T8, "what the bench measured"), (lesson14.check_int8_prediction, W8 / BANDWIDTH, "fixed cost"),
    (lesson14.check_int8_prediction, 2 * INT8_MS, "t = int8's"),
    (lesson14.check_ridge_batch, RIDGE_BATCH / 2, "ridge itself"), (lesson14.check_ridge_batch, RIDGE_BATCH / 4, "b = 2 × ridge"),
    (lesson14.check_ridge_batch, 4.0, "Set b / 2"),
    (lesson14.check_outside, T0, "t0 from the line"), (lesson14.check_outside, T32, "Subtract the matmul floor"),
    (lesson14.check_int8_prediction, torch.tensor([T8]), "what the bench measured"), (lesson14.check_ridge_batch, [RIDGE_BATCH / 2], "ridge itself"),
    (lesson14.check_int8_miss, 1, "already count"), (lesson14.check_int8_miss, "3", "if option 3 held"),
    (lesson14.check_int8_miss, "b", "one option's number"), (lesson14.check_int8_miss, True, "one option's number"),
    (lesson14.check_int8_miss, 2.5, "one option's number"), (lesson14.check_int8_miss, float("nan"), "one option's number"),
    (lesson14.check_floor_share, 100 * FLOOR_SHARE, "percentage"), (lesson14.check_floor_share, FLOOR_GFLOP_S, "divide it by"),
    (lesson14.check_floor_share, FLOOR_SHARE / 16, "each of the 16 rows"), (lesson14.check_floor_share, 0.9, "Divide the floor's FLOPs"),
])
def test_mistakes_get_their_hint(check, wrong, hint):
    out = verdict(check, wrong)
    assert "Not yet" in out and hint in out


def test_the_int8_miss_has_one_right_letter():
    assert all("Correct" in verdict(lesson14.check_int8_miss, answer) for answer in (2, " 2 ", 2.0, np.int64(2)))


def test_the_floor_runs_far_below_the_roof_past_the_ridge():
    """Exercise 2: the ridge falls between batches 8 and 16 (by hand), and at 16 the floor reaches well under half the roof."""
    assert 8 < RIDGE_BATCH < 16 and FLOOR_SHARE < 0.5
    out = verdict(lesson14.check_floor_share, FLOOR_SHARE)
    assert f"{FLOOR_GFLOP_S:.1f} GFLOP/s, {FLOOR_SHARE:.2f} of the" in out


def test_the_rival_reason_reads_each_step_minus_its_one_row_products():
    """Exercise 1c's option 3 is ruled out by subtraction: int8 and bfloat16 leave about the same time outside their
    one-row products (by hand from the JSON: step minus the kernel line, each as the lesson prints it, to 0.1 ms). The
    option's feedback points at the subtraction without giving its numbers away; the subtraction's answer gives them."""
    kernel = _SAVED["int8_kernel"]
    int8_out = round(T8, 1) - round(kernel["int8_kernel_ms"], 1)
    bfloat16_out = round(T16, 1) - round(kernel["bfloat16_linear_ms"], 1)
    assert abs(int8_out - bfloat16_out) < 0.1 * bfloat16_out  # "about the same"
    for answer in (2, 3):
        assert f"{int8_out:.1f}" not in verdict(lesson14.check_int8_miss, answer)
    out = verdict(lesson14.check_int8_outside, int8_out, bfloat16_out)
    assert "option 3 does not hold" in out and f"int8 在只乘一个向量的矩阵乘法之外剩下 {int8_out:.1f} 毫秒，bfloat16 剩下 {bfloat16_out:.1f} 毫秒" in out

def test_the_one_row_products_did_not_follow_bfloat16s_roof():
    """What exercise 3's answer says: the first machine's ridge is below 1 FLOP per byte (section 7), and the roofline predicts a larger gain for the
    one-row products than was measured; each typical mistake gets its hint."""
    assert FIRST_RIDGE < 1 and ROOFLINE_GAIN > 1.5 * ONE_ROW_GAIN
    for ridge, gain, hint in ((1 / BF16_RIDGE, ROOFLINE_GAIN, "bandwidth over throughput"),
                              (2 * BF16_RIDGE, ROOFLINE_GAIN, "where the roofs meet"),
                              (BF16_RIDGE, ONE_ROW_GAIN, "what the bench measured"),
                              (BF16_RIDGE, BF16_ROOF_GAIN, "bound by its bytes"),
                              (BF16_RIDGE, _SECOND["roofs"]["bandwidth_gb_s"] / _SAVED["roofs"]["bandwidth_gb_s"], "bandwidth roofs"),
                              (BF16_RIDGE, 1 / ROOFLINE_GAIN, "divide the first machine's")):
        out = verdict(lesson14.check_bfloat16_ridge, ridge, gain)
        assert "Not yet" in out and hint in out, (ridge, gain)


@pytest.mark.parametrize("bandwidth, fixed, hint", [
    (W32 / T32, 0.0, "float32's bytes over its time"), (W32 / T32, T0, "float32's bytes over its time"),
    (BANDWIDTH * 1e3, T0, "units"), (BANDWIDTH, T0 + 2.0, "subtract"), (3.0, 1.0, "subtract"),
])
def test_fit_mistakes_get_their_hint(bandwidth, fixed, hint):
    out = verdict(lesson14.check_fit, bandwidth, fixed)
    assert "Not yet" in out and hint in out


@pytest.mark.parametrize("odd", ["7", [1, 2], Awkward(), float("nan"), None])
def test_fit_odd_answers_get_a_verdict_not_a_traceback(odd):
    assert "Correct" not in verdict(lesson14.check_fit, odd, T0)
    assert "Correct" not in verdict(lesson14.check_fit, BANDWIDTH, odd)


@pytest.mark.parametrize("check", [lesson14.check_int8_prediction, lesson14.check_int8_miss, lesson14.check_ridge_batch,
                                   lesson14.check_outside, lambda v: lesson14.check_bfloat16_ridge(v, ROOFLINE_GAIN),
                                   lambda v: lesson14.check_int8_outside(v, BFLOAT16_OUTSIDE),
                                   lambda v: lesson14.check_int8_outside(INT8_OUTSIDE, v),
                                   lambda v: lesson14.check_bfloat16_ridge(BF16_RIDGE, v), lesson14.check_floor_share])
@pytest.mark.parametrize("odd", ["100", [1, 2], Awkward(), float("nan"), None])
def test_odd_answers_get_a_verdict_not_a_traceback(check, odd):
    out = verdict(check, odd)
    assert "Correct" not in out


def test_a_meta_tensor_has_no_value_to_check():
    out = verdict(lesson14.check_int8_prediction, torch.tensor([INT8_MS], device="meta"))
    assert "Not yet" in out and "number of milliseconds" in out


# Exercise 4: a per-row int8 quantizer, checked on a small matrix whose rows have very different sizes
MATRIX = torch.tensor([[0.50, -1.27, 0.033, 0.904], [1e-3, -2e-3, 5e-4, 0.0], [30.0, -7.5, 0.1, 12.25]])


def _by_row(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scales = w.abs().amax(dim=1, keepdim=True) / 127
    return torch.round(w / scales).to(torch.int8), scales.squeeze(1)


def test_exercise_4_accepts_a_per_row_quantizer_and_reports_the_bytes():
    out = verdict(lesson14.check_int8_rows, _by_row, MATRIX)
    assert "Correct" in out and "All 12 weights come back within half a step" in out
    assert "[[50, -127, 3, 90]" in str(_by_row(MATRIX)[0].tolist())  # section 7's row by hand: 0.50 / 0.01 = 50, ...
    big = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    out = verdict(lesson14.check_int8_rows, _by_row, big)
    assert f"{(64 * 32 + 4 * 64) / 1e6:.2f} MB, against {4 * 64 * 32 / 1e6:.2f} MB" in out  # 1 byte a code, 4 a scale


@pytest.mark.parametrize("quantize, hint", [
    (lambda w: (torch.round(w / (w.abs().max() / 127)).to(torch.int8), (w.abs().max() / 127).expand(w.shape[0])), "the same scale"),
    (lambda w: ((w / (w.abs().amax(dim=1, keepdim=True) / 127)).to(torch.int8), w.abs().amax(dim=1) / 127), "cut, not rounded"),
    (lambda w: (torch.round(w / (w.abs().amax(dim=1, keepdim=True) / 127)), w.abs().amax(dim=1) / 127), "as int8"),
    (lambda w: (torch.round(w / (w.abs().amax(dim=1, keepdim=True) / 128)).to(torch.int8), w.abs().amax(dim=1) / 128), "divided by 127"),
    (lambda w: (torch.round(w / (w.abs().amax(dim=1, keepdim=True) / 127)).to(torch.int8), (w.abs().amax(dim=1) / 127).half()),
     "but rounded"),
    (lambda w: None, "returns None"), (lambda w: [1, 2], "two tensors"), (lambda w: (w, w), "one number per row"),
    (lambda w: 1 / 0, "ZeroDivisionError"), (3, "pass the function itself"),
])
def test_exercise_4_mistakes_get_their_hint(quantize, hint):
    out = verdict(lesson14.check_int8_rows, quantize, MATRIX)
    assert "Not yet" in out and hint in out, out


def test_exercise_4_wants_a_matrix():
    assert "2-d float weight matrix" in verdict(lesson14.check_int8_rows, _by_row, MATRIX[0])
    assert "2-d float weight matrix" in verdict(lesson14.check_int8_rows, _by_row, "qkv")


# Exercise 5, by hand: 3.35e12 bytes a second over 8e9 weights × 2 bytes; the cache of 64 sequences of 8,192 tokens,
# a key and a value of 8 heads × 128 bfloat16 numbers in each of 32 layers, over the 16 GB of weights
GPU_TOKENS = 3.35e12 / 16e9
GPU_CACHE_SHARE = 64 * 8192 * 32 * 2 * 8 * 128 * 2 / 16e9  # 68.7 GB of cache: about 4.3 times the weights


def test_exercise_5_by_hand():
    out = verdict(lesson14.check_gpu_estimate, GPU_TOKENS, GPU_CACHE_SHARE)
    assert "Correct" in out and "209 tokens a second" in out and "4.3 times the weights" in out
    assert "85 GB" in out and "80 GB are binary: about 86 GB" in out  # 16 GB of weights + 68.7 of cache: nearly all of an H100
    left = 80 * 2**30 / 1e9 - (16e9 + GPU_CACHE_SHARE * 16e9) / 1e9  # about 1.2 GB of an H100 left beside them
    assert f"about {left:.0f} GB left for activations" in out and f"只剩约 {left:.0f} GB" in out


@pytest.mark.parametrize("tokens, share, hint", [
    (2 * GPU_TOKENS, GPU_CACHE_SHARE, "1 byte a weight"), (GPU_TOKENS / 1e3, GPU_CACHE_SHARE, "units"),
    (50.0, GPU_CACHE_SHARE, "reads every weight once"), (GPU_TOKENS, GPU_CACHE_SHARE / 2, "both the key and the value"),
    (GPU_TOKENS, GPU_CACHE_SHARE * 2, "2 bytes a number"), (GPU_TOKENS, GPU_CACHE_SHARE * 4, "key-value heads are cached"),
    (GPU_TOKENS, GPU_CACHE_SHARE / 64, "multiply by the batch"), (GPU_TOKENS, GPU_CACHE_SHARE / 32, "32 layers"),
    (GPU_TOKENS, 1.0, "divide by the weights"), ("many", GPU_CACHE_SHARE, "two numbers"),
])
def test_exercise_5_mistakes_get_their_hint(tokens, share, hint):
    out = verdict(lesson14.check_gpu_estimate, tokens, share)
    assert "Not yet" in out and hint in out, out


def test_exercise_1a_with_the_cache_in_w_and_exercise_2_rounded_either_way():
    """Section 4's formula counts the cache in W: that fit (by hand, numpy's solver on W + C) is right too; so are the whole batches either side of b."""
    rows = {r["format"]: r for r in _SAVED["timings"] if (r["batch"], r["phase"]) == (1, "decode")}
    w = [(rows[f]["weight_bytes"] + rows[f]["cache_bytes"]) / 1e6 for f in ("float32", "bfloat16")]
    inverse, fixed = np.linalg.solve(np.array([[w[0], 1.0], [w[1], 1.0]]), np.array([T32, T16]))
    out = verdict(lesson14.check_fit, 1 / inverse, fixed)
    assert "Correct" in out and "With the cache's bytes" in out, out
    below, above = math.floor(RIDGE_BATCH), math.ceil(RIDGE_BATCH)
    assert all("Correct" in verdict(lesson14.check_ridge_batch, b) for b in (below, above))
    assert "Correct" not in verdict(lesson14.check_ridge_batch, below - 1) and "Correct" not in verdict(lesson14.check_ridge_batch, below - 0.9)
    out = verdict(lesson14.check_fit, _SAVED["roofs"]["bandwidth_gb_s"], T0)  # the roof itself, not the fitted slope
    assert "Not yet" in out and "bandwidth roof, a measurement" in out, out


def test_exercise_1c_swapped_answers_are_named_and_rounded_ones_taken():
    out = verdict(lesson14.check_int8_outside, BFLOAT16_OUTSIDE, INT8_OUTSIDE)
    assert "Not yet" in out and "other order" in out, out
    assert "Correct" in verdict(lesson14.check_int8_outside, round(INT8_OUTSIDE, 1), round(BFLOAT16_OUTSIDE, 1))


def test_exercise_1c_subtracting_the_float32_floor_from_int8_gets_its_hint():
    """int8's step minus float32's products (the matmul floor, by hand from the JSON) is the wrong subtrahend."""
    floor = next(r["ms"] for r in _SAVED["timings"] if (r["format"], r["batch"], r["phase"]) == ("matmul floor", 1, "decode"))
    out = verdict(lesson14.check_int8_outside, T8 - floor, T16 - _SAVED["int8_kernel"]["bfloat16_linear_ms"])
    assert "Not yet" in out and "subtract int8's own" in out


def _float32_rows(run: dict) -> tuple[dict, dict]:
    """The float32 decode step and prefill at batch 1, read with plain json."""
    rows = {r["phase"]: r for r in run["timings"] if (r["format"], r["batch"]) == ("float32", 1)}
    return rows["decode"], rows["prefill"]


# Exercise 6, by hand from the second machine's file: the step's bytes at its roof, over a prefill token, and the step over them
_STEP2, _PREFILL2 = _float32_rows(_SECOND)
BYTES_MS_2 = (_STEP2["weight_bytes"] + _STEP2["cache_bytes"]) / 1e6 / _SECOND["roofs"]["bandwidth_gb_s"]  # MB / (GB/s) = ms
AGAINST_PREFILL_2 = BYTES_MS_2 / (_PREFILL2["ms"] / 128)
AGAINST_BYTES_2 = _STEP2["ms"] / BYTES_MS_2


def test_exercise_6_by_hand_in_every_form():
    assert 5 < AGAINST_PREFILL_2 < 7 and 3 < AGAINST_BYTES_2 < 4  # the reviewer's 6.0 and 3.5, roughly
    for form in FORMS:
        out = verdict(lesson14.check_step_factors, form(BYTES_MS_2), form(AGAINST_PREFILL_2), form(AGAINST_BYTES_2))
        assert "Correct" in out and f"{AGAINST_BYTES_2:.1f} times its bytes" in out, out
    weights_only = _STEP2["weight_bytes"] / 1e6 / _SECOND["roofs"]["bandwidth_gb_s"]  # the small cache left out: accepted
    assert "Correct" in verdict(lesson14.check_step_factors, weights_only, AGAINST_PREFILL_2, AGAINST_BYTES_2)


@pytest.mark.parametrize("answer, hint", [
    ((BYTES_MS_2 * _SECOND["roofs"]["bandwidth_gb_s"] / _SAVED["roofs"]["bandwidth_gb_s"], AGAINST_PREFILL_2, AGAINST_BYTES_2), "first machine's roof"),
    ((1e3 * BYTES_MS_2, AGAINST_PREFILL_2, AGAINST_BYTES_2), "MB / (GB/s) = ms"),
    ((BYTES_MS_2, AGAINST_PREFILL_2 / 128, AGAINST_BYTES_2), "by its 128 tokens"),
    ((BYTES_MS_2, 1 / AGAINST_PREFILL_2, AGAINST_BYTES_2), "Turn the ratio over"),
    ((BYTES_MS_2, AGAINST_PREFILL_2, 1 / AGAINST_BYTES_2), "Turn the ratio over"),
    ((BYTES_MS_2, AGAINST_PREFILL_2, 2.8), "(c) the measured step"),
    ((BYTES_MS_2, "six", AGAINST_BYTES_2), "three numbers"),
])
def test_exercise_6_mistakes_get_their_hint(answer, hint):
    out = verdict(lesson14.check_step_factors, *answer)
    assert "Not yet" in out and hint in out, out


def test_exercise_3_names_the_ridge_of_float32s_roof():
    """The second machine's float32 roof divided by its bandwidth gets the float32 hint."""
    out = verdict(lesson14.check_bfloat16_ridge, _SECOND["format_roofs"]["float32"] / _SECOND["roofs"]["bandwidth_gb_s"], ROOFLINE_GAIN)
    assert "Not yet" in out and "float32's compute roof" in out, out


def test_exercise_1a_bfloat16s_bytes_over_its_time_gets_its_hint():
    out = verdict(lesson14.check_fit, W16 / T16, T0)
    assert "Not yet" in out and "bfloat16's bytes over its time" in out, out
