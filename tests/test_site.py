"""Classroom builds: every lesson's slide metadata is complete, and the slides and the static site of
both languages open in Chromium with the network cut off: no outside request, formulas typeset,
Chinese text on the Chinese pages, reveal.js moving to the next slide.

The build is made here from the lessons, as `make slides html` makes it (Chinese copies re-run with
language="zh"), and served from 127.0.0.1. Screenshots at a projector's 1280 x 800 go to
build/screenshots/slides/ and build/screenshots/html/.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import psutil
import pytest

from attention_utils.course.publish import language_copy, lesson_paths, write_copies
from attention_utils.course.site import (build_site, build_slides, for_static_export, mark_slides, slide_problems,
                                  slide_types)
from lab_server import CHROMIUM, CHROMIUM_FLAGS  # beside this file

ROOT = Path(__file__).resolve().parents[1]
LESSONS = lesson_paths(ROOT / "notebooks")
NAMES = [path.stem for path in LESSONS]
SCREENSHOTS = ROOT / "build" / "screenshots"
PROJECTOR = {"width": 1280, "height": 800}
CHINESE = re.compile(r"[\u4e00-\u9fff]")
RAW_FORMULA = re.compile(r"\$[^$\s][^$]*\$")
LANGUAGES = ("en", "zh")
TAB_SECONDS = 60  # a tab opens and closes in well under a second here


@pytest.mark.parametrize("lesson", LESSONS, ids=NAMES)
def test_slide_metadata_is_complete(lesson):
    nb = nbformat.read(lesson, as_version=4)
    assert slide_problems(nb) == [], "run `python -m attention_utils.course.site mark-slides` on the lesson"


@pytest.mark.parametrize("lesson", LESSONS, ids=NAMES)
def test_mark_slides_makes_complete_metadata(lesson, tmp_path):
    """The rule-based tool leaves every lesson with complete slide metadata and its sources untouched."""
    copy = tmp_path / lesson.name
    shutil.copy(lesson, copy)
    mark_slides(copy)
    before, after = nbformat.read(lesson, as_version=4), nbformat.read(copy, as_version=4)
    assert slide_problems(after) == []
    assert [c.source for c in after.cells] == [c.source for c in before.cells]


PLOTTING_CODE = re.compile(r"\b(plt\.|ax\w*\.|fig\.|figure\.|widgets\.|ipywidgets\.)")


@pytest.mark.parametrize("lesson", LESSONS, ids=NAMES)
def test_slides_show_figures_not_plotting_code(lesson):
    """On a classroom slide the class sees the figure; the drawing code lives in attention_utils.explorers."""
    nb = nbformat.read(lesson, as_version=4)
    shown = [(index, line.strip()) for index, cell in enumerate(nb.cells)
             if cell.cell_type == "code" and cell.metadata.get("slideshow", {}).get("slide_type") not in ("skip", "notes")
             for line in cell.source.splitlines()
             if PLOTTING_CODE.search(line) and not line.lstrip().startswith("#") and line.strip() != "plt.show()"]
    assert not shown, f"plotting code on the slides (cell, line): {shown[:5]}"


def test_slide_rules_on_a_small_lesson():
    """Headings start slides, set-up goes to the notes, a solution gets its own sub-slide, zh follows en."""
    new = nbformat.v4
    cells = [new.new_markdown_cell("# Lesson 1 · Title"), new.new_markdown_cell("# 第 1 课 · 标题"),
             new.new_markdown_cell("## Set-up"), new.new_markdown_cell("## 准备工作"),
             new.new_code_cell('language = "en"'), new.new_code_cell("au.setup(seed=seed)"),
             new.new_markdown_cell("## Exercises"), new.new_markdown_cell("## 练习"),
             new.new_code_cell("answer = ..."), new.new_code_cell("answer = 1"),
             new.new_markdown_cell("**2.** Next."), new.new_markdown_cell("**2.** 下一题。")]
    for cell, tag in zip(cells, ["en", "zh", "en", "zh", "parameters", None, "en", "zh", None, "solution", "en", "zh"]):
        cell.metadata["tags"] = [tag] if tag else []
    nb = new.new_notebook(cells=cells)
    assert slide_types(nb) == ["slide", "slide", "notes", "notes", "skip", "notes",
                               "slide", "slide", "-", "subslide", "subslide", "subslide"]
    for cell, slide_type in zip(nb.cells, slide_types(nb)):
        cell.metadata["slideshow"] = {"slide_type": slide_type}
    assert slide_problems(nb) == []
    nb.cells[7].metadata["slideshow"]["slide_type"] = "-"
    assert slide_problems(nb) == ["cell 7: the zh cell's type '-' differs from its en cell's 'slide'"]


def test_static_copy_keeps_figures_drops_controls():
    """The explorer's controls (widget views) go, its default figure stays, lesson links point to pages."""
    new = nbformat.v4
    explorer = new.new_code_cell("explore(draw, n=slider)", outputs=[
        new.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "m"},
                                             "text/plain": "HBox()"}),
        new.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})])
    links = new.new_markdown_cell("Next: [Lesson 2](02_vectors_in_3d.ipynb), see ![x](../figures/x.png)")
    nb = new.new_notebook(cells=[links, explorer], metadata={"widgets": {"state": {}}})
    static = for_static_export(nb)
    assert [list(o["data"]) for o in static.cells[1].outputs] == [["image/png", "text/plain"]]
    assert static.cells[0].source == "Next: [Lesson 2](02_vectors_in_3d.html), see ![x](../figures/x.png)"
    assert "widgets" not in static.metadata and len(nb.cells[1].outputs) == 2


@pytest.fixture(scope="module")
def built(tmp_path_factory, request) -> Path:
    """Copies, slides and site of every lesson, in a temporary folder, as `make slides html` makes them.

    The Chinese copies come from the series' one run in Chinese (conftest's `chinese_run`, in JupyterLab,
    shared with the browser and offline tests): running a lesson with language="zh" and then keeping its
    Chinese cells gives what `make copies` gives by running the Chinese copy with papermill.
    SITE_BUILD=build checks what `make slides html` wrote into build/ instead of building anew (and without
    making the Chinese run, which only the new build reads).
    """
    for kind in ("slides", "html"):
        shutil.rmtree(SCREENSHOTS / kind, ignore_errors=True)
    if os.environ.get("SITE_BUILD"):
        return Path(os.environ["SITE_BUILD"]).resolve()
    chinese_run = request.getfixturevalue("chinese_run")
    assert chinese_run.returncode == 0, chinese_run.output[-6000:]
    assert len(chinese_run.problems) == len(LESSONS), chinese_run.output[-6000:]
    build = tmp_path_factory.mktemp("build")
    write_copies(build, ROOT / "notebooks")
    for path in lesson_paths(chinese_run.folder):
        nbformat.write(language_copy(nbformat.read(path, as_version=4), "zh"), build / "zh" / path.name)
    build_slides(build, build / "slides")
    build_site(build, build / "html")
    return build


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        """Keep the test's output clean."""


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        """A tab closed while a file was still on its way (the test had seen what it needed) is not the site's fault:
        no traceback for it in the test's output. Any other error is printed as usual."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def server(built):
    """An HTTP server on 127.0.0.1 for the built folder; yields its base URL."""
    handler = functools.partial(QuietHandler, directory=str(built))
    httpd = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class Window:
    """One Chromium window at a projector's size for every page: a new tab per test, as a reader opens them
    (sharing the window's cache of reveal.js and MathJax saved about half a second a page).

    Twice in full runs Chromium stopped answering around lesson 13's page, idle (once a new tab waited 15 minutes,
    once closing the tab waited 10): opening or closing a tab that takes more than a minute ends that Chromium, and
    the next tab starts a fresh one."""

    def __init__(self, playwright) -> None:
        self.playwright = playwright
        self.launch()

    def launch(self) -> None:
        self.browser = self.playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        self.context = self.browser.new_context(viewport=PROJECTOR)

    def new_page(self, seconds: float = TAB_SECONDS):
        from playwright.sync_api import Error
        for attempt in (1, 2):
            try:
                with watchdog(seconds):
                    return self.context.new_page()
            except Error:
                if attempt == 2:
                    raise
                print(f"no new tab within {seconds:.0f} s, or Chromium was ended: Chromium restarted", file=sys.stderr)
                self.launch()

    def close_page(self, page, seconds: float = TAB_SECONDS) -> None:
        from playwright.sync_api import Error
        with watchdog(seconds), contextlib.suppress(Error):  # a tab of an ended Chromium is closed with it
            page.close()

    def close(self) -> None:
        self.browser.close()


@contextlib.contextmanager
def watchdog(seconds: float):
    """End this process's Chromium if the block is still running after `seconds` (a stuck call then raises)."""
    timer = threading.Timer(seconds, end_chromium)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def end_chromium() -> None:
    """Kill the Chromium processes this test process started."""
    for child in psutil.Process().children(recursive=True):
        if "chrom" in child.name().lower():
            with contextlib.suppress(psutil.Error):
                child.kill()


@pytest.fixture(scope="module")
def window():
    """The Chromium window every page of this module opens in (see `Window`)."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    with playwright_api.sync_playwright() as p:
        opened = Window(p)
        yield opened
        opened.close()


@contextlib.contextmanager
def offline_page(window):
    """A page whose requests beyond 127.0.0.1 are blocked; yields (page, outside URLs, failed local URLs)."""
    outside, failed = [], []
    page = window.new_page()

    def route(route) -> None:
        if urlparse(route.request.url).hostname == "127.0.0.1" or route.request.url.startswith("data:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    page.set_default_timeout(30_000)
    page.on("response", lambda response: response.status >= 400 and failed.append(response.url))
    try:
        yield page, outside, failed
    finally:
        window.close_page(page)


def wait_for_mathjax(page) -> None:
    """Wait until MathJax has loaded and typeset everything queued."""
    page.wait_for_function("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0"
                           " && document.querySelectorAll('.MathJax_Processing').length === 0")


def visible_prose(page, selector: str) -> str:
    """The rendered markdown's text without code (where a `$` may be literal)."""
    return page.evaluate("""selector => [...document.querySelectorAll(selector)].map(element => {
        const copy = element.cloneNode(true);
        copy.querySelectorAll('code, pre, script, .MathJax, .MathJax_Display, .MathJax_Preview').forEach(e => e.remove());
        return copy.textContent;
    }).join('\\n')""", selector)


def has_formulas(name: str) -> bool:
    """Whether the lesson's markdown holds TeX ($...$); lesson 17's holds none, and then MathJax has nothing to typeset."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    return any(RAW_FORMULA.search(cell.source) for cell in nb.cells if cell.cell_type == "markdown")


def check_formulas_and_language(page, language: str, selector: str, name: str) -> None:
    typeset = page.locator(".MathJax, .MathJax_Display, .MathJax_SVG").count()
    assert typeset > 0 or not has_formulas(name), "no formula was typeset by MathJax"
    prose = visible_prose(page, selector)
    assert not RAW_FORMULA.findall(prose), f"formulas left as raw TeX: {RAW_FORMULA.findall(prose)[:3]}"
    if language == "zh":
        assert len(CHINESE.findall(prose)) > 100, "the Chinese page shows almost no Chinese text"


def screenshot(page, kind: str, name: str) -> None:
    folder = SCREENSHOTS / kind
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"))


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", NAMES)
def test_slides_offline(window, server, language, name):
    with offline_page(window) as (page, outside, failed):
        page.goto(f"{server}/slides/{language}/{name}.html")
        page.wait_for_function("() => window.Reveal && Reveal.isReady()")
        page.evaluate("() => Reveal.configure({transition: 'none'})")  # each move done at once, not in 0.8 s
        wait_for_mathjax(page)
        check_formulas_and_language(page, language, ".jp-MarkdownOutput", name)
        screenshot(page, "slides", f"{language}_{name}_1_title")
        first = page.evaluate("() => [Reveal.getIndices().h, Reveal.getCurrentSlide().textContent]")
        page.keyboard.press("ArrowRight")
        page.wait_for_function("first => Reveal.getIndices().h !== first", arg=first[0])
        second = page.evaluate("() => [Reveal.getIndices().h, Reveal.getCurrentSlide().textContent]")
        assert second[1] != first[1], "the next slide shows the same content"
        figure = page.evaluate("""() => {
            const slides = Reveal.getSlides();
            const index = slides.findIndex(s => s.querySelector('.jp-OutputArea-output img'));
            return index < 0 ? null : Reveal.getIndices(slides[index]);
        }""")
        assert figure, "no slide shows a figure"
        page.evaluate("indices => Reveal.slide(indices.h, indices.v)", figure)
        wait_for_mathjax(page)  # the slide's formulas are typeset again when it shows
        screenshot(page, "slides", f"{language}_{name}_2_figure")
    assert outside == [], f"requests beyond 127.0.0.1: {outside}"
    assert failed == [], f"local files missing: {failed}"


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", NAMES)
def test_page_offline(window, server, language, name):
    with offline_page(window) as (page, outside, failed):
        page.goto(f"{server}/html/{language}/{name}.html")
        wait_for_mathjax(page)
        check_formulas_and_language(page, language, ".jp-MarkdownOutput", name)
        assert page.locator(".jp-OutputArea-output img").count() > 0, "the page shows no figure"
        solutions = page.locator("details.solution")
        assert solutions.count() >= 2, "the exercises' solutions are not folded away"
        assert not solutions.first.locator(".jp-CodeCell").is_visible()
        solutions.first.locator("summary").click()
        assert solutions.first.locator(".jp-CodeCell").is_visible()
        rels = page.eval_on_selector_all("nav.lesson-links a", "links => links.map(a => a.rel)")
        position = NAMES.index(name)
        assert ("prev" in rels) == (position > 0) and ("next" in rels) == (position < len(NAMES) - 1)
        screenshot(page, "html", f"{language}_{name}")
        if position < len(NAMES) - 1:
            page.locator("nav.lesson-links a[rel=next]").first.click()
            page.wait_for_url(f"**/{NAMES[position + 1]}.html", wait_until="commit")  # the link works; its page is checked on its own
    assert outside == [], f"requests beyond 127.0.0.1: {outside}"
    assert failed == [], f"local files missing: {failed}"


@pytest.mark.parametrize("language", LANGUAGES)
def test_index_lists_every_lesson(window, server, language):
    with offline_page(window) as (page, outside, failed):
        page.goto(f"{server}/html/{language}/index.html")
        hrefs = page.eval_on_selector_all("a", "links => links.map(a => a.getAttribute('href'))")
        assert [f"{name}.html" for name in NAMES] == [h for h in hrefs if h.endswith(".html") and "/" not in h]
        assert all(f"../../slides/{language}/{name}.html" in hrefs for name in NAMES)
        assert f"../{'zh' if language == 'en' else 'en'}/index.html" in hrefs
        if language == "zh":
            assert CHINESE.search(page.inner_text("body"))
        screenshot(page, "html", f"{language}_index")
    assert outside == [] and failed == []
