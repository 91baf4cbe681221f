"""Every lesson is well-formed: bilingual pairs, local images, clean stored outputs, lesson parts."""

import re
from pathlib import Path

import nbformat
import pytest

from attention_utils.course.publish import image_links, installed_versions, lesson_paths, parity_problems, tags

ROOT = Path(__file__).resolve().parents[1]
LESSONS = lesson_paths(ROOT / "notebooks")
REMOTE = re.compile(r"""(src|href)\s*=\s*["']?(https?:)?//|!\[[^\]]*\]\(\s*(https?:)?//|@import\s+url\(\s*["']?(https?:)?//""")
ABSOLUTE = re.compile(r"(/root/|/home/\w|/work/|/tmp/|[A-Z]:\\\\Users)")


def lesson_id(path: Path) -> str:
    return path.stem


@pytest.fixture(params=LESSONS, ids=lesson_id)
def lesson(request):
    return request.param, nbformat.read(request.param, as_version=4)


def test_there_are_lessons():
    assert LESSONS, "no notebooks/NN_*.ipynb found"


def test_bilingual_parity(lesson):
    _, nb = lesson
    assert parity_problems(nb) == []


def test_images_are_local_and_exist(lesson):
    path, nb = lesson
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        assert not REMOTE.search(cell.source), f"remote resource in: {cell.source[:80]}"
        for link in image_links(cell.source):
            assert (path.parent / link).resolve().is_file(), f"missing image {link}"


def test_links_to_lessons_resolve(lesson):
    path, nb = lesson
    for cell in nb.cells:
        for target in re.findall(r"\]\(([^)#\s]+\.ipynb)", cell.source):
            assert (path.parent / target).is_file(), f"{target} does not exist yet"


def test_stored_outputs_are_from_one_clean_run(lesson):
    _, nb = lesson
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    for cell in code:
        for output in cell.outputs:
            assert output.output_type != "error", f"stored error in: {cell.source[:60]}"
            assert output.get("name") != "stderr", f"stored stderr (a warning?) in: {cell.source[:60]}"


def test_kernel_paths_and_versions(lesson):
    path, nb = lesson
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert not ABSOLUTE.search(path.read_text(encoding="utf-8")), "absolute path stored in the notebook"
    assert nb.metadata.get("attention_series", {}).get("versions") == installed_versions(), (
        "outputs were produced with other package versions: run `make notebooks`"
    )


def test_lesson_has_every_part(lesson):
    path, nb = lesson
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in tags(code[0]) and re.search(r"^language\s*=", code[0].source, re.MULTILINE)
    assert any("solution" in tags(c) for c in code), "no exercise solution cell"
    assert sum("solution" in tags(c) for c in code) >= 2, "fewer than two exercises"
    assert any(re.search(r"\bexplore\(|\bshow_\w+\(", c.source) for c in code), "no interactive explorer"
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), "no figure"
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "**You will learn to**" in markdown and "## Summary" in markdown and "## 小结" in markdown
    for heading in ("**You will learn to**", "**本课目标**"):  # a list under each, not one line run together
        assert re.search(re.escape(heading) + r"\n- ", markdown), f"{heading} is not followed by a list, one item a line"
    # the neighbours in the series as it stands (a lesson not yet written leaves a gap in the numbers)
    index = [p.name for p in LESSONS].index(path.name)
    if index > 0:
        assert f"]({LESSONS[index - 1].name})" in markdown, f"no link to the previous lesson, {LESSONS[index - 1].name}"
    if index + 1 < len(LESSONS):
        assert f"]({LESSONS[index + 1].name})" in markdown, f"no link to the next lesson, {LESSONS[index + 1].name}"


PLUMBING = re.compile(r"\b(plt\.|ax\w*\.|fig\.|figure\.|widgets\.|ipywidgets\.)")
LONGEST_CELL = 25


def test_no_long_cell_of_plotting_plumbing(lesson):
    """A lesson's long code cells are its subject (a class or loop to read); drawing code lives in
    attention_utils/explorers/ and the lesson calls it in one line."""
    path, nb = lesson
    long_plumbing = [
        (index, len(cell.source.splitlines()))
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and len(cell.source.splitlines()) > LONGEST_CELL and PLUMBING.search(cell.source)
    ]
    assert not long_plumbing, f"{path.name}: cells (index, lines) of plotting or widget code: {long_plumbing}"


def test_solutions_are_collapsed(lesson):
    """JupyterLab shows a solution cell collapsed until the learner clicks it open."""
    path, nb = lesson
    open_cells = [index for index, cell in enumerate(nb.cells) if "solution" in tags(cell)
                  and not (cell.metadata.get("jupyter", {}).get("source_hidden") is True
                           and cell.metadata.get("jupyter", {}).get("outputs_hidden") is True)]
    assert not open_cells, (f"{path.name}: solution cells {open_cells} need the cell metadata "
                            '"jupyter": {"source_hidden": true, "outputs_hidden": true}')


def test_tagged_cells_say_why(lesson):
    _, nb = lesson
    for cell in nb.cells:
        if {"nbval-ignore-output", "nbval-skip", "raises-exception"} & set(tags(cell)):
            assert cell.source.lstrip().startswith("#"), "a tagged cell must start with a comment saying why"
