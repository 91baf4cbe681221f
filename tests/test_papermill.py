"""A lesson runs headlessly under papermill with parameters, in Chinese, without warnings."""

from pathlib import Path

import nbformat
import papermill
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_first_lesson_runs_in_chinese(tmp_path):
    source = ROOT / "notebooks" / "01_dot_products.ipynb"
    target = tmp_path / "01_zh.ipynb"
    papermill.execute_notebook(
        str(source), str(target), parameters={"language": "zh", "seed": 7},
        cwd=str(source.parent), kernel_name="python3", progress_bar=False,
    )
    nb = nbformat.read(target, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "language = \"zh\"" in injected[0].source
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("name") == "stderr"], "a warning (missing glyph?) was printed"
    assert any("image/png" in o.get("data", {}) for o in outputs)


def test_a_parameter_of_the_wrong_kind_stops_the_run_with_one_clear_message(tmp_path):
    """papermill's `-p quick false` arrives as the string "false", which Python counts as true: the lesson
    must refuse it instead of silently running the quick variant; a seed torch cannot take is refused too."""
    source = ROOT / "notebooks" / "01_dot_products.ipynb"
    for parameters, message in (({"quick": "false"}, "quick must be True or False"),
                                ({"seed": 99999999999999999999}, "seed must be at most 2**64 - 1")):
        with pytest.raises(papermill.PapermillExecutionError) as stopped:
            papermill.execute_notebook(str(source), str(tmp_path / "out.ipynb"), parameters=parameters,
                                       cwd=str(source.parent), kernel_name="python3", progress_bar=False)
        assert message in str(stopped.value)
