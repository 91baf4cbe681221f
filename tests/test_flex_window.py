"""FlexAttention with the sliding-window block mask gives what SDPA gives with the window written as loops,
eager and compiled, and a kernel compiled under one ATen kernel set is never reused under another."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_kv_cache import visible_by_loops

from attention_utils.inference import flex_window

ROOT = Path(__file__).resolve().parents[1]
CASES = [(64, 8, 0, 16), (128, 32, 0, 32), (128, 20, 3, 32)]  # tokens, window, sinks, block size


def by_loops(queries, keys, values, window, sinks):
    allowed = torch.tensor(visible_by_loops(queries.shape[-2], window, sinks))
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=allowed)


@pytest.mark.parametrize("num_tokens, window, sinks, block_size", CASES)
def test_the_block_mask_skips_only_empty_tiles(num_tokens, window, sinks, block_size):
    allowed = torch.tensor(visible_by_loops(num_tokens, window, sinks))
    tiles = flex_window.visible_blocks(num_tokens, window, sinks, block_size)
    for row, column in itertools.product(range(num_tokens // block_size), repeat=2):
        tile = allowed[row * block_size:(row + 1) * block_size, column * block_size:(column + 1) * block_size]
        assert tiles[row, column] == bool(tile.any()), (row, column)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("num_tokens, window, sinks, block_size", CASES)
def test_flex_attention_equals_sdpa_with_the_window(num_tokens, window, sinks, block_size, compiled):
    if compiled and not flex_window.can_compile():
        pytest.skip("torch.compile cannot build CPU kernels here (no C++ compiler, or ATEN_CPU_CAPABILITY=default)")
    queries, keys, values = torch.randn(3, 2, 3, num_tokens, 16, generator=torch.Generator().manual_seed(num_tokens))
    block_mask = flex_window.window_block_mask(num_tokens, window, sinks, block_size)
    found = flex_window.flex_window_attention(queries, keys, values, block_mask, compiled=compiled)
    torch.testing.assert_close(found, by_loops(queries, keys, values, window, sinks), atol=1e-5, rtol=1e-5)


CHECK = """
import torch, torch.nn.functional as F
from attention_utils.inference import flex_window, sliding_window
q, k, v = torch.randn(3, 1, 4, 256, 32, generator=torch.Generator().manual_seed(0))
found = flex_window.flex_window_attention(q, k, v, flex_window.window_block_mask(256, 32, block_size=32), compiled=True)
print(float((found - F.scaled_dot_product_attention(q, k, v, attn_mask=~sliding_window.sliding_window_mask(256, 32))).abs().max()))
"""


def test_a_kernel_compiled_under_one_kernel_set_is_not_reused_under_another(tmp_path):
    """torch's saved-graph cache does not tell ATEN_CPU_CAPABILITY settings apart: with it, a graph saved on the
    machine's own kernels and loaded under avx2 (or the other way round) answered 3.4 away from SDPA."""
    native = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                            env={k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"},
                            capture_output=True, text=True, check=True).stdout.strip()
    if native in ("DEFAULT", "AVX2") or not flex_window.can_compile():
        pytest.skip(f"needs two kernel sets that compile; this CPU's own is {native}")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}  # one cache, shared by both runs
    for capability in (None, "avx2"):
        run_env = {k: v for k, v in env.items() if k != "ATEN_CPU_CAPABILITY"}
        if capability:
            run_env["ATEN_CPU_CAPABILITY"] = capability
        done = subprocess.run([sys.executable, "-c", CHECK], env=run_env, cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert float(done.stdout.split()[-1]) < 1e-5, (capability or native, done.stdout)
