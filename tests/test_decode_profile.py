"""Lesson 14's quiet profiler: the native start/stop lines are hidden, Python's stderr is not, and the matmul share."""

import subprocess
import sys
import warnings

import pytest
import torch

from attention_utils.inference.decode_profile import attention_ms, matmul_share, profile_calls

SCRIPT = """
import sys, warnings, torch
from attention_utils.inference.decode_profile import profile_calls
def call():
    torch.ones(64, 64) @ torch.ones(64, 64)
    warnings.warn("a python warning")
    print("python stderr line", file=sys.stderr)
profile_calls(call, repeats=1)
"""


def test_only_the_native_profiler_lines_are_hidden():
    # In a fresh process, so descriptor 2 is the real one (as in a terminal).
    bare = subprocess.run([sys.executable, "-c", "import torch\nwith torch.profiler.profile(): torch.ones(2) + 1"],
                          capture_output=True, text=True, check=True)
    if "profiler_start" not in bare.stderr:
        pytest.skip("this torch build prints no profiler_start line, so there is nothing to hide")
    quiet = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    assert "profiler_start" not in quiet.stderr and "profiler_stop" not in quiet.stderr
    assert "a python warning" in quiet.stderr and "python stderr line" in quiet.stderr


def test_share_of_matrix_products():
    only_matmul = profile_calls(lambda: torch.ones(256, 256) @ torch.ones(256, 256), repeats=2)
    assert any(event.key == "aten::mm" for event in only_matmul)
    no_matmul = profile_calls(lambda: torch.ones(256, 256).exp(), repeats=2)
    assert matmul_share(no_matmul) == 0
    share = matmul_share(only_matmul)
    by_hand = sum(e.self_cpu_time_total for e in only_matmul if e.key == "aten::mm") / sum(
        e.self_cpu_time_total for e in only_matmul)
    assert 0 < share <= 1 and share == pytest.approx(by_hand)


def test_bad_arguments_are_refused_clearly():
    with pytest.raises(TypeError, match="call must be a function"):
        profile_calls(42)
    with pytest.raises(ValueError, match="repeats"):
        profile_calls(lambda: None, repeats=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="no CPU time"):
            matmul_share(profile_calls(lambda: None))


def test_attention_ms_sums_every_sdpa_operator_and_nothing_else():
    own = {"aten::_scaled_dot_product_flash_attention_for_cpu": 2.0, "aten::scaled_dot_product_attention": 0.25,
           "aten::mm": 30.0, "aten::softmax": 1.0}  # by hand: 2.0 + 0.25
    assert attention_ms(own) == 2.25 and attention_ms({"aten::mm": 1.0}) == 0
