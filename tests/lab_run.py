"""The series' one run in Chinese, as a learner makes it: JupyterLab in Chromium runs every lesson.

    python tests/lab_run.py OUT [NN ...]

copies every lesson (or only lessons NN ...) into OUT/notebooks/ with language = "zh" in its parameters cell, starts JupyterLab
as `make lab` does, and for each lesson: opens it, clears its outputs and runs all cells, checks that
no cell printed an error or warning, that every image loads, that solutions stay folded, and that a
widget redraws its figure; it saves the run (before moving the widget, so the saved figure is the
default one) and takes a screenshot into build/screenshots/lab/. OUT/outcomes.json gives, per lesson,
what went wrong (null when nothing did) and how long it took.

conftest.py runs this script once, in a network namespace with only loopback where it can: the browser
test, the offline test and the classroom builds (slides, site) all read that one run.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
from playwright.sync_api import Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from attention_utils.course.publish import lesson_paths
from lab_server import CHROMIUM, CHROMIUM_FLAGS, running_lab  # beside this file: on the path as a script and under pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "build" / "screenshots" / "lab"  # its own folder: the site test writes beside it
SOLUTION_CODE = ".jp-InputArea-editor:visible"
SOLUTION_OUTPUT = ".jp-OutputArea-output:visible"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def chinese_copy(lesson: Path, folder: Path) -> None:
    """Copy a lesson with language = "zh" in its parameters cell."""
    nb = nbformat.read(lesson, as_version=4)
    parameters = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    parameters.source, count = re.subn(r'^language = "en"', 'language = "zh"', parameters.source, flags=re.MULTILINE)
    assert count == 1, f"{lesson.name}: no `language = \"en\"` line in the parameters cell"
    nbformat.write(nb, folder / lesson.name)


def sessions(base: str, token: str, path: str) -> list[dict]:
    """The server's sessions of one notebook."""
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}") as response:
        return [s for s in json.load(response) if s["path"] == path]


def open_lesson(page: Page, path: str) -> None:
    """File > Open from Path…, as a learner can: the lab stays loaded (loading JupyterLab again for each
    lesson cost the browser about 9 CPU-seconds a lesson)."""
    page.click("li.lm-MenuBar-item:has-text('File')")
    page.click("li[data-command='filebrowser:open-path']")
    page.fill(".jp-Dialog input", path)
    page.click(".jp-Dialog .jp-mod-accept")


def wait_for_kernel(base: str, token: str, path: str) -> None:
    """Wait until the server runs an idle kernel for the notebook; Run All before that asks to pick a kernel."""
    deadline = time.monotonic() + 180  # a kernel start took over 60 s once under make test
    while time.monotonic() < deadline:
        if any(s["kernel"]["execution_state"] == "idle" for s in sessions(base, token, path)):
            return
        time.sleep(0.5)
    raise AssertionError(f"no kernel started for {path} within 180 s")


def run_all_cells(page: Page) -> None:
    """Clear the stored outputs, Run > Run All Cells, then wait until every code cell has a number."""
    page.click("li.lm-MenuBar-item:has-text('Edit')")
    page.click("li[data-command='editmenu:clear-all']")
    page.click("li.lm-MenuBar-item:has-text('Run')")
    page.click("li[data-command='runmenu:run-all']")
    page.wait_for_function(
        """panel => {
            // a collapsed cell (a solution) shows an empty placeholder prompt instead of its number
            const prompts = [...document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputPrompt:not(.jp-Placeholder-prompt)')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""", arg=PANEL, timeout=900_000,  # lessons 15 and 16: about 7 min each under load here
        polling=1000)  # once a second is enough for a wait of minutes; Playwright's default checks at every frame
    page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)


def save(page: Page, saved: Path) -> None:
    """File > Save Notebook, then wait until the file holds the run (the server writes the file in place, so it
    can be read half-written)."""
    before = saved.stat().st_mtime_ns
    page.click("li.lm-MenuBar-item:has-text('File')")
    page.click("li[data-command='docmanager:save']")
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, f"{saved.name} was not saved within 60 s"
        time.sleep(0.2)
        with contextlib.suppress(nbformat.reader.NotJSONError, json.JSONDecodeError):
            if saved.stat().st_mtime_ns != before and nbformat.read(saved, as_version=4):
                return


def close_lesson(page: Page, base: str, token: str, path: str) -> None:
    """Shut the lesson's kernel down and close its tab, so that later lessons do not share the cores and memory
    with it (the kernels of lessons 13 and 14 hold the real model) and the browser no longer draws it."""
    for session in sessions(base, token, path):
        request = urllib.request.Request(f"{base}/api/sessions/{session['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(request).close()
    page.click(f"#jp-main-dock-panel .lm-TabBar-tab:has-text('{Path(path).name}') .lm-TabBar-tabCloseIcon")
    discard = page.locator(".jp-Dialog button.jp-mod-warn")  # "Discard" the moved widget: the saved run stays
    with contextlib.suppress(PlaywrightTimeout):
        discard.wait_for(timeout=5_000)
        discard.click()
    page.locator(f"#jp-main-dock-panel .lm-TabBar-tab:has-text('{Path(path).name}')").wait_for(state="detached")


def move_first_widget(page: Page, cell) -> None:
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


def run_lesson(page: Page, base: str, token: str, lesson: Path) -> None:
    """Everything a learner does with one lesson (see the module's docstring); an AssertionError says what failed."""
    path = f"notebooks/{lesson.name}"
    open_lesson(page, path)
    panel = page.locator(PANEL)
    panel.locator(".jp-Notebook").wait_for()
    panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=180_000)
    wait_for_kernel(base, token, path)
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
        save(page, lesson)
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
        close_lesson(page, base, token, path)


def main(out: Path, numbers: list[str]) -> None:
    (out / "notebooks").mkdir(parents=True)
    shutil.copytree(ROOT / "figures", out / "figures")  # lessons show ../figures/*.png
    lessons = [path for path in lesson_paths(ROOT / "notebooks") if not numbers or path.name[:2] in numbers]
    for lesson in lessons:
        chinese_copy(lesson, out / "notebooks")
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    outcomes = {}
    with running_lab(out) as (base, _, token), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(f"{base}/lab?reset&token={token}")
        page.wait_for_selector("#jp-main-dock-panel")
        for lesson in lessons:
            start = time.monotonic()
            try:
                run_lesson(page, base, token, out / "notebooks" / lesson.name)
                problem = None
            except Exception as error:  # noqa: BLE001 - recorded for the lesson's test, then the next lesson runs
                problem = f"{type(error).__name__}: {error}"
            outcomes[lesson.name] = {"problem": problem, "seconds": round(time.monotonic() - start, 1)}
            print(f"{lesson.name}: {problem or 'ok'} ({outcomes[lesson.name]['seconds']} s)", flush=True)
        browser.close()
    (out / "outcomes.json").write_text(json.dumps(outcomes, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
