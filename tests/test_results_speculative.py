"""Lesson 18's readers of a saved speculative bench: the verdict lines, checked on a run made up by hand."""

from __future__ import annotations

from attention_utils import results


def row(draft: str, k: int, speedup: float, predicted: float) -> dict:
    return {"draft": draft, "k": k, "alpha": 0.9, "tokens_per_pass": 3.0, "expected_tokens_per_pass": 3.1,
            "draft_cost": 0.3, "speedup": speedup, "predicted": predicted, "same": True}


RUN = {"summary": [row("int8", 2, 0.998, 1.0), row("int8", 4, 1.3, 1.2), row("q4 compiled", 4, 1.6, 2.1),
                   row("q4 compiled", 8, 2.0, 2.2), row("early exit", 2, 0.4, 0.3)]}


def test_the_verdicts_name_the_fastest_the_misses_and_the_slower_rows_as_printed():
    lines = results.speculative_verdict_lines(RUN)
    assert lines[0] == "✅ fastest: q4 model, compiled at k = 8, 2.00× plain float32 greedy decoding (target ≥ 1.5×)"
    assert lines[1].startswith("✅ every run gave plain greedy decoding's tokens: True")
    # each draft's fastest row against its prediction: 1.3/1.2 = +8%, 2.0/2.2 = -9%, 0.4/0.3 = +33%
    assert lines[2:5] == ["✅ int8 model (k = 4): measured 1.30×, predicted 1.20× (+8%; target within ±20%)",
                          "✅ q4 model, compiled (k = 8): measured 2.00×, predicted 2.20× (-9%; target within ±20%)",
                          "❌ early exit (k = 2): measured 0.40×, predicted 0.30× (+33%; target within ±20%)"]
    assert lines[5] == "slower than the model alone: early exit k = 2 (0.40×)"  # 0.998 prints 1.00×: not listed as slower
    chinese = results.speculative_verdict_lines(RUN, "zh")
    assert chinese[0] == "✅ 最快：q4 模型（编译后），k = 8，普通 float32 贪心解码的 2.00 倍（目标 ≥ 1.5 倍）"
    assert results.draft_name("q4 compiled", "zh") == "q4 模型（编译后）"


def test_a_run_below_the_target_is_marked():
    slow = {"summary": [row("int8", 4, 1.19, 1.15)]}
    assert results.speculative_verdict_lines(slow)[0].startswith("❌ fastest: int8 model at k = 4, 1.19×")


def test_another_language_is_refused():
    import pytest

    with pytest.raises(ValueError, match="'en' or 'zh'"):
        results.speculative_verdict_lines(RUN, "fr")
