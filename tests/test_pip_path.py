"""The README's start without `make` works: its macOS/Linux commands, run in a temporary copy of the project,
install the pinned packages, import the package and run lesson 1 with papermill."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_commands(platform: str) -> list[str]:
    """The commands of the fenced block right after `<!-- pip-path: platform -->` in the README."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- pip-path: {platform} -->\n```\w*\n(.*?)```", text, re.DOTALL)
    assert match, f"the README has no pip-path block for {platform}"
    return [line for line in match.group(1).splitlines() if line.strip()]


def test_the_windows_commands_are_the_same_steps():
    """Windows has no test machine here: its block must be the macOS/Linux block with Windows paths."""
    unix = readme_commands("macos-linux")
    windows = readme_commands("windows")
    as_windows = [line.replace("python3 -m venv", "py -3.11 -m venv").replace(".venv/bin/", ".venv\\Scripts\\")
                  for line in unix]
    assert windows == as_windows


def test_the_readme_brings_pip_to_the_version_make_setup_uses():
    """The pip that comes with Python 3.11 took twice as long to install the series (73 s against 34 s): both paths use the newer one."""
    pinned = re.search(r"^PIP_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert pinned, "the Makefile should pin pip as PIP_VERSION"
    commands = readme_commands("macos-linux")
    assert commands[1] == f".venv/bin/python -m pip install --no-compile pip=={pinned.group(1)}"
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert f"-m pip install --no-compile pip=={pinned.group(1)}" in workflow


@pytest.mark.skipif(sys.platform == "win32", reason="runs the macOS/Linux commands")
def test_the_readme_commands_install_and_run_a_lesson(tmp_path):
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    project = tmp_path / "series"
    for name in filter(None, files.split("\0")):
        if (ROOT / name).is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, project / name)
    commands = readme_commands("macos-linux")
    assert commands[-1].startswith(".venv/bin/jupyter lab"), "the block should end by opening JupyterLab"
    for command in commands[:-1]:  # all but starting the server
        done = subprocess.run(command, shell=True, cwd=project, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    python = project / ".venv" / "bin" / "python"
    where = subprocess.run([python, "-c", "import attention_utils, sys; print(attention_utils.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert Path(where.strip()).is_relative_to(project), f"imported {where} instead of the copy"
    lesson = project / "notebooks" / "01_dot_products.ipynb"
    ran = subprocess.run([project / ".venv" / "bin" / "papermill", "--cwd", project / "notebooks", "-k", "python3",
                          "-p", "language", "zh", lesson, tmp_path / "out.ipynb"],
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    outputs = [o for c in nbformat.read(tmp_path / "out.ipynb", as_version=4).cells for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o.get("output_type") == "error" or o.get("name") == "stderr"]
