"""The package's layout: the library never imports the workshop, parts import only earlier parts, no import circles."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attention_utils"
WORKSHOP = "attention_utils.course"
# The teaching library's parts, in the order of the series: a module imports nothing from a later part.
PARTS = ["attention_utils.inference", "attention_utils.models", "attention_utils.recurrent"]
# The top level is what lessons 1-11 build on. Two of its modules grew inference arguments in lesson 12: the fused
# module takes shared key/value heads, a window and a cache, and lesson 10's model takes a cache (and, for lesson 15,
# builds grouped-query or latent layers).
TOP_LEVEL_USES_OF_INFERENCE = {
    "attention_utils.fused": {"attention_utils.inference.grouped_query", "attention_utils.inference.kv_cache",
                              "attention_utils.inference.sliding_window"},
    "attention_utils.tiny_model": {"attention_utils.inference.grouped_query", "attention_utils.inference.kv_cache",
                                   "attention_utils.inference.latent_attention"},
}


def module_name(path: Path) -> str:
    """attention_utils/course/bench/report.py -> attention_utils.course.bench.report (packages drop __init__)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """The package modules a file imports, relative imports resolved, at any depth of the file (lazy imports too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t.startswith("attention_utils")}
    known = modules()
    return {t for t in found if t in known} - {name}


def graph() -> dict[str, set[str]]:
    return {name: imports_of(path) for name, path in modules().items()}


def test_the_teaching_library_never_imports_the_workshop():
    upward = {
        name: sorted(t for t in targets if t.startswith(WORKSHOP))
        for name, targets in graph().items()
        if not name.startswith(WORKSHOP)
    }
    assert {name: found for name, found in upward.items() if found} == {}


def part_of(name: str) -> int | None:
    """The index of the part a module belongs to (0 for the top level), None for the workshop, exercises and explorers."""
    for index, part in enumerate(PARTS, start=1):
        if name == part or name.startswith(part + "."):
            return index
    pieces = name.split(".")
    if pieces[1:2] and pieces[1] in {"course", "explorers", "exercises"}:
        return None
    return 0


def later_imports(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """For each module under a part, the modules of later parts it imports (a part's __init__ only describes it)."""
    found = {
        name: sorted(t for t in targets if (part_of(t) or 0) > part_of(name))
        for name, targets in edges.items()
        if part_of(name) and name not in PARTS
    }
    return {name: targets for name, targets in found.items() if targets}


def test_a_module_imports_nothing_from_a_later_part():
    assert later_imports(graph()) == {}


def test_a_later_import_is_caught():
    edges = {"attention_utils.inference.kv_cache": {"attention_utils.models.llama", "attention_utils.checks"},
             "attention_utils.models.llama": {"attention_utils.inference.kv_cache"}}
    assert later_imports(edges) == {"attention_utils.inference.kv_cache": ["attention_utils.models.llama"]}


def test_the_top_level_uses_only_the_listed_inference_modules():
    uses = {
        name: {t for t in targets if part_of(t)}
        for name, targets in graph().items()
        if part_of(name) == 0 and name != "attention_utils"  # the package's __init__ re-exports names for `au.`
    }
    assert {name: found for name, found in uses.items() if found} == TOP_LEVEL_USES_OF_INFERENCE


def test_the_top_level_holds_at_most_18_modules():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 18, f"{len(top)} modules at the top of attention_utils/: group the newer ones into a part"


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of names (first == last), or None: depth-first search."""
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = "open"
        for target in sorted(edges.get(name, ())):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target, path + [target])):
                return cycle
        state[name] = "done"
        return None

    for name in sorted(edges):
        if name not in state and (cycle := visit(name, [name])):
            return cycle
    return None


def test_no_module_imports_in_a_circle():
    # a package's __init__ importing its own submodules is how a package is made, not a cycle
    edges = {name: {t for t in targets if not t.startswith(name + ".")} for name, targets in graph().items()}
    assert find_cycle(edges) is None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("name", sorted(modules()))
def test_every_module_says_what_it_holds_in_one_line(name):
    docstring = ast.get_docstring(ast.parse(modules()[name].read_text(encoding="utf-8")))
    assert docstring, f"{name} needs a docstring whose first line says what it holds"
    first = docstring.splitlines()[0]
    assert first.endswith((".", ":")) and len(first) <= 120, f"{name}: first docstring line should be one short sentence"


def test_lessons_read_saved_results_not_the_harness():
    lessons = Path(__file__).resolve().parents[1] / "notebooks"
    for lesson in sorted(lessons.glob("[0-9][0-9]_*.ipynb")):
        assert "attention_utils.course" not in lesson.read_text(encoding="utf-8"), f"{lesson.name} imports the workshop"


def names_in_init(package: str = "attention_utils") -> dict[str, str]:
    """`<package>.<name>` -> the module that defines it, read from the package's __init__ (relative imports only)."""
    init = PACKAGE.parent.joinpath(*package.split("."), "__init__.py")
    found = {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found |= {alias.asname or alias.name: f"{package}.{node.module}" for alias in node.names}
    return found


def library_modules_of(lesson: Path) -> list[str]:
    """The teaching-library modules a lesson uses, as paths under attention_utils/ without .py, read from its imports
    and `au.<name>` calls; left out: what every lesson uses (set-up, language) and its own explorers and exercises."""
    known, by_name = modules(), names_in_init()
    used = set()
    for cell in json.loads(lesson.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attention_utils"):
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    if name in known:  # a module: from attention_utils.inference import kv_cache
                        used.add(name)
                    elif known.get(node.module, Path()).name == "__init__.py":  # a name a package re-exports
                        used.add(names_in_init(node.module).get(alias.name, node.module))
                    else:
                        used.add(node.module)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "au":
                used.add(by_name.get(node.attr, f"attention_utils.{node.attr}"))
    everywhere = {"attention_utils", "attention_utils.environment", "attention_utils.language"}
    library = {name for name in used if name in known and part_of(name) is not None} - everywhere
    return sorted(name.removeprefix("attention_utils.").replace(".", "/") for name in library)


def readme_lesson_modules() -> dict[str, list[str]]:
    """The README's lesson -> modules table: lesson number -> the module paths its second column names."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Which modules each lesson uses", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].isdigit():
            rows[cells[0]] = re.findall(r"`([a-z_/0-9]+)`", cells[1])
    return rows


def test_the_readme_names_the_modules_each_lesson_uses():
    lessons = sorted((PACKAGE.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    measured = {str(int(lesson.name[:2])): library_modules_of(lesson) for lesson in lessons}
    assert readme_lesson_modules() == measured


MOST_LINES = 450  # the guide's bar: a module longer than this holds more than one idea; split it by what it does


def long_modules(paths: dict[str, Path], most: int = MOST_LINES) -> dict[str, int]:
    """The modules whose files have more than `most` lines, with their line counts."""
    counts = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in paths.items()}
    return {name: count for name, count in counts.items() if count > most}


def test_no_module_of_the_package_is_over_450_lines():
    assert long_modules(modules()) == {}


def test_a_long_module_is_caught(tmp_path):
    short, long = tmp_path / "short.py", tmp_path / "long.py"
    short.write_text("x = 1\n" * MOST_LINES, encoding="utf-8")
    long.write_text("x = 1\n" * (MOST_LINES + 1), encoding="utf-8")
    assert long_modules({"short": short, "long": long}) == {"long": MOST_LINES + 1}
