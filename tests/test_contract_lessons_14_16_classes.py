"""Contract 4 on lessons 14-16's helpers: each class of wrong answer a probe found, fixed where it lives.

Values read from meta tensors, saved results in the shapes the bench writes, a cache factory passed as an
object, silent wrong answers (a paged sequence shared by two layers, unknown names, a basis that is not
orthonormal), size checks that name the right argument, and memory checks that count every (T, T) matrix.
Each test failed before its fix. The checkers' forms and hints are in test_exercises_lesson14..16.py.
"""

from __future__ import annotations

import pytest
import torch

from attention_utils.explorers import lesson15 as explorers15
from attention_utils.inference import batched_generation, quantized_cache
from attention_utils.inference.kv_cache import KVCache
from attention_utils.recurrent import linear_attention
from contract_helpers import assert_contract_error
from tiny_models import tiny_llama


def meta(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, device="meta")


# ---- values read from meta tensors: skipped where they only guard, refused where the work needs them ----

@pytest.mark.parametrize("form", ["parallel", "recurrent", "chunked"])
def test_normalized_linear_attention_runs_on_meta(form):
    out = getattr(linear_attention, f"linear_attention_{form}")(meta(1, 4, 3), meta(1, 4, 3), meta(1, 4, 2), normalize=True)
    assert out.is_meta and out.shape == (1, 4, 2)


def test_dequantize_names_codes_on_another_device_than_their_scale():
    codes, scale, offset = quantized_cache.quantize(torch.randn(4, 8), 8, -1)
    assert_contract_error(lambda: quantized_cache.dequantize(codes, scale.to("meta"), offset.to("meta")), "codes",
                          "codes.to('meta')", kind=TypeError)
    assert_contract_error(lambda: quantized_cache.dequantize(codes.to("meta"), scale, offset), "codes", kind=TypeError)
    assert quantized_cache.dequantize(codes.to("meta"), scale.to("meta"), offset.to("meta")).is_meta


def test_generate_batch_runs_a_model_on_meta():
    model = tiny_llama(d_model=16, num_heads=4, num_kv_heads=2, seed=0).float().to("meta")
    result = batched_generation.generate_batch(model, [[1, 2], [3]], 2, KVCache(model.config.num_layers))
    assert result.tokens.shape == (2, 4) and result.tokens.is_meta


def test_a_bar_chart_of_meta_magnitudes_is_refused():
    assert_contract_error(lambda: explorers15.draw_key_magnitudes(meta(2, 4), 0), "magnitudes", "meta")
