"""The decode benchmark: its stack decodes what it recomputes, the harness measures, the README and lesson 12 quote the saved file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention_utils import results
from attention_utils.course.bench import decode, decode_report
from attention_utils.inference.kv_cache import KVCache

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "12_attention_at_inference.ipynb"


@pytest.mark.parametrize("key", decode.VARIANTS)
def test_the_stack_decodes_what_it_recomputes(key):
    """Prefill 5 tokens and decode 6 more one by one: the outputs equal one run over all 11, for every variant."""
    work = decode.DECODE_QUICK
    torch.manual_seed(0)
    stack = decode.AttentionStack(work, decode.VARIANTS[key], context_length=32).eval()
    x = torch.randn(2, 11, work.d_model)
    with torch.inference_mode():
        expected = stack(x)
        cache = KVCache(work.num_layers)
        pieces = [stack(x[:, :5], cache=cache)] + [stack(x[:, t : t + 1], cache=cache) for t in range(5, 11)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), expected, rtol=0, atol=1e-5)


def test_the_variants_share_key_value_heads_as_named():
    work = decode.DECODE_FULL
    assert [decode.VARIANTS[k].num_kv_heads(work) for k in ("mha", "gqa", "mqa", "window")] == [12, 3, 1, 12]


def test_one_measurement_times_both_ways_and_counts_the_cache_exactly():
    found = decode.measure_decode(decode.DECODE_QUICK, "gqa", 16, threads=1)
    work = decode.DECODE_QUICK
    # 8 query heads of 8 features share 2 key/value heads: 2 layers x 2 heads x 8 features x 16 tokens x 4 bytes, K and V
    assert found["kv_heads"] == 2
    assert found["cache_bytes"] == found["formula_bytes"] == 2 * work.num_layers * 2 * 8 * 16 * 4
    assert found["cached_ms"] > 0 and found["full_ms"] > 0
    assert found["speedup"] == pytest.approx(found["full_ms"] / found["cached_ms"])
    windowed = decode.measure_decode(work, "window", 32, threads=1)
    assert windowed["tokens_kept"] == work.window  # the ring buffer keeps the window, not the 32 tokens


def summary(speedup: float, exact: bool = True) -> dict:
    """Results holding what decode_check reads: MHA rows at two lengths."""
    rows = [{"variant": "mha", "length": length, "speedup": s, "cache_bytes": 10, "formula_bytes": 10 if exact else 11}
            for length, s in ((128, 2.0), (1024, speedup))]
    return {"rows": rows}


def test_the_targets_are_read_at_the_longest_length():
    assert [passed for _, passed in decode_report.decode_check(summary(5.1))] == [True, True]
    assert [passed for _, passed in decode_report.decode_check(summary(4.9))] == [False, True]
    assert [passed for _, passed in decode_report.decode_check(summary(9.0, exact=False))] == [True, False]


def test_the_saved_results_meet_the_targets():
    saved = results.load_saved(results.SAVED_DECODE)
    assert all(passed for _, passed in decode_report.decode_check(saved)), decode_report.decode_check(saved)
    longest = max(saved["workload"]["lengths"])
    assert {row["variant"] for row in saved["rows"] if row["length"] == longest} == set(decode.VARIANTS)
    if "error" not in saved["flex"]:
        assert all(difference < 1e-4 for difference in saved["flex"]["max_difference"].values())


def test_the_readme_shows_the_saved_decode_results():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.index("<!-- bench:end -->") < readme.index("<!-- decode:start -->")
    section = readme.split("<!-- decode:start -->\n", 1)[1].split("\n<!-- decode:end -->", 1)[0]
    assert section == decode_report.decode_markdown(results.load_saved(results.SAVED_DECODE))


def test_a_quick_decode_run_writes_only_its_own_folder(tmp_path):
    saved = results.SAVED_DECODE
    stamp = saved.stat().st_mtime_ns if saved.exists() else None
    done = subprocess.run([sys.executable, "-m", "attention_utils.course.bench", "--decode", "--quick", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "decode.json").read_text(encoding="utf-8"))
    work = decode.DECODE_QUICK
    assert sorted((row["variant"], row["length"]) for row in found["rows"]) == sorted(
        (key, length) for key in decode.VARIANTS for length in work.lengths)
    assert all((tmp_path / f"bench_decode_{language}.png").exists() for language in ("en", "zh"))
    assert (saved.stat().st_mtime_ns if saved.exists() else None) == stamp  # --quick leaves figures/ alone


def test_lesson_12_quotes_the_saved_results():
    import nbformat

    lesson = nbformat.read(LESSON, as_version=4)
    saved = results.load_saved(results.SAVED_DECODE)
    for call, expected in (("results.decode_table", results.decode_table(saved, "en")),
                           ("results.flex_summary", results.flex_summary(saved, "en"))):
        quoting = [cell for cell in lesson.cells if cell.cell_type == "code" and call in cell.source]
        assert quoting, f"lesson 12 should print {call}"
        stored = "".join(output.get("text", "") for cell in quoting for output in cell.outputs)
        assert stored.strip() == expected.strip()
    prose = "\n".join(cell.source for cell in lesson.cells if cell.cell_type == "markdown")
    # times, and ratios such as 7.5x or 7.5 倍 (a formula's "2 × layers" is not a ratio)
    typed = re.findall(r"\d[\d,.]*\s*(?:ms|毫秒)\b|\d+(?:\.\d+)?[x×](?=[\s,.;:)]|$)|\d+\.\d+\s*倍", prose)
    assert typed == [], f"benchmark numbers typed into lesson 12's prose: {typed}"
