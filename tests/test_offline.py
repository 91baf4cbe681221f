"""The whole series runs with the network cut off: a fresh network namespace with only loopback.

The run is the series' one run in Chinese (the `chinese_run` fixture of conftest.py): JupyterLab and
Chromium both inside the namespace, every lesson run with Chinese plot labels and printed lines, and
saved. So it proves that the lessons, JupyterLab and its widgets all work offline.
"""

from pathlib import Path

import nbformat
import pytest

from attention_utils.course.publish import lesson_paths

ROOT = Path(__file__).resolve().parents[1]


def test_series_runs_offline_in_chinese(chinese_run):
    if not chinese_run.offline:
        pytest.skip("needs root, unshare and ip to make a network namespace")
    assert chinese_run.returncode == 0, chinese_run.output[-6000:]
    lessons = [p.name for p in lesson_paths(ROOT / "notebooks")]
    assert [p.name for p in lesson_paths(chinese_run.folder)] == lessons
    assert chinese_run.problems == dict.fromkeys(lessons), chinese_run.output[-6000:]
    for path in lesson_paths(chinese_run.folder):
        nb = nbformat.read(path, as_version=4)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        assert all(cell.execution_count for cell in code), f"{path.name}: saved before every cell had run"
        for cell in code:
            for output in cell.get("outputs", []):
                assert output.get("name") != "stderr", f"{path.name}: warning printed: {output.get('text', '')[:200]}"
