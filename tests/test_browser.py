"""A learner's view: JupyterLab in Chromium runs each lesson, a widget moves, the figure changes.

The work is done once for the whole series by tests/lab_run.py (conftest's `chinese_run`): each lesson is
served with language = "zh" in its parameters cell, so the screenshots in build/screenshots/lab/ show
Chinese text, a Chinese-labelled plot and a moved widget. Each test here reads one lesson's outcome.
"""

from __future__ import annotations

import pytest

from attention_utils.course.publish import lesson_paths
from lab_server import CHROMIUM, ROOT  # beside this file

LESSONS = lesson_paths(ROOT / "notebooks")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (.ci/run installs it)")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_lesson_runs_and_widget_redraws(chinese_run, lesson):
    assert lesson.name in chinese_run.problems, f"the run stopped before {lesson.name}:\n{chinese_run.output[-6000:]}"
    problem = chinese_run.problems[lesson.name]
    assert problem is None, f"{problem} (screenshot: build/screenshots/lab/{lesson.stem}.png)"
