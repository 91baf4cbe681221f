"""Slides and pages stay offline and script-free: a lesson that would load something remote or run a script is refused."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from attention_utils.course.publish import lesson_paths
from attention_utils.course.site import for_static_export, offline_problems

ROOT = Path(__file__).resolve().parents[1]


def lesson_with(markdown: str = "", html: str | None = None, javascript: bool = False):
    outputs = []
    if html is not None:
        outputs.append(nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": "x"}))
    if javascript:
        outputs.append(nbformat.v4.new_output("display_data", data={"application/javascript": "alert(1)"}))
    code = nbformat.v4.new_code_cell("x = 1", outputs=outputs)
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown), code])


@pytest.mark.parametrize(
    "markdown",
    [
        "<script>alert('md')</script>",
        "<img src=x onerror=alert(1)>",
        "<iframe src='https://example.com'></iframe>",
        "![a cat](https://example.com/cat.png)",
        "![a cat](//example.com/cat.png)",
        '<img src="http://example.com/cat.png">',
        '<link rel="stylesheet" href="https://cdn.example.com/x.css">',
        "<style>@import url(https://fonts.example.com/x.css);</style>",
        "<a href='javascript:alert(1)'>click</a>",
        "<object data='https://example.com/x.swf'></object>",
    ],
)
def test_remote_loads_and_scripts_in_markdown_are_refused(markdown):
    nb = lesson_with(markdown)
    assert offline_problems(nb)
    with pytest.raises(ValueError) as refused:
        for_static_export(nb)
    english, chinese = str(refused.value).split("\n")
    assert "cell 0" in english and "离线" in chinese


def test_script_and_remote_outputs_are_refused():
    assert offline_problems(lesson_with(html="<div><script src='https://x.org/a.js'></script></div>")) == [
        "cell 1: '<script'"
    ]
    assert offline_problems(lesson_with(javascript=True)) == ["cell 1: a JavaScript output"]


@pytest.mark.parametrize(
    "markdown",
    [
        "See [the paper](https://arxiv.org/abs/2104.09864) for the proof.",  # a link loads nothing until clicked
        "![the pipeline](../figures/attention_pipeline_en.png)",
        "Scores: $q \\cdot k$; the word onerror in prose; <b>bold</b>",
        '<a href="https://arxiv.org/abs/2309.17453">StreamingLLM</a>',  # an HTML link loads nothing either
    ],
)
def test_plain_markdown_local_images_and_links_pass(markdown):
    nb = lesson_with(markdown)
    assert offline_problems(nb) == []
    assert for_static_export(nb).cells[0].source == markdown


@pytest.mark.parametrize("lesson", lesson_paths(ROOT / "notebooks"), ids=lambda p: p.stem)
def test_every_lesson_exports_offline(lesson):
    assert offline_problems(nbformat.read(lesson, as_version=4)) == []


def test_code_in_prose_that_looks_like_an_attribute_passes():
    assert offline_problems(lesson_with("Set `only = True` and `source = 'https://x'` in your own code.")) == []
