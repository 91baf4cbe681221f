"""How `make test` shares the checks between parallel workers (pytest-xdist, `-n`).

A lesson's cells share one kernel and must run in order, and a test file's module fixtures are costly to
build twice, so each file goes whole to one worker. The files that read the one Chinese run of the series
(the `chinese_run` fixture) go together, so that run happens once. Without `-n` nothing changes.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadFileScheduling

# Every test file that uses conftest's `chinese_run` (tests/test_ci_workflow.py checks this list).
CHINESE_RUN_FILES = ("tests/test_offline.py", "tests/test_site.py")


class ByFileSharingTheChineseRun(LoadFileScheduling):
    """xdist's by-file scheduling, with the files of CHINESE_RUN_FILES as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        return "chinese_run" if file in CHINESE_RUN_FILES else file


@pytest.hookimpl(optionalhook=True)  # so that `-p no:xdist` still runs
def pytest_xdist_make_scheduler(config, log):
    return ByFileSharingTheChineseRun(config, log)
