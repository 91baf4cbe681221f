"""How `make test` shares the checks between parallel workers (pytest-xdist, `-n`).

A lesson's cells share one kernel and must run in order, and a test file's module fixtures are costly to
build twice, so each file goes whole to one worker. Files that share a costly session fixture go to one
worker together, so that it is built once: the one Chinese run of the series (`chinese_run`: every lesson
run in JupyterLab in Chromium) and transformers' reading of lesson 13's model (`transformers_smollm2`).
The longest units start first (the Chinese run with the browser, offline and classroom-build tests that
read it, then the test files of a minute or more, then the lessons from the last), so that no worker is
left with a long unit at the end while the other waits. Without `-n` only that order changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

# For each costly session fixture of tests/conftest.py, every test file that uses it
# (tests/test_ci_workflow.py checks these lists).
SHARED_FIXTURES = {
    "chinese_run": ("tests/test_browser.py", "tests/test_offline.py", "tests/test_site.py"),
    "transformers_smollm2": ("tests/test_batched_generation.py", "tests/test_llama.py", "tests/test_speculative_model.py"),
}
CHINESE_RUN_FILES = SHARED_FIXTURES["chinese_run"]
# Test files that took a minute or more in `make test` here (the README's install, `make lab`, the bench).
LONG_FILES = ("tests/test_pip_path.py", "tests/test_lab.py", "tests/test_batched_generation.py", "tests/test_llama.py",
              "tests/test_bench.py")


class ByFileSharingFixtures(LoadFileScheduling):
    """xdist's by-file scheduling, with the files of each SHARED_FIXTURES entry as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        return next((fixture for fixture, files in SHARED_FIXTURES.items() if file in files), file)


def start_order(item: pytest.Item) -> tuple[int, int]:
    """The Chinese run's files (the browser test first), the long test files, the lessons from the last one, the rest."""
    file = item.nodeid.split("::", 1)[0]
    if file == "tests/test_browser.py":
        return (0, 0)
    if file in CHINESE_RUN_FILES:
        return (1, 0)
    if file in LONG_FILES:
        return (2, LONG_FILES.index(file))
    if file.startswith("notebooks/") and file.endswith(".ipynb") and Path(file).name[:2].isdigit():
        return (3, -int(Path(file).name[:2]))
    return (4, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=start_order)  # stable: the cells of a lesson keep their order


@pytest.hookimpl(optionalhook=True)  # so that `-p no:xdist` still runs
def pytest_xdist_make_scheduler(config, log):
    config.option.loadscopereorder = False  # keep start_order, not xdist's "most tests first"
    return ByFileSharingFixtures(config, log)
