"""The whole series runs with the network cut off: a fresh network namespace with only loopback.

The run is `make run LANGUAGE=zh` (the `chinese_run` fixture of conftest.py), so it also proves every
lesson runs headlessly under papermill with Chinese plot labels and printed lines.
"""

import nbformat
import pytest

from attention_utils.course.publish import lesson_paths


def test_series_runs_offline_in_chinese(chinese_run):
    if not chinese_run.offline:
        pytest.skip("needs root, unshare and ip to make a network namespace")
    assert chinese_run.returncode == 0, chinese_run.output[-6000:]
    ran = lesson_paths(chinese_run.folder)
    assert [p.name for p in ran] == [p.name for p in lesson_paths(chinese_run.folder.parents[2] / "notebooks")]
    for path in ran:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                assert output.get("name") != "stderr", f"{path.name}: warning printed: {output.get('text', '')[:200]}"
