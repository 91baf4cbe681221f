"""`make run` keeps only complete runs: a failing lesson never leaves fresh early lessons beside stale later ones."""

from __future__ import annotations

from pathlib import Path

import nbformat

from attention_utils.course.publish import run_series


def write_lesson(folder: Path, name: str, body: str) -> None:
    parameters = nbformat.v4.new_code_cell('language = "en"')
    parameters.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[parameters, nbformat.v4.new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / name)


def printed(path: Path) -> str:
    return "".join(o.get("text", "") for c in nbformat.read(path, as_version=4).cells for o in c.get("outputs", []))


def test_a_failed_run_keeps_the_last_complete_one(tmp_path, capsys):
    lessons, out = tmp_path / "notebooks", tmp_path / "run" / "zh"
    lessons.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb", "03_c.ipynb"):
        write_lesson(lessons, name, "print('run 1', language)")
    assert run_series("zh", out, lessons)
    assert sorted(p.name for p in out.iterdir()) == ["01_a.ipynb", "02_b.ipynb", "03_c.ipynb"]
    assert printed(out / "03_c.ipynb") == "run 1 zh\n"

    write_lesson(lessons, "01_a.ipynb", "print('run 2', language)")
    write_lesson(lessons, "02_b.ipynb", "raise RuntimeError('a learner broke this cell')")
    assert not run_series("zh", out, lessons)
    said = capsys.readouterr().err
    assert "02_b.ipynb" in said and "运行在 02_b.ipynb 处中断" in said
    assert [printed(out / name) for name in ("01_a.ipynb", "03_c.ipynb")] == ["run 1 zh\n", "run 1 zh\n"]
    failed = out.with_name("zh.failed")
    assert sorted(p.name for p in failed.iterdir()) == ["01_a.ipynb", "02_b.ipynb"]
    assert "a learner broke this cell" in str([c.outputs for c in nbformat.read(failed / "02_b.ipynb", as_version=4).cells if c.cell_type == "code"])
    assert not out.with_name("zh.partial").exists()

    write_lesson(lessons, "02_b.ipynb", "print('run 3', language)")
    assert run_series("zh", out, lessons)
    assert printed(out / "01_a.ipynb") == "run 2 zh\n" and not failed.exists()
