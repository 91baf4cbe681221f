"""Sentences of lessons 8-13 that read a printed number agree with that number, in both languages (issue 45).

Each test takes the numbers from a lesson's stored (English-run) output, or from the saved bench file the
lesson prints, and finds them in the sentence that reads them, in the English cell and in the Chinese cell.
Re-executing a lesson or re-running `make bench` with other numbers fails here until the sentence is re-read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from test_claims_01_05 import lesson, stored
from test_claims_01_05 import prose as english_and_chinese

ROOT = Path(__file__).resolve().parents[1]


def saved(name: str) -> dict:
    return json.loads((ROOT / "figures" / name).read_text(encoding="utf-8"))


def prose(nb: nbformat.NotebookNode, marker: str) -> tuple[str, str]:
    """The English cell that holds `marker` and the Chinese cell after it, single line breaks read as spaces."""
    return tuple(re.sub(r"(?<!\n)\n(?!\n)", " ", text) for text in english_and_chinese(nb, marker))


def printed(pattern: str, text: str) -> re.Match:
    found = re.search(pattern, text)
    assert found, f"nothing matches {pattern!r}: was a print changed, or the lesson not executed?"
    return found


def in_both(values: list[str], en: str, zh: str) -> None:
    for value in values:
        assert value in en and value in zh, f"{value} should be quoted in both languages"


# ---------------------------------------------------------------------------------------------
# Lesson 8


def test_lesson08_one_qkv_projection_reads_no_further_than_its_pair():
    nb = lesson("08_fused_attention")
    out = stored(nb, "results.headline")
    pair = printed(r"book / one QKV projection: (\d+) / (\d+) ms = (\d\.\d\d)\n", out)
    book, qkv, ratio = pair.groups()
    assert f"{int(book) / int(qkv):.2f}" == ratio  # one pair's own medians give its ratio
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    apart = [int(printed(rf"\| {name} \| (\d+) \(", readme)[1]) for name in (r"MultiHeadAttention \(book\)", "one QKV projection, explicit softmax")]
    en, zh = prose(nb, "Read the `book / one QKV projection` line")
    # the prose types no times (tests/test_bench.py): it reads the pair's direction and the README's, and what they support
    assert float(ratio) < 1 and "took longer than the book's module in their single pair, a ratio below 1" in en
    assert "耗时更长，比值小于 1" in zh
    assert apart[0] > apart[1] and "there the one QKV projection is the slightly faster one" in en and "合并 QKV 投影反而略快一些" in zh
    assert "makes no measurable difference" in en and "测不出差别" in zh  # the two disagree on the sign
    fused = [printed(r"fused module / bare floor: (\d+) / ", out)[1], printed(r"boolean mask / fused module: \d+ / (\d+) ms", out)[1]]
    assert fused[0] != fused[1]  # the same step, two pairs, two medians: the sentence that points at them
    assert "compare the fused module's median beside the bare floor with its median beside the boolean mask" in en
    assert "比较一下融合模块和裸 SDPA 下限配对时的中位数，与它和布尔掩码配对时的中位数" in zh
    sdpa = printed(r"one QKV projection / fused module: (\d\.\d\d)", out)[1]
    assert float(sdpa) > 2 and "Nearly all the gain comes from SDPA, the next line" in en and "几乎全部加速都来自 SDPA，也就是下一行" in zh


def test_lesson08_trap_one_compares_like_with_like():
    nb = lesson("08_fused_attention")
    out = stored(nb, "results.headline")
    line = printed(r"time ratios: fused with dropout / fused = (\d\.\d\d); fused with dropout / book = (\d\.\d\d); "
                   r"fused / book = (\d\.\d\d)", out)
    memory = printed(r"fused with dropout \d+ ms, (\d+) MiB; book \(no dropout\) \d+ ms, (\d+) MiB", out)
    en, zh = prose(nb, "Dropout sends CPU SDPA to its math fallback")
    assert float(line[2]) > 1 and float(line[3]) < 1  # with dropout slower than the book, without it faster
    in_both([line[1], line[2], line[3]], en, zh)
    assert f"{memory[1]} against {memory[2]} MiB" in en and f"{memory[1]} 对 {memory[2]} MiB" in zh
    assert "2.80 times as long as without it" in en and "是不带时的 2.80 倍" in zh


def test_lesson08_fast_path_memory_and_exponents_are_the_benchs():
    bench = saved("bench_results.json")
    rows = {(r["implementation"], r["mode"], r["length"]): r for r in bench["rows"]}
    fits = {(f["implementation"], f["mode"]): f for f in bench["fits"]}
    nb = lesson("08_fused_attention")
    en, zh = prose(nb, "everything goes to `_native_multi_head_attention`")
    mha, fused = rows["torch_mha", "inference", 1024]["memory_mib"], rows["fused", "inference", 1024]["memory_mib"]
    in_both([f"{mha:.0f} MiB", f"{fused:.0f} MiB", f"{fits['torch_mha', 'inference']['memory_exponent']:.2f}"], en, zh)
    en, zh = prose(nb, "Both figures are log-log")
    explicit = [fits[key, "inference"]["memory_exponent"] for key in ("wrapper", "book", "explicit", "einsum", "torch_mha")]
    assert 1.6 <= min(explicit) and max(explicit) <= 1.85  # "1.6 to 1.8"
    in_both(["1.6", "1.8", f"{fits['fused', 'inference']['memory_exponent']:.2f}"], en, zh)


# ---------------------------------------------------------------------------------------------
# Lesson 12


def test_lesson12_crossover_can_be_redone_from_the_printed_fit():
    nb = lesson("12_attention_at_inference")
    out = stored(nb, "results.decode_split_lines")
    fit = printed(r"MHA (\d+\.\d\d) ms \+ (\d\.\d{3}) ms per 1,000 tokens, GQA (\d+\.\d\d) ms \+ (\d\.\d{3}) ms per 1,000 "
                  r"tokens; the two shares would be equal at T ≈ (\d\.\d{3}) / (\d\.\d{3}) × 1,000 ≈ ([\d,]+)", out)
    slow_c, slow_s, fast_c, fast_s, dc, ds, equal = fit.groups()
    assert abs(float(slow_c) - float(fast_c) - float(dc)) <= 0.011 and abs(float(slow_s) - float(fast_s) - float(ds)) <= 0.0011
    assert round(float(dc) / float(ds) * 1000, -1) == int(equal.replace(",", ""))  # recomputed from the printed digits
    bytes_ = printed(r"read per step at T = 128: weights (\d+) MB → \d+ MB, cache (\d+\.\d) MB → ", out)
    en, zh = prose(nb, "At $T = 128$ a step reads")
    ratio = f"{int(bytes_[1]) / float(bytes_[2]):.0f}"
    assert f"{ratio} times as many bytes of weights" in en and f"是缓存的 {ratio} 倍" in zh
    in_both([f"{bytes_[1]} MB", f"{bytes_[2]} MB", f"{dc} / {ds} × 1,000 ≈ {equal}"], en, zh)


def test_lesson12_window_speedup_reads_the_ratio_to_causal_sdpa():
    nb = lesson("12_attention_at_inference")
    out = stored(nb, "results.flex_summary")
    same_kernel = printed(r"visiting every causal tile: [\d.]+ ms, (\d\.\d)x as long as the window block mask", out)[1]
    causal = printed(r"causal SDPA without a window: [\d.]+ ms, (\d\.\d)x as long as the window block mask", out)[1]
    en, zh = prose(nb, "how much faster a window with FlexAttention")
    assert float(causal) < float(same_kernel)  # the ratio to read is the smaller one; the prose names the lines, not numbers
    assert 'to causal SDPA (the "causal SDPA without a window" line)' in en and "“不加窗口的因果 SDPA”那一行" in zh
    assert "“同一个内核访问全部因果分数块”那一行" in zh


# ---------------------------------------------------------------------------------------------
# Lesson 13


def test_lesson13_exercise_quotes_the_printed_weight_bytes():
    nb = lesson("13_a_real_language_model")
    weights = printed(r"bytes one decode step reads: weights (\d+) MB, cache (\d+\.\d) MB", stored(nb, "results.model_decode_lines"))
    en, zh = prose(nb, "### Exercise 1: when the cache outweighs the model")
    in_both([f"{weights[1]} MB"], en, zh)
    measured = printed(r"(\d[\d,]*) bytes per token; 2,048 tokens: (\d+\.\d) MB", stored(nb, "per_token = cache.nbytes"))
    assert int(measured[1].replace(",", "")) == 2 * 30 * 3 * 64 * 4  # by hand: keys and values, 30 layers, 3 heads of 64
    assert round(2048 * 46_080 / 1e6, 1) == float(measured[2])


def test_lesson13_base_sentence_keeps_pair_zero_out():
    nb = lesson("13_a_real_language_model")
    en, zh = prose(nb, "The rotary base is ten times lesson 11's")
    assert "every feature pair but the first" in en and "除特征对 0 以外的每个特征对" in zh


# ---------------------------------------------------------------------------------------------
# Lesson 9


def test_lesson09_explicit_memory_passes_one_gib_at_its_last_length():
    nb = lesson("09_fused_kernel_by_hand")
    last = printed(r"\n4096\s+(\d+\.\d)\s", stored(nb, "extra peak memory (MiB)"))[1]
    assert 1024 < float(last) < 2048  # more than 1 GiB, not "gigabytes"
    en, zh = prose(nb, "## What the tiles save: memory")
    assert "already passes 1 GiB" in en and "已经超过 1 GiB" in zh


def test_lesson09_gap_to_sdpa_stays_a_hypothesis_until_the_tile_test_is_saved():
    nb = lesson("09_fused_kernel_by_hand")
    en, zh = prose(nb, "It is still slower than SDPA")
    kernel = saved("bench_kernel.json")
    if "tile_sizes" not in kernel:
        assert "so the cause stays a hypothesis here" in en and "这里的原因仍然只是推测" in zh
    assert "the last line gives the size of both" in prose(nb, "The tiled loop is faster than the explicit version")[0]
