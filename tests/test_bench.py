"""The benchmark's contenders all compute the book's attention, none looks ahead, and the harness runs."""

import csv
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

import attention_utils as au
from attention_utils import language, results
from attention_utils.results import same_process_pairs
from attention_utils.course.bench import harness, implementations, report

ROOT = Path(__file__).resolve().parents[1]
TOKENS = 7


def book() -> au.MultiHeadAttention:
    """A small module with biases everywhere; the same seed gives the same weights on every call."""
    torch.manual_seed(3)
    return au.MultiHeadAttention(8, 8, context_length=10, dropout=0.0, num_heads=2, qkv_bias=True)


class InvertedMaskAttention(au.FusedMultiHeadAttention):
    """The bug a public benchmark once shipped: a True = hide mask handed to SDPA, which reads True = may attend."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        queries, keys, values = self.project_heads(x)
        future = au.causal_mask(x.shape[1])
        return self.combine_heads(F.scaled_dot_product_attention(queries, keys, values, attn_mask=future))


def outputs_with_changed_future(module, x: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs for x, and for x with every token after position t replaced by large noise."""
    changed = x.clone()
    changed[:, t + 1 :] = 10 * torch.randn_like(changed[:, t + 1 :])
    with torch.inference_mode():
        return module(x), module(changed)


def leaks_future(module, x: torch.Tensor, t: int) -> bool:
    """True when some output at a position <= t depends on the tokens after t."""
    before, after = outputs_with_changed_future(module, x, t)
    return not torch.allclose(before[:, : t + 1], after[:, : t + 1], atol=1e-6)


@pytest.mark.parametrize("key", implementations.IMPLEMENTATIONS)
def test_every_contender_computes_the_books_attention(key):
    implementation = implementations.IMPLEMENTATIONS[key]
    module = implementation.build(book())
    x = torch.randn(3, TOKENS, 8)
    expected = book()(x)
    with torch.inference_mode():  # inference: nn.MultiheadAttention takes its fast path here
        assert torch.allclose(module.eval()(x), expected, atol=1e-5)
    if "training" in implementation.modes and key != "fused_dropout":  # with dropout the numbers must differ
        assert torch.allclose(module.train()(x), expected, atol=1e-5)


def test_the_dropout_contender_drops_in_training():
    module = implementations.IMPLEMENTATIONS["fused_dropout"].build(book()).train()
    x = torch.randn(3, TOKENS, 8)
    assert not torch.allclose(module(x), module(x))


@pytest.mark.parametrize("key", implementations.IMPLEMENTATIONS)
def test_every_contender_is_causal(key):
    module = implementations.IMPLEMENTATIONS[key].build(book()).eval()
    x = torch.randn(2, TOKENS, 8)
    for t in range(TOKENS - 1):
        assert not leaks_future(module, x, t), f"{key} looks past position {t}"
        before, after = outputs_with_changed_future(module, x, t)
        assert not torch.allclose(before[:, t + 1 :], after[:, t + 1 :], atol=1e-6)  # the change is visible later


def test_the_causality_check_catches_an_inverted_mask():
    inverted = InvertedMaskAttention.from_multihead(book()).eval()
    x = torch.randn(2, TOKENS, 8)
    assert all(leaks_future(inverted, x, t) for t in range(TOKENS - 1))


def test_loglog_slope_recovers_the_exponent():
    lengths = [128, 256, 512, 1024]
    assert math.isclose(results.loglog_slope(lengths, [3 * t**2 for t in lengths]), 2.0)
    assert math.isclose(results.loglog_slope(lengths, [0.5 * t for t in lengths]), 1.0)


def summary(fused_ms: float, fused_mib: float, same_process: float = 1.01) -> dict:
    """Results holding what the checks read: fused, bare and book at inference, T=1024, and the same-process ratio."""
    rows = [
        {"implementation": key, "mode": "inference", "length": 1024, "median_ms": ms, "memory_mib": mib}
        for key, ms, mib in (("fused", fused_ms, fused_mib), ("bare", 100.0, 100.0), ("book", 300.0, 1000.0))
    ]
    return {
        "rows": rows,
        "interleaved": {"length": 1024, "calls": 21, "fused_over_bare": same_process},
    }


def test_checks_are_ratios_of_medians():
    assert all(passed for _, passed in report.check(summary(fused_ms=104.0, fused_mib=140.0)))
    not_fast_enough = [passed for _, passed in report.check(summary(fused_ms=130.0, fused_mib=140.0))]
    assert not_fast_enough == [False, True, True]  # 300 / 130 = 2.3x the book
    too_big = [passed for _, passed in report.check(summary(fused_ms=100.0, fused_mib=160.0))]
    assert too_big == [True, False, True]
    slow_in_one_process = [passed for _, passed in report.check(summary(100.0, 140.0, same_process=1.04))]
    assert slow_in_one_process == [True, True, False]


def test_the_same_process_measurement_times_every_step():
    found = harness.measure_interleaved(implementations.QUICK, length=16, calls=4, threads=1)
    assert found["calls"] == 4 and set(found["median_ms"]) == set(implementations.SAME_PROCESS)
    assert all(ms > 0 for ms in found["median_ms"].values())
    assert set(found["ratios"]) == {f"{a}/{b}" for a, b in implementations.SAME_PROCESS_PAIRS}
    assert found["fused_over_bare"] == found["ratios"]["fused/bare"] and all(r > 0 for r in found["ratios"].values())


def test_the_same_process_measurement_keeps_every_pairs_own_medians():
    found = harness.measure_interleaved(implementations.QUICK, length=16, calls=2, threads=1, repeats=2)
    assert len(found["pairs"]) == 2 * len(implementations.SAME_PROCESS_PAIRS) and found["repeats"] == 2
    for pair in found["pairs"]:
        assert pair["first_ms"] > 0 and pair["second_ms"] > 0 and pair["ratio"] == pair["first_ms"] / pair["second_ms"]


def test_pair_medians_of_an_older_file_come_from_steps_timed_in_one_pair_only():
    older = {"median_ms": {"a": 8.0, "b": 99.0, "c": 99.0, "d": 5.0}, "ratios": {"a/b": 0.4, "b/c": 3.0, "c/d": 2.0}}
    found = {(p["first"], p["second"]): (p["first_ms"], p["second_ms"]) for p in same_process_pairs(older)}
    assert found == {("a", "b"): (8.0, 20.0), ("b", "c"): (None, None), ("c", "d"): (10.0, 5.0)}  # by hand: 8 / 0.4, 2 x 5


def test_the_tile_size_timing_pairs_two_tiles_and_sdpa():
    found = harness.time_tile_sizes(length=64, calls=2, threads=1, sizes=(8, 32))
    assert set(found["median_ms"]) == {"tiled_8", "tiled_32", "sdpa"} and found["sizes"] == [8, 32]
    assert set(found["ratios"]) == {"tiled_8/tiled_32", "tiled_32/sdpa"} and all(r > 0 for r in found["ratios"].values())


def test_the_explicit_kernel_is_causal_attention():
    queries, keys, values = (torch.randn(2, 3, 9, 4) for _ in range(3))
    expected = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
    for key, (_, attend) in implementations.KERNELS.items():
        assert torch.allclose(attend(queries, keys, values), expected, atol=1e-5), key


def test_kernel_memory_is_measured_in_a_fresh_process():
    found = harness.run_in_child(harness.measure_kernel, "explicit", 512, 1)
    assert found["median_ms"] > 0
    # eight (512, 512) float32 matrices of scores are 8 MiB; the masked scores and the weights are more of them
    assert found["memory_mib"] >= 8


def test_readme_section_is_replaced_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- bench:start -->\nold table\n<!-- bench:end -->\nafter\n", encoding="utf-8")
    report.update_readme("new table", readme)
    assert readme.read_text(encoding="utf-8") == "intro\n<!-- bench:start -->\nnew table\n<!-- bench:end -->\nafter\n"


def test_quick_run_writes_one_row_per_configuration(tmp_path):
    figure = ROOT / "figures" / "bench_time_en.png"
    stamp = figure.stat().st_mtime_ns if figure.exists() else None
    result = subprocess.run(
        [sys.executable, "-m", "attention_utils.course.bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "results.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    runs = [(key, mode, length) for (mode, length), keys in harness.plan(implementations.QUICK).items() for key in keys]
    assert sorted((row["implementation"], row["mode"], int(row["length"])) for row in rows) == sorted(runs)
    uncompiled = {key for key, implementation in implementations.IMPLEMENTATIONS.items() if not implementation.compiles}
    assert {row["implementation"] for row in rows} == uncompiled
    for lang in language.LANGUAGES:
        assert (tmp_path / f"bench_time_{lang}.png").exists() and (tmp_path / f"bench_memory_{lang}.png").exists()
    assert (figure.stat().st_mtime_ns if figure.exists() else None) == stamp  # --quick leaves figures/ alone


def test_the_readme_shows_the_saved_results():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- bench:start -->\n", 1)[1].split("\n<!-- bench:end -->", 1)[0]
    assert section == report.markdown(results.load_saved())


def test_lesson_8_quotes_the_saved_results():
    import nbformat

    lesson = nbformat.read(ROOT / "notebooks" / "08_fused_attention.ipynb", as_version=4)
    quoting = [cell for cell in lesson.cells if "results.headline" in cell.source]
    assert quoting, "lesson 8 should print its benchmark numbers with results.headline"
    stored = "".join(output.get("text", "") for cell in quoting for output in cell.outputs)
    assert stored.strip() == "\n".join(results.headline(results.load_saved(), "en")).strip()
    prose = "\n".join(cell.source for cell in lesson.cells if cell.cell_type == "markdown")
    # times and time ratios come only from the saved results (memory in MiB/GiB is also computed by formula there)
    typed = re.findall(r"\d[\d,.]*\s*(?:ms|s|GB|毫秒|秒)\b|\d+(?:\.\d+)?\s*[x×](?=[\s,.;:)]|$)", prose)
    assert typed == [], f"benchmark numbers typed into lesson 8's prose: {typed}"


def test_kernels_timed_together_report_every_kernel():
    found = harness.time_kernels_together(length=64, calls=3, threads=1)
    assert found["calls"] == 3 and set(found["median_ms"]) == set(implementations.KERNELS)
    assert all(ms > 0 for ms in found["median_ms"].values())
    assert set(found["ratios"]) == {"explicit/tiled", "tiled/sdpa"} and all(r > 0 for r in found["ratios"].values())


def test_kernels_are_timed_as_neighbouring_pairs_in_alternating_order(monkeypatch):
    """Lesson 8's fair method: explicit against tiled, then tiled against SDPA, each pair back to back, first one
    first, then the other; never a fixed rotation in which one kernel always follows the explicit version."""
    calls = []
    fake = {key: (label, lambda q, k, v, key=key: calls.append(key)) for key, (label, _) in implementations.KERNELS.items()}
    monkeypatch.setattr(harness, "KERNELS", fake)
    found = harness.time_kernels_together(length=8, calls=4, threads=1)
    timed = calls[len(fake):]  # after one warm-up call each
    alternating = ["explicit", "tiled", "tiled", "explicit"] * 2 + ["tiled", "sdpa", "sdpa", "tiled"] * 2
    assert timed == alternating
    assert set(found["ratios"]) == {"explicit/tiled", "tiled/sdpa"}


def readme_halves() -> tuple[str, str]:
    """The README's benchmark section split into its English and its Chinese half (at the Chinese set-up line)."""
    section = report.markdown(results.load_saved())
    english, chinese = section.split("\n由 `make bench` 于 ", 1)
    return english, "由 `make bench` 于 " + chinese


def table_rows(half: str) -> dict[str, list[str]]:
    """The table of one half: {first cell: the other cells}, header and rule left out."""
    rows = [line.strip("|").split(" | ") for line in half.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [cell.strip() for cell in cells[1:]] for cells in rows[1:]}


def test_the_readme_section_has_an_english_and_a_chinese_half():
    english, chinese = readme_halves()
    assert "figures/bench_time_en.png" in english and "figures/bench_memory_en.png" in english
    assert "figures/bench_time_zh.png" in chinese and "figures/bench_memory_zh.png" in chinese
    assert "_en.png" not in chinese and "_zh.png" not in english
    assert not re.search(r"[\u4e00-\u9fff]", english), "Chinese in the English half"
    for words in ("Written by", "Traps", "Timed in one process", "implementation", "calls each side"):
        assert words not in chinese, words
    assert "| 实现 | 推理耗时（毫秒） |" in chinese and "每种各调用" in chinese and "每边" not in chinese


def test_the_chinese_table_holds_the_saved_numbers_under_the_glossarys_names():
    saved = results.load_saved()
    english, chinese = readme_halves()
    zh_rows, en_rows = table_rows(chinese), table_rows(english)
    labels = {key: implementation.label for key, implementation in implementations.IMPLEMENTATIONS.items()}
    assert labels["wrapper"][1].startswith("包装器") and labels["explicit"][1].startswith("合并 QKV 投影")
    for row in saved["rows"]:
        if row["length"] != 1024:
            continue
        en_label, zh_label = labels[row["implementation"]]
        column = 0 if row["mode"] == "inference" else 3
        median = str(round(row["median_ms"]))  # read from the JSON, not from the report
        assert zh_rows[zh_label][column].startswith(median + "（"), (zh_label, zh_rows[zh_label])
        assert en_rows[en_label][column].startswith(median + " ("), (en_label, en_rows[en_label])
        assert zh_rows[zh_label][column + 2] == en_rows[en_label][column + 2] == str(round(row["memory_mib"]))
    assert len(zh_rows) == len(en_rows)


def test_every_saved_note_has_its_chinese():
    for note in results.load_saved()["notes"]:
        chinese = report.note_zh(note)
        assert chinese != note and re.search(r"[\u4e00-\u9fff]", chinese), note
        assert sorted(re.findall(r"\d+", chinese)) == sorted(re.findall(r"\d+", note)), (note, chinese)  # the same numbers
    stopped = report.note_zh("wrapper of single heads stopped at training, T=2048: out of memory")
    assert stopped == "包装器（wrapper）在训练、T=2048 时中止：out of memory"
    assert report.note_zh("a note nobody has translated") == "a note nobody has translated"


def test_the_headline_follows_the_language():
    saved = results.load_saved()
    english, chinese = results.headline(saved, "en"), results.headline(saved, "zh")
    assert len(english) == len(chinese) == 7  # a heading, four pairs, two training lines
    for en, zh in zip(english, chinese):
        assert re.findall(r"\d+(?:\.\d+)?", en) == re.findall(r"\d+(?:\.\d+)?", zh), (en, zh)
    assert "各调用 15 次" in chinese[0] and "合并 QKV 投影" in chinese[1] and "耗时之比" in chinese[6]
    language.choose_language("zh")
    try:
        assert results.headline(saved) == chinese
    finally:
        language.choose_language("en")
    assert results.headline(saved) == english
