"""Every lesson's stored outputs hold on torch's plain CPU kernels too, not only on the AVX2 ones `make test` uses.

A learner's CPU may pick other kernels than the machine that stored the outputs. nbval compares each lesson
once more in a pytest process of its own with ATEN_CPU_CAPABILITY=default (the variable is read when torch
loads, so it cannot change inside this process). Each lesson is its own unit of work for the workers
(conftest.py), so these runs fill the time the other checks leave, instead of a second pass after them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attention_utils.course.publish import lesson_paths

ROOT = Path(__file__).resolve().parents[1]
LESSONS = lesson_paths(ROOT / "notebooks")


def plain_kernel_environment() -> dict[str, str]:
    """This process's environment with torch's plain kernels, without the parent's pytest-xdist variables.

    torch.compile's cache does not tell the kernel sets apart, so it gets a folder of its own.
    """
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.update(ATEN_CPU_CAPABILITY="default", TORCHINDUCTOR_CACHE_DIR=str(ROOT / "build" / "inductor-default"))
    return env


KERNEL_NEVER_STARTED = "Kernel died before replying to kernel_info"  # jupyter_client's words, before any cell ran


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda path: path.stem)
def test_stored_outputs_hold_on_the_plain_kernels(lesson):
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "--no-header", str(lesson.relative_to(ROOT))]

    def nbval() -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=ROOT, env=plain_kernel_environment(), capture_output=True, text=True,
                              timeout=1800)
    result = nbval()
    if result.returncode and KERNEL_NEVER_STARTED in result.stdout:
        # once in a full `make test` here (2026-11-29) a kernel died while starting, before it ran a cell: start it again
        result = nbval()
    assert result.returncode == 0, f"nbval under ATEN_CPU_CAPABILITY=default:\n{result.stdout[-8000:]}{result.stderr[-2000:]}"


def test_the_environment_gives_the_plain_kernels():
    """The check above is only worth its time if torch in that process really runs its plain kernels."""
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    result = subprocess.run([sys.executable, "-c", probe], env=plain_kernel_environment(), capture_output=True, text=True)
    assert result.stdout.strip() == "DEFAULT", result.stderr[-2000:]
