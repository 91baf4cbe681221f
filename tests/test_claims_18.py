"""Lesson 18's sentences that read a stored number agree with it, in both languages (as tests/test_lesson_claims.py).

The lesson's stored outputs are re-made whenever the lesson is executed, and the numbers of sections 1 and 3
come from `make bench BENCH_ARGS=--speculative`; a rerun with other numbers fails here until the sentence is re-read.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attention_utils import results
from test_lesson_claims import lesson, printed, prose, stored_text

NAME = "18_speculative_decoding.ipynb"


@pytest.fixture(scope="module")
def speculative():
    return lesson(NAME)


@pytest.fixture(scope="module")
def saved():
    return results.load_saved(results.SAVED_SPECULATIVE)


def test_the_roofline_cost_is_one_below_the_ridge_and_the_measured_cost_is_higher(speculative):
    """Section 1: 'while the intensity stays below the ridge ... c(k) stays at 1.00'; the summary: 'the measured cost was higher'."""
    out = stored_text(speculative)
    ridge = float(printed(r"ridge at ([\d.]+) FLOPs per byte", out)[1])
    rows = re.findall(r"^\s*(\d)\s+[\d.]+\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.MULTILINE)
    assert len(rows) == 9
    assert all(roofline == "1.00" for _, intensity, roofline, _ in rows if float(intensity) < ridge)
    assert re.search(r"the measured c\(\d\) is above the roofline's: True", out)
    assert re.search(r"checking (\d+) tokens in one pass is cheaper than \1 decode steps: True", out)
    for language, words in (("en", "the measured cost was higher"), ("zh", "实测的代价更高")):
        assert words in prose(speculative, language)


def test_every_greedy_run_gave_the_plain_tokens(speculative):
    """Section 2: 'Every line says True'."""
    out = stored_text(speculative)
    same = re.findall(r"same: (True|False)", out)
    assert len(same) == 6 and set(same) == {"True"}
    assert "same tokens as plain greedy decoding: True" in out
    assert "Every line says `True`" in prose(speculative, "en") and "每一行都是 `True`" in prose(speculative, "zh")


def test_the_rule_passes_and_the_shortcut_fails(speculative):
    """Section 4: 'the rule passing and the version without resampling failing, with p far below that threshold'."""
    out = stored_text(speculative)
    rule = printed(r"the rule\s+10,000 pairs: chi-square p = ([\d.]+); consistent with the model \(p > 0.001\): (\w+)", out)
    shortcut = printed(r"no resampling\s+10,000 pairs: chi-square p < 1e-6; consistent with the model \(p > 0.001\): (\w+)", out)
    assert float(rule[1]) > 1e-3 and rule[2] == "True"
    assert shortcut[1] == "False"
    assert "without resampling failing" in prose(speculative, "en") and "没有通过" in prose(speculative, "zh")


def test_section_3_reads_the_saved_run(speculative, saved):
    """Section 3 and the summary: the model drafts right on most tokens at half a step or more;
    the early exit slower than the model alone at every k, with the lowest alpha."""
    rows = saved["summary"]
    for name in ("int8", "bfloat16"):
        assert all(r["alpha"] > 0.5 and r["draft_cost"] >= 0.45 for r in rows if r["draft"] == name)
    early = [r for r in rows if r["draft"] == "early exit"]
    assert early and all(r["speedup"] < 1 for r in early)
    assert max(r["alpha"] for r in early) < min(r["alpha"] for r in rows if r["draft"] != "early exit")
    assert all(r["same"] for r in rows)
    for language, words in (("en", "early exit was slower than the model alone"), ("zh", "提前退出比模型单独解码还慢")):
        assert words in prose(speculative, language)


def test_the_few_row_products_read_as_the_stored_table_shows(speculative):
    """Section 1: 'where x @ W.T grows with the rows much faster than (W @ x.T).T ... On the machine that stored this
    lesson it was so'; the summary: 'part of the gap was the kernel torch picks for a few rows'."""
    out = stored_text(speculative)
    rows = {int(r): (float(right), float(left))
            for r, right, left in re.findall(r"^\s*(\d)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+([\d.]+)$", out, re.MULTILINE)}
    assert sorted(rows) == [1, 2, 3, 5] and rows[1] == (1.0, 1.0)
    assert all(right > 1.5 for right, _ in (rows[2], rows[3]))  # x @ W.T grows with the rows
    assert all(left < 1.3 for _, left in (rows[2], rows[3]))  # (W @ x.T).T stays near one row's time
    assert all(left < right for right, left in rows.values() if right > 1)
    differ = float(printed(r"matrices, \d+ threads; the two ways differ by at most ([\d.e+-]+) on two rows", out)[1])
    assert differ < 1e-4  # the same numbers, up to float32 rounding
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")  # its class note quotes row 2
    assert f"two rows took {rows[2][0]:.2f}× one row the first way and {rows[2][1]:.2f}× the second" in readme
    for language, words in (("en", "On the machine that stored this lesson it was so"), ("zh", "保存本课输出的那台机器上正是这样"),
                            ("en", "part of the gap was the kernel torch picks for a few rows"),
                            ("zh", "差距有一部分来自 torch 为少数几行挑选的内核")):
        assert words in prose(speculative, language)


def table_row(table: str, name: str, k: int) -> tuple[str, ...]:
    """alpha, d, measured and predicted speed-up of one draft and k in a printed table (the numbers as printed)."""
    found = printed(rf"\n{re.escape(name)}\s+{k}\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+([\d.]+)×\s+([\d.]+)×", table)
    return found.groups()


def test_the_second_machine_and_weights_left_as_the_saved_run_measured_them(speculative):
    """The paragraphs after the second machine's tables, the summary and section 6 quote their alpha, d, speed-ups,
    steps and c(4) in both languages, and say only what they show: int8's draft cheaper there; the q4 drafts right
    most often; compiled q4 the fastest row; against the faster weights-left step every draft dearer, int8 at most
    a little faster and slower at k = 8, compiled q4 still faster but far below its nn.Linear row."""
    out = stored_text(speculative)
    first = out[:out.index("with bfloat16 instructions), nn.Linear")]
    second = out[out.index("with bfloat16 instructions), nn.Linear"):out.index("weights-left, for the model")]
    left = out[out.index("weights-left, for the model"):]
    (_, d1, speed1, _), (_, d2, speed2, predicted2) = table_row(first, "int8 model", 4), table_row(second, "int8 model", 4)
    alpha_q4, d_q4, speed_q4, predicted_q4 = table_row(second, "q4 model", 4)
    alpha_c, d_c, speed_c, predicted_c = table_row(second, "q4 model, compiled", 8)
    _, d_left, speed_left, predicted_left = table_row(left, "int8 model", 8)
    _, d_c_left, fastest, predicted_fastest = table_row(left, "q4 model, compiled", 8)
    assert float(d2) < float(d1) and float(speed2) > float(speed1)
    alphas = [float(a) for a in re.findall(r"\n[a-z0-9 ,]+?\s+\d\s+([\d.]+)\s", second)]
    assert float(alpha_q4) == float(alpha_c) == max(alphas)  # "the q4 drafts were right most often"
    assert f"fastest: q4 model, compiled at k = 8, {speed_c}×" in second
    int8_left = [float(speed) for speed in re.findall(r"\nint8 model\s+\d\s+(?:[\d.]+\s+){4}([\d.]+)×", left)]
    assert len(int8_left) == 3 and f"{max(int8_left):.2f}" == "1.07" and float(speed_left) < 1  # "at most 1.07×", "lost time"
    step = printed(r"nn.Linear: one decode step ([\d.]+) ms", second)[1]
    left_step, cost_left, cost = printed(r"one decode step ([\d.]+) ms; c\(4\) = ([\d.]+) against ([\d.]+)", out).groups()
    assert float(left_step) < float(step) / 1.5 and float(cost) < float(cost_left) < 2  # "though not quite as much"
    assert float(d_left) > float(d2) and float(d_c_left) > float(d_c)  # "each cost more of the faster step"
    assert printed(r"fastest against plain weights-left decoding: ([\d.]+)x \(q4 model, compiled, k = 8\)", left)[1] == fastest
    assert 1 < float(fastest) < float(speed_c) / 1.5  # "still ... faster"; the fairer comparison "gives a smaller answer"
    for language in ("en", "zh"):
        text = prose(speculative, language)
        for number in (d1, d2, speed1, speed2, predicted2, alpha_q4, d_q4, speed_q4, predicted_q4, d_c, speed_c, predicted_c,
                       step, left_step, cost_left, cost, d_left, speed_left, predicted_left, d_c_left, fastest, predicted_fastest):
            assert number in text, (language, number)



def test_only_the_draft_is_compiled_and_the_lesson_says_so(speculative):
    """Section 3: 'only the draft is compiled ... 21.5 ms for a compiled weights-left float32 step against 26.8 ms eager':
    the printed line, lesson 14's saved bench on the same machine kind, and both languages agree."""
    out = stored_text(speculative)
    eager, compiled = printed(r"a float32 weights-left step ([\d.]+) ms eager, ([\d.]+) ms compiled", out).groups()
    saved = results.load_saved(results.SAVED_MODEL_BF16)
    assert eager == f"{results.model_timing(saved, 'float32 weights-left')['ms']:.1f}"
    assert compiled == f"{results.model_timing(saved, 'float32 weights-left compiled')['ms']:.1f}"
    assert float(compiled) < float(eager)
    for language, words in (("en", "only the draft is\ncompiled"), ("zh", "只有草稿编译过")):
        text = prose(speculative, language)
        assert eager in text and compiled in text and words.replace("\n", " ") in text, language
