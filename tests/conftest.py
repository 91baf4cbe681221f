"""Shared fixtures: a fixed seed and thread count for every package test, one run of the series in Chinese,
lesson 13's model and transformers' reading of it."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from filelock import FileLock

from lab_server import CHROMIUM  # beside this file

ROOT = Path(__file__).resolve().parents[1]
NO_NETWORK_PROOF = (
    "import socket\n"
    "try:\n"
    "    socket.create_connection(('151.101.0.223', 443), timeout=3)\n"
    "except OSError:\n"
    "    pass\n"
    "else:\n"
    "    raise SystemExit('the network is still reachable')\n"
)


@pytest.fixture(autouse=True)
def _reproducible():
    torch.manual_seed(0)
    # two threads alone; one per worker when pytest-xdist runs two workers on the two cores
    torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)


@pytest.fixture(autouse=True)
def _english_unless_a_test_says_otherwise():
    """Each test starts in English, and a test that switches to Chinese cannot leak it into the next one:
    package errors lead with the learner's language, so a leaked "zh" would swap their two lines."""
    from attention_utils.language import choose_language

    choose_language("en")
    yield
    choose_language("en")


@dataclass
class ChineseRun:
    """The series' one run in Chinese (tests/lab_run.py): its saved lessons, whether the network was cut off,
    what went wrong in each lesson (None when nothing did), and what the run printed."""

    folder: Path
    offline: bool
    returncode: int
    output: str
    problems: dict[str, str | None]


@pytest.fixture(scope="session")
def chinese_run(tmp_path_factory) -> ChineseRun:
    """Every lesson run once in Chinese in JupyterLab in Chromium (tests/lab_run.py), in a network namespace with
    only loopback where root and unshare allow it. The browser test, the offline test and the classroom builds
    share this one run, even from different workers: the first to ask makes it under a lock, in the folder the
    workers share, and the others read its record (the root conftest.py starts the browser test first)."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    pytest.importorskip("playwright.sync_api")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # popen-gwN/.. is the run's own folder
    record = shared / "chinese-run.json"
    with FileLock(shared / "chinese-run.lock"):
        if not record.exists():
            record.write_text(json.dumps(_run_series_in_chinese(shared / "chinese-run")), encoding="utf-8")
    fields = json.loads(record.read_text(encoding="utf-8"))
    return ChineseRun(**{**fields, "folder": Path(fields["folder"])})


def _run_series_in_chinese(out: Path) -> dict:
    """Run tests/lab_run.py into out/series, cut off from the network where it can be; ChineseRun's fields as JSON."""
    can_cut = os.geteuid() == 0 and shutil.which("unshare") and shutil.which("ip")
    run = f".venv/bin/python tests/lab_run.py {out / 'series'}"
    command = (["unshare", "--net", "sh", "-c", f'ip link set lo up && .venv/bin/python -c "{NO_NETWORK_PROOF}" && {run}']
               if can_cut else ["sh", "-c", run])
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=2400)
    outcomes = out / "series" / "outcomes.json"
    problems = ({name: o["problem"] for name, o in json.loads(outcomes.read_text(encoding="utf-8")).items()}
                if outcomes.exists() else {})
    return {"folder": str(out / "series" / "notebooks"), "offline": bool(can_cut), "returncode": result.returncode,
            "output": result.stdout + result.stderr, "problems": problems}


@pytest.fixture(scope="session")
def smollm2():
    """Lesson 13's model and tokenizer, loaded once for all the tests that need them (a few seconds each time)."""
    from attention_utils.models.llama import load_smollm2

    return load_smollm2()


@pytest.fixture(scope="session")
def _gguf_read_once():
    """gguf's file reader and its table of tensor names, each remembered for every transformers load of the session.

    transformers parses the file's header twice for the model, once more for the tokenizer, and rebuilds gguf's
    table of tensor names for each of the model's ~400 modules (25 s → 14 s for the model alone here, the same
    logits to the bit). The remembering is patched in only while transformers loads (see reading_with_transformers).
    """
    import gguf

    return functools.lru_cache(maxsize=None)(gguf.GGUFReader), functools.lru_cache(maxsize=None)(gguf.get_tensor_name_map)


@contextlib.contextmanager
def reading_with_transformers(read_once: tuple):
    """Offline (HF_HUB_OFFLINE=1), with gguf's reader and name table remembered (_gguf_read_once)."""
    import gguf

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr(gguf, "GGUFReader", read_once[0])
        patch.setattr(gguf, "get_tensor_name_map", read_once[1])
        yield


@pytest.fixture(scope="session")
def transformers_smollm2(_gguf_read_once):
    """transformers' Llama reading lesson 13's GGUF file offline, the tests' independent reference: loaded once for
    the files that compare with it (it dequantizes the file itself)."""
    from attention_utils.models.gguf_file import find_model_file

    with reading_with_transformers(_gguf_read_once):
        from transformers import AutoModelForCausalLM

        path = find_model_file()
        return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def transformers_tokenizer(_gguf_read_once):
    """transformers' tokenizer as it reads lesson 13's GGUF file, offline; a test that changes its settings takes a copy."""
    from attention_utils.models.gguf_file import find_model_file

    with reading_with_transformers(_gguf_read_once):
        from transformers import AutoTokenizer

        path = find_model_file()
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


@pytest.fixture
def one_thread():
    """Run a test of the real model on one thread: its many small operations are steadier that way on a shared
    2-core machine (with two threads each one waits whenever another process holds the second core)."""
    torch.set_num_threads(1)
