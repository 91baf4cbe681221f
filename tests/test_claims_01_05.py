"""Sentences of lessons 1-5 that read a stored number agree with that number, in both languages.

Each test reads a lesson's stored (English-run) output and the prose next to it, and checks what is
mechanical: the winner a sentence names is the winner the printed matrix has, the numbers quoted are
the numbers printed. The numbers themselves come from the stored outputs, never from this file, so a
re-run that changes them fails here until the prose is re-read. (tests/test_book_numbers.py checks
the book's values independently.)
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TOKENS = ["Your", "journey", "starts", "with", "one", "step"]


def lesson(stem: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)


def stored(nb: nbformat.NotebookNode, marker: str) -> str:
    """The stored text output of the one code cell whose source holds `marker`."""
    cells = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    assert len(cells) == 1, f"{len(cells)} code cells hold {marker!r}"
    return "".join(o.get("text", "") for o in cells[0].outputs if o.output_type == "stream")


def prose(nb: nbformat.NotebookNode, marker: str) -> tuple[str, str]:
    """The English markdown cell that holds `marker`, and the Chinese cell right after it."""
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and marker in c.source
             and "en" in c.metadata.get("tags", [])]
    assert len(found) == 1, f"{len(found)} English cells hold {marker!r}"
    en, zh = nb.cells[found[0]], nb.cells[found[0] + 1]
    assert "zh" in zh.metadata.get("tags", [])
    return en.source, zh.source


def numbers(text: str) -> list[str]:
    return re.findall(r"\d+\.\d+", text)


def matrix(text: str) -> list[list[float]]:
    """The rows of the first printed tensor in `text`."""
    body = text[text.index("tensor(") : text.index(")", text.index("tensor("))]
    return [[float(v) for v in numbers(row)] for row in body.split("],")]


def top_keys(rows: list[list[float]]) -> list[str]:
    return [TOKENS[max(range(len(row)), key=row.__getitem__)] for row in rows]


def same_numbers(en: str, zh: str, quoted: list[str]) -> None:
    for value in quoted:
        assert value in en and value in zh, f"{value} should be quoted in both languages"


@pytest.fixture(scope="module")
def lesson_1_top_keys() -> list[str]:
    scores = matrix(stored(lesson("01_dot_products"), "all_scores = inputs @ inputs.T"))
    assert len(scores) == 6 and all(len(row) == 6 for row in scores)
    return top_keys(scores)


def test_lesson_1_names_the_rows_that_do_not_peak_on_themselves(lesson_1_top_keys):
    nb = lesson("01_dot_products")
    scores = matrix(stored(nb, "all_scores = inputs @ inputs.T"))
    en, zh = prose(nb, "The diagonal is not always the largest score of its row")
    others = {token: top for token, top in zip(TOKENS, lesson_1_top_keys) if top != token}
    assert others, "the sentence says some row peaks elsewhere"
    for token, top in others.items():
        assert f'"{token}"' in en and f"“{token}”" in zh, token
    assert '"one" with "starts"' in en and others["one"] == "starts"
    assert {t for t, top in others.items() if top == "journey"} == {"starts", "with", "step"}
    starts, journey = TOKENS.index("starts"), TOKENS.index("journey")
    quoted = [f"{scores[starts][journey]:.4f}", f"{scores[starts][starts]:.4f}"]
    assert f"scores {quoted[0]} with \"journey\" but {quoted[1]} with itself" in en
    same_numbers(en, zh, quoted)


def test_lesson_4_cites_lesson_1_correctly(lesson_1_top_keys):
    en, zh = prose(lesson("04_qkv_projections"), "Nothing guaranteed that")
    named = re.search(r"in lesson 1's matrix (.*?) score highest with \"journey\"", en).group(1)
    expected = {t for t, top in zip(TOKENS, lesson_1_top_keys) if top == "journey" and t != "journey"}
    assert set(re.findall(r'"(\w+)"', named)) == expected
    assert all(f"“{token}”" in zh for token in expected)


def test_lesson_4_top_key_table_and_its_reading(lesson_1_top_keys):
    nb = lesson("04_qkv_projections")
    out = stored(nb, "lesson_1 = inputs @ inputs.T")
    table = {line.split()[0]: line.split()[1:] for line in out.splitlines()
             if len(line.split()) == 4 and line.split()[0] in TOKENS}
    assert list(table) == TOKENS
    assert [row[0] for row in table.values()] == lesson_1_top_keys, "lesson 4 reprints lesson 1's top keys"
    assert "symmetric, like lesson 1's scores? False" in out and "symmetric again: True" in out
    en, zh = prose(nb, "The table answers a second question")
    if "every row's top key is \"journey\"" in en:
        assert all(row[-2:] == ["journey", "journey"] for row in table.values()), "the prose says every row"
    same_numbers(en, zh, re.findall(r"Your -> journey: (\d\.\d{4})\s+journey -> Your: (\d\.\d{4})", out)[0])


def test_lesson_4_pairs_above_both_self_scores():
    nb = lesson("04_qkv_projections")
    out = stored(nb, "def above_both_self_scores")
    lines = dict(re.findall(r"^(.*?): pairs above both self-scores: (.*)$", out, flags=re.M))
    assert lines["lesson 1"] == "[]" and lines["W_k = W_q"] == "[]", "one matrix cannot break the bound"
    assert lines["own W_k"] == "[('Your', 'step')]"
    quoted = list(re.search(r"Your -> step: (\S+)\s+Your -> Your: (\S+)\s+step -> step: (\S+)", out).groups())
    assert float(quoted[0]) > max(float(quoted[1]), float(quoted[2]))
    en, zh = prose(nb, "Only the separate matrices break rule (2)")
    assert '"Your" meets the key of "step"' in en
    same_numbers(en, zh, quoted)


def scaling_table(out: str) -> dict[int, list[str]]:
    return {int(line.split()[0]): line.split()[1:] for line in out.splitlines() if re.match(r"\s*\d+\s", line)}


def test_lesson_3_reads_the_softmax_input_gradient():
    nb = lesson("03_normalization")
    table = scaling_table(stored(nb, "results.append((d_k"))
    raw, scaled = {d: float(row[-2]) for d, row in table.items()}, {d: float(row[-1]) for d, row in table.items()}
    en, zh = prose(nb, "the gradient at the softmax's input falls from")
    quoted = re.search(r"falls from (\d\.\d+) at \$d_k = 16\$ to (\d\.\d+) at \$d_k = 1024\$", en).groups()
    assert quoted == (f"{raw[16]:.3f}", f"{raw[1024]:.3f}") and raw[1024] < raw[16]
    low, high = map(float, re.search(r"stays between (\d\.\d+) and (\d\.\d+)", en).groups())
    assert low <= min(scaled.values()) and max(scaled.values()) <= high
    same_numbers(en, zh, [*quoted, f"{low:.2f}", f"{high:.2f}"])


def test_lesson_3_measured_further_back_the_comparison_turns():
    nb = lesson("03_normalization")
    out = stored(nb, "unscaled_more = ")
    assert "from d_k = 4 on, the unscaled run sends more gradient to q·k and to q: True" in out
    table = scaling_table(out)
    for d_k, (raw_s, scaled_s, raw_q, scaled_q) in table.items():
        if d_k > 1:
            assert float(raw_s) > float(scaled_s) and float(raw_q) > float(scaled_q), d_k
    en, zh = prose(nb, "the unscaled run sends the larger gradient back")
    quoted = re.search(r"at \$d_k = 1024\$, (\S+) against (\S+) at the scores and (\S+) against (\S+) at the query", en).groups()
    assert list(quoted) == table[1024]
    same_numbers(en, zh, list(quoted))


def test_lesson_1_roadmap_names_every_lesson_of_the_readme():
    readme = (NOTEBOOKS.parent / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| \[(.+?)\]\(notebooks/\d\d_\w+\.ipynb\) \| (.+?) \|$", readme, flags=re.M)
    assert len(rows) >= 16, "the README lists every lesson"
    en, zh = prose(lesson("01_dot_products"), "## Where this series goes")
    for number, title_en, title_zh in rows:
        assert f"{number}. **{title_en}.**" in en, f"lesson {number} is missing from the English roadmap"
        assert f"{number}. **{title_zh}**。" in zh, f"lesson {number} is missing from the Chinese roadmap"


def test_lesson_3_scaled_largest_weight_is_flat_from_d_k_4():
    nb = lesson("03_normalization")
    table = scaling_table(stored(nb, "results.append((d_k"))
    scaled = {d: float(row[4]) for d, row in table.items()}  # the "max w scaled" column
    en, zh = prose(nb, "the gradient at the softmax's input falls from")
    low, high = map(float, re.search(r"from \$d_k = 4\$ on the largest weight stays between (\d\.\d+) and (\d\.\d+)",
                                     en).groups())
    assert all(low - 0.005 <= w < high + 0.005 for d, w in scaled.items() if d >= 4)
    assert scaled[1] < low - 0.005, "d_k = 1 is the dip the next paragraph explains"
    assert f"最大权重（{table[1][4]}）" in zh or f"（{table[1][4]}）" in zh
    same_numbers(en, zh, [f"{low:.2f}", f"{high:.2f}", table[1][4]])


def test_lesson_3_the_dip_at_d_k_1_is_read_from_its_check():
    nb = lesson("03_normalization")
    out = stored(nb, "def mean_largest_weight")
    table = {int(d): list(row) for d, *row in re.findall(r"^\s*(\d+)\s+(\d\.\d+)\s+(\d\.\d+)\s+(\d\.\d+)\s*$", out, flags=re.M)}
    assert sorted(table) == [1, 4, 16]
    uniform, fixed, normal_entries = (float(v) for v in table[1])
    normal_scores = float(re.search(r"16 scores drawn from N\(0, 1\): largest weight (\d\.\d+)", out).group(1))
    share = re.search(r"fixing \|q\| closes (\d+)% of the gap to normal scores; most of the dip remains: True", out).group(1)
    # the share follows from the printed numbers, by hand, to the rounding of three decimals
    assert abs((fixed - uniform) / (normal_scores - uniform) - int(share) / 100) < 0.03
    assert fixed - uniform < (normal_scores - uniform) / 2, "fixing |q| closes less than half of the gap"
    assert uniform < normal_entries < normal_scores, "normal entries lie between the two"
    en, zh = prose(nb, "lifts the largest weight at $d_k = 1$ only from")
    assert f"only from {table[1][0]} to {table[1][1]}" in en and f"give {normal_scores:.3f}" in en
    assert f"closes {share}% of the gap" in en and f"{share}% 的差距" in zh
    assert f"Normal entries give {table[1][2]} at $d_k = 1$" in en
    sixteen = sorted(table[16])
    assert f"({sixteen[0]} to {sixteen[-1]})" in en and f"（{sixteen[0]} 到 {sixteen[-1]}）" in zh
    same_numbers(en, zh, [table[1][0], table[1][1], table[1][2], f"{normal_scores:.3f}", sixteen[0], sixteen[-1]])


def test_lesson_3_no_weight_dominates_the_context_vectors():
    nb = lesson("03_normalization")
    out = stored(nb, "cosine = context @ inputs[1]")
    low, high = re.search(r"all 36 weights lie between (\d\.\d+) and (\d\.\d+)", out).groups()
    assert float(high) < 0.5, "no weight dominates its row"
    en, zh = prose(nb, "The six context vectors are almost the same")
    assert "almost even" not in en and f"between {low} and {high}" in en and f"{low} 到 {high} 之间" in zh


def test_lesson_2_reads_the_float32_rounding_as_printed():
    nb = lesson("02_vectors_in_3d")
    out = stored(nb, "off_by = ")
    off_by = float(re.search(r"a cosine of 1 - 1e-7 is an angle of (\d\.\d+)°", out).group(1))
    assert abs(off_by - 0.0256) < 1e-4  # arccos(1 - 1e-7) = sqrt(2e-7) rad = 0.0256°, by hand
    assert "float32 cosine 1.00000012: arccos gives nan°, with the clamp 0.0000°" in out
    assert re.search(r"float32 cosine 0\.99999994: arccos gives 0\.0198°", out)
    en, zh = prose(nb, "## Angle")
    assert f"about {off_by:.2f}°" in en and f"约 {off_by:.2f}°" in zh and "0.02°" not in en + zh


@pytest.mark.parametrize("number", range(1, 8))
def test_lessons_1_to_7_close_with_the_right_links(number):
    readme = (NOTEBOOKS.parent / "README.md").read_text(encoding="utf-8")
    rows = {int(n): (en, path, zh) for n, en, path, zh in
            re.findall(r"^\| (\d+) \| \[(.+?)\]\(notebooks/(\d\d_\w+\.ipynb)\) \| (.+?) \|$", readme, flags=re.M)}
    nb = lesson(rows[number][1].removesuffix(".ipynb"))
    en, zh = nb.cells[-2].source, nb.cells[-1].source
    assert "en" in nb.cells[-2].metadata.get("tags", []) and "zh" in nb.cells[-1].metadata.get("tags", [])
    for other in (number - 1, number + 1):
        if other in rows:
            title_en, path, title_zh = rows[other]
            assert f"[Lesson {other} · {title_en}]({path})" in en, other
            assert f"[第 {other} 课 · {title_zh}]({path})" in zh, other
