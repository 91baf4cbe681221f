"""Sentences that read a stored number agree with it (issue 28, item 4).

Each test takes a number from a lesson's stored output and the sentence that reads it, in both
languages, and checks that they agree: the count the text quotes is the count printed, and a word
like "slower" goes with a ratio below 1. Re-executing a lesson or re-running `make bench` with other
numbers then fails here until the sentence is re-read. Where a reference exists outside the lesson
(the book's printed mask), it is typed in here, not taken from the lesson.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
BOOK_MASK_KEPT = 21  # entries kept by the book's printed mask (section 3.5.2), counted on the page
BOOK_MASK_FIRST_ROW = "[2, 2, 0, 2, 2, 0]"


def lesson(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def stored_text(nb: nbformat.NotebookNode) -> str:
    """Every stored stream output of the lesson, in order."""
    return "".join(output.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                   for output in cell.get("outputs", []) if output.get("output_type") == "stream")


def prose(nb: nbformat.NotebookNode, language: str) -> str:
    """The markdown cells of one language, joined (line breaks inside a paragraph become spaces)."""
    cells = [cell.source for cell in nb.cells if cell.cell_type == "markdown" and language in cell.metadata.get("tags", [])]
    return re.sub(r"(?<!\n)\n(?!\n)", " ", "\n\n".join(cells))


def printed(pattern: str, text: str) -> re.Match:
    found = re.search(pattern, text)
    assert found, f"nothing matches {pattern!r}: was a print or a sentence changed, or the lesson not executed?"
    return found


def quoted(pattern: str, text: str) -> list[str]:
    found = re.findall(pattern, text)
    assert found, f"the text no longer says {pattern!r}: update this test with the new sentence"
    return found


@pytest.fixture(scope="module")
def dropout():
    return lesson("06_dropout.ipynb")


def test_lesson06_book_mask_count(dropout):
    kept = int(printed(r"kept in the book's mask: (\d+) of 36", stored_text(dropout))[1])
    assert kept == BOOK_MASK_KEPT
    assert {int(n) for n in quoted(r"(\d+) of 36 kept", prose(dropout, "en"))} == {kept}
    assert {int(n) for n in quoted(r"保留 36 个中的 (\d+) 个", prose(dropout, "zh"))} == {kept}


def test_lesson06_book_mask_first_row(dropout):
    code = "".join(cell.source for cell in dropout.cells if cell.cell_type == "code")
    assert printed(r"book_mask = torch\.tensor\(\[(\[[\d, ]+\])", code)[1] == BOOK_MASK_FIRST_ROW
    for language in ("en", "zh"):
        assert f"`{BOOK_MASK_FIRST_ROW}`" in prose(dropout, language)


def test_lesson06_this_machine_draws_the_book_mask(dropout):
    """The text says the machine that stored the outputs drew the book's mask; the stored line must say True."""
    assert printed(r"nn\.Dropout on this computer draws the book's mask: (\w+)", stored_text(dropout))[1] == "True"
    assert quoted(r"its `nn\.Dropout` drew the book's mask", prose(dropout, "en"))
    assert quoted(r"它的 `nn\.Dropout` 抽出的就是书中的掩码", prose(dropout, "zh"))


def test_lesson06_hand_drawn_count(dropout):
    kept = int(printed(r"kept: (\d+) of 36 entries", stored_text(dropout))[1])
    assert {int(n) for n in quoted(r"kept (\d+) of the 36 entries", prose(dropout, "en"))} == {kept}
    assert {int(n) for n in quoted(r"在 36 个元素中保留了 (\d+) 个", prose(dropout, "zh"))} == {kept}


def test_lesson07_seed_coincidence_numbers():
    """The four numbers the text calls the wrapper's first row are in it, and at features 4-5 and 10-11 of 'Your'."""
    nb = lesson("07_multi_head_attention.ipynb")
    outputs = stored_text(nb)
    wrapper_row = [float(x) for x in printed(r"torch\.Size\(\[2, 6, 4\]\)\ntensor\(\[\[([-\d., ]+)\]", outputs)[1].split(",")]
    features = [float(x) for x in printed(r"tensor\(\[([-\d.,\s]+)\]\)\ntensor\(\[\[", outputs)[1].split(",")]
    named = [float(x.replace("−", "-")) for x in
             printed(r"(−?\d\.\d{4}), (−?\d\.\d{4}) \(features 4–5\) and (−?\d\.\d{4}),\s+(−?\d\.\d{4})", prose(nb, "en")).groups()]
    assert named == wrapper_row == [features[4], features[5], features[10], features[11]]


def test_lesson09_gap_to_sdpa_and_crossed_tiles():
    nb = lesson("09_fused_kernel_by_hand.ipynb")
    outputs = stored_text(nb)
    gap = printed(r"the tiled loop takes (\d+\.\d) times as long as SDPA", outputs)[1]
    assert f"by the third line it takes {gap} times as long" in prose(nb, "en")
    assert f"耗时是 SDPA 的 {gap} 倍" in prose(nb, "zh")
    row = printed(r"\n1024\s+64\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+) / (\d+)", outputs)
    crossed, computed = row[2], row[4]
    assert f"they are {crossed} of the {computed}" in prose(nb, "en")
    assert f"{computed} 个需要计算的分数块中有 {crossed} 个" in prose(nb, "zh")


@pytest.fixture(scope="module")
def fixed_memory():
    return lesson("16_fixed_size_memory.ipynb")


def test_lesson16_b_fades_once(fixed_memory):
    """B is written by the second write and read after the third: one decay, 7 x 0.5 (by hand), as the cell prints."""
    assert printed(r"decay 0\.5: \[5\.0, 7\.0, ([\d.]+)\]", stored_text(fixed_memory))[1] == "3.5" == f"{7 * 0.5}"
    assert "comes back as $7 \\times 0.5 = 3.5$" in prose(fixed_memory, "en")
    assert "读出来就是 $7 \\times 0.5 = 3.5$" in prose(fixed_memory, "zh")


def test_lesson16_thread_count_is_the_saved_one(fixed_memory):
    saved = json.loads((NOTEBOOKS.parent / "figures" / "bench_recurrent.json").read_text(encoding="utf-8"))
    assert int(printed(r"make bench \([^)]*, (\d+) threads\):", stored_text(fixed_memory))[1]) == saved["environment"]["threads"]
    for language in ("en", "zh"):
        assert not re.search(r"one thread on|单线程测的", prose(fixed_memory, language))


def seeds_text(language: str, *accuracies: float) -> str:
    """'a, b, c and d' (Chinese: 'a、b、c 和 d'), the way the text lists one number per seed."""
    shown = [f"{a:.2f}" for a in accuracies]
    comma, last = ("、", " 和 ") if language == "zh" else (", ", " and ")
    return comma.join(shown[:-1]) + last + shown[-1]


@pytest.mark.parametrize("part, model, key_size, pairs", [
    ("capacity", "linear", 8, 4), ("capacity", "linear", 8, 24), ("capacity", "linear", 16, 4),
    ("capacity", "linear", 16, 24), ("capacity", "delta", 8, 4), ("capacity", "delta", 16, 4),
    ("capacity", "window", 8, 4), ("capacity", "hybrid_window", 8, 4), ("capacity", "two_linear", 8, 24),
    ("rebind", "linear", 32, 2), ("rebind", "linear", 32, 8), ("rebind", "softmax", 32, 2),
    ("rebind", "softmax", 32, 8), ("rebind", "delta", 32, 8),
    ("cliff", "delta", 16, 2), ("cliff", "delta", 16, 16), ("cliff", "delta", 8, 2), ("cliff", "delta", 8, 16),
    ("cliff", "linear", 16, 2), ("cliff", "linear", 16, 16),
    ("boundary", "linear", 8, 2), ("boundary", "linear", 8, 8), ("boundary", "delta", 8, 2), ("boundary", "delta", 8, 8),
    ("boundary", "gated_delta", 8, 8)])
def test_lesson16_grid_readings_quote_both_seeds_of_the_saved_grid(fixed_memory, part, model, key_size, pairs):
    """Each sentence that reads a grid cell quotes every seed as the saved file has them (a re-run grid fails here)."""
    saved = json.loads((NOTEBOOKS.parent / "figures" / "bench_recall.json").read_text(encoding="utf-8"))
    found = [row["accuracy"] for row in sorted(saved["rows"], key=lambda r: r["seed"]) if row["part"] == part
             and row["model"] == model and row["key_size"] == key_size and row["pairs"] == pairs]
    assert len(found) == 4
    for language in ("en", "zh"):
        assert seeds_text(language, *found) in prose(fixed_memory, language), (language, found)


@pytest.fixture(scope="module")
def caches():
    return lesson("15_shrinking_the_kv_cache.ipynb")


def test_lesson15_the_bench_ratios_the_text_reads(caches):
    """The smaller caches' decode steps, as multiples of the contiguous one, are the printed ones, and above 1 (slower)."""
    outputs = stored_text(caches)
    for length in (512, 128):
        ratios = {kind: printed(rf"\n{length}\s+{kind}\s+[\d.]+\s+[\d.]+%\s+[\d.]+\s+(\d\.\d\d)", outputs)[1]
                  for kind in ("int8", "int4")}
        paged = printed(rf"\n{length}\s+float32, pages of 16\s+[\d.]+\s+[\d.]+%\s+[\d.]+\s+(\d\.\d\d)", outputs)[1]
        assert all(float(r) > 1 for r in (*ratios.values(), paged)), "the text says the smaller caches are slower"
        for language in ("en", "zh"):
            for ratio in (*ratios.values(), paged):
                assert ratio in prose(caches, language), f"T = {length}: the ratio {ratio} is not read in the {language} text"


def test_lesson15_sequences_in_8_gib(caches):
    """Printed counts equal the hand count 8 GiB // (4,096 tokens × bytes per token), and the text quotes them."""
    outputs, budget = stored_text(caches), 8 * 2**30
    by_hand = {"float32 as shipped": 2 * 30 * 3 * 64 * 4, "int8": (64 + 16 + 64 + 8) * 90, "int4": (32 + 16 + 32 + 8) * 90,
               r"MLA \(256 \+ 32\), float32": (256 + 32) * 30 * 4}
    for name, per_token in by_hand.items():
        count = int(printed(rf"\n{name}\s+[\d,]+\s+[\d.,]+\s+(\d+)\n", outputs)[1])
        assert count == budget // (4096 * per_token)
        assert f" {count} " in prose(caches, "en") and f"{count} 条" in prose(caches, "zh")


def test_lesson15_doubling_row(caches):
    mib, times = printed(r"doubling \(lesson 12\)\s+([\d.]+)\s+(\d\.\d\d)", stored_text(caches)).groups()
    assert f"take {mib} MiB, {times} times" in prose(caches, "en")
    assert f"占 {mib} MiB，是 {times} 倍" in prose(caches, "zh")


def test_lesson15_weights_and_cache_shares(caches):
    """The shares printed for weights and cache equal a hand count (538,060,032 float32 weight bytes, 46,080 cache bytes
    per token, the q4 file's 123,118,848), and the text quotes each printed share and perplexity."""
    outputs = stored_text(caches)
    weights, q4, per_token = 538_060_032, 123_118_848, 46_080
    int4 = float(printed(r"\nint4 cache\s+538\s+([\d,]+)\s", outputs)[1].replace(",", ""))
    for batch, length in ((1, 1024), (16, 4096)):
        total = weights / batch + per_token * length
        line = printed(rf"batch {batch}, {length:,} tokens: float32 reads ([\d,]+) MB per token, (\d+)% of it weights; left after "
                       r"shrinking the weights (\d+)%, the cache (\d+)%, both (\d+)%", outputs).groups()
        by_hand = (f"{total / 1e6:,.0f}", f"{weights / batch / total:.0%}", f"{(q4 / batch + per_token * length) / total:.0%}",
                   f"{(weights / batch + int4 * length) / total:.0%}", f"{(q4 / batch + int4 * length) / total:.0%}")
        assert line == tuple(s.rstrip("%") for s in by_hand)
        for share in line[1:]:
            assert f"{share}%" in prose(caches, "en") and f"{share}%" in prose(caches, "zh")
    for name in ("q4 weights", "int4 cache", r"q4 \+ int4 cache"):
        perplexity = printed(rf"\n{name}\s+\d+\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+(\d+\.\d\d)\n", outputs)[1]
        assert perplexity in prose(caches, "en") and perplexity in prose(caches, "zh"), name


def test_lesson14_kernel_rows_and_the_bench_profile(decoding):
    """Section 7: both kernels read well below the bandwidth roof, bfloat16's roof is below float32's; section 4: mm most."""
    outputs = stored_text(decoding)
    bandwidth = _number(r"  bandwidth: ([\d.]+) GB/s; matmul", outputs)
    for name in ("int8 kernel", "bfloat16 F.linear"):
        assert _number(rf"{name}\s*: +[\d.]+ ms for +\d+ MB, +([\d.]+) GB/s", outputs) < 0.75 * bandwidth  # "well below"
    float32, bfloat16 = (_number(rf"{name} ([\d.]+)", printed(r"compute roofs[^\n]*", outputs)[0]) for name in ("float32", "bfloat16"))
    assert bfloat16 < 0.5 * float32  # "far below float32's"
    assert _number(r"matrix products (\d+)% of the steps' own CPU time", outputs) > 50  # "most of the time"


@pytest.fixture(scope="module")
def decoding():
    return lesson("14_why_decoding_is_slow.ipynb")


def _number(pattern: str, text: str) -> float:
    return float(printed(pattern, text)[1].replace(",", ""))


def test_lesson14_decode_and_prefill_either_side_of_the_bench_ridge(decoding):
    outputs = stored_text(decoding)
    ridge = _number(r"the bench's ridge: ([\d.]+)", outputs)
    assert _number(r"arithmetic intensity: ([\d.]+)", outputs) < ridge / 5  # "far left"
    assert _number(r"prefill of 128 tokens: ([\d.]+)", outputs) > 5 * ridge  # "far to the right"
    assert f"far left of the bench's ridge ({ridge:.1f})" in prose(decoding, "en") and f"远在基准测试的脊点（{ridge:.1f}）" in prose(decoding, "zh")


def test_lesson14_the_step_grows_with_the_cache_more_than_its_bytes_yet_little(decoding):
    """Section 5: the step grows more than the cache's bytes predict on both machines, per cached token over the whole
    span more than three times its bytes' time, yet under a tenth of the step; the same step in another loop of the run
    differs by more (section 3's optional part), which is why section 5 compares lengths within one loop."""
    outputs = stored_text(decoding)
    prefill, step, read = printed(r"prefill takes ([\d.]+)x as long, the decode step ([\d.]+)x, and the step reads ([\d.]+)x",
                                  outputs).groups()
    assert float(prefill) > 3 * float(step)
    assert f"the prefill took {prefill} times as long, the decode step {step} times" in prose(decoding, "en").replace("\n", " ")
    assert f"预填充的耗时变成 {prefill} 倍，一步解码只是 {step} 倍" in prose(decoding, "zh")
    predicted = printed(r"more tokens: ([\d.]+) ms", outputs)[1]
    token_bytes_us, token_flops, token_flops_us = printed(
        r"one more cached token: reading its [\d,]+ bytes takes ([\d.]+) µs, its ([\d,]+) FLOPs ([\d.]+) µs", outputs).groups()
    assert f"{token_flops} FLOPs, {token_flops_us} µs" in " ".join(prose(decoding, "en").split())
    assert f"多做 {token_flops} 次浮点运算，要 {token_flops_us} 微秒" in prose(decoding, "zh")
    measured, per_token = printed(r"measured from T = 32 to 512: \+([\d.]+) ms a step, ([\d.]+) µs per added token", outputs).groups()
    assert float(per_token) == pytest.approx(1e3 * float(measured) / 480, abs=0.1)  # the measured ms over 480 tokens
    longest = _number(r"T = 512: prefill +\d+ ms, decode step +([\d.]+) ms", outputs)
    other_measured, other_per_token, other_bytes_us = printed(
        r"the second machine, T = 32 to 512: \+([\d.]+) ms a step, ([\d.]+) µs per added token against ([\d.]+) µs for its bytes",
        outputs).groups()
    other = [r for r in _saved_run("bench_model_bf16_cpu.json")["rows"] if (r["weights"], r["batch"]) == ("float32", 1)]
    lengths = {r["length"]: r["decode_ms"] for r in other}
    assert float(other_per_token) == pytest.approx(1e3 * (lengths[512] - lengths[32]) / 480, abs=0.05)  # by hand from the file
    other_halves = printed(r"the second machine, T = 32 to 512: [^\n]*; its halves ([\d.]+) and ([\d.]+) µs", outputs).groups()
    by_hand_other = (1e3 * (lengths[128] - lengths[32]) / 96, 1e3 * (lengths[512] - lengths[128]) / 384)
    assert other_halves == tuple(f"{h:.1f}" for h in by_hand_other) and max(by_hand_other) < 1.2 * min(by_hand_other)  # "evenly"
    assert f"evenly ({other_halves[0]} and {other_halves[1]} µs in its two halves)" in " ".join(prose(decoding, "en").split())
    assert f"前后两段很均匀（{other_halves[0]} 和 {other_halves[1]} 微秒）" in prose(decoding, "zh")
    saved_ms = {r["length"]: r["decode_ms"] for r in _saved_run("bench_model.json")["rows"] if (r["weights"], r["batch"]) == ("float32", 1)}
    first_half_ms = f"{saved_ms[128] - saved_ms[32]:.1f}"  # "may be that run's noise: 2.2 ms between medians"
    assert f"{first_half_ms} ms between medians saved without their spread" in " ".join(prose(decoding, "en").split())
    assert f"两个没有记下离散程度的中位数之间的 {first_half_ms} 毫秒" in prose(decoding, "zh")
    assert float(measured) > 3 * float(predicted)  # "grew more than the cache's bytes predict"
    for grew, its_bytes in ((per_token, token_bytes_us), (other_per_token, other_bytes_us)):
        assert float(grew) > 3 * float(its_bytes)  # "more than three times its bytes' time"
    assert float(measured) < 0.1 * longest  # "under a tenth of the step at T = 512"
    first = {r["length"]: r["decode_ms"] for r in _saved_run("bench_model.json")["rows"] if (r["weights"], r["batch"]) == ("float32", 1)}
    halves = printed(r"the first machine, per added token: T = 32 to 128: ([\d.]+) µs and T = 128 to 512: ([\d.]+) µs", outputs).groups()
    by_hand = (1e3 * (first[128] - first[32]) / 96, 1e3 * (first[512] - first[128]) / 384)  # the uneven halves, from the file
    assert [float(h) for h in halves] == pytest.approx(by_hand, abs=0.05) and by_hand[0] > 3 * by_hand[1]
    assert f"unevenly: {halves[0]} µs per added token from T = 32 to 128, {halves[1]} from 128 to 512" in prose(decoding, "en").replace("\n", " ")
    assert f"每多一个词元多 {halves[0]} 微秒，从 128 到 512 只多 {halves[1]} 微秒" in prose(decoding, "zh")
    apart = printed(r"73.9 ms in lesson 13's loop, [\d.]+ ms in section 3's \(\+([\d.]+)\)", outputs)[1]
    assert float(apart) > float(measured)  # "more than the step's whole growth from T = 32 to 512"
    assert apart == f"{first[128] - _row(_saved_run('bench_model.json'), 'float32')['ms']:.1f}"  # by hand from the file
    assert f"{apart} ms apart, for a cause that was not measured" in " ".join(prose(decoding, "en").split())  # the appendix, for section 3
    third = printed(r"SDPA calls alone, per added token: over each layer's cache ([\d.]+) µs", outputs)[1]  # the third machine's
    assert abs(float(third) - float(other_per_token)) < 0.5 and float(per_token) > 1.5 * float(third)  # "of the same size"; open
    assert (f"The second machine's {other_per_token} µs a token is of the same size, though its run profiled no length; the first "
            f"machine's {per_token} stays open") in " ".join(prose(decoding, "en").split())
    assert (f"第二台机器的 {other_per_token} 微秒大小相当，但那次运行没有按长度剖析；第一台的 {per_token} 微秒仍没有答案"
            in prose(decoding, "zh"))
    grown = printed(r"measured, per added token: first machine ([\d.]+) µs against ([\d.]+) µs for its bytes; second machine ([\d.]+) µs "
                    r"against ([\d.]+) µs for its bytes", outputs).groups()
    assert grown == (per_token, token_bytes_us, other_per_token, other_bytes_us)  # the same numbers as the appendix's lines
    assert (f"a step grew {grown[0]} µs per added token on the first machine and {grown[2]} on the second, several times their "
            f"bytes' {grown[1]} and {grown[3]}") in " ".join(prose(decoding, "en").split())
    assert f"第一台机器多 {grown[0]} 微秒，第二台多 {grown[2]} 微秒，是各自读字节时间（{grown[1]} 和 {grown[3]} 微秒）的好几倍" in prose(decoding, "zh")
    row = next(r for r in _saved_run("bench_model.json")["rows"] if (r["weights"], r["batch"], r["length"]) == ("float32", 1, 128))
    at_roof = 1e3 * (row["weight_bytes"] + row["cache_bytes"]) / (_saved_run("bench_model.json")["roofs"]["bandwidth_gb_s"] * 1e9)
    by_hand = (at_roof / (row["prefill_ms"] / 128), row["decode_ms"] / at_roof)  # section 3's two factors with lesson 13's loop
    split = printed(r"section 3's split with lesson 13's loop: ([\d.]+) x ([\d.]+) \(([\d.]+) before rounding\)", outputs).groups()
    assert split[:2] == (f"{by_hand[0]:.1f}", f"{by_hand[1]:.1f}") and abs(float(split[2]) - 18.3) < 1  # "the product stays about 18"
    assert by_hand[0] < 6.6 and by_hand[1] > 2.8  # the summary's "6.6 at most, 2.8 at least" holds in this loop too
    assert f"becomes {split[0]} × {split[1]} (the last line)" in prose(decoding, "en").replace("\n", " ")
    assert f"拆分变成 {split[0]} × {split[1]}（最后一行）" in prose(decoding, "zh")
    for language in ("en", "zh"):
        text = prose(decoding, language)
        for number in (measured, predicted, per_token, token_bytes_us, other_measured, other_per_token, other_bytes_us, apart):
            assert number in text, (language, number)
    assert "more than three times" in prose(decoding, "en").replace("\n", " ") and "的三倍" in prose(decoding, "zh")


def test_lesson14_the_live_growth_profile_prints_its_own_verdict(decoding):
    """Section 5's optional live profile: its SDPA line is the sum of SDPA's rows as printed, over 480 tokens, and its last
    line's verdict ('larger' when SDPA's change exceeds the products', the noise) follows from the printed
    numbers, whatever the machine printed; the prose says how to read it, not what one run printed."""
    outputs = stored_text(decoding)
    lines = re.findall(r"^  (aten::\S+) +([\d.]+) → +([\d.]+) ms$", outputs, flags=re.M)
    grew, per_token, products = (float(v) for v in printed(
        r"attention's kernel: ([+-][\d.]+) ms a step, ([\d.]+) µs per added token \(30 layers, one query\); "
        r"the products: ([+-][\d.]+) ms \(the noise\)", outputs).groups())
    shown = [float(a) - float(b) for n, b, a in lines if "scaled_dot_product" in n]
    assert grew == pytest.approx(sum(shown), abs=0.02) and per_token == pytest.approx(1e3 * grew / 480, abs=0.06)
    verdict = printed(r"SDPA's change is (larger|not larger) than the products' \(the noise\)", outputs)[1]
    assert (verdict == "larger") == (grew > abs(products)) or abs(grew - abs(products)) < 0.02
    english = " ".join(prose(decoding, "en").split())
    assert "the last line says whether SDPA's change is larger" in english and "When this lesson was stored, on the third" not in english
    assert "最后一行告诉你 SDPA 的变化是否比它大" in prose(decoding, "zh")


def test_lesson14_the_step_grows_by_sdpas_work_per_token_as_the_saved_profile_shows(decoding):
    """Section 5's reason, from the third machine's saved profile (bench --attention-growth), redone by hand from the file:
    the whole step's and SDPA's own time per added token, SDPA's against the token's cached bytes at the same thread's roof
    (46,080 bytes, by hand from the model's shape), far outside SDPA's quartiles; every other operator, the control,
    moving within all operators' spread; and the step's SDPA calls alone, over each layer's cache, over one layer's (kept
    in the CPU's caches) and written as products, which split that cost into reading and arithmetic."""
    outputs = stored_text(decoding)
    found = _saved_run("bench_attention_growth.json")
    assert found["environment"]["cpu_capability"] == "AVX2"  # the third machine, held to AVX2 as the set-up's table says
    assert found["attention_by_length"]["repeats"] == 3  # "profiles three steps at each [length]"
    assert "profiled three steps at each on the third machine" in " ".join(prose(decoding, "en").split()) and "各剖析了三步" in prose(decoding, "zh")
    growth = found["attention_by_length"]
    short, long = growth["by_length"]["32"], growth["by_length"]["512"]
    token_bytes = 30 * 2 * 3 * 64 * 4  # a key and a value of 3 heads of 64 float32 numbers, in each of 30 layers
    step_us = 1e3 * (long["all_operators_ms"] - short["all_operators_ms"]) / 480
    sdpa_us = 1e3 * (long["attention_ms"] - short["attention_ms"]) / 480
    token_us = 1e6 * token_bytes / (growth["roofs"]["bandwidth_gb_s"] * 1e9)
    token_flops = 30 * 2 * 2 * 9 * 64  # a 64-number dot product and a 64-number weighted sum, 2 FLOPs a number, 9 heads, 30 layers
    flops_us = 1e6 * token_flops / (growth["roofs"]["matmul_gflop_s"] * 1e9)
    line = printed(r"the lengths taking turns (\d+) times, per added token: the whole step ([\d.]+) µs, SDPA ([\d.]+) µs: "
                   r"([\d.]+)x its cached bytes' ([\d.]+) µs and ([\d.]+)x its FLOPs' ([\d.]+) µs", outputs).groups()
    assert line == (str(growth["turns"]), f"{step_us:.1f}", f"{sdpa_us:.1f}", f"{sdpa_us / token_us:.1f}", f"{token_us:.1f}",
                    f"{sdpa_us / flops_us:.1f}", f"{flops_us:.2f}")
    rest = [row["all_operators_ms"] - row["attention_ms"] for row in (short, long)]
    spans = [row["all_operators_ms_quartiles"][1] - row["all_operators_ms_quartiles"][0] for row in (short, long)]
    moved = printed(r"every other operator [\d.]+ → [\d.]+ ms \(\+([\d.]+)\), while all operators' quartiles lie ([\d.]+) and "
                    r"([\d.]+) ms apart", outputs).groups()
    assert moved == (f"{round(rest[1], 2) - round(rest[0], 2):.2f}", f"{spans[0]:.1f}", f"{spans[1]:.1f}")  # the printed two's difference
    sdpa_spread = max(row["attention_ms_quartiles"][1] - row["attention_ms_quartiles"][0] for row in (short, long))
    gap = long["attention_ms_quartiles"][0] - short["attention_ms_quartiles"][1]  # between the two lengths' quartile ranges
    assert gap > 5 * sdpa_spread  # "far outside its quartiles"
    assert abs(rest[1] - rest[0]) < min(spans)  # "within" the spread
    assert sdpa_us / token_us > 1.5 and sdpa_us / flops_us > 1.5  # more than both its bytes and its FLOPs at the roofs
    english, chinese = " ".join(prose(decoding, "en").split()), prose(decoding, "zh")
    low, high = sorted(moved[1:])
    assert (f"SDPA's own time grew {line[2]} µs per cached token, far outside its quartiles: {line[3]} times the time to read that "
            f"token's keys and values and {line[5]} times the time for its FLOPs" in english
            and f"moved {moved[0]} ms, within the {low} to {high} ms that all operators' quartiles span" in english)
    assert (f"每多一个缓存词元，SDPA 自身的时间多 {line[2]} 微秒" in chinese
            and f"这是读这个词元的键和值所需时间的 {line[3]} 倍，是做它的浮点运算所需时间的 {line[5]} 倍" in chinese
            and f"只变了 {moved[0]} 毫秒，落在所有算子合计的四分位数之间 {low} 到 {high} 毫秒的差里" in chinese)
    # the step's SDPA calls alone, three ways (bench one_query_attention), redone from the file
    alone = {way: 1e3 * (rows["512"]["ms"] - rows["32"]["ms"]) / 480 for way, rows in growth["one_query"]["ways"].items()}
    kept = alone["sdpa, one layer's cache"]
    shown = printed(r"SDPA calls alone, per added token: over each layer's cache ([\d.]+) µs; over one layer's cache, kept in the "
                    r"core's own caches, ([\d.]+) µs \((\d+) GFLOP/s, ([\d.]+) of that thread's matmul roof\); written as products "
                    r"\(q @ K.T, softmax, @ V\) ([\d.]+) µs", outputs).groups()
    rate = token_flops / kept / 1e3  # GFLOP/s
    assert shown == (f"{alone['sdpa']:.1f}", f"{kept:.1f}", f"{rate:.0f}", f"{rate / growth['roofs']['matmul_gflop_s']:.2f}",
                     f"{alone['products']:.1f}")
    assert abs(alone["sdpa"] - sdpa_us) < 0.2 * sdpa_us  # "about what they cost inside the step"
    assert 0.35 < (alone["sdpa"] - kept) / alone["sdpa"] < 0.65 and alone["products"] <= alone["sdpa"]  # "about half"; "no faster"
    reading = f"{float(shown[0]) - float(shown[1]):.1f}"  # the printed numbers' difference, as the prose reads it
    assert (f"Over each layer's own cache they cost {shown[0]} µs a token, about what they cost inside the step; over one layer's "
            f"cache every time, small enough to stay in the core's own caches, {shown[1]} µs. So about half the cost is fetching the "
            f"cache from farther out, the shared cache or memory ({reading} µs, against {line[4]} for its bytes at the memory roof), "
            f"and half is the kernel's arithmetic for one query, at {shown[3]} of the thread's matmul roof.") in english
    assert (f"nothing copied), the same attention took {shown[4]} µs: for one query the fused kernel is no faster than plain "
            "products") in english
    assert (f"各层读各自的缓存时，每多一个词元多 {shown[0]} 微秒" in chinese and f"只多 {shown[1]} 微秒" in chinese
            and f"从更远处（共享缓存或内存）取缓存上（{reading} 微秒，按内存的带宽屋顶读这些字节只要 {line[4]} 微秒）" in chinese
            and "融合内核并不比普通的矩阵乘法快" in chinese
            and f"速度只有同一线程矩阵乘法屋顶的 {shown[3]} 倍" in chinese and f"同样的注意力用了 {shown[4]} 微秒" in chinese)


def test_lesson14_q4_and_llama_cpp_as_the_saved_run_measured_them(decoding):
    """The paragraph after the saved q4 row quotes its printed times and ratios, in both languages."""
    outputs = stored_text(decoding)
    _, float32_bytes, float32_ratio = printed(r"float32 +\d+ MB of weights; measured +([\d.]+) ms, from its bytes +([\d.]+) ms \(([\d.]+)x\)",
                                                    outputs).groups()
    _, q4_bytes, q4_ratio = printed(r"q4 +\d+ MB of weights; measured +([\d.]+) ms, from its bytes +([\d.]+) ms \(([\d.]+)x\)", outputs).groups()
    speed = printed(r"(?m)^q4 decodes ([\d.]+)x as fast as float32", outputs)[1]  # the q4 section's line, not the compiled one
    llama, slower = printed(r"llama.cpp on the same file: ([\d.]+) ms per token; q4's step takes ([\d.]+)x as long", outputs).groups()
    assert round(float(q4_ratio)) == 7  # "about seven times" (the float32 ratio is quoted as printed, below)
    q4_mb = _number(r"; q4 (\d+) MB", outputs)
    assert q4_mb < 538 / 4  # "under a quarter of the bytes"
    for language in ("en", "zh"):
        text = prose(decoding, language)
        for number in (speed, q4_bytes, llama, slower, f"{q4_mb:.0f} MB", float32_ratio):  # q4's and float32's times: printed just above
            assert number in text, (language, number)
    rests = []  # "the rest" of each line: its measured time less its bytes' time, as the two are printed
    for name in ("float32", "q4"):
        measured, from_bytes, rest = printed(rf"{name} +\d+ MB of weights; measured +([\d.]+) ms, from its bytes +([\d.]+) ms "
                                             r"\([\d.]+x\); beyond its bytes +([\d.]+) ms", outputs).groups()
        assert f"{float(measured) - float(from_bytes):.1f}" == rest
        rests.append(rest)
    assert f"the time beyond them only from {rests[0]} to {rests[1]} ms" in " ".join(prose(decoding, "en").split())
    assert f"超出读字节的时间却只从 {rests[0]} 毫秒降到 {rests[1]} 毫秒" in prose(decoding, "zh")


def test_lesson14_compiled_steps_as_the_saved_run_measured_them(decoding):
    """The paragraph after the compiled rows quotes their printed times, gains and ratios, in both languages."""
    outputs = stored_text(decoding)
    rows = {name: printed(rf"{name} +eager +([\d.]+) ms, compiled +([\d.]+) ms: +([\d.]+) ms less per step \(compiling took "
                          r"(\d+) s; greedy tokens equal: (\d+) of \5\)", outputs).groups() for name in ("float32", "q4")}
    eager_floor, compiled_floor = printed(r"(\d+)% of the step's time eager, (\d+)% compiled", outputs).groups()
    llama = printed(r"q4 compiled takes ([\d.]+)x as long as llama.cpp", outputs)[1]
    q4_bytes = printed(r"q4 +\d+ MB of weights; measured +[\d.]+ ms, from its bytes +([\d.]+) ms", outputs)[1]
    share, outside = printed(r"the saving is (\d+)% of the ([\d.]+) ms section 3's bar puts outside the products", outputs).groups()
    first = _saved_run("bench_model.json")
    by_hand = _row(first, "float32")["ms"] - _row(first, "matmul floor")["ms"]  # the step outside its products
    floor_ms = _row(first, "matmul floor")["ms"]
    above = f"{round(_row(first, 'float32 compiled')['ms'], 1) - round(floor_ms, 1):.1f}"  # a difference of the printed times
    assert f"spends only {above} ms outside them" in prose(decoding, "en").replace("\n", " ") and f"时间就只剩 {above} 毫秒" in prose(decoding, "zh")
    assert (eager_floor, compiled_floor) == (f"{floor_ms / _row(first, 'float32')['ms']:.0%}".rstrip("%"),
                                             f"{floor_ms / _row(first, 'float32 compiled')['ms']:.0%}".rstrip("%"))  # by hand
    assert outside == f"{by_hand:.1f}" and share == f"{float(rows['float32'][2]) / by_hand:.0%}".rstrip("%")
    assert float(rows["q4"][2]) > float(outside)  # "more than float32 spends outside its products at all"
    assert float(rows["q4"][1]) > 3 * float(q4_bytes)  # "still far above the 5.4 ms its bytes would take"
    assert 1.5 < float(llama) < 2.5  # "its compiled step 1.9 times" llama.cpp's
    second = _saved_run("bench_model_bf16_cpu.json")  # the appendix reads its table's compiled rows: the same saving for both
    steps = {name: f"{_row(second, name)['ms']:.1f}" for name in ("float32", "float32 compiled", "q4", "q4 compiled")}
    assert round(float(steps["float32"]) - float(steps["float32 compiled"]), 1) == round(float(steps["q4"]) - float(steps["q4 compiled"]), 1)
    assert f"float32 from {steps['float32']} to {steps['float32 compiled']} ms" in prose(decoding, "en").replace("\n", " ")
    assert f"q4 从 {steps['q4']} 毫秒降到 {steps['q4 compiled']} 毫秒" in prose(decoding, "zh")
    for language in ("en", "zh"):
        text = prose(decoding, language)
        for number in (rows["float32"][2], rows["float32"][3], rows["q4"][1], rows["q4"][2], rows["q4"][3], rows["q4"][4],
                       f"{eager_floor}%", f"{compiled_floor}%", q4_bytes, f"{share}%", outside, llama):
            assert number in text, (language, number)


def test_lesson14_weights_left_as_the_second_machine_measured_it(decoding):
    """The weights-left paragraph and the summary quote the second machine's saved rows (the live line varies)."""
    table = stored_text(decoding)[stored_text(decoding).index("second ÷ first"):]
    step = {name: printed(rf"\n{name}, decode step\s+[-\d.]+\s+([\d.]+)", table)[1]
            for name in ("float32", "float32 weights-left", "matmul floor", "matmul floor weights-left")}
    ratio = f"{float(step['float32']) / float(step['float32 weights-left']):.2f}"
    for language in ("en", "zh"):
        text = prose(decoding, language)
        for number in (*step.values(), ratio):
            assert number in text, (language, number)
    assert 1.8 < float(ratio) < 2.2  # the summary's ratio, near twice


def test_lesson14_section6_readings_of_the_saved_rows(decoding):
    """The float32 step's third of the roof, int8 at a quarter with its table quantized, the kernels' rates, the quality
    noise and q4's logits, bfloat16's prefill, the profile against the floor, exercise 3's test of bfloat16's ridge, and
    the second machine's faster reads: each as the text reads it."""
    outputs = stored_text(decoding)
    assert 0.3 < 1 / _number(r"float32 +\d+ MB of weights; measured +[\d.]+ ms, from its bytes +[\d.]+ ms \(([\d.]+)x\)", outputs) < 0.4  # "a third"
    assert 3.8 < _number(r"int8 \d+ MB in all, 1/([\d.]+) of float32's", outputs) < 4.2  # "about a quarter"
    roof = _number(r"  bandwidth: ([\d.]+) GB/s; matmul", outputs)
    assert 0.4 < _number(r"float32 matmul floor: +[\d.]+ ms for +\d+ MB, +([\d.]+) GB/s", outputs) / roof < 0.6  # "about half"
    pairs = re.findall(r"(\w+) (\d+)% / (\d+)%", printed(r"free-running agreement, first machine / second: [^\n]*", outputs)[0])
    kept = re.findall(r"(\w+) (\d+)% / (\d+)%", printed(r"positions before the first difference: [^\n]*", outputs)[0])
    free, before = ({n: (int(a), int(b)) for n, a, b in found} for found in (pairs, kept))
    assert len(free) == len(before) == 3 and all(before[n][0] <= free[n][0] for n in free)  # "fewer"
    assert (min(free[n][0] for n in free), max(free[n][0] for n in free)) == (53, 56)  # "53% to 56% on the first machine"
    assert (min(before[n][0] for n in before), max(before[n][0] for n in before)) == (43, 50)  # "43% to 50%"
    assert max(free, key=lambda n: free[n][0]) == "q4" == min(before, key=lambda n: before[n][0])  # "highest by one, lowest by the other"
    moves = [b - a for found in (free, before) for a, b in found.values()]
    assert min(abs(m) for m in moves) == 3 and max(abs(m) for m in moves) == 12 and min(moves) < 0 < max(moves)  # "3 to 12, not always the same way"
    for machine, most in (("first machine", 0.2), ("second machine", 0.3)):  # "no more than 0.2% ... and about 0.3%", same sign on both
        line = printed(rf"perplexity on 439 tokens, {machine}: [^\n]*", outputs)[0]
        changes = {name: float(change) for name, change in re.findall(r"(\w+) ([+-][\d.]+)%", line)}
        assert len(changes) == 3 and max(abs(c) for c in changes.values()) <= most, machine
        signs = changes if machine == "first machine" else signs
        assert all((changes[n] > 0) == (signs[n] > 0) for n in changes)
    prefill = {name: _number(rf"\n{name}\s+\d+\s+[\d.]+\s+(\d+)\s", outputs) for name in ("float32", "bfloat16")}
    assert f"{prefill['bfloat16'] / prefill['float32']:.1f}" == "4.7"
    share, floor_share = _number(r"matrix products (\d+)% of the steps' own CPU time", outputs), _number(r"\(2 threads\): (\d+)% of its", outputs)
    ridge, roof_gain, measured_gain = printed(r"On the second machine the ridge is [\d.]+ / [\d.]+ ≈ ([\d.]+) FLOPs per byte.*?: "
                                              r"([\d.]+) times as fast. The bench measured ([\d.]+) times", outputs).groups()
    first_ridge = _number(r"bfloat16's ridge: ([\d.]+) FLOPs per byte", outputs)  # section 7's, the first machine
    assert first_ridge < 1 < float(ridge) and float(roof_gain) > 1.5 * float(measured_gain)  # "does not follow the large product's roof"
    floor = _batch_column(outputs, "matmul floor")
    assert max(float(floor[b]) for b in (2, 4, 8)) < 1.05 * min(float(floor[b]) for b in (2, 4, 8))  # "about as long at 2, 4 or 8"
    assert 1.7 < float(floor[2]) / float(floor[1]) < 2.0  # "nearly twice the one-row kernel"
    kernel = [printed(r"bfloat16 F.linear:?\s+([\d.]+) ms for", outputs)[1]]  # the int8 kernel's time is exercise 1's to read
    largest = printed(r"first machine: teacher-forced [^\n]*; largest logit difference over the 439-token text: ([^\n]*)", outputs)[1]
    logit = dict(re.findall(r"(\w+) ([\d.]+)", largest))
    assert sorted(logit) == ["bfloat16", "int8", "q4"]
    assert float(logit["q4"]) < min(float(logit["bfloat16"]), float(logit["int8"]))  # "q4's largest logit difference is the smallest"
    reads = [_number(r"; bandwidth roof ([\d.]+) GB/s", outputs[at:]) for at in (0, outputs.index("with bfloat16 instructions:\n"))]
    for language in ("en", "zh"):
        text = prose(decoding, language)
        for number in (f"{share:.0f}%", f"{floor_share:.0f}%", "4.7", *logit.values(), "439", f"{reads[0]:.1f}", f"{reads[1]:.1f}",
                       *(floor[b] for b in (2, 4, 8)), *kernel):
            assert number in text, (language, number)


def test_lesson14_the_live_thread_lines_print_their_own_verdict(decoding):
    """The live threads cell's last line reads its own printed times: what the second thread took off each way, and which
    way was the faster on one thread; the prose says how to read it, not what one run printed."""
    outputs = stored_text(decoding)
    linear = [float(v) for v in printed(r"x @ W.T \(nn.Linear\): 1 thread ([\d.]+) ms, 2 threads ([\d.]+) ms", outputs).groups()]
    left = [float(v) for v in printed(r"W @ x.T \(weights-left\): 1 thread ([\d.]+) ms, 2 threads ([\d.]+) ms", outputs).groups()]
    took = printed(r"2 threads against one: x @ W.T \(nn.Linear\) ([+-]\d+)%, W @ x.T \(weights-left\) ([+-]\d+)%; on one thread "
                   r"weights-left was (the faster|not the faster)", outputs).groups()
    for (one, two), shown in ((linear, took[0]), (left, took[1])):
        assert abs(100 * (two / one - 1) - int(shown)) <= 1  # from the printed times, rounded
    assert (took[2] == "the faster") == (left[0] < linear[0])
    assert "the last line reads them" in " ".join(prose(decoding, "en").split())
    assert "最后一行替你读出了它们" in prose(decoding, "zh")


def test_lesson14_the_bench_thread_lines_as_the_text_reads_them(decoding):
    """Section 4 reads the second machine's thread lines: nn.Linear's one-row floor as long on one thread as on two, its
    share of one thread's sum, weights-left's share and its use of the second thread, and the sum's two readings."""
    outputs = stored_text(decoding)
    linear = printed(r"  matmul floor: +([\d.]+) / ([\d.]+) ms, ([\d.]+) / [\d.]+ GB/s, (\d+)% / \d+% of the sum", outputs).groups()
    left = printed(r"  matmul floor weights-left: +([\d.]+) / ([\d.]+) ms, ([\d.]+) / [\d.]+ GB/s, (\d+)% / \d+% of the sum",
                   outputs).groups()
    *sums, roof = printed(r"a sum over 256 MiB: ([\d.]+) / ([\d.]+) GB/s \(this run's bandwidth roof, measured before its formats' loop: "
                          r"([\d.]+) GB/s\)", outputs).groups()
    assert linear[0] == linear[1]  # "45.1 ms on one thread and on two"
    assert float(left[1]) < 0.8 * float(left[0]) and int(left[3]) > int(linear[3])  # the second thread used; a faster read
    assert roof == printed(r"with bfloat16 instructions:\n  compute roofs: [^\n]*; bandwidth roof ([\d.]+) GB/s", outputs)[1]
    assert float(sums[1]) > 1.3 * float(roof)  # "against the 35.2 measured before the formats' loop": the bandwidth moved
    for language in ("en", "zh"):
        text = prose(decoding, language)
        for number in (linear[0], linear[2], f"{linear[3]}%", left[2], f"{left[3]}%", left[0], left[1], sums[1], roof):
            assert number in text, (language, number)


def test_lesson14_batch_checks_and_bfloat16_behind_float32(decoding):
    outputs = stored_text(decoding)
    assert "largest logit difference below 1e-4: True" in outputs  # "they agree to below 1e-4"
    found = printed(r"the second machine, batch 1 → 2, the same products: matmul floor ([\d.]+) → ([\d.]+) ms, weights-left "
                    r"([\d.]+) → ([\d.]+) ms", outputs).groups()
    linear_1, linear, left_1, left = (float(v) for v in found)
    assert linear > 1.7 * linear_1 and left < 1.05 * left_1  # "its floor jumps the same way", weights-left does not
    assert linear > 3 * left  # "19.1 ms one way and 84.3 the other"
    for language in ("en", "zh"):
        assert all(number in prose(decoding, language) for number in found)
    behind = printed(r"bfloat16 step takes longer than the float32 one: \[([\d, ]*)\]", outputs)[1]
    assert behind == "8, 16", "the text names batches 8 and 16 as those at which bfloat16 is slower: re-read it"
    assert "at batches 8 and 16" in prose(decoding, "en").replace("\n", " ") and "批大小 8 和 16 上" in prose(decoding, "zh")
    assert _number(r"T = 4,096: cache\s+[\d,]+ MB, ([\d.]+)x", outputs) > 3  # "several times more cache than weights"
    ridge = _number(r"ridge at (\d+) FLOPs per byte", outputs)
    assert 100 < ridge < 1000  # "batches in the hundreds"
    bandwidth = _number(r"bandwidth: ([\d.]+) GB/s; matmul", outputs)
    assert 3350 / bandwidth > 100  # "over a hundred times what two threads of the first machine read"


def test_lesson14_ratios_the_text_explains(decoding):
    outputs = stored_text(decoding)
    assert _number(r"the products alone \(the matmul floor, [\d.]+ ms\): (\d+)% of the step's time eager", outputs) < 100  # "slower than its matmul floor"
    speed = _number(r"\nbfloat16 +269 +[\d.]+ +\d+ +([\d.]+)×", outputs)  # section 7's table: decode speed against float32
    assert 1 < speed < 2 and f"only {speed:.2f} times as fast" in prose(decoding, "en").replace("\n", " ")  # "less than twice as fast"
    one, eight = (_number(rf"\n{b} +[\d.]+, (\d+) ", outputs) for b in (1, 8))  # section 6's table: float32's tokens a second
    assert eight / one < 8  # "by less than the batch"
    assert 0.85 < _number(r"int8's step takes ([\d.]+)x as long as bfloat16's", outputs) < 1.15  # "about as long"
    prefill = printed(r"the bfloat16 prefill took ([\d.]+)x as long as the float32 one", outputs)[1]
    assert float(prefill) > 1  # "on the first machine bfloat16's took 4.7 times as long"
    assert f"took {prefill} times as long" in prose(decoding, "en").replace("\n", " ")
    assert f"耗时甚至是 float32 的 {prefill} 倍" in prose(decoding, "zh")
    int8, bfloat16, float32 = (_number(rf"\n{name}\s+(\d+) MB of weights", outputs) for name in ("int8", "bfloat16", "float32"))
    assert int8 < bfloat16 and int8 > float32 / 4  # "fewer bytes than bfloat16", "not a quarter of float32's"


def test_lesson14_the_file_is_under_a_fifth_and_int8_misses_its_prediction(decoding):
    outputs = stored_text(decoding)
    share = printed(r"the file \d+ MB, 1/([\d.]+) of float32.s", outputs)[1]
    assert 5 < float(share) < 6  # "under a fifth"
    predicted, measured = printed(r"≈ ([\d.]+) ms; the bench measured ([\d.]+) ms", outputs).groups()
    assert float(measured) > 1.1 * float(predicted)  # exercise 1 (c): "the bench measured more than that" (beyond noise)
    assert "under a fifth" in prose(decoding, "en") and "不到 float32 的五分之一" in prose(decoding, "zh")
    assert f"1/{share}" in prose(decoding, "en") and f"1/{share}" in prose(decoding, "zh")


def test_lesson14_int8_weight_rounding_against_bfloat16_arithmetic(decoding):
    """'int8 weights alone move the logits more than bfloat16 does; bfloat16 arithmetic on top adds less than that'."""
    outputs = stored_text(decoding)
    found = {name: _number(rf"\n{name}\s+mean logit difference ([\d.]+)", outputs)
             for name in ("bfloat16", "int8", "int8, float32 arithmetic")}
    weights_only = found["int8, float32 arithmetic"]
    assert weights_only > found["bfloat16"]
    assert 0 < found["int8"] - weights_only < weights_only  # "adds less than that": the weight rounding is the larger part


@pytest.fixture(scope="module")
def serving():
    return lesson("17_serving_many_requests.ipynb")


def test_lesson17_int8_pages_in_the_same_bytes(serving):
    """The text's "about 3.6 times as many int8 pages" is the printed page-bytes ratio, rounded."""
    found = printed(r"(\d\.\d\d) times as many int8 pages|同样的字节能放下 (\d\.\d\d) 倍", stored_text(serving))
    ratio = float(next(group for group in found.groups() if group))
    assert f"{ratio:.1f}" == "3.6"
    assert "about 3.6 times as many int8 pages" in prose(serving, "en") and "大约 3.6 倍的 int8 页" in prose(serving, "zh")


def test_lesson17_chunked_prefill_steps(serving):
    """The text reads the printed plan: request 2 feeds 6 tokens a step beside two decode tokens, over 7 steps."""
    plan = re.findall(r"\n\d+ \{0: 1, 1: 1, 2: (\d+)\}", stored_text(serving))
    chunks = [int(n) for n in plan if int(n) > 1]
    assert chunks[0] == 6 and len(chunks) == 7 and sum(chunks) == 40
    assert "the remaining 6 tokens of the budget" in prose(serving, "en") and "spread over 7 steps" in prose(serving, "en")
    assert "剩下的 6 个词元" in prose(serving, "zh") and "分 7 步送完" in prose(serving, "zh")


def test_lesson17_prefix_cache_table(serving):
    """The later two requests read the system prompt's full page; the columns add up to each prompt's length."""
    rows = re.findall(r"\n(\d)\s+(\d+)\s+(\d+)\s+(\d+)(?=\n)", stored_text(serving))
    assert [int(r[2]) for r in rows[:3]] == [0, 16, 16]
    assert all(int(prompt) == int(cached) + int(computed) for _, prompt, cached, computed in rows[:3])


def test_lesson14_the_second_machine_as_the_saved_runs_measured_them(decoding):
    """The paragraphs after the two machines' table quote its printed ratios and times, in both languages, and say
    only what they show: fewer bytes gained more, the formats in the order of their bytes, the roofs reversed."""
    outputs = stored_text(decoding)
    table = outputs[outputs.index("second ÷ first"):]
    def row(name: str) -> tuple[str, str, str]:  # first, second (its quartiles skipped), second ÷ first
        return printed(rf"\n{name}\s+([\d.]+)\s+([\d.]+)(?: \([\d.]+–[\d.]+\))?\s+([\d.]+)×", table).groups()

    def quartiles(name: str) -> tuple[float, float]:
        return tuple(float(q) for q in printed(rf"\n{name}\s+[\d.]+\s+[\d.]+ \(([\d.]+)–([\d.]+)\)", table).groups())
    steps = {name: row(f"{name}, decode step") for name in ("float32", "bfloat16", "int8", "q4", "q4 compiled", "matmul floor")}
    prefill = row("bfloat16, prefill")
    second = {name: float(step[1]) for name, step in steps.items()}
    assert second["float32"] > second["bfloat16"] > second["int8"] > second["q4"]  # "line up by their bytes"
    spreads = [quartiles(f"{name}, decode step") for name in ("q4", "int8", "bfloat16", "float32")]
    assert all(low[1] < high[0] for low, high in zip(spreads, spreads[1:]))  # "none inside another's quartiles"
    q4_share = f"{second['q4'] / second['float32']:.2f}"  # "q4 took 0.30 of float32's time for 0.23 of its bytes"
    assert max(float(steps[n][2]) for n in ("bfloat16", "int8", "q4")) < min(float(steps[n][2]) for n in ("float32", "matmul floor"))
    assert float(steps["matmul floor"][2]) > 0.95  # "alone (the floor) did not get faster"
    roofs = [printed(r"compute roofs: float32 (\d+), bfloat16 (\d+)", outputs[at:]).groups()
             for at in (0, outputs.index("with bfloat16 instructions:\n"))]
    assert float(roofs[0][1]) < float(roofs[0][0]) and float(roofs[1][1]) > 2 * float(roofs[1][0])
    assert float(roofs[1][1]) / float(roofs[0][1]) > 4  # "far more than twice-as-wide vectors alone would explain"
    reads = [_number(r"; bandwidth roof ([\d.]+) GB/s", outputs[at:]) for at in (0, outputs.index("with bfloat16 instructions:\n"))]
    ratios = [printed(r"int8's step takes ([\d.]+)x as long as bfloat16's; at batch 8 bfloat16's takes ([\d.]+)x as long as "
                      r"float32's; q4 compiled ([\d.]+)x", outputs[at:]).groups()
              for at in (0, outputs.index("with bfloat16 instructions:\n"))]
    assert 0.85 < float(ratios[0][0]) < 1.15  # section 7: int8 "takes about as long" as bfloat16 on the first machine
    assert float(ratios[0][1]) > 1 > float(ratios[1][1])  # bfloat16 behind float32 at batch 8 on the first only
    numbers = [*(steps[n][2] for n in ("int8", "q4", "bfloat16", "float32", "matmul floor")), *(steps[n][1] for n in
               ("float32", "bfloat16", "int8", "q4")), f"{reads[1]:.1f}", f"{reads[0]:.1f}", *ratios[0][:1],
               ratios[1][1], ratios[0][1], *roofs[1], *roofs[0], *prefill[:2][::-1],
               *(printed(rf"\n{name}, decode step\s+-\s+([\d.]+)", table)[1] for name in (
                   "float32 weights-left", "matmul floor weights-left", "matmul floor q4")),
               q4_share]
    for language in ("en", "zh"):
        text = prose(decoding, language)
        for number in numbers:
            assert number in text, (language, number)


def test_lesson14_bfloat16_behind_float32_reads_its_batched_steps(decoding):
    """Section 7: 'from batch 4 on, its step nearly doubles with the batch and runs at 52% to 64% of that roof'."""
    outputs = stored_text(decoding)
    printed_ms, *shares, first, second = printed(r"bfloat16 steps at batch 4, 8, 16: ([\d., ]+) ms; [\d., ]+ GFLOP/s, (\d+)%, (\d+)%, "
                                                 r"(\d+)% of bfloat16's roof; each doubling ([\d.]+)x, ([\d.]+)x", outputs).groups()
    column = _batch_column(outputs, "bfloat16")
    steps = [column[b] for b in (4, 8, 16)]
    assert printed_ms == ", ".join(steps)  # the kernel cell's line repeats the batch table
    growth = [f"{float(b) / float(a):.2f}" for a, b in zip(steps, steps[1:])]
    assert growth == [first, second] and all(1.6 < float(g) < 2.0 for g in growth)  # "1.71 and then 1.91 times as long"
    for language in ("en", "zh"):
        text = prose(decoding, language)
        assert f"{shares[0]}% 到 {shares[2]}%" in text or f"{shares[0]}% to {shares[2]}%" in text, language
    assert f"{growth[0]} and then {growth[1]} times as long" in prose(decoding, "en").replace("\n", " ")
    assert f"上一档的 {growth[0]} 倍、{growth[1]} 倍" in prose(decoding, "zh")


def test_lesson14_the_float32_step_against_its_bytes_as_section_3_reads_it(decoding):
    """Section 3: 'its bytes would take 22.8 ms of its 62.9, 36%' is the line printed under the table, and a third."""
    outputs = stored_text(decoding)
    bytes_ms, share, step = printed(r"float32 at batch 1: its weights and cache at the bandwidth roof would take ([\d.]+) ms, "
                                    r"(\d+)% of its ([\d.]+) ms step", outputs).groups()
    assert 30 <= int(share) <= 40  # "about a third"
    most, made = printed(r"(\d+) tokens a second at that roof, against its (\d+)", outputs).groups()
    saved = json.loads((NOTEBOOKS.parent / "figures" / "bench_model.json").read_text(encoding="utf-8"))
    row = next(r for r in saved["timings"] if (r["format"], r["batch"], r["phase"]) == ("float32", 1, "decode"))
    ceiling = saved["roofs"]["bandwidth_gb_s"] * 1e9 / (row["weight_bytes"] + row["cache_bytes"])  # tokens a second, by hand
    assert (int(most), int(made)) == (round(ceiling), round(1e3 / row["ms"]))
    for language in ("en", "zh"):
        assert all(number in prose(decoding, language) for number in (bytes_ms, f"{share}%", step)), language
    assert f"about {most} tokens a second at the measured roof, against the {made} it made" in prose(decoding, "en").replace("\n", " ")
    assert f"按实测屋顶每秒约 {most} 个词元，实际是 {made} 个" in prose(decoding, "zh")


def test_lesson14_the_first_machine_profile_hints_the_second_thread_bought_nothing(decoding):
    """Section 4's appendix (the thread rows): the one-thread profile's matrix products per step against the two-thread
    matmul floor, printed and checked by hand from the saved profile (share × total time / steps), read as a hint in both
    languages."""
    outputs = stored_text(decoding)
    profile = json.loads((NOTEBOOKS.parent / "figures" / "bench_model.json").read_text(encoding="utf-8"))["profile"]
    one_thread, floor = printed(r"the first machine: the profile's matrix products, one thread, ([\d.]+) ms a step; "
                                r"the matmul floor, two threads, ([\d.]+) ms", outputs).groups()
    assert float(one_thread) == pytest.approx(profile["matmul_share"] * profile["total_ms"] / profile["repeats"], abs=0.05)
    assert float(one_thread) < 1.05 * float(floor)  # "the second thread bought nothing": one thread as fast as two
    for language in ("en", "zh"):
        assert one_thread in prose(decoding, language) and floor in prose(decoding, language), language


def test_lesson14_the_roof_and_byte_ratios_section_11_works_out(decoding):
    """Section 10's '0.13 of float32's' and '2.04 times it' roofs and the summary's '0.30 of float32's time for 0.23 of
    its bytes', printed per machine and checked against the printed roofs and bytes."""
    outputs = stored_text(decoding)
    roof_ratios = re.findall(r"  bfloat16's roof ([\d.]+)x float32's; q4's step ([\d.]+) of float32's time for ([\d.]+) of its bytes", outputs)
    assert len(roof_ratios) == 2 and float(roof_ratios[0][0]) < 1 < float(roof_ratios[1][0])  # reversed between the machines
    for number in (roof_ratios[0][0], roof_ratios[1][0], *roof_ratios[1][1:]):  # 0.13, 2.04; q4 0.30 for 0.23 on the second
        assert number in prose(decoding, "en") and number in prose(decoding, "zh"), number
    float32, bfloat16 = (float(v) for v in printed(r"compute roofs: float32 (\d+), bfloat16 (\d+)", outputs).groups())
    q4_mb = _number(r"; q4 (\d+) MB", outputs)
    float32_mb = _number(r"\nfloat32\s+(\d+) MB of weights", outputs)
    for number in (f"{bfloat16 / float32:.2f}", f"{q4_mb / float32_mb:.2f}"):
        assert number in prose(decoding, "en") and number in prose(decoding, "zh"), number


def test_lesson14_the_compiled_cache_and_weights_left_lines_the_text_reads(decoding):
    """Section 4 reads the compiled cache's slots and the eager keys (printed from the workload), and the summary's 1.90."""
    outputs = stored_text(decoding)
    slots, first, last, calls, warm = printed(r"fixed cache of (\d+) slots; the eager ones over (\d+) to (\d+) keys in (\d+) timed calls "
                                              r"\(after a warm call at (\d+)\)", outputs).groups()
    assert int(last) - int(first) + 1 == int(calls) and int(warm) == 128 + 1 == int(first) - 1  # the 128-token prompt, then one key a call
    faster = printed(r"weights-left's step: ([\d.]+)x as fast as nn.Linear's", outputs)[1]
    for language in ("en", "zh"):
        text = prose(decoding, language)
        assert all(number in text for number in (slots, f"{first} 到 {last}" if language == "zh" else f"{first} to {last}", faster)), language


def test_lesson14_float32_batched_steps_stay_far_below_their_roof(decoding):
    """Section 7: 'float32's steps stay far below their own, much higher roof (at most 20% of it)', from the printed line,
    its GFLOP/s checked by hand from the saved rows (FLOPs over ms) against the printed float32 roof."""
    outputs = stored_text(decoding)
    rates, *shares = printed(r"float32 steps at batch 4, 8, 16: ([\d., ]+) GFLOP/s, (\d+)%, (\d+)%, (\d+)% of float32's roof",
                             outputs).groups()
    saved = json.loads((NOTEBOOKS.parent / "figures" / "bench_model.json").read_text(encoding="utf-8"))
    rows = {r["batch"]: r for r in saved["timings"] if (r["format"], r["phase"]) == ("float32", "decode")}
    assert rates == ", ".join(f"{rows[b]['flops'] / rows[b]['ms'] / 1e6:.1f}" for b in (4, 8, 16))
    most = max(int(s) for s in shares)
    assert most <= 25  # "far below"
    assert f"at {most}% of their own roof or less" in prose(decoding, "en") and f"最多只到它自己那道屋顶的 {most}%" in prose(decoding, "zh")


def test_lesson14_llama_cpp_against_its_bytes(decoding):
    """Section 8: 'even llama.cpp's step took 2.6 times its bytes' time', the printed ratio checked by hand from the saved
    row (its file and cache bytes over the bench's bandwidth roof), above 1: its step is not at its bytes' floor either."""
    outputs = stored_text(decoding)
    saved = json.loads((NOTEBOOKS.parent / "figures" / "bench_model.json").read_text(encoding="utf-8"))
    row = next(r for r in saved["timings"] if r["format"] == "llama.cpp")
    by_hand = row["ms"] / ((row["weight_bytes"] + row["cache_bytes"]) / (saved["roofs"]["bandwidth_gb_s"] * 1e9) * 1e3)
    ratio = printed(r"llama.cpp from its bytes [\d.]+ ms: its step took ([\d.]+)x that", outputs)[1]
    assert ratio == f"{by_hand:.1f}"
    assert float(ratio) > 1.5  # "even llama.cpp's step" is well above its bytes' time
    assert f"took {ratio} times its bytes' time" in prose(decoding, "en").replace("\n", " ")
    assert f"读字节所需时间的 {ratio} 倍" in prose(decoding, "zh")


def _batch_column(outputs: str, name: str) -> dict[int, str]:
    """The ms of one format in the first printed batch table that has its column, by batch (read from the header)."""
    header_at = outputs.index(f"{name} (ms/step, tokens/s)")
    start, end = outputs.rindex("\n", 0, header_at) + 1, outputs.index("\n", header_at)
    column = re.split(r"\s{2,}", outputs[start:end].strip()).index(f"{name} (ms/step, tokens/s)")
    found = {}
    for line in outputs[end + 1:].split("\n"):
        if not re.match(r"\d+\s", line):
            return found
        found[int(line.split()[0])] = re.split(r"\s{2,}", line.strip())[column].split(",")[0]
    return found


def _saved_run(name: str) -> dict:
    return json.loads((NOTEBOOKS.parent / "figures" / name).read_text(encoding="utf-8"))


def _row(run: dict, fmt: str, phase: str = "decode", batch: int = 1) -> dict:
    return next(r for r in run["timings"] if (r["format"], r["batch"], r["phase"]) == (fmt, batch, phase))


def test_lesson14_the_loops_gap_on_both_machines(decoding):
    """Section 3's optional part: the same float32 step (and its prefill) in the bench's two loops, on both machines, by hand from the
    saved files; the prose quotes the printed numbers in both languages."""
    outputs = stored_text(decoding)
    first, second = _saved_run("bench_model.json"), _saved_run("bench_model_bf16_cpu.json")
    here, there = printed(r"in section 3's \(\+[\d.]+\); the prefill (\d+) and (\d+) ms", outputs).groups()
    lesson13 = next(r for r in first["rows"] if (r["weights"], r["batch"], r["length"]) == ("float32", 1, 128))
    assert (int(here), int(there)) == (round(lesson13["prefill_ms"]), round(_row(first, "float32", "prefill")["ms"]))
    one, other, apart = printed(r"the second machine, the same two loops: ([\d.]+) and ([\d.]+) ms, ([\d.]+) apart", outputs).groups()
    again = next(r for r in second["rows"] if (r["weights"], r["batch"], r["length"]) == ("float32", 1, 128))
    assert (float(one), float(other)) == (round(again["decode_ms"], 1), round(_row(second, "float32")["ms"], 1))
    assert abs(abs(float(other) - float(one)) - float(apart)) < 0.11
    gap = abs(_row(first, "float32")["ms"] - lesson13["decode_ms"])  # the first machine's gap, by hand
    assert float(apart) < gap / 4  # "the gap is no rule": far smaller on the second machine
    for language in ("en", "zh"):
        text = prose(decoding, language)
        assert all(number in text for number in (here, there, apart)), (language, here, there, apart)


def test_lesson14_the_second_machines_later_bandwidth_read(decoding):
    """Section 3's optional part: the second machine's roof before its formats' loop and the same
    two-thread sum later (its thread rows), by hand from the saved file; the prose's 'much higher' and its numbers."""
    outputs = stored_text(decoding)
    second = _saved_run("bench_model_bf16_cpu.json")
    before, later = (float(v) for v in printed(r"the second machine's bench: bandwidth ([\d.]+) GB/s before its formats' loop, "
                                               r"([\d.]+) GB/s from the same two-thread sum", outputs).groups())
    assert before == round(second["roofs"]["bandwidth_gb_s"], 1)
    assert later == round(second["threads"]["bandwidth_gb_s"][str(max(second["threads"]["threads"]))], 1)
    assert later > 1.5 * before  # "much higher"
    first = _saved_run("bench_model.json")
    row = _row(first, "float32")
    bytes_ms = (row["weight_bytes"] + row["cache_bytes"]) / (first["roofs"]["bandwidth_gb_s"] * 1e6)  # at the first roof
    assert round(100 * bytes_ms / row["ms"] * before / later) == 22  # the what-if: a roof later / before as high
    prefill = _row(first, "float32", "prefill")
    higher = bytes_ms * before / later  # the step's bytes at the higher roof
    factors = f"{higher / (prefill['ms'] / prefill['length']):.1f}", f"{row['ms'] / higher:.1f}"
    assert printed(r"with a roof [\d.]+x as high: its bytes 22% of the step, ([\d.]+)x a prefill token's time; the step ([\d.]+)x",
                   outputs).groups() == factors
    assert all(float(f) > 3 for f in factors)  # "the two factors would change, not the answer"
    for language in ("en", "zh"):
        assert all(f in prose(decoding, language) for f in factors), language
    for language in ("en", "zh"):
        assert all(f"{v:.1f}" in prose(decoding, language) for v in (before, later)) and "22%" in prose(decoding, language)


def test_lesson14_section_11_black_roof_and_prefill_rate(decoding):
    """Section 10: the black roof (float32's 1,024² products) and bfloat16's prefill rate the figure's reading compares, by hand."""
    outputs = stored_text(decoding)
    second = _saved_run("bench_model_bf16_cpu.json")
    roof, rate = printed(r"with bfloat16 instructions:\n  compute roofs: float32 (\d+),[^\n]*\n  bfloat16's prefill "
                         r"reached (\d+) GFLOP/s", outputs).groups()
    prefill = _row(second, "bfloat16", "prefill")
    assert int(roof) == round(second["format_roofs"]["float32"]) and int(rate) == round(prefill["flops"] / prefill["ms"] / 1e6)
    assert int(roof) < int(rate) < round(second["format_roofs"]["bfloat16"])  # "above the black roof, under its own"
    for language in ("en", "zh"):
        assert roof in prose(decoding, language) and rate in prose(decoding, language)


def test_lesson14_lesson12s_constants_against_the_bytes(decoding):
    """Section 5: GQA's and MQA's fitted constants differ by more than their fewer weight bytes take at the first
    machine's roof (1.6 and 1.7 times), by hand from lesson 12's and this lesson's saved files; the prose's numbers."""
    outputs = stored_text(decoding)
    lesson12, first = _saved_run("bench_decode.json"), _saved_run("bench_model.json")
    weights = {r["variant"]: r["weight_bytes"] for r in lesson12["rows"] if r["length"] == 128}
    for fast in ("gqa", "mqa"):
        fewer, at_roof, constants, times = printed(rf"{fast.upper()}: ([\d.]+) MB fewer weight bytes take ([\d.]+) ms at the first "
                                                   r"machine's roof; the constants differ by ([\d.]+) ms, ([\d.]+)x that", outputs).groups()
        by_hand = (weights["mha"] - weights[fast]) / (first["roofs"]["bandwidth_gb_s"] * 1e6)  # ms
        assert (fewer, at_roof) == (f"{(weights['mha'] - weights[fast]) / 1e6:.1f}", f"{by_hand:.2f}")
        assert 1.3 < float(constants) / by_hand < 2.0 and times in ("1.6", "1.7")  # "1.6 and 1.7 times the bytes' time"
        for language in ("en", "zh"):
            assert all(number in prose(decoding, language) for number in (fewer, at_roof, constants)), (language, fast)


def test_lesson14_the_step_against_a_prefill_token_and_its_three_parts(decoding):
    """Section 3: per token, a step's bytes alone at the roof against a prefill token (6.6x), the measured step against
    its bytes (2.8x), and the bar's three parts on both machines, by hand from the saved files, in both languages."""
    outputs = stored_text(decoding)
    first, second = _saved_run("bench_model.json"), _saved_run("bench_model_bf16_cpu.json")
    step, prefill, floor = _row(first, "float32"), _row(first, "float32", "prefill"), _row(first, "matmul floor")
    roof = first["roofs"]["bandwidth_gb_s"]
    bytes_ms = (step["weight_bytes"] + step["cache_bytes"]) / roof / 1e6
    per_token = prefill["ms"] / prefill["length"]
    alone, on_top = f"{bytes_ms / per_token:.1f}", f"{step['ms'] / bytes_ms:.1f}"
    assert printed(r"its bytes alone at the roof: ([\d.]+)x a prefill token's time; the measured step: ([\d.]+)x", outputs).groups() == (alone, on_top)
    weights_ms = floor["weight_bytes"] / roof / 1e6  # the bar's first part: the products read the weights only
    parts = [f"{weights_ms:.1f}", f"{floor['ms'] - weights_ms:.1f}", f"{step['ms'] - floor['ms']:.1f}"]
    other_slow = _row(second, "matmul floor")["ms"] - _row(second, "matmul floor")["weight_bytes"] / second["roofs"]["bandwidth_gb_s"] / 1e6
    assert printed(r"first machine: weights at the roof ([\d.]+) ms, the products beyond them ([\d.]+) ms, outside the products "
                   r"([\d.]+) ms", outputs).groups() == tuple(parts)  # the figure's labels, printed under it
    assert printed(r"second machine: weights at the roof [\d.]+ ms, the products beyond them ([\d.]+) ms", outputs)[1] == f"{other_slow:.1f}"
    for language in ("en", "zh"):
        text = prose(decoding, language)
        assert all(number in text for number in (alone, on_top, *parts)), language
    other_weights = _row(second, "matmul floor")["weight_bytes"] / second["roofs"]["bandwidth_gb_s"] / 1e6
    other_outside = _row(second, "float32")["ms"] - _row(second, "matmul floor")["ms"]
    assert abs(float(parts[1]) - float(parts[0])) < 0.1 * float(parts[0])  # "the first two parts are about equal" (one run, no spread)
    assert other_slow > 1.5 * max(other_weights, other_outside)  # "on the second the middle part is by far the largest"
    assert "the first two parts are about equal; on the second the middle part is by far the largest" in prose(decoding, "en").replace("\n", " ")
    assert "第一台机器上前两部分差不多大；第二台机器上，中间那部分大得多" in prose(decoding, "zh")
    profile = first["profile"]
    all_ms = profile["total_ms"] / profile["repeats"]
    outside = all_ms - profile["matmul_share"] * all_ms  # the profile's operators outside the products, per step
    assert printed(r"outside the products: ([\d.]+) ms a step in the profile \(of ([\d.]+)\)", outputs).groups() == (f"{outside:.1f}", f"{all_ms:.1f}")
    assert f"{outside:.1f}" in prose(decoding, "en") and f"{outside:.1f}" in prose(decoding, "zh")


def test_lesson14_a_second_row_in_the_same_loop_in_section_5(decoding):
    """Section 6's control for the batch-2 jump: int8's and q4's steps at batch 1 and 2 in the loop that timed float32, by
    hand from the first machine's file; a second row costs them far less than it costs the matmul floor, as the text
    reads it in both languages."""
    outputs = stored_text(decoding)
    first = _saved_run("bench_model.json")
    def step(fmt: str, batch: int) -> float:
        return next(r["ms"] for r in first["timings"] if (r["format"], r["batch"], r["phase"]) == (fmt, batch, "decode"))
    floor_jump = step("matmul floor", 2) / step("matmul floor", 1)
    for name in ("int8", "q4"):
        one, two, ratio = printed(rf"{name} *, same loop: batch 1 → 2: ([\d.]+) → ([\d.]+) ms \(([\d.]+)x\)", outputs).groups()
        assert (one, two, ratio) == (f"{step(name, 1):.1f}", f"{step(name, 2):.1f}", f"{step(name, 2) / step(name, 1):.2f}")
        assert float(ratio) < 1.2 < 1.8 < floor_jump  # "a second row" nearly free there, not there
        for language in ("en", "zh"):
            assert ratio in prose(decoding, language), (language, name)


def test_lesson14_weights_left_batch_two_in_section_10(decoding):
    """Section 6's optional part: the second machine's weights-left step at batch 1 and 2, a second row almost free, by hand from the file."""
    outputs = stored_text(decoding)
    second = _saved_run("bench_model_bf16_cpu.json")
    steps = [next(r["ms"] for r in second["timings"] if (r["format"], r["batch"], r["phase"]) == ("float32 weights-left", b, "decode"))
             for b in (1, 2)]
    assert printed(r"the float32 step weights-left at batch 1 and 2: ([\d.]+) and ([\d.]+) ms", outputs).groups() == tuple(f"{t:.1f}" for t in steps)
    assert steps[1] < 1.05 * steps[0]  # "a second row almost free"
    for language in ("en", "zh"):
        assert all(f"{t:.1f}" in prose(decoding, language) for t in steps), language


def test_lesson14_lesson12s_slopes_against_the_cache_bytes(decoding):
    """Section 5: lesson 12's three fitted slopes against their cache bytes' time at the first machine's roof, a line by
    hand (least squares over the three variants, from bench_decode.json and bench_model.json): close to the bytes' time
    in its factor, plus a part that does not shrink with the cache; quoted in both languages."""
    outputs = stored_text(decoding)
    decode, roof = _saved_run("bench_decode.json"), _saved_run("bench_model.json")["roofs"]["bandwidth_gb_s"]
    xs, ys = [], []
    for name in ("mha", "gqa", "mqa"):
        rows = sorted((r for r in decode["rows"] if r["variant"] == name and r["window"] is None), key=lambda r: r["length"])
        lengths, times = [r["length"] for r in rows], [r["cached_ms"] for r in rows]
        mean_t, mean_y = sum(lengths) / len(lengths), sum(times) / len(times)
        ys.append(1e3 * sum((t - mean_t) * (y - mean_y) for t, y in zip(lengths, times)) / sum((t - mean_t) ** 2 for t in lengths))
        at_128 = next(r for r in rows if r["length"] == 128)
        xs.append(1e3 * at_128["cache_bytes"] / 128 / (roof * 1e6))
    mean_x, mean_y = sum(xs) / 3, sum(ys) / 3
    factor = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    fixed = mean_y - factor * mean_x
    shown = (f"{factor:.2f}", f"{fixed:.1f}")
    assert printed(r"against their cache bytes' time at that roof: ([\d.]+) × the bytes' time \+ ([\d.]+) ms per 1,000", outputs).groups() == shown
    assert 0.9 < factor < 1.3 and fixed > 1  # "follow the bytes", "a part that does not shrink with the cache"
    for language in ("en", "zh"):
        assert all(number in prose(decoding, language) for number in shown), language


def test_lesson14_the_products_alone_take_as_long_on_both_machines(decoding):
    """Section 4: nn.Linear's products alone took about as long on the second machine as on the first though its roof
    is higher, by hand from both saved files; the prose reads the four numbers in both languages."""
    outputs = stored_text(decoding)
    runs = _saved_run("bench_model.json"), _saved_run("bench_model_bf16_cpu.json")
    by_hand = [(f"{_row(run, 'matmul floor')['ms']:.1f}", f"{run['roofs']['bandwidth_gb_s']:.1f}") for run in runs]
    found = printed(r"nn.Linear's products alone: ([\d.]+) ms on the first machine \(roof ([\d.]+) GB/s\), ([\d.]+) ms on the "
                    r"second \(roof ([\d.]+) GB/s\)", outputs).groups()
    assert found == (*by_hand[0], *by_hand[1])
    first_ms, first_roof, second_ms, second_roof = (float(v) for v in found)
    assert abs(first_ms - second_ms) < 0.02 * first_ms and second_roof > 1.3 * first_roof  # "as long", "higher"
    for language in ("en", "zh"):
        assert all(v in prose(decoding, language) for v in found), language


def test_lesson14_the_stored_live_ridge_against_the_bench_as_section_1_reads_it(decoding):
    """Section 1: the live line comparing this machine's roofs with the bench's is consistent with the two roofs printed
    (ridge ratio = matmul ratio / read ratio): the ridge is below the bench's exactly where the read's ratio exceeds the
    matmul's, as the prose reads it."""
    outputs = stored_text(decoding)
    read, matmul, ridge = (float(v) for v in printed(
        r"against the bench's roofs: your read ([\d.]+)x, your matmul ([\d.]+)x, your ridge ([\d.]+)x", outputs).groups())
    live_read, live_matmul = _number(r"read 256 MiB: ([\d.]+) GB/s", outputs), _number(r"float32 matmul: ([\d.]+) GFLOP/s", outputs)
    bench = _saved_run("bench_model.json")
    assert read == pytest.approx(live_read / bench["roofs"]["bandwidth_gb_s"], abs=0.01) and ridge == pytest.approx(matmul / read, abs=0.01)
    assert matmul == pytest.approx(live_matmul / bench["format_roofs"]["float32"], abs=0.01)  # float32's 1,024² roof
    assert (ridge < 1) == (read > matmul) or abs(read - matmul) < 0.02  # your ridge is below the bench's where your read's ratio exceeds


def test_lesson14_the_live_control_and_profile_print_their_own_verdicts(decoding):
    """Section 4's optional live cells read their own printed numbers: the fixed-cache control's difference as a share of
    the faster line, within 5% or not, and the live profile's share against the saved 71%, larger or not."""
    outputs = stored_text(decoding)
    growing = _number(r"eager step, growing cache +([\d.]+) ms", outputs)
    fixed = _number(r"eager step, 256 fixed slots +([\d.]+) ms", outputs)
    gap, within = printed(r"the two differ by (\d+)%: (within|more than) 5%", outputs).groups()
    assert abs(100 * abs(growing - fixed) / min(growing, fixed) - int(gap)) <= 1 and (within == "within") == (int(gap) <= 5)
    live = _number(r"matrix products: (\d+)% of the steps' own CPU time", outputs)
    saved, larger = printed(r"the bench's saved profile: (\d+)%; yours is (larger|not larger)", outputs).groups()
    assert saved == f"{_saved_run('bench_model.json')['profile']['matmul_share']:.0%}"[:-1]
    assert (larger == "larger") == (live > int(saved)) or live == int(saved)
    english = " ".join(prose(decoding, "en").split())
    assert "The last line says which." in english and "the last line compares its share with the saved 71%" in english
    assert "When this lesson was stored, the third machine's two lines" not in english


def test_lesson14_the_roofline_bound_of_a_step_and_of_a_prefill_token(decoding):
    """Sections 2 and 3: at the bench's roofs a decode step's FLOPs take far less than its bytes (2.0 against 22.8 ms), and
    a prefill token at the compute roof is 56% of its measured time, the step's bytes 11.9 times it; by hand from the
    bench's own float32 row (FLOPs and bytes it counted for the same 128-token step), not from the lesson's count."""
    outputs = stored_text(decoding)
    first = _saved_run("bench_model.json")
    roofs = {**first["roofs"], "matmul_gflop_s": first["format_roofs"]["float32"]}  # float32's roof: its 1,024² products
    row = _row(first, "float32")
    shown = f"{row['flops'] / 1e6 / roofs['matmul_gflop_s']:.1f}", f"{(row['weight_bytes'] + row['cache_bytes']) / 1e6 / roofs['bandwidth_gb_s']:.1f}"
    assert printed(r"the decode step at the bench's roofs: its FLOPs ([\d.]+) ms, its bytes ([\d.]+) ms", outputs).groups() == shown
    prefill = _row(first, "float32", "prefill")
    ideal = prefill["flops"] / prefill["length"] / (roofs["matmul_gflop_s"] * 1e6)  # ms
    step = _row(first, "float32")
    bytes_ms = (step["weight_bytes"] + step["cache_bytes"]) / (roofs["bandwidth_gb_s"] * 1e6)
    line = (f"{ideal:.1f}", f"{ideal / (prefill['ms'] / prefill['length']):.0%}", f"{bytes_ms / ideal:.1f}")
    assert printed(r"a prefill token at the compute roof: ([\d.]+) ms, (\d+%) of its measured time; the step's bytes at theirs: "
                   r"([\d.]+)x", outputs).groups() == line
    for language in ("en", "zh"):
        text = prose(decoding, language)
        assert all(v in text for v in (*shown, line[1], line[2])), language


def test_lesson14_the_live_cache_control_prints_its_own_verdict(decoding):
    """Section 4's optional cache control reads its own printed ratio: 'clearly faster' from 1.3 times, 'close' below 1.1,
    as the prose states the thresholds; the ratio is the two printed times'."""
    outputs = stored_text(decoding)
    memory = float(printed(r"blocks' matrices × one vector: ([\d.]+) ms \(\d+ MB from memory", outputs)[1])
    cache, times = (float(v) for v in printed(r"the first block's matrices \d+ times: ([\d.]+) ms \(the same FLOPs; its \d+ MB from cache\): ([\d.]+)x", outputs).groups())
    assert abs(memory / cache - times) < 0.06
    verdict = printed(r"the cache line: (clearly faster|close|in between)", outputs)[1]
    assert verdict == ("clearly faster" if times >= 1.3 else "close" if times < 1.1 else "in between") or abs(times - 1.3) < 0.06 or abs(times - 1.1) < 0.06
    assert "clearly faster from 1.3 times, close below 1.1" in " ".join(prose(decoding, "en").split())
    cached = printed(r"its (\d+) MB from cache", outputs)[1]
    assert f"{cached} MB" in prose(decoding, "en") and f"{cached} MB" in prose(decoding, "zh")  # "whose 14 MB stay in the cache"


def test_lesson14_bfloat16s_prefill_against_its_own_roof(decoding):
    """Section 7: bfloat16's prefill on the first machine, its FLOPs over its time by hand from the file, runs close to
    its format's low compute roof: the reading that the slow rate sets its time."""
    first = _saved_run("bench_model.json")
    prefill = _row(first, "bfloat16", "prefill")
    reached = prefill["flops"] / prefill["ms"] / 1e6
    share = reached / first["format_roofs"]["bfloat16"]
    assert share > 0.8  # "the slow rate sets its time"
    assert printed(r"bfloat16's prefill: ([\d.]+) GFLOP/s, (\d+)% of its compute roof", stored_text(decoding)).groups() == (
        f"{reached:.1f}", f"{share:.0%}".rstrip("%"))
    assert f"{reached:.1f} GFLOP/s, {share:.0%} of that roof" in prose(decoding, "en").replace("\n", " ")
    assert f"{reached:.1f} GFLOP/s，是这道屋顶的 {share:.0%}" in prose(decoding, "zh")


def test_lesson14_float32s_own_step_jumps_from_one_row_to_two(decoding):
    """Section 6: float32's batch-2 step against its batch-1 step, by hand from the first machine's file, as printed and
    read before the matmul floor's jump."""
    first = _saved_run("bench_model.json")
    ms = {b: next(r["ms"] for r in first["timings"] if (r["format"], r["batch"], r["phase"]) == ("float32", b, "decode")) for b in (1, 2)}
    ratio = f"{ms[2] / ms[1]:.2f}"
    assert printed(r"for 16 times the tokens; batch 2 ([\d.]+)x", stored_text(decoding))[1] == ratio
    assert 1.5 < float(ratio) < 2  # "a jump the roofline does not predict", yet not twice
    assert f"float32's step took {ratio} times as long" in prose(decoding, "en").replace("\n", " ")
    assert f"float32 一步的耗时却变成 {ratio} 倍" in prose(decoding, "zh")


def test_lesson14_the_batch_2_jump_and_bfloat16s_gain_as_the_summary_reads_them(decoding):
    """Section 6: most of float32's batch-2 jump is in its products (differences of the printed rows); the summary:
    bfloat16's products alone ran 2.4 times as fast as float32's, yet the rest of its step did not shrink with its bytes."""
    first = _saved_run("bench_model.json")
    ms = {(r["format"], r["batch"]): r["ms"] for r in first["timings"] if r["phase"] == "decode"}
    step_jump = round(ms[("float32", 2)], 1) - round(ms[("float32", 1)], 1)
    floor_jump = round(ms[("matmul floor", 2)], 1) - round(ms[("matmul floor", 1)], 1)
    assert 0.5 < floor_jump / step_jump < 1  # "most of the jump"
    assert f"{floor_jump:.1f} of the step's {step_jump:.1f} ms" in prose(decoding, "en").replace("\n", " ")
    assert f"一步多出的 {step_jump:.1f} 毫秒里有 {floor_jump:.1f} 毫秒是乘法" in prose(decoding, "zh")
    bf16_products, f32_products = first["int8_kernel"]["bfloat16_linear_ms"], ms[("matmul floor", 1)]  # two loops of the run
    faster = f"{f32_products / bf16_products:.1f}"
    assert f"ran {faster} times as fast as float32's" in " ".join(prose(decoding, "en").split())  # a wrapped list item
    assert f"单独计时的乘法速度是 float32 的 {faster} 倍" in prose(decoding, "zh")
    # "the rest of its step did not shrink with its bytes", across two loops: it holds even with bfloat16's products as many
    # ms slower in the step's loop as the same float32 step was between the run's two loops (73.9 against 62.9 ms)
    loop_gap = next(r["decode_ms"] for r in first["rows"] if (r["weights"], r["batch"], r["length"]) == ("float32", 1, 128)) - ms[("float32", 1)]
    assert loop_gap > 5 and ms[("bfloat16", 1)] - (bf16_products + loop_gap) > 0.5 * (ms[("float32", 1)] - f32_products)
    assert "the rest of its step did not shrink with its bytes" in " ".join(prose(decoding, "en").split())
    assert "它一步里其余的时间没有随字节数一起缩短" in prose(decoding, "zh")


def test_lesson14_int8_products_with_the_table_kept_in_bfloat16(decoding):
    """Section 7's fourth kernel line, redone by hand from the file: the int8 model's block matrices at the int8 kernel's
    rate plus its bfloat16 embedding table (SmolLM2-135M: 49,152 × 576 numbers, 2 bytes each) at bfloat16's rate; still
    below bfloat16's one-row products, which the prose reads as about the same, in both languages."""
    first = _saved_run("bench_model.json")
    kern, table = first["int8_kernel"], 49152 * 576 * 2
    blocks = _row(first, "int8")["weight_bytes"] - table
    by_hand = (blocks / (kern["int8_bytes"] / kern["int8_kernel_ms"])
               + table / (kern["bfloat16_bytes"] / kern["bfloat16_linear_ms"]))
    shown = printed(r"the int8 model's own products at these rates \(\d+ MB int8, its \d+ MB table bfloat16\): about ([\d.]+) ms",
                    stored_text(decoding))[1]
    assert shown == f"{by_hand:.1f}" and by_hand < kern["bfloat16_linear_ms"]
    assert f"the same rates give about {shown} ms" in prose(decoding, "en")
    assert f"按两种内核各自的速度估算，它的乘法约需 {shown} 毫秒" in prose(decoding, "zh")


def test_lesson14_every_int8_weight_within_half_a_step_widened_by_the_bfloat16_scale(decoding):
    """Section 7's whole-model check: every int8 weight within half a float32 step, widened by rounding the scale up to
    bfloat16 by at most a factor 1 + 2⁻⁷ (8 significant bits): the 'under 1%' the prose reads, in both languages."""
    worst = printed(r"every int8 weight against its float32 value: at most ([\d.]+) times half a float32 step",
                    stored_text(decoding))[1]
    assert 1.0 <= float(worst) <= 1 + 2 ** -7 + 5e-4  # the printed value is rounded to three digits
    assert f"at most {worst} times half a float32 step" in prose(decoding, "en")
    assert f"最多差 float32 半个步长的 {worst} 倍" in prose(decoding, "zh")


def test_lesson14_bfloat16s_added_rows_run_at_about_two_thirds_of_its_roof(decoding):
    """Section 7: each row added to bfloat16's batch does one row's products (269 MFLOP: 2 FLOPs per 2-byte weight) in
    what it adds to the step; that rate, redone from the file, is about two thirds of bfloat16's large-product roof on
    the first machine, as printed and read in both languages; before it, bfloat16's ridge (below 1 FLOP per byte) and the
    two bounds it gives one row's products, redone from the file."""
    first, batches = _saved_run("bench_model.json"), (1, 2, 4, 8, 16)
    ms = [_row(first, "bfloat16", batch=b)["ms"] for b in batches]
    added = [(t2 - t1) / (b2 - b1) for t1, t2, b1, b2 in zip(ms, ms[1:], batches, batches[1:])]
    mflop = first["int8_kernel"]["bfloat16_bytes"] / 1e6
    rates = [mflop / a for a in added]
    roof = first["format_roofs"]["bfloat16"]
    shown = printed(r"bfloat16's added rows \((\d+) MFLOP each\): ([\d.]+) to ([\d.]+) GFLOP/s, (\d+)% to (\d+)% of its compute roof",
                    stored_text(decoding)).groups()
    assert shown == (f"{mflop:.0f}", f"{min(rates):.1f}", f"{max(rates):.1f}", f"{min(rates) / roof:.0%}"[:-1], f"{max(rates) / roof:.0%}"[:-1])
    assert 0.6 < min(rates) / roof and max(rates) / roof < 0.75  # "about two thirds"
    english, chinese = " ".join(prose(decoding, "en").split()), prose(decoding, "zh")
    assert f"bfloat16's added rows ran at {shown[1]} to {shown[2]} GFLOP/s (the second line), about two thirds" in english
    assert f"bfloat16 多出的每一行算下来是 {shown[1]} 到 {shown[2]} GFLOP/s（第二行）" in chinese
    # the ridge's reading before it: bfloat16's roofs bound one row's products, by hand from the file
    bandwidth = first["roofs"]["bandwidth_gb_s"]
    ridge = printed(r"bfloat16's ridge: ([\d.]+) FLOPs per byte; its one-row products \((\d+) MFLOP for as many MB\): at its roofs "
                    r"([\d.]+) ms by arithmetic, ([\d.]+) ms by bytes; measured ([\d.]+)", stored_text(decoding)).groups()
    assert ridge == (f"{roof / bandwidth:.2f}", f"{mflop:.0f}", f"{mflop / roof:.1f}", f"{mflop / bandwidth:.1f}",
                     f"{first['int8_kernel']['bfloat16_linear_ms']:.1f}")
    assert float(ridge[0]) < 1 and float(ridge[2]) > float(ridge[3])  # "left of a one-row product's 1"; arithmetic the longer
    assert (f"its ridge, {ridge[0]} FLOPs per byte, lies left of a bfloat16 one-row product's 1 FLOP per byte (2 FLOPs per 2-byte weight; the third line)" in english
            and f"at the rate its large product reached, its {ridge[1]} MFLOP take {ridge[2]} ms, more than the {ridge[3]} ms its bytes "
                f"take at the bandwidth roof; they took {ridge[4]}" in english)
    assert (f"bfloat16 的脊点是每字节 {ridge[0]} 次浮点运算" in chinese
            and f"这 {ridge[1]} MFLOP 要 {ridge[2]} 毫秒，比按带宽屋顶读字节的 {ridge[3]} 毫秒还长；实测是 {ridge[4]} 毫秒" in chinese)


def test_lesson14_section7s_two_readings_have_their_controls(decoding):
    """Section 7's controls, redone from both files: each machine's kernel rates predict the difference between its
    bfloat16 and int8 steps (the int8 model's own products: its 107 MB of int8 blocks at the int8 kernel's rate, its
    57 MB table at bfloat16's); where bfloat16's roof is above float32's, bfloat16's batch-8 step is no longer the slower."""
    outputs, english, chinese = stored_text(decoding), " ".join(prose(decoding, "en").split()), prose(decoding, "zh")
    table = 49152 * 576 * 2  # the tied table in bfloat16, by hand
    found = []
    for name in ("first", "second"):
        run = _saved_run("bench_model.json" if name == "first" else "bench_model_bf16_cpu.json")
        kern = run["int8_kernel"]
        own = ((_row(run, "int8")["weight_bytes"] - table) / (kern["int8_bytes"] / kern["int8_kernel_ms"])
               + table / (kern["bfloat16_bytes"] / kern["bfloat16_linear_ms"]))
        steps = _row(run, "bfloat16")["ms"] - _row(run, "int8")["ms"]
        line = printed(rf"{name} machine: int8 kernel ([\d.]+) ms, bfloat16 F.linear ([\d.]+) ms; bfloat16's products less the int8 "
                       r"model's ([\d.]+) ms, the steps' difference ([\d.]+) ms", outputs).groups()
        assert line == (f"{kern['int8_kernel_ms']:.1f}", f"{kern['bfloat16_linear_ms']:.1f}", f"{kern['bfloat16_linear_ms'] - own:.1f}",
                        f"{steps:.1f}")
        found.append(line)
    second_kern = _saved_run("bench_model_bf16_cpu.json")["int8_kernel"]
    assert second_kern["int8_kernel_ms"] < second_kern["bfloat16_linear_ms"]  # "there the int8 kernel is the faster"
    assert abs(float(found[1][2]) - float(found[1][3])) < 1  # "int8's step follows its kernel" on the second machine
    first, second = found
    assert (f"there the int8 kernel is the faster ({second[0]} against {second[1]} ms), and at its kernel rates bfloat16's products take "
            f"{second[2]} ms longer than the int8 model's, where the steps differ by {second[3]}") in english
    assert f"On the first machine the same estimate, {first[2]} ms, and the steps' {first[3]} come from two loops" in english
    assert (f"那里 int8 内核更快（{second[0]} 对 {second[1]} 毫秒），按它的内核速度，bfloat16 的乘法比 int8 副本的多 {second[2]} 毫秒，"
            f"而两者一步差 {second[3]} 毫秒") in chinese and f"第一台机器上同样的估算是 {first[2]} 毫秒，一步之差是 {first[3]} 毫秒" in chinese
    second_run = _saved_run("bench_model_bf16_cpu.json")
    roofs = second_run["format_roofs"]
    batch8 = _row(second_run, "bfloat16", batch=8)["ms"] / _row(second_run, "float32", batch=8)["ms"]
    roof_line = printed(r"the second machine: bfloat16's roof ([\d.]+)x float32's; at batch 8 bfloat16's step ([\d.]+)x as long as "
                        r"float32's", outputs).groups()
    assert roof_line == (f"{roofs['bfloat16'] / roofs['float32']:.2f}", f"{batch8:.2f}") and batch8 < 1 < roofs["bfloat16"] / roofs["float32"]
    assert (f"whose bfloat16 roof is {roof_line[0]} times float32's, supports this, though as no clean control, since its vector width "
            f"and bandwidth differ too (the last line): there bfloat16's batch-8 step took {roof_line[1]} of float32's time") in english
    assert f"第二台机器上 bfloat16 的算力屋顶是 float32 的 {roof_line[0]} 倍" in chinese and f"只有 float32 的 {roof_line[1]} 倍" in chinese

def test_lesson14_each_added_sequence_costs_bfloat16_about_its_one_row_products(decoding):
    """Section 7's batch line, redone from the file: bfloat16's step grows by about its one-row products' time per added
    sequence (arithmetic grows with the rows), float32's by at most a few ms after batch 2; the prose reads the range and
    the bound in both languages, and says bfloat16 is the slower from batch 8, which the rows show."""
    first, batches = _saved_run("bench_model.json"), (1, 2, 4, 8, 16)
    steps = {f: [_row(first, f, batch=b)["ms"] for b in batches] for f in ("bfloat16", "float32")}
    added = {f: [(t2 - t1) / (b2 - b1) for t1, t2, b1, b2 in zip(ms, ms[1:], batches, batches[1:])] for f, ms in steps.items()}
    shown = printed(r"costs a step: bfloat16 ([\d., ]+) ms; float32 ([\d., ]+) ms", stored_text(decoding)).groups()
    assert shown == tuple(", ".join(f"{v:.1f}" for v in added[f]) for f in ("bfloat16", "float32"))
    one_row = first["int8_kernel"]["bfloat16_linear_ms"]
    assert all(0.95 * one_row < v < 1.15 * one_row for v in added["bfloat16"])  # "about as much as its one-row products alone"
    low, high, most = f"{min(added['bfloat16']):.1f}", f"{max(added['bfloat16']):.1f}", f"{max(added['float32'][1:]):.1f}"
    assert float(most) < 0.25 * one_row  # float32's rows share the bytes and cost little
    english = " ".join(prose(decoding, "en").split())
    assert f"costs bfloat16's step {low} to {high} ms" in english and f"float32's step pays at most {most} ms a sequence" in english
    assert f"就多花 {low} 到 {high} 毫秒" in prose(decoding, "zh") and f"最多只多花 {most} 毫秒" in prose(decoding, "zh")
    assert [b for b in batches if steps["bfloat16"][batches.index(b)] > steps["float32"][batches.index(b)]] == [8, 16]


def test_lesson14_int8_batches_against_its_kernel_roof_and_its_bfloat16_table(decoding):
    """The appendix's int8 line, redone from the file: its steps at batches 4 to 16 reach a third of its kernel's roof or
    less, and its bfloat16 table (49,152 × 576) alone needs at batch 16 its FLOPs over bfloat16's roof."""
    first = _saved_run("bench_model.json")
    roofs = first["format_roofs"]
    shares = [_row(first, "int8", batch=b)["flops"] / _row(first, "int8", batch=b)["ms"] / 1e6 / roofs["int8"] for b in (4, 8, 16)]
    table_ms = 2 * 49152 * 576 * 16 / (roofs["bfloat16"] * 1e6)
    line = printed(r"int8 steps at batch 4, 8, 16: (\d+)%, (\d+)%, (\d+)% of its kernel's roof; at batch 16 its bfloat16 table "
                   r"alone takes ([\d.]+) ms", stored_text(decoding)).groups()
    assert line == (*(f"{s:.0%}".rstrip("%") for s in shares), f"{table_ms:.1f}") and max(shares) < 0.4
    english = " ".join(prose(decoding, "en").split())
    assert f"only {line[0]}% to {line[2]}% of its kernel's roof" in english and f"takes {line[3]} ms at batch 16" in english
    assert f"只达到自己内核屋顶的 {line[0]}% 到 {line[2]}%" in prose(decoding, "zh") and f"按 bfloat16 的屋顶就要 {line[3]} 毫秒" in prose(decoding, "zh")


def test_lesson14_the_int8_kernel_is_held_by_neither_of_its_roofs(decoding):
    """Section 7's appendix: the int8 kernel's one-row products at its compute roof (2 FLOPs per weight of every matrix, 268,959,744
    in all: section 2's FlopCounterMode count) and at the bandwidth roof both take far less than it measured."""
    first = _saved_run("bench_model.json")
    kern, roof, bandwidth = first["int8_kernel"], first["format_roofs"]["int8"], first["roofs"]["bandwidth_gb_s"]
    numbers = (f"{268_959_744 / (roof * 1e6):.1f}", f"{kern['int8_bytes'] / 1e6 / bandwidth:.1f}", f"{kern['int8_kernel_ms']:.1f}")
    shown = printed(r"int8 kernel at its roofs \([\d.]+ GFLOP/s, [\d.]+ GB/s\): ([\d.]+) ms by arithmetic, ([\d.]+) ms by bytes; measured ([\d.]+)",
                    stored_text(decoding)).groups()
    assert shown == numbers and 2 * max(float(n) for n in numbers[:2]) < float(numbers[2])
    assert (f"its bytes take {numbers[1]} ms of that (the line below, which also puts all its arithmetic at {numbers[0]} ms at its "
            "compute roof: neither roof holds it there)") in " ".join(prose(decoding, "en").split())
    assert f"读字节占其中 {numbers[1]} 毫秒（下面那一行；它全部的运算按算力屋顶也只要 {numbers[0]} 毫秒，哪道屋顶都拖不住它）" in prose(decoding, "zh")


def test_lesson14_weight_rounding_against_bfloat16_arithmetic_from_the_saved_rows(decoding):
    """The appendix's quality split, redone from the two files: int8 weights with float32 arithmetic (bench --quality-split)
    move the largest logit by most of what int8 with bfloat16 arithmetic does and by more than bfloat16 does; the prose
    reads the printed numbers in both languages; the split's float32 run equals the first machine's (float32 arithmetic)."""
    first, split = _saved_run("bench_model.json")["quality"], _saved_run("bench_quality_split.json")["quality"]
    alone, both, bf16 = (q["largest_logit_difference"] for q in (split["int8 float32"], first["int8"], first["bfloat16"]))
    assert bf16 < alone < both and alone > 0.5 * both  # "close to the 2.03", "about twice bfloat16's 0.82"
    assert split["float32"]["perplexity"] == first["float32"]["perplexity"]
    agree = [f"{q['teacher_forced_agreement']:.1%}" for q in (split["int8 float32"], first["int8"], first["bfloat16"])]
    english = " ".join(prose(decoding, "en").split())
    assert (f"moved the largest logit by {alone:.2f}, close to the {both:.2f} that the speed rows' int8 reached, whose arithmetic, "
            f"table and scales are bfloat16 too, and about twice bfloat16's {bf16:.2f}") in english
    low, high = sorted(agree, key=lambda v: float(v[:-1]))[::2]  # "too close to rank": the column's range
    assert float(high[:-1]) - float(low[:-1]) < 1 and f"teacher-forced agreement {low} to {high}" in english
    assert f"最大 logit 差就有 {alone:.2f}，接近速度那几行的 int8 的 {both:.2f}" in prose(decoding, "zh")
    assert f"教师强制一致率在 {low} 到 {high} 之间" in prose(decoding, "zh")
    printed(rf"int8 weights, float32 arithmetic +{agree[0][:-1]}% +{alone:.2f} ", stored_text(decoding))


def test_lesson14_the_int8_kernel_pays_most_of_its_time_once_per_weight(decoding):
    """Section 7: a second sequence costs int8's step far less than its kernel's one-row time (section 6's printed rows,
    43.1 → 49.8), so at least the difference is paid once per weight read; bfloat16's second sequence costs about its
    products (the contrast its paragraph draws); the estimate and the steps stay within a few ms ("about even"). Redone from
    the file, read in both languages."""
    first = _saved_run("bench_model.json")
    int8 = [round(_row(first, "int8", batch=b)["ms"], 1) for b in (1, 2)]
    added, kernel = f"{int8[1] - int8[0]:.1f}", first["int8_kernel"]["int8_kernel_ms"]
    bf16_added = f"{_row(first, 'bfloat16', batch=2)['ms'] - _row(first, 'bfloat16', batch=1)['ms']:.1f}"
    fixed = kernel - float(added)
    assert fixed > 0.5 * kernel and round(fixed) == 11  # "at least about 11 of the kernel's 18.0 ms"
    english = " ".join(prose(decoding, "en").split())
    assert f"a second sequence added only {added} ms to int8's step (its printed rows, {int8[0]} → {int8[1]})" in english
    assert f"so by this estimate across two loops at least about 11 of the kernel's {kernel:.1f} ms ({kernel:.1f} − {added}) is paid once per weight read" in english
    at_roof = first["int8_kernel"]["int8_bytes"] / 1e6 / first["roofs"]["bandwidth_gb_s"]  # its bytes at the bandwidth roof, ms
    other = f"{kernel:.1f}"  # the kernel as printed, less the printed increment and the printed bytes' time
    other = f"{float(other) - float(added) - float(f'{at_roof:.1f}'):.1f}"
    assert other == f"{fixed - at_roof:.1f}" and f"its bytes take {at_roof:.1f} ms of that (the line below" in english and f"The other {other} ms or more" in english
    assert f"读字节占其中 {at_roof:.1f} 毫秒" in prose(decoding, "zh") and f"其余至少约 {other} 毫秒" in prose(decoding, "zh")
    floor = _row(first, "matmul floor")
    assert f"as float32's products do with nothing to widen ({floor['weight_bytes'] / floor['ms'] / 1e6:.1f} GB/s)" in english
    assert f"int8 的一步只多 {added} 毫秒（按第 6 节打印的 {int8[0]} → {int8[1]} 相减）" in prose(decoding, "zh")
    assert float(bf16_added) > 2 * float(added)  # bfloat16's second sequence costs it far more: the contrast the bfloat16 paragraph reads
    assert f"where a second sequence cost int8's step {added}" in english and f"而 int8 多一条序列只多 {added} 毫秒" in prose(decoding, "zh")
    kern, table = first["int8_kernel"], 49152 * 576 * 2  # the int8 model's own products at the kernels' rates, as section 7 prints
    own = ((_row(first, "int8")["weight_bytes"] - table) / (kern["int8_bytes"] / kern["int8_kernel_ms"])
           + table / (kern["bfloat16_bytes"] / kern["bfloat16_linear_ms"]))
    steps = [kern["bfloat16_linear_ms"] - own, _row(first, "bfloat16")["ms"] - _row(first, "int8")["ms"]]
    assert all(0 < v < 3 for v in steps)  # "about even": a few ms either way, which two loops cannot order
    assert "about bfloat16's 19.6, and their steps are indeed about even" in " ".join(prose(decoding, "en").split())


def test_lesson14_bfloat16s_rest_outside_its_products_on_both_machines(decoding):
    """The appendix's line for section 7, redone from both files: at batch 1, bfloat16's step minus its one-row products against float32's
    step minus the matmul floor. On the first machine the difference is smaller than the gap between two loops of the same
    run on one float32 step (so the text reads only 'did not shrink with its bytes'); on the second, with bfloat16
    instructions, the two rests are within a ms. Read in both languages."""
    runs = [_saved_run(name) for name in ("bench_model.json", "bench_model_bf16_cpu.json")]
    rests = [(_row(r, "bfloat16")["ms"] - r["int8_kernel"]["bfloat16_linear_ms"], _row(r, "float32")["ms"] - _row(r, "matmul floor")["ms"])
             for r in runs]
    shown = [f"{v:.1f}" for pair in rests for v in pair]
    assert printed(r"batch 1, outside the one-row products: bfloat16 ([\d.]+) ms, float32 ([\d.]+) ms; on the second machine "
                   r"\(bfloat16 instructions\): ([\d.]+) and ([\d.]+) ms", stored_text(decoding)).groups() == tuple(shown)
    first = runs[0]
    loop_gap = next(r["decode_ms"] for r in first["rows"] if (r["weights"], r["batch"], r["length"]) == ("float32", 1, 128)) - _row(first, "float32")["ms"]
    assert rests[0][0] - rests[0][1] < loop_gap  # "two loops of one run disagreed by more"
    assert rests[0][0] - rests[0][1] > 5 * abs(rests[1][0] - rests[1][1])  # the excess shows on the first machine only
    english = " ".join(prose(decoding, "en").split())
    assert (f"Outside its products bfloat16's step left {shown[0]} ms against float32's {shown[1]}. Two loops of one run disagreed "
            f"by more, {loop_gap:.1f} ms on the same float32 step") in english
    assert f"which has bfloat16 instructions, the two were {shown[2]} and {shown[3]} ms" in english
    chinese = prose(decoding, "zh")
    assert f"乘法之外，bfloat16 的一步剩 {shown[0]} 毫秒，float32 剩 {shown[1]} 毫秒" in chinese and f"（{loop_gap:.1f} 毫秒，见附录“第 3 节补充”）还小" in chinese
    assert f"这两个数是 {shown[2]} 和 {shown[3]} 毫秒" in chinese


def test_lesson14_section_8s_appendix_prints_the_second_machines_q4_split_it_reads(decoding):
    second = _saved_run("bench_model_bf16_cpu.json")
    products, step = _row(second, "matmul floor q4")["ms"], _row(second, "q4")["ms"]
    assert printed(r"the second machine: q4's products alone ([\d.]+) ms of its ([\d.]+) ms step", stored_text(decoding)).groups() == (
        f"{products:.1f}", f"{step:.1f}")
    assert f"found them {products:.1f} ms of its {step:.1f} ms step (the line below)" in " ".join(prose(decoding, "en").split())
    assert f"{step:.1f} 毫秒的一步里乘法占 {products:.1f} 毫秒（下面的单元格）" in prose(decoding, "zh")


def test_lesson14_the_summary_gives_the_issues_two_answers(decoding):
    """The summary's two answers, redone from the file: int8 about even with bfloat16 because its kernel reads its bytes
    slower (7.5 against 13.7 GB/s), and bfloat16 slower from batch 8 (its own compute roof 0.13 of float32's, about 20 ms per added sequence); plus the
    appendix's control for section 5, the second machine's growth per token against its bytes, in both languages."""
    first, second = _saved_run("bench_model.json"), _saved_run("bench_model_bf16_cpu.json")
    roofs, kern = first["format_roofs"], first["int8_kernel"]
    added = [(_row(first, "bfloat16", batch=b)["ms"] - _row(first, "bfloat16", batch=a)["ms"]) / (b - a)
             for a, b in ((1, 2), (2, 4), (4, 8), (8, 16))]
    assert all(abs(v - 20) < 2.5 for v in added)  # "about 20 ms"
    eight = (f"{_row(first, 'bfloat16', batch=8)['ms']:.1f}", f"{_row(first, 'float32', batch=8)['ms']:.1f}")
    rates = [kern[f"{name}_bytes"] / kern[ms] / 1e6 for name, ms in (("int8", "int8_kernel_ms"), ("bfloat16", "bfloat16_linear_ms"))]
    english = " ".join(prose(decoding, "en").split())
    assert f"bfloat16's is {roofs['bfloat16'] / roofs['float32']:.2f} of float32's" in english
    assert f"its kernel read its bytes at {rates[0]:.1f} GB/s against bfloat16's {rates[1]:.1f}" in english and rates[0] < rates[1]
    assert f"int8 内核读字节只有 {rates[0]:.1f} GB/s" in prose(decoding, "zh")
    assert f"from batch 8 it is slower than float32 ({eight[0]} against {eight[1]} ms)" in english
    assert f"从批大小 8 起反而比 float32 慢（{eight[0]} 对 {eight[1]} 毫秒）" in prose(decoding, "zh")
    lengths = {r["length"]: r["decode_ms"] for r in second["rows"] if (r["weights"], r["batch"]) == ("float32", 1)}
    per_token = f"{1e3 * (lengths[512] - lengths[32]) / 480:.1f}"
    token_us = f"{1e6 * 2 * 30 * 3 * 64 * 4 / (second['roofs']['bandwidth_gb_s'] * 1e9):.1f}"  # a token's float32 keys and values
    assert f"grew {per_token} µs per added token against {token_us} µs for its bytes (the last line)" in english
    assert f"每多一个词元多 {per_token} 微秒，按屋顶读它的字节只要 {token_us} 微秒（最后一行）" in prose(decoding, "zh")


def test_lesson14_the_live_quality_lines_print_their_own_ordering(decoding):
    """The appendix's three live copies: the last line's ordering follows from the three printed mean logit differences
    (int8 weights alone above bfloat16's; bfloat16 arithmetic on top adding less than the weights alone), as the prose
    says how to read it."""
    outputs = stored_text(decoding)
    mean = {name: float(printed(rf"(?m)^{re.escape(name)} +mean logit difference ([\d.]+)", outputs)[1])
            for name in ("bfloat16", "int8", "int8, float32 arithmetic")}
    above, adds, same = printed(r"int8 weights alone (above|not above) bfloat16's; bfloat16 arithmetic on top adds (less|more) than "
                                r"that: (as|not as) the saved rows", outputs).groups()
    alone, both = mean["int8, float32 arithmetic"], mean["int8"]
    assert (above == "above") == (alone > mean["bfloat16"]) and (adds == "less") == (both - alone < alone)
    assert (same == "as") == (above == "above" and adds == "less")
    assert "The last line says whether your three lines order as the saved rows do" in " ".join(prose(decoding, "en").split())
