"""Build tools for the notebooks: bilingual parity, one-language and student copies, clean runs.

    python -m attention_utils.course.publish execute notebooks/01_*.ipynb   # run in place, store outputs
    python -m attention_utils.course.publish copies build                   # en / zh / student copies
    python -m attention_utils.course.publish run zh build/run/zh            # every lesson with papermill
"""

from __future__ import annotations

import argparse
import copy
import re
import shutil
import sys
from pathlib import Path

import nbformat

from ..checks import bilingual

LANGUAGE_TAGS = ("en", "zh")
HEADING = re.compile(r"^(#+)\s", re.MULTILINE)
FORMULA = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.DOTALL)
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)|<img[^>]*\ssrc=[\"']([^\"']+)")


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def language_of(cell) -> str | None:
    """The `en`/`zh` tag of a markdown cell, or None."""
    return next((t for t in tags(cell) if t in LANGUAGE_TAGS), None)


def image_links(source: str) -> list[str]:
    """Every image path a markdown source shows (markdown syntax and <img src>)."""
    return [a or b for a, b in IMAGE.findall(source)]


def images_match(english: list[str], chinese: list[str]) -> bool:
    """The same images in the same order, except that a figure x_en.png may be shown as x_zh.png in Chinese."""
    return len(english) == len(chinese) and all(
        zh in (en, re.sub(r"_en(\.\w+)$", r"_zh\1", en)) for en, zh in zip(english, chinese)
    )


def _formula_shape(found: list[str]) -> list[str]:
    """Formulas (or headings) with the words inside \\text{...} blanked: those words are prose, written in each language."""
    return [re.sub(r"\\text\{[^{}]*\}", r"\\text{}", item) for item in found]


def parity_problems(nb) -> list[str]:
    """What breaks the en/zh pairing: order, heading levels, formulas and image links must match."""
    problems = []
    markdown = [c for c in nb.cells if c.cell_type == "markdown" and c.source.strip()]
    languages = [language_of(c) for c in markdown]
    if languages != ["en", "zh"] * (len(markdown) // 2) or len(markdown) % 2:
        return [f"markdown cells must alternate en, zh (en first); got {languages}"]
    for number, (en, zh) in enumerate(zip(markdown[::2], markdown[1::2]), start=1):
        for name, pattern in (("heading levels", HEADING), ("formulas", FORMULA)):
            found_en, found_zh = (_formula_shape(pattern.findall(c.source)) for c in (en, zh))
            if found_en != found_zh:
                problems.append(f"pair {number}: {name} differ: {found_en} vs {found_zh}")
        if not images_match(image_links(en.source), image_links(zh.source)):
            problems.append(f"pair {number}: image links differ")
        if not re.search(r"[\u4e00-\u9fff]", zh.source):
            problems.append(f"pair {number}: the zh cell has no Chinese")
    return problems


def language_copy(nb, language: str):
    """A copy with only one language's markdown cells (code cells are shared)."""
    other = {"en": "zh", "zh": "en"}[language]
    result = copy.deepcopy(nb)
    result.cells = [c for c in result.cells if not (c.cell_type == "markdown" and language_of(c) == other)]
    return result


def student_copy(nb):
    """A copy without the cells tagged `solution`."""
    result = copy.deepcopy(nb)
    result.cells = [c for c in result.cells if "solution" not in tags(c)]
    return result


def lesson_paths(folder: Path = Path("notebooks")) -> list[Path]:
    """The numbered lessons, in order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def execute(path: Path, timeout: int = 600) -> None:
    """Run a notebook top to bottom on a clean python3 kernel in its own folder and save it."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": str(path.parent)}}).execute()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["attention_series"] = {"versions": installed_versions()}
    nbformat.write(nb, path)


def installed_versions() -> dict[str, str]:
    """Versions that shape the stored outputs; the hygiene test compares them with what is installed."""
    from importlib.metadata import version

    return {name: version(name) for name in ("torch", "matplotlib", "numpy", "ipywidgets")}


def write_copies(out: Path, folder: Path = Path("notebooks")) -> list[Path]:
    """Write en/, zh/ and student/ copies of every lesson under `out`, with the figures they link to."""
    shutil.copytree(folder.parent / "figures", out / "figures", dirs_exist_ok=True)  # lessons link ../figures/
    written = []
    for path in lesson_paths(folder):
        nb = nbformat.read(path, as_version=4)
        for name, variant in (("en", language_copy(nb, "en")), ("zh", language_copy(nb, "zh")), ("student", student_copy(nb))):
            target = out / name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(variant, target)
            written.append(target)
    return written


def run_series(language: str, out: Path, folder: Path = Path("notebooks")) -> bool:
    """Run every lesson headlessly with papermill into `out`, which only ever holds a complete run.

    The lessons are written into `<out>.partial/` first and moved into place when all have run, so a
    failing lesson never leaves `out` with fresh early lessons beside stale later ones: `out` keeps the
    previous complete run, and the failed run's outputs (with the error shown in its cell) go to
    `<out>.failed/`. Returns True when every lesson ran.
    """
    import papermill

    partial, failed = out.with_name(out.name + ".partial"), out.with_name(out.name + ".failed")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    lessons = lesson_paths(folder)
    for path in lessons:
        print(f"{path.name} ({language})", flush=True)
        try:
            papermill.execute_notebook(str(path), str(partial / path.name), parameters={"language": language},
                                       cwd=str(folder), kernel_name="python3", progress_bar=False)
        except Exception as error:  # noqa: BLE001 - a failed lesson ends the run with one clear line
            shutil.rmtree(failed, ignore_errors=True)
            partial.rename(failed)
            kept_en = f"{out} still holds the last complete run" if out.exists() else f"nothing was written to {out}"
            kept_zh = f"{out} 中仍是上一次完整运行的结果" if out.exists() else f"{out} 中没有写入任何内容"
            print(bilingual(f"The run stopped at {path.name} ({type(error).__name__}); {kept_en}; this run's lessons, "
                            f"with the error shown in its cell, are in {failed}.",
                            f"运行在 {path.name} 处中断（{type(error).__name__}）；{kept_zh}；"
                            f"本次运行的课程（出错的单元格里有报错信息）在 {failed} 中。"),
                  file=sys.stderr, flush=True)
            return False
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    shutil.rmtree(failed, ignore_errors=True)
    print(bilingual(f"All {len(lessons)} lessons ran; outputs in {out}.", f"全部 {len(lessons)} 课运行完毕，结果在 {out} 中。"),
          flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("execute", help="run notebooks in place on a clean kernel")
    run.add_argument("paths", nargs="*", type=Path)
    copies = commands.add_parser("copies", help="write en/zh/student copies")
    copies.add_argument("out", type=Path)
    series = commands.add_parser("run", help="run every lesson with papermill into a folder, all or nothing")
    series.add_argument("language", choices=LANGUAGE_TAGS)
    series.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "execute":
        for path in args.paths or lesson_paths():
            print(f"executing {path}", flush=True)
            execute(path)
    elif args.command == "run":
        return 0 if run_series(args.language, args.out) else 1
    else:
        for path in write_copies(args.out):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
