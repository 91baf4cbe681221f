"""Classroom builds: slide metadata for the lessons, offline reveal.js slides and a static site per language.

    python -m attention_utils.course.site mark-slides notebooks/*.ipynb   # set slideshow.slide_type in every cell
    python -m attention_utils.course.site slides build                    # build/en, build/zh -> build/slides/{en,zh}
    python -m attention_utils.course.site html build                      # build/en, build/zh -> build/html/{en,zh}

Slides and pages are exported with nbconvert from the executed one-language copies that
`python -m attention_utils.course.publish copies build` writes (the Chinese copies re-run with language="zh").
Every script they load (reveal.js, MathJax) is copied from an installed Python package into an
`assets/` folder beside them, so a classroom without internet access sees the same thing.
"""

from __future__ import annotations

import argparse
import copy
import functools
import math
import re
import shutil
import sys
from importlib.resources import files
from pathlib import Path

import nbformat

from ..checks import bilingual
from .publish import LANGUAGE_TAGS, language_of, lesson_paths, tags

SLIDE_TYPES = ("slide", "subslide", "fragment", "skip", "notes", "-")
LINES_PER_SLIDE = 26  # text lines that fit on one 1280 x 800 slide at the slides' font size
FIGURE_LINES = 16  # a figure takes about as much height as this many lines of text
TEMPLATES = Path(__file__).parent / "templates"
MATHJAX_CONFIG = "MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
LESSON_LINK = re.compile(r"\]\((\d\d_[\w-]+)\.ipynb\)")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SERIES_TITLE = {"en": "Attention, step by step", "zh": "一步一步读懂注意力机制"}
LABELS = {
    "en": {"previous": "← Previous lesson", "next": "Next lesson →", "index": "All lessons", "slides": "slides",
           "other": "[中文版](../zh/index.html)", "solution": "Solution (click to open)"},
    "zh": {"previous": "← 上一课", "next": "下一课 →", "index": "全部课程", "slides": "幻灯片",
           "other": "[English version](../en/index.html)", "solution": "参考答案（点击展开）"},
}
HTML_LANGUAGE = {"en": "en", "zh": "zh-CN"}


# --- slide boundaries ---------------------------------------------------------------------------

def is_setup_code(cell) -> bool:
    """The parameters cell (and papermill's injected one) and the cell that calls au.setup: needed to run
    a lesson, not to teach it."""
    setup_tags = {"parameters", "injected-parameters"}
    return cell.cell_type == "code" and (bool(setup_tags & set(tags(cell))) or "au.setup(" in cell.source)


def heading_level(cell) -> int:
    """1 for a `# ` title cell, 2 for a `## ` section cell, 0 for anything else."""
    if cell.cell_type != "markdown":
        return 0
    match = re.match(r"(#{1,2}) ", cell.source.lstrip())
    return len(match.group(1)) if match else 0


def sections(cells) -> list[list[int]]:
    """Cell indices grouped by section: a new group starts at each `#` or `##` heading cell (en or zh)."""
    groups: list[list[int]] = []
    for index, cell in enumerate(cells):
        starts = heading_level(cell) and not (language_of(cell) == "zh" and index and heading_level(cells[index - 1]))
        if starts or not groups:
            groups.append([])
        groups[-1].append(index)
    return groups


def is_setup_section(cells, indices: list[int]) -> bool:
    """A `##` section whose code cells all only set the lesson up (the "Set-up" section)."""
    code = [cells[i] for i in indices if cells[i].cell_type == "code"]
    return heading_level(cells[indices[0]]) == 2 and bool(code) and all(is_setup_code(c) for c in code)


def cell_lines(cell) -> int:
    """About how many lines of a slide a cell fills: wrapped text, code, printed output, figures."""
    if cell.cell_type == "markdown":
        return sum(max(1, math.ceil(len(line) / 90)) for line in cell.source.splitlines())
    lines = len(cell.source.splitlines())
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "image/png" in data or "image/svg+xml" in data:
            lines += FIGURE_LINES
        elif output.get("output_type") == "stream":
            lines += len(output.get("text", "").splitlines())
        elif "text/plain" in data and WIDGET_VIEW not in data:
            lines += len(data["text/plain"].splitlines())
    return lines


def slide_types(nb) -> list[str]:
    """One slide type per cell: a slide per section, sub-slides where a section outgrows a slide.

    Each `#`/`##` heading starts a slide; the set-up section goes to the speaker notes (its
    parameters cell is skipped); each solution is a sub-slide of its own, shown after the class has
    tried; otherwise a new sub-slide starts where an English paragraph (with the code cells that
    follow it) or a code cell (with its output) would overflow the slide.
    A Chinese cell always takes the type of the English cell it translates.
    """
    cells = nb.cells
    types = ["-"] * len(cells)
    for indices in sections(cells):
        setup = is_setup_section(cells, indices)
        used, after_solution = 0, False
        for position, index in enumerate(indices):
            cell = cells[index]
            if language_of(cell) == "zh" and index and language_of(cells[index - 1]) == "en":
                types[index] = types[index - 1]
                continue
            if setup:
                types[index] = "skip" if "parameters" in tags(cell) else "notes"
            elif position == 0:
                types[index], used = "slide", 0
            elif "solution" in tags(cell):
                types[index], used, after_solution = "subslide", 0, True
            elif after_solution or used and used + lines_needed(cells, index) > LINES_PER_SLIDE:
                types[index], used, after_solution = "subslide", 0, False
            used += cell_lines(cell)
    return types


def lines_needed(cells, index: int) -> int:
    """Lines a cell needs on the current slide: a paragraph with the code cells that follow it, or one code cell."""
    return block_lines(cells, index) if cells[index].cell_type == "markdown" else cell_lines(cells[index])


def block_lines(cells, index: int) -> int:
    """Lines of a paragraph together with the code cells that follow it (they belong on one slide)."""
    lines = cell_lines(cells[index])
    for cell in cells[index + 1:]:
        if cell.cell_type == "markdown" and language_of(cell) == "zh":
            continue
        if cell.cell_type == "markdown" or "solution" in tags(cell):
            break
        lines += cell_lines(cell)
    return lines


def mark_slides(path: Path) -> None:
    """Write slideshow.slide_type into every cell of a lesson (cell sources and outputs stay as they are)."""
    nb = nbformat.read(path, as_version=4)
    for cell, slide_type in zip(nb.cells, slide_types(nb)):
        cell.metadata["slideshow"] = {"slide_type": slide_type}
    nbformat.write(nb, path)


def slide_problems(nb) -> list[str]:
    """What is missing or inconsistent in a lesson's slide metadata (empty when complete)."""
    problems = []
    cells = nb.cells
    found = [c.metadata.get("slideshow", {}).get("slide_type") for c in cells]
    for index, slide_type in enumerate(found):
        if slide_type not in SLIDE_TYPES:
            problems.append(f"cell {index}: slide_type {slide_type!r} is not one of {SLIDE_TYPES}")
    if problems:
        return problems
    if found and found[0] != "slide":
        problems.append("cell 0 (the title) must start a slide")
    for indices in sections(cells):
        expected = "notes" if is_setup_section(cells, indices) else "slide"
        if indices and found[indices[0]] != expected and heading_level(cells[indices[0]]):
            problems.append(f"cell {indices[0]}: a section heading must be {expected!r}, not {found[indices[0]]!r}")
    for index, cell in enumerate(cells):
        if language_of(cell) == "zh" and index and language_of(cells[index - 1]) == "en" and found[index] != found[index - 1]:
            problems.append(f"cell {index}: the zh cell's type {found[index]!r} differs from its en cell's {found[index - 1]!r}")
        if "parameters" in tags(cell) and found[index] != "skip":
            problems.append(f"cell {index}: the parameters cell must be 'skip'")
        if "solution" in tags(cell) and found[index] in ("-", "fragment"):
            problems.append(f"cell {index}: a solution must start its own sub-slide (or be skipped)")
    return problems


# --- static exports -----------------------------------------------------------------------------

def copy_assets(copies: Path, out: Path) -> None:
    """Copy reveal.js (from sphinx-revealjs) and MathJax 2 (from jupyter-server-mathjax) into out/assets,
    and the lessons' figures into out/figures (pages in out/en/ link ../figures/ as the lessons do)."""
    reveal = files("sphinx_revealjs") / "_static" / "revealjs"
    sources = {
        out / "assets" / "reveal.js" / "dist": reveal / "dist",
        out / "assets" / "reveal.js" / "plugin" / "notes": reveal / "plugin" / "notes",
        out / "assets" / "mathjax": files("jupyter_server_mathjax") / "static",
        out / "figures": copies / "figures",
    }
    for target, source in sources.items():
        shutil.copytree(str(source), target, dirs_exist_ok=True)


# Anything in a lesson that would make a page or slide load something from the internet, or run a script.
REMOTE_OR_SCRIPT = re.compile(
    r"<\s*(script|iframe|object|embed|frame|base)\b"  # elements that run or load something
    r"|<[^>]*\bon[a-z]+\s*="  # event handlers inside a tag: <img onerror=...>
    r"|javascript:"
    r"|<(?!a\b)[^>]*\b(src|href|data|poster|srcset|action)\s*=\s*[\"']?\s*(https?:)?//"  # a tag (not a link) loading from the web
    r"|url\(\s*[\"']?\s*(https?:)?//|@import"  # remote CSS
    r"|!\[[^\]]*\]\(\s*<?(https?:)?//",  # a markdown image from the web
    re.IGNORECASE,
)


def offline_problems(nb) -> list[str]:
    """Where a lesson would load something remote or run a script on a static page: cell number and what."""
    found = []
    for number, cell in enumerate(nb.cells):
        texts = [cell.source] if cell.cell_type == "markdown" else []
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            if "application/javascript" in data:
                found.append(f"cell {number}: a JavaScript output")
            texts.append(str(data.get("text/html", "")))
        for text in texts:
            if match := REMOTE_OR_SCRIPT.search(text):
                found.append(f"cell {number}: {match.group(0).strip()!r}")
    return found


def for_static_export(nb):
    """A copy fit for a static page: no widget controls, lesson links to .html; refused if it would go online.

    Slides and pages promise to work offline and to run no script of a lesson's own: a teacher who
    adds a remote image, an iframe or a script to a lesson is told where, instead of the build
    silently breaking that promise.

    The explorers' default figures are ordinary image outputs, so they stay; the controls above
    them only work with a running kernel and are left out. The cell papermill injected (language
    = "zh") stays beside the parameters cell and takes its slide type.
    """
    problems = offline_problems(nb)
    if problems:
        listed = "; ".join(problems)
        raise ValueError(
            bilingual(
                f"This lesson would load something from the internet or run a script on an offline page ({listed}); "
                "use a local image in figures/ and plain markdown instead.",
                f"这一课在离线网页上会从网络加载内容或运行脚本（{listed}）；请改用 figures/ 中的本地图片和普通 Markdown。",
            )
        )
    result = copy.deepcopy(nb)
    result.metadata.pop("widgets", None)
    parameters = next((c for c in result.cells if "parameters" in tags(c)), None)
    for cell in result.cells:
        if "injected-parameters" in tags(cell) and parameters is not None and "slideshow" in parameters.metadata:
            cell.metadata["slideshow"] = dict(parameters.metadata["slideshow"])
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if WIDGET_VIEW not in o.get("data", {})]
        elif cell.cell_type == "markdown":
            cell.source = LESSON_LINK.sub(r"](\1.html)", cell.source)
    return result


def lesson_title(nb) -> str:
    """The text of the lesson's `# ` heading."""
    first = next(c for c in nb.cells if heading_level(c) == 1)
    return first.source.lstrip()[2:].splitlines()[0].strip()


def exporter_settings(language: str) -> dict:
    """nbconvert settings shared by slides and pages: local MathJax, no prompts, the page's language."""
    return {
        "extra_template_basedirs": [str(TEMPLATES)],
        "extra_template_paths": [str(TEMPLATES)],  # for the shared offline_mathjax.html.j2
        "mathjax_url": f"../assets/mathjax/{MATHJAX_CONFIG}",
        "exclude_input_prompt": True,
        "exclude_output_prompt": True,
        "language_code": HTML_LANGUAGE[language],
    }


@functools.cache
def _exporter(kind: str, language: str):
    """One nbconvert exporter per kind and language, kept for every lesson: building one compiles its
    templates again (a tenth of the build's time)."""
    from nbconvert import HTMLExporter, SlidesExporter

    if kind == "slides":
        return SlidesExporter(
            template_name="offline_slides", reveal_url_prefix="../assets/reveal.js", reveal_theme="white",
            reveal_width="1280", reveal_height="800", reveal_number="c/t", **exporter_settings(language))
    return HTMLExporter(template_name="offline_page", **exporter_settings(language))


def export_slides(nb, folder: Path, language: str) -> str:
    """reveal.js slides of one executed lesson, loading reveal.js and MathJax from ../assets."""
    exporter = _exporter("slides", language)
    body, _ = exporter.from_notebook_node(for_static_export(nb), resources={"metadata": {"path": str(folder)}})
    return body


def export_page(nb, folder: Path, language: str, links: list[dict]) -> str:
    """One page of the static site, with `links` (previous, all lessons, next) above and below it and
    each solution folded away until the reader opens it."""
    exporter = _exporter("page", language)
    resources = {"metadata": {"path": str(folder)}, "site_links": links, "solution_label": LABELS[language]["solution"]}
    body, _ = exporter.from_notebook_node(for_static_export(nb), resources=resources)
    return body


def executed_copies(copies: Path, language: str) -> list[Path]:
    """The executed one-language lessons that `publish copies` (and papermill for zh) wrote."""
    found = lesson_paths(copies / language)
    if not found:
        raise FileNotFoundError(f"no lessons in {copies / language}: run `make copies` first")
    return found


def build_slides(copies: Path, out: Path) -> list[Path]:
    """Slides of every lesson in each language: out/{en,zh}/NN_name.html, assets in out/assets."""
    copy_assets(copies, out)
    written = []
    for language in LANGUAGE_TAGS:
        for path in executed_copies(copies, language):
            target = out / language / path.with_suffix(".html").name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(export_slides(nbformat.read(path, as_version=4), path.parent, language), encoding="utf-8")
            written.append(target)
    return written


def page_links(names: list[str], position: int, language: str) -> list[dict]:
    """Previous lesson, all lessons, next lesson (those that exist) for the page at `position`."""
    labels = LABELS[language]
    links = []
    if position > 0:
        links.append({"href": f"{names[position - 1]}.html", "rel": "prev", "text": labels["previous"]})
    links.append({"href": "index.html", "rel": "index", "text": labels["index"]})
    if position < len(names) - 1:
        links.append({"href": f"{names[position + 1]}.html", "rel": "next", "text": labels["next"]})
    return links


def index_notebook(titles: dict[str, str], language: str):
    """The site's front page as a one-cell notebook: the title, the other language, the lessons and their slides."""
    labels = LABELS[language]
    lines = [f"# {SERIES_TITLE[language]}", "", labels["other"], ""]
    for name, title in titles.items():
        lines.append(f"1. [{title}]({name}.html) · [{labels['slides']}](../../slides/{language}/{name}.html)")
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("\n".join(lines))])


def build_site(copies: Path, out: Path) -> list[Path]:
    """A static site per language: out/{en,zh}/index.html and one page per lesson, assets in out/assets."""
    copy_assets(copies, out)
    written = []
    for language in LANGUAGE_TAGS:
        paths = executed_copies(copies, language)
        lessons = {path.stem: nbformat.read(path, as_version=4) for path in paths}
        names = list(lessons)
        folder = out / language
        folder.mkdir(parents=True, exist_ok=True)
        for position, (name, nb) in enumerate(lessons.items()):
            page = export_page(nb, paths[position].parent, language, page_links(names, position, language))
            (folder / f"{name}.html").write_text(page, encoding="utf-8")
            written.append(folder / f"{name}.html")
        titles = {name: lesson_title(nb) for name, nb in lessons.items()}
        index = export_page(index_notebook(titles, language), folder, language, [])
        (folder / "index.html").write_text(index, encoding="utf-8")
        written.append(folder / "index.html")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    mark = commands.add_parser("mark-slides", help="set slideshow.slide_type in every cell of the lessons")
    mark.add_argument("paths", nargs="*", type=Path)
    for name, help_text in (("slides", "reveal.js slides into BUILD/slides"), ("html", "a static site into BUILD/html")):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("build", type=Path, help="the folder holding en/ and zh/ executed copies")
    args = parser.parse_args(argv)
    if args.command == "mark-slides":
        for path in args.paths or lesson_paths():
            mark_slides(path)
            print(f"marked {path}")
    elif args.command == "slides":
        for path in build_slides(args.build, args.build / "slides"):
            print(path)
    else:
        for path in build_site(args.build, args.build / "html"):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
