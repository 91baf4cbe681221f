"""The package's two rooms: the teaching library never imports the course's workshop, and no module imports in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attention_utils"
WORKSHOP = "attention_utils.course"


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
