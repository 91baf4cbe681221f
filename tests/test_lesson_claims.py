"""Sentences that read a stored number agree with it (issue 28, item 4).

Each test takes a number from a lesson's stored output and the sentence that reads it, in both
languages, and checks that they agree: the count the text quotes is the count printed, and a word
like "slower" goes with a ratio below 1. Re-executing a lesson or re-running `make bench` with other
numbers then fails here until the sentence is re-read. Where a reference exists outside the lesson
(the book's printed mask), it is typed in here, not taken from the lesson.
"""

from __future__ import annotations

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
    """The text says the machine that ran the lesson gives the book's mask; the stored line must say True."""
    assert printed(r"nn\.Dropout on this computer draws the book's mask: (\w+)", stored_text(dropout))[1] == "True"
    assert quoted(r"its `nn\.Dropout` gives the book's mask", prose(dropout, "en"))
    assert quoted(r"它的 `nn\.Dropout` 给出的就是书中的掩码", prose(dropout, "zh"))


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


def test_lesson08_one_qkv_sentence_reads_the_ratio_the_right_way():
    nb = lesson("08_fused_attention.ipynb")
    line = printed(r"book (\d+) ms, one QKV projection (\d+) ms.*\n\s+one QKV projection: (\d\.\d\d)x as fast as the book; "
                   r"SDPA on top: (\d\.\d\d)x as fast again", stored_text(nb))
    book_ms, explicit_ms, one_qkv, sdpa = int(line[1]), int(line[2]), line[3], line[4]
    english, chinese = prose(nb, "en"), prose(nb, "zh")
    # the prose types no ratio (tests/test_bench.py): it names the printed one and reads its direction
    if float(one_qkv) < 1:
        assert "is slower than the book's module here: its ratio on that line is below 1" in english
        assert "反而比书中的模块慢：这一行的第一个比值小于 1" in chinese
    else:
        assert "is faster than the book's module" in english and "比书中的模块快" in chinese
    assert float(sdpa) > 1 and "Nearly all the gain comes from SDPA" in english and "几乎全部加速都来自 SDPA" in chinese
    for text in (english, chinese):  # the worked example of "ratio of medians is not the printed ratio"
        example = printed(r"[(（](\d+) / (\d+) (?:is|是) (\d\.\d\d)[，,] ?(?:not|不是) (\d\.\d\d)[)）]", text)
        assert (int(example[1]), int(example[2])) == (book_ms, explicit_ms)
        assert example[3] == f"{book_ms / explicit_ms:.2f}" and example[4] == one_qkv and example[3] != one_qkv


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
