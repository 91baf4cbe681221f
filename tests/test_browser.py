"""A learner's view: JupyterLab in Chromium runs each lesson, a widget moves, the figure changes.

Lessons are served from a temporary copy whose parameters cell asks for Chinese plot labels, so the
screenshots in build/screenshots/lab/ show Chinese text, a Chinese-labelled plot and a moved widget.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from attention_utils.course.publish import lesson_paths
from lab_server import running_lab

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "build" / "screenshots" / "lab"  # its own folder: the site test writes beside it
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
LESSONS = lesson_paths(ROOT / "notebooks")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (.ci/run installs it)")


def chinese_copy(lesson: Path, folder: Path) -> None:
    """Copy a lesson with language = "zh" in its parameters cell."""
    nb = nbformat.read(lesson, as_version=4)
    parameters = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    parameters.source, count = re.subn(r'^language = "en"', 'language = "zh"', parameters.source, flags=re.MULTILINE)
    assert count == 1, f"{lesson.name}: no `language = \"en\"` line in the parameters cell"
    nbformat.write(nb, folder / lesson.name)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    playwright_api = pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("series")
    (root / "notebooks").mkdir()
    shutil.copytree(ROOT / "figures", root / "figures")  # lessons show ../figures/*.png
    for lesson in LESSONS:
        chinese_copy(lesson, root / "notebooks")
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    with running_lab(root) as (base, _, token):
        with playwright_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab?reset&token={token}")
            page.wait_for_selector("#jp-main-dock-panel")
            yield page, base, token
            browser.close()


def wait_for_kernel(base: str, token: str, path: str) -> None:
    """Wait until the server runs an idle kernel for the notebook; Run All before that asks to pick a kernel."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{base}/api/sessions?token={token}") as response:
            sessions = json.load(response)
        if any(s["path"] == path and s["kernel"]["execution_state"] == "idle" for s in sessions):
            return
        time.sleep(0.5)
    raise AssertionError(f"no kernel started for {path} within 120 s")


def close_lesson(page, base: str, token: str, path: str) -> None:
    """Shut the lesson's kernel down and close its tab, so that later lessons do not share the cores and memory
    with it (the kernels of lessons 13 and 14 hold the real model) and the browser no longer draws it."""
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}") as response:
        sessions = [s for s in json.load(response) if s["path"] == path]
    for session in sessions:
        request = urllib.request.Request(f"{base}/api/sessions/{session['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(request).close()
    page.click(f"#jp-main-dock-panel .lm-TabBar-tab:has-text('{Path(path).name}') .lm-TabBar-tabCloseIcon")
    discard = page.locator(".jp-Dialog button.jp-mod-warn")  # "Discard" the outputs of the run: the lesson stays as stored
    with contextlib.suppress(PlaywrightTimeout):
        discard.wait_for(timeout=5_000)
        discard.click()
    page.locator(f"#jp-main-dock-panel .lm-TabBar-tab:has-text('{Path(path).name}')").wait_for(state="detached")


def run_all_cells(page) -> None:
    """Clear the stored outputs, Run > Run All Cells, then wait until every code cell has a number."""
    page.click("li.lm-MenuBar-item:has-text('Edit')")
    page.click("li[data-command='editmenu:clear-all']")
    page.click("li.lm-MenuBar-item:has-text('Run')")
    page.click("li[data-command='runmenu:run-all']")
    panel = ".jp-NotebookPanel:not(.lm-mod-hidden)"
    page.wait_for_function(
        """panel => {
            // a collapsed cell (a solution) shows an empty placeholder prompt instead of its number
            const prompts = [...document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputPrompt:not(.jp-Placeholder-prompt)')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""", arg=panel, timeout=900_000,  # lessons 15 and 16: about 7 min each under load here
        polling=1000)  # once a second is enough for a wait of minutes; Playwright's default checks at every frame
    page.wait_for_selector(f"{panel} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)


def move_first_widget(page, cell) -> None:
    """Change the first control of an explorer: a slider, a dropdown or a toggle button."""
    slider = cell.locator(".widget-slider .noUi-handle")
    dropdown = cell.locator(".widget-dropdown select")
    toggle = cell.locator(".widget-toggle-button:not(.mod-active)")
    if slider.count():
        handle = slider.first
        at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        handle.focus()
        for _ in range(3):
            page.keyboard.press("ArrowLeft" if at_max else "ArrowRight")
    elif dropdown.count():
        # by position: ipywidgets writes the spaces of option labels as no-break spaces
        chosen = dropdown.first.evaluate("select => select.selectedIndex")
        dropdown.first.select_option(index=1 if chosen == 0 else 0)
    else:
        toggle.first.click()


SOLUTION_CODE = ".jp-InputArea-editor:visible"
SOLUTION_OUTPUT = ".jp-OutputArea-output:visible"


def assert_solutions_collapsed(panel, lesson: Path, hidden: str) -> None:
    """Every solution cell shows a placeholder line, and nothing that matches `hidden` (code, output)."""
    nb = nbformat.read(lesson, as_version=4)
    cells = panel.locator(".jp-Notebook .jp-Cell")
    assert cells.count() == len(nb.cells), "JupyterLab did not render every cell"
    for index, cell in enumerate(nb.cells):
        if "solution" in cell.metadata.get("tags", []):
            shown = cells.nth(index)
            assert shown.locator(".jp-InputPlaceholder").is_visible() and shown.locator(hidden).count() == 0, (
                f"solution cell {index} is not collapsed")


def open_first_solution(panel, lesson: Path) -> None:
    """One click on the collapser of the first solution cell shows its code."""
    nb = nbformat.read(lesson, as_version=4)
    index = next(i for i, c in enumerate(nb.cells) if "solution" in c.metadata.get("tags", []))
    cell = panel.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".jp-InputCollapser").click()
    cell.locator(".jp-InputArea-editor").wait_for(state="visible", timeout=10_000)
    assert nb.cells[index].source.splitlines()[0] in cell.locator(".jp-InputArea-editor").inner_text()


def open_lesson(page, path: str) -> None:
    """File > Open from Path…, as a learner can: the lab stays loaded (a page load per lesson costs the
    browser about 4 CPU-seconds of starting JupyterLab again)."""
    page.click("li.lm-MenuBar-item:has-text('File')")
    page.click("li[data-command='filebrowser:open-path']")
    page.fill(".jp-Dialog input", path)
    page.click(".jp-Dialog .jp-mod-accept")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_lesson_runs_and_widget_redraws(page, lesson):
    page, base, token = page
    open_lesson(page, f"notebooks/{lesson.name}")
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    panel.locator(".jp-Notebook").wait_for()
    # a kernel start took over 60 s once under make test
    panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=180_000)
    wait_for_kernel(base, token, f"notebooks/{lesson.name}")
    if page.locator(".jp-Dialog").count():  # a slow kernel start can ask which kernel to use
        page.click(".jp-Dialog .jp-mod-accept")
    # menus act on the focused notebook: click this lesson's own tab to make sure it is the one
    page.click(f"#jp-main-dock-panel .lm-TabBar-tab:has-text('{lesson.name}')")
    try:
        assert_solutions_collapsed(panel, lesson, hidden=f"{SOLUTION_CODE}, {SOLUTION_OUTPUT}")
        run_all_cells(page)
        errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        assert errors.count() == 0, errors.first.inner_text()
        broken = panel.locator(".jp-RenderedMarkdown img").evaluate_all(
            "imgs => imgs.filter(i => i.complete && i.naturalWidth === 0).map(i => i.getAttribute('src'))")
        assert not broken, f"images that do not load: {broken}"
        # JupyterLab shows a cell's output again when it runs it, but the code stays hidden
        assert_solutions_collapsed(panel, lesson, hidden=SOLUTION_CODE)
        open_first_solution(panel, lesson)

        # an explorer's controls, not another widget such as lesson 10's training progress bar
        cell = panel.locator(".jp-CodeCell:has(.widget-slider, .widget-dropdown, .widget-toggle-button)").first
        cell.scroll_into_view_if_needed()
        before = cell.locator(".jp-OutputArea-output img").last.get_attribute("src")
        move_first_widget(page, cell)
        # the redraw replaces the image element, so look it up again inside the cell each time
        page.wait_for_function(
            "([cell, old]) => { const imgs = cell.querySelectorAll('.jp-OutputArea-output img');"
            " return imgs.length && imgs[imgs.length - 1].getAttribute('src') !== old; }",
            arg=[cell.element_handle(), before], timeout=30_000)
        cell.locator(".jp-OutputArea").scroll_into_view_if_needed()
    finally:  # a screenshot also when it fails: it shows what the learner would have seen
        page.screenshot(path=str(SCREENSHOTS / f"{lesson.stem}.png"))
        close_lesson(page, base, token, f"notebooks/{lesson.name}")
