"""Weights in fewer bytes (lesson 14): int8 rows with a scale each, checked by hand and against a dequantized float32 copy.

References: a row quantized by hand; the rounding bound (each weight within half a step, s / 2, of
the original); nn.Linear holding scale * values in float32 (the dequantized copy), which an int8
model computing in float32 must match to float32 rounding (1e-3 on logits, as test_llama.py; measured
about 1e-4); the byte count from the parameter count by hand.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_utils.inference.generation import generate
from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.weight_formats import (
    Int8Linear, dequantize_rows, dequantized, quantize_rows, to_format, weight_bytes,
)
from attention_utils.models.llama import model_inputs
from contract_helpers import assert_contract_error

pytestmark = pytest.mark.usefixtures("one_thread")


def test_one_row_by_hand():
    values, scale = quantize_rows(torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]]))
    assert scale.tolist() == pytest.approx([2 / 127, 1.0])
    # 1 / (2/127) = 63.5 rounds to the even 64; 0.5 / (2/127) = 31.75 rounds to 32
    assert values.tolist() == [[64, -127, 32], [0, 0, 0]]
    assert values.dtype == torch.int8


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 8), cols=st.integers(1, 40), seed=st.integers(0, 2**16), size=st.floats(1e-3, 1e3))
def test_rounding_error_is_at_most_half_a_step(rows, cols, seed, size):
    weight = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * size
    values, scale = quantize_rows(weight)
    error = (dequantize_rows(values, scale) - weight).abs()
    assert (error <= scale[:, None] / 2 * (1 + 1e-5)).all()
    assert values.abs().max() == 127  # the largest weight of each row uses the whole range


def test_int8_linear_equals_the_dequantized_weights():
    linear = nn.Linear(64, 48, bias=False)
    x = torch.randn(2, 5, 64)
    reference = x @ dequantize_rows(*quantize_rows(linear.weight.detach())).T
    torch.testing.assert_close(Int8Linear(linear)(x), reference, rtol=1e-5, atol=1e-5)
    # bfloat16 activations: 8 bits of mantissa, so about 1% of the size of a sum
    fast = Int8Linear(linear)(x.bfloat16()).float()
    assert (fast - reference).abs().max() <= 0.02 * reference.abs().max()



ODD_ROWS = """
import torch
from torch import nn
from attention_utils.inference.weight_formats import Int8Linear, dequantize_rows, quantize_rows
torch.manual_seed(0)
worst = 0.0
for in_features in (8, 24, 40, 100):
    linear = nn.Linear(in_features, 24, bias=False)
    reference = dequantize_rows(*quantize_rows(linear.weight.detach()))
    for _ in range(20):
        x = torch.randn(3, in_features)
        exact = x.bfloat16().float() @ reference.T
        found = Int8Linear(linear.bfloat16())(x.bfloat16()).float()
        worst = max(worst, ((found - exact).abs().max() / exact.abs().max()).item())
print(worst)
"""


@pytest.mark.parametrize("capability", [None, "avx2", "default"], ids=["this CPU's own", "avx2", "default"])
def test_int8_rows_of_any_length_in_bfloat16(capability):
    """torch 2.13's AVX-512 int8 kernel returned garbage (or crashed) for rows whose length is not a multiple of 16
    (measured on an AMD Zen 4): each kernel set, this CPU's own included, must give the dequantized product."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    done = subprocess.run([sys.executable, "-c", ODD_ROWS], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) <= 0.02  # bfloat16 sums: about 1% of their size, as above


def test_int8_model_equals_its_dequantized_float32_copy(smollm2):
    model, tokenizer = smollm2
    ids = model_inputs(tokenizer, "Once upon a time, there was a little")
    int8 = to_format(model, "int8", torch.float32)
    with torch.no_grad():
        largest = (int8(ids) - dequantized(int8)(ids)).abs().max().item()
    assert largest < 1e-3
    assert isinstance(model.blocks[0].feed_forward.gate_up, nn.Linear), "the original model must stay float32"
    assert model.token_embedding.weight.dtype == torch.float32


def test_int8_layers_pass_every_check_of_the_package(smollm2):
    """An int8 layer shows a .weight like nn.Linear's (dtype and device for the checks), which the checked path reads."""
    model, _ = smollm2
    int8 = to_format(model, "int8", torch.float32)
    qkv = int8.blocks[0].attention.qkv
    torch.testing.assert_close(qkv.weight, dequantize_rows(qkv.values, qkv.scale), rtol=0, atol=0)
    x = torch.randn(1, 3, model.config.d_model)
    attention = int8.blocks[0].attention
    with torch.no_grad():  # attention called alone goes through every input and output check
        torch.testing.assert_close(attention(x), dequantized(int8).blocks[0].attention(x), rtol=1e-4, atol=1e-4)
    assert_contract_error(lambda: attention(x.double()), "x")


def test_weight_bytes_by_hand(smollm2):
    model, _ = smollm2
    c = model.config
    per_layer = {"qkv": (c.num_heads + 2 * c.num_kv_heads) * c.head_dim, "out": c.d_model, "gate": c.d_ff,
                 "up": c.d_ff, "down": c.d_model}  # rows of each linear layer
    inputs = {"qkv": c.d_model, "out": c.d_model, "gate": c.d_model, "up": c.d_model, "down": c.d_ff}
    linear = c.num_layers * sum(per_layer[k] * inputs[k] for k in per_layer)
    rows = c.num_layers * sum(per_layer.values())
    rest = c.vocab_size * c.d_model + (2 * c.num_layers + 1) * c.d_model  # embedding, norms
    assert weight_bytes(model) == 4 * (linear + rest)
    assert weight_bytes(to_format(model, "bfloat16")) == 2 * (linear + rest)
    assert weight_bytes(to_format(model, "int8")) == linear + 2 * rows + 2 * rest  # scales in bfloat16, as it computes


@pytest.mark.parametrize("format", ["bfloat16", "int8"])
def test_the_fewer_bytes_still_answer_paris(smollm2, format):
    model, tokenizer = smollm2
    ids = model_inputs(tokenizer, "The capital of France is")
    tokens = generate(to_format(model, format), ids, 2, KVCache(model.config.num_layers)).tokens
    assert tokenizer.decode(tokens[0, ids.shape[1]:]) == " Paris."


def test_contract(smollm2):
    model, _ = smollm2
    assert_contract_error(lambda: quantize_rows([[1.0]]), "weight", kind=TypeError)
    assert_contract_error(lambda: quantize_rows(torch.ones(3)), "weight", kind=ValueError)
    assert_contract_error(lambda: quantize_rows(torch.tensor([[float("nan")]])), "weight", kind=ValueError)
    assert_contract_error(lambda: dequantize_rows(torch.ones(2, 2), torch.ones(2)), "values", kind=TypeError)
    assert_contract_error(lambda: dequantize_rows(torch.ones(2, 2, dtype=torch.int8), torch.ones(3)), "scale",
                          kind=ValueError)
    assert_contract_error(lambda: to_format(model, "int4"), "format", kind=ValueError)
    assert_contract_error(lambda: to_format("model", "int8"), "model", kind=TypeError)
    assert_contract_error(lambda: to_format(model, "bfloat16", torch.float32), "compute", kind=ValueError)
    assert_contract_error(lambda: Int8Linear(nn.Linear(2, 2)), "Int8Linear", kind=TypeError)
    assert_contract_error(lambda: weight_bytes(None), "model", kind=TypeError)


@pytest.mark.parametrize("compute, extra", [(torch.float32, 0.0), (torch.bfloat16, 2**-8)])
def test_every_int8_weight_is_within_half_a_step_of_its_float32_value(smollm2, compute, extra):
    """Quantized from float32, not from a bfloat16 copy: |s'q - w| <= s' / 2 with s' the scale the kernel uses, and a
    bfloat16 s' rounded up from s is below s (1 + 2⁻⁷) (8 significant bits), so the error is below s (1/2 + 2⁻⁸);
    s by hand from the float32 weights."""
    model, _ = smollm2
    converted = to_format(model, "int8", compute)
    pairs = [(name, module) for name, module in converted.named_modules() if isinstance(module, Int8Linear)]
    assert len(pairs) == sum(isinstance(m, nn.Linear) for m in model.modules()) > 0  # every block matrix
    originals = dict(model.named_modules())
    for name, layer in pairs:
        weight = originals[name].weight.detach().float()
        step = weight.abs().amax(dim=1, keepdim=True) / 127  # float32's step of each row, by hand
        error = (layer.values.float() * layer.scale.float()[:, None] - weight).abs()
        # float32's own product s · q is off by up to 127 · 2⁻²⁴ of a step: 1e-5 of a step covers it
        assert bool((error <= step * (0.5 + extra + 1e-5)).all()), name
        assert (error / step).max() > 0.49  # some weight sits near half a step: the bound is tight


def test_the_scale_dtype_must_be_one_the_kernel_computes_in():
    linear = nn.Linear(16, 4, bias=False)
    for wrong, kind in ((torch.float16, ValueError), ("bfloat16", TypeError), (None, TypeError)):
        with pytest.raises(kind, match="torch.float32 or torch.bfloat16"):
            quantize_rows(linear.weight.detach(), wrong)
    with pytest.raises(ValueError, match="compute must be torch.float32 or torch.bfloat16"):
        Int8Linear(linear, compute=torch.float64)
    values, scale = quantize_rows(torch.tensor([[1.0, 0.3]]), torch.bfloat16)
    assert scale.bfloat16().float() == scale and scale >= 1 / 127  # held exactly in bfloat16, rounded up
