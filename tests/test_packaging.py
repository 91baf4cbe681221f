"""The requirement files agree with each other, so `make setup` and conda/Binder install the same things."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def names(path: Path) -> dict[str, str]:
    """Map each requirement's normalized name to its line."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            name = re.split(r"[<>=!~ \[]", line, maxsplit=1)[0]
            found[name.lower().replace("_", "-")] = line
    return found


def test_torch_is_pinned_exactly_everywhere():
    assert names(ROOT / "requirements.txt")["torch"] == "torch==2.13.0"
    assert names(ROOT / "requirements-lock.txt")["torch"] == "torch==2.13.0"


def test_every_direct_dependency_is_locked_exactly():
    lock = names(ROOT / "requirements-lock.txt")
    for name in names(ROOT / "requirements.txt"):
        assert name in lock, f"{name} is missing from requirements-lock.txt: run `make lock`"
        assert "==" in lock[name]


def test_environment_yml_installs_the_same_files():
    text = (ROOT / "environment.yml").read_text()
    for line in ("-r requirements.txt", "-c requirements-lock.txt", "-e ."):
        assert line in text
