"""The build tools: parity problems are found, and the copies drop exactly what they should."""

from pathlib import Path

import nbformat

from attention_utils.course import publish

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "01_dot_products.ipynb"


def markdown(text: str, language: str):
    return nbformat.v4.new_markdown_cell(text, metadata={"tags": [language]})


def test_parity_finds_broken_pairs():
    nb = nbformat.v4.new_notebook()
    nb.cells = [markdown("## Title $x^2$", "en"), markdown("## 标题 $x^2$", "zh")]
    assert publish.parity_problems(nb) == []
    nb.cells[1] = markdown("### 标题 $x^3$ ![](a.png)", "zh")
    problems = " ".join(publish.parity_problems(nb))
    assert "heading levels" in problems and "formulas" in problems and "image links" in problems
    nb.cells = [nb.cells[1], nb.cells[0]]
    assert "alternate" in publish.parity_problems(nb)[0]
    nb.cells = [markdown("## A", "en"), markdown("## B", "zh")]
    assert "no Chinese" in publish.parity_problems(nb)[0]


def test_parity_allows_a_chinese_figure_for_an_english_one():
    nb = nbformat.v4.new_notebook()
    nb.cells = [markdown("![t](../figures/time_en.png)", "en"), markdown("![时间](../figures/time_zh.png)", "zh")]
    assert publish.parity_problems(nb) == []
    for other in ("../figures/memory_zh.png", "../figures/time_zh.svg", "../figures/time_en.png_zh", "time_zh.png"):
        nb.cells[1] = markdown(f"![时间]({other})", "zh")
        assert "image links differ" in " ".join(publish.parity_problems(nb)), other
    nb.cells = [markdown("![a](x_en.png) ![b](y.png)", "en"), markdown("![甲](x_zh.png) ![乙](y_zh.png)", "zh")]
    assert "image links differ" in " ".join(publish.parity_problems(nb))  # only an _en name may become _zh


def test_copies_drop_the_other_language_and_the_solutions(tmp_path):
    written = publish.write_copies(tmp_path, ROOT / "notebooks")
    assert {p.parent.name for p in written} == {"en", "zh", "student"}
    original = nbformat.read(LESSON, as_version=4)
    code_cells = sum(c.cell_type == "code" for c in original.cells)
    for language, other in (("en", "zh"), ("zh", "en")):
        copy = nbformat.read(tmp_path / language / LESSON.name, as_version=4)
        languages = {publish.language_of(c) for c in copy.cells if c.cell_type == "markdown"}
        assert languages == {language}
        assert sum(c.cell_type == "code" for c in copy.cells) == code_cells
    student = nbformat.read(tmp_path / "student" / LESSON.name, as_version=4)
    solutions = sum("solution" in publish.tags(c) for c in original.cells)
    assert solutions >= 2
    assert not any("solution" in publish.tags(c) for c in student.cells)
    assert len(student.cells) == len(original.cells) - solutions
