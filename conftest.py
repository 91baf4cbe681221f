"""How `make test` shares the checks between parallel workers (pytest-xdist, `-n`).

A lesson's cells share one kernel and must run in order, and a test file's module fixtures are costly to
build twice, so each file goes whole to one worker. The files that read the one Chinese run of the series
(the `chinese_run` fixture: every lesson run in JupyterLab in Chromium) go together, so that run happens
once. The longest units start first (the Chinese run with the browser, offline and classroom-build tests
that read it, then the lessons from the last), so that no worker is left with a long unit at the end
while the other waits. Without `-n` only that order changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

# Every test file that uses conftest's `chinese_run` (tests/test_ci_workflow.py checks this list).
CHINESE_RUN_FILES = ("tests/test_browser.py", "tests/test_offline.py", "tests/test_site.py")


class ByFileSharingTheChineseRun(LoadFileScheduling):
    """xdist's by-file scheduling, with the files of CHINESE_RUN_FILES as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        return "chinese_run" if file in CHINESE_RUN_FILES else file


def start_order(item: pytest.Item) -> tuple[int, int]:
    """The Chinese run's files (the browser test first), then the lessons from the last one, then the rest."""
    file = item.nodeid.split("::", 1)[0]
    if file == "tests/test_browser.py":
        return (0, 0)
    if file in CHINESE_RUN_FILES:
        return (1, 0)
    if file.startswith("notebooks/") and file.endswith(".ipynb") and Path(file).name[:2].isdigit():
        return (2, -int(Path(file).name[:2]))
    return (3, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=start_order)  # stable: the cells of a lesson keep their order


@pytest.hookimpl(optionalhook=True)  # so that `-p no:xdist` still runs
def pytest_xdist_make_scheduler(config, log):
    config.option.loadscopereorder = False  # keep start_order, not xdist's "most tests first"
    return ByFileSharingTheChineseRun(config, log)
