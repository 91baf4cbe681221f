"""How `make test` shares the checks between parallel workers (pytest-xdist, `-n`).

A lesson's cells share one kernel and must run in order, and a test file's module fixtures are costly to
build twice, so each file goes whole to one worker. Files that share transformers' reading of lesson 13's
model (`transformers_smollm2`) go to one worker together, so that it is built once. The one Chinese run of
the series (`chinese_run`: every lesson run in JupyterLab in Chromium) is made by the browser test, which
starts first; the offline and classroom-build tests that read it start after lesson 15, on whichever worker
is free, by when it is done (tests/conftest.py shares it between workers). Each lesson's check on torch's plain
kernels (tests/test_default_kernels.py, its own pytest process) is a unit of its own. Between them the
longest units start first (the test files of a minute or more, then the lessons and their plain-kernel
checks from the last), so that no worker is left with a long unit at the end while the other waits.
Without `-n` only that order changes.
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
    "transformers_tokenizer": ("tests/test_batched_generation.py", "tests/test_bpe_tokenizer.py"),
}
# fixtures built once per worker, from one reading of the model file: the files of all of them go to one worker together
ONE_WORKER = ("transformers_smollm2", "transformers_tokenizer")
CHINESE_RUN_READERS = ("tests/test_offline.py", "tests/test_site.py")  # after the browser test has made the run
PLAIN_KERNELS = "tests/test_default_kernels.py"
# Test files that took a minute or more in `make test` here (the README's install, `make lab`, the bench).
LONG_FILES = ("tests/test_pip_path.py", "tests/test_lab.py", "tests/test_batched_generation.py", "tests/test_llama.py",
              "tests/test_bench.py")


class ByFileSharingFixtures(LoadFileScheduling):
    """xdist's by-file scheduling, with the files of each SHARED_FIXTURES entry as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        if file == PLAIN_KERNELS:
            return nodeid  # one lesson each
        return ONE_WORKER[0] if any(file in SHARED_FIXTURES[fixture] for fixture in ONE_WORKER) else file


def start_order(item: pytest.Item) -> tuple[int, float]:
    """The browser test (it makes the Chinese run), the long test files, the lessons from the last one with their
    plain-kernel checks, then the rest. The tests that read the Chinese run come after lesson 15: by then the
    other worker has had about as much work as the browser test takes (about 10 minutes), so they do not wait."""
    file = item.nodeid.split("::", 1)[0]
    if file == "tests/test_browser.py":
        return (0, 0)
    if file in LONG_FILES:
        return (1, LONG_FILES.index(file))
    if file.startswith("notebooks/") and file.endswith(".ipynb") and Path(file).name[:2].isdigit():
        return (2, -int(Path(file).name[:2]))
    if file == PLAIN_KERNELS and "[" in item.nodeid:
        return (2, -int(item.nodeid.split("[", 1)[1][:2]))
    if file in CHINESE_RUN_READERS:
        return (2, -14.5)
    return (3, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=start_order)  # stable: the cells of a lesson keep their order


@pytest.hookimpl(optionalhook=True)  # so that `-p no:xdist` still runs
def pytest_xdist_make_scheduler(config, log):
    config.option.loadscopereorder = False  # keep start_order, not xdist's "most tests first"
    return ByFileSharingFixtures(config, log)
