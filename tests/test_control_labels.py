"""The text names every explorer control by the label that control shows in that language.

A Chinese learner sees 步, 窗口 W, 汇聚点 on the sliders; a Chinese cell that says "drag **step**" sends
them looking for a control that is not there (chinese-review-3, lessons 10-12). Each control's two
labels are read from the explorers' code (every `description=` is `text("en", "zh")` or one string for
both), checked against the labels the widgets really show when an explorer is built headless in each
language, and then every markdown cell is searched for a control named in the other language's words.
"""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path
from unittest import mock

import ipywidgets
import matplotlib
import nbformat
import pytest

matplotlib.use("Agg")

from explorer_harness import controls_in  # noqa: E402

from attention_utils.explorers import widgets as explorer_frame  # noqa: E402
from attention_utils.course.publish import language_of, lesson_paths  # noqa: E402
from attention_utils.plotting.fonts import set_language  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXPLORERS = ROOT / "attention_utils" / "explorers"
LESSONS = lesson_paths(ROOT / "notebooks")
# Words that say "this is a control" right after its name, in each language.
CONTROL_WORDS = {"en": r"(?:slider|menu|drop-?down|box|buttons?|switch|field|control)",
                 "zh": r"(?:滑块|下拉菜单|下拉框|菜单|按钮|开关|输入框|文本框|控件)"}
NAMED = re.compile(r"\*\*([^*\n]{1,30})\*\*|“([^”\n]{1,30})”|\"([^\"\n]{1,30})\"")


def label_pairs(source: str) -> list[tuple[str, str]]:
    """(English, Chinese) label of every control an explorer module creates, read from its `description=` arguments."""
    pairs = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.keyword) or node.arg != "description":
            continue
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            pairs.append((value.value, value.value))
        elif (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "text" and len(value.args) == 2
              and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in value.args)):
            pairs.append((value.args[0].value, value.args[1].value))
        else:
            raise AssertionError(f"a control label this test cannot read: {ast.unparse(value)}")
    return pairs


def lesson_labels(lesson: Path) -> list[tuple[str, str]]:
    """The label pairs of lesson NN's explorers (none if the lesson has no explorer module)."""
    module = EXPLORERS / f"lesson{lesson.name[:2]}.py"
    return label_pairs(module.read_text(encoding="utf-8")) if module.exists() else []


def offenders(nb, pairs: list[tuple[str, str]]) -> list[str]:
    """Markdown cells that name a control by a label it does not show in the cell's language."""
    english = {en for en, _ in pairs}
    chinese = {zh for _, zh in pairs}
    shown = {"en": english, "zh": chinese}
    foreign = {"en": chinese - english, "zh": english - chinese}  # labels only the other language shows
    found = []
    for index, cell in enumerate(nb.cells):
        language = language_of(cell) if cell.cell_type == "markdown" else None
        if language not in ("en", "zh"):
            continue
        for match in NAMED.finditer(cell.source):
            name = next(group for group in match.groups() if group is not None).strip()
            if name[-1] in ".:;!?。：；！？，,":  # a bold lead-in ("**Dropout.** Switch it off"), not a control's name
                continue
            followed = re.match(r"\s*" + CONTROL_WORDS[language], cell.source[match.end():], re.IGNORECASE)
            if name in foreign[language] or (followed and name not in shown[language]):
                found.append(f"c{index} ({language}): {match.group(0)!r}")
    return found


# Lessons whose text another change of issue 29 is fixing; listed here so the merge shows them, removed with the fix.
BEING_FIXED: dict[str, str] = {}  # lesson stem -> the offending cell, while its fix is under way


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda path: path.stem)
def test_the_text_names_controls_by_their_labels_in_its_language(lesson):
    if lesson.stem in BEING_FIXED:
        pytest.xfail(BEING_FIXED[lesson.stem])
    assert offenders(nbformat.read(lesson, as_version=4), lesson_labels(lesson)) == []


def built_labels(show, language: str, *args, **kwargs) -> list[str]:
    """The labels the controls of an explorer show when it is built headless in `language`."""
    shown = []
    set_language(language)
    try:
        with mock.patch.object(explorer_frame, "display", lambda item, *more, display_id=False, **options:
                               shown.append(item) if not display_id else mock.Mock()):
            show(*args, **kwargs)
    finally:
        set_language("en")
        matplotlib.pyplot.close("all")
    return [control.description for control in controls_in(shown) if isinstance(control, ipywidgets.ValueWidget)]


from attention_utils import data  # noqa: E402


@pytest.mark.parametrize("number, call", [
    ("01", lambda explorers: (explorers.show_scores, (data.example_inputs(), data.TOKENS), {})),
    ("05", lambda explorers: (explorers.show_mask, (data.example_inputs() @ data.example_inputs().T, data.TOKENS, 3), {})),
    ("12", lambda explorers: (explorers.show_generation, (), {"prompt_length": 5, "new_tokens": 8})),
])
def test_the_labels_read_from_the_code_are_the_ones_the_widgets_show(number, call):
    """The static reading above is checked against explorers built headless in English and in Chinese."""
    import importlib

    show, args, kwargs = call(importlib.import_module(f"attention_utils.explorers.lesson{number}"))
    pairs = label_pairs((EXPLORERS / f"lesson{number}.py").read_text(encoding="utf-8"))
    for language, index in (("en", 0), ("zh", 1)):
        assert built_labels(show, language, *args, **kwargs) == [pair[index] for pair in pairs]


def test_a_planted_offender_is_found():
    """A Chinese cell that says **step** (the English label of lesson 12's 步 slider) fails; so does an English 窗口 W."""
    lesson = next(path for path in LESSONS if path.name.startswith("12"))
    nb = nbformat.read(lesson, as_version=4)
    pairs = lesson_labels(lesson)
    assert offenders(nb, pairs) == []
    planted = copy.deepcopy(nb)
    zh = next(cell for cell in planted.cells if cell.cell_type == "markdown" and language_of(cell) == "zh")
    zh.source += "\n\n把 **step** 滑块拖到最后。"
    en = next(cell for cell in planted.cells if cell.cell_type == "markdown" and language_of(cell) == "en")
    en.source += "\n\nMove the **窗口 W** slider. Then the **speed** slider."
    found = offenders(planted, pairs)
    assert len(found) == 3, found
    assert any("**step**" in f for f in found) and any("**窗口 W**" in f for f in found) and any("**speed**" in f for f in found)
