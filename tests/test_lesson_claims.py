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
    return (" 和 " if language == "zh" else " and ").join(f"{a:.2f}" for a in accuracies)


@pytest.mark.parametrize("part, model, key_size, pairs", [
    ("capacity", "linear", 8, 4), ("capacity", "linear", 8, 24), ("capacity", "linear", 16, 4),
    ("capacity", "linear", 16, 24), ("capacity", "delta", 8, 4), ("capacity", "delta", 16, 4),
    ("capacity", "window", 8, 4), ("capacity", "hybrid_window", 8, 4), ("capacity", "two_linear", 8, 24),
    ("rebind", "linear", 32, 2), ("rebind", "linear", 32, 8), ("rebind", "softmax", 32, 2),
    ("cliff", "delta", 8, 2), ("cliff", "delta", 8, 16), ("cliff", "linear", 8, 2), ("cliff", "delta", 4, 16),
    ("cliff", "linear", 4, 16)])
def test_lesson16_grid_readings_quote_both_seeds_of_the_saved_grid(fixed_memory, part, model, key_size, pairs):
    """Each sentence that reads a grid cell quotes both seeds as the saved file has them (a re-run grid fails here)."""
    saved = json.loads((NOTEBOOKS.parent / "figures" / "bench_recall.json").read_text(encoding="utf-8"))
    found = [row["accuracy"] for row in sorted(saved["rows"], key=lambda r: r["seed"]) if row["part"] == part
             and row["model"] == model and row["key_size"] == key_size and row["pairs"] == pairs]
    assert len(found) == 2
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
