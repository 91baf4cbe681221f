"""The file's own 4-bit blocks read directly (lesson 14): repacked codes against gguf's dequantization, the model against float32.

References: `gguf.quants.dequantize` of the same tensors, with each block's d and m read here with
numpy from the GGUF block layout (float16 d, float16 m, then 16 bytes of codes); the rounding bound
from first principles: bfloat16 keeps 8 significant bits, so rounding d and z = m + 8·d moves each by
at most 2^-8 of itself, and (q − 8)·d + z, with |q − 8| <= 8, moves by at most 2^-8·(8|d| + |z|);
the float32 model (lesson 13's, equal to transformers') for the logits; byte counts by hand.
"""

from __future__ import annotations

import copy

import gguf
import gguf.quants
import numpy as np
import pytest
import torch
from torch import nn

from attention_utils.course.bench.model_formats import quality
from attention_utils.inference.held_out import HELD_OUT_TEXT
from attention_utils.inference.weight_formats import weight_bytes
from attention_utils.models.gguf_file import read_gguf, tensor_bytes
from attention_utils.models.block_formats import q4_1_blocks
from attention_utils.models.q4_weights import Q4Linear, to_q4
from contract_helpers import assert_contract_error

pytestmark = pytest.mark.usefixtures("one_thread")
TENSORS = ["blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.29.ffn_up.weight"]
UNIT = 2.0**-8  # bfloat16's unit roundoff: 8 significant bits, round to nearest


@pytest.fixture(scope="module")
def file():
    return read_gguf()


@pytest.fixture(scope="module")
def q4(smollm2):
    return to_q4(smollm2[0])


def gguf_reference(file, name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """gguf's float32 weights of one tensor, and each block's d and z = m + 8d, read with numpy (rows, blocks)."""
    entry = file.entry(name)
    with open(file.path, "rb") as stream:  # the bytes read here, not through the reader under test
        stream.seek(file.start + entry.offset)
        raw = np.frombuffer(stream.read(tensor_bytes(entry)), dtype=np.uint8).reshape(entry.shape[0], -1)
    weights = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q4_1)
    blocks = raw.reshape(entry.shape[0], -1, 20)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    return torch.from_numpy(weights.copy()), torch.from_numpy(d), torch.from_numpy(m + 8 * d)


@pytest.mark.parametrize("name", TENSORS)
def test_repacked_weights_are_ggufs_within_the_rounding_of_the_scales(file, name):
    weights, d, z = gguf_reference(file, name)
    layer = Q4Linear(*q4_1_blocks(file.blocks(name)))
    found = layer.dequantized()  # what the kernel multiplies by (its float32 path, the bfloat16 scales)
    bound = (UNIT * (8 * d.abs() + z.abs())).repeat_interleave(32, dim=1)  # per weight, from its block
    error = (found - weights).abs()
    assert (error <= bound + 1e-6 * weights.abs()).all()  # 1e-6: float32 arithmetic inside the kernel
    assert error.max() > 0  # the scales were rounded: the bound is not empty talk
    # with the exact float32 scales the kernel gives gguf's weights: the codes themselves were repacked unchanged
    layer.scales_and_zeros = torch.stack([d, z], dim=-1).transpose(0, 1).contiguous()
    exact = torch.ops.aten._weight_int4pack_mm_for_cpu(torch.eye(layer.in_features), layer.packed, 32,
                                                       layer.scales_and_zeros).T
    torch.testing.assert_close(exact, weights, rtol=1e-6, atol=1e-7)


def test_the_bfloat16_path_multiplies_by_the_same_weights(file):
    layer = Q4Linear(*q4_1_blocks(file.blocks(TENSORS[0])))
    x = torch.randn(4, layer.in_features).bfloat16()
    expected = x.float() @ layer.dequantized().T
    found = layer(x).float()
    # each product is rounded to bfloat16 once at the end (about 2^-8 of the result) after a float32 sum
    assert ((found - expected).abs() <= 2 * UNIT * expected.abs() + 1e-2).all()
    torch.testing.assert_close(layer(x.float()), found, rtol=0, atol=0)  # float32 in, the same kernel, float32 out


def test_without_vectorized_kernels_a_float32_copy_of_the_same_weights_is_used(file, monkeypatch):
    codes, d, m = q4_1_blocks(file.blocks(TENSORS[0]))
    fast = Q4Linear(codes, d, m)
    assert fast.float_copy is None  # this host has AVX2 (make test runs under avx2)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    scalar = Q4Linear(codes, d, m)
    # the copy holds the weights the kernel multiplies by (the kernel applied to the identity): float32 sums of the same terms
    torch.testing.assert_close(scalar.float_copy, fast.dequantized(), rtol=1e-6, atol=1e-7)
    x = torch.randn(3, fast.in_features)
    expected = x @ fast.dequantized().T
    torch.testing.assert_close(scalar(x), expected, rtol=1e-5, atol=1e-4)  # float32 throughout
    found = fast(x)  # activations rounded to bfloat16 on the kernel's path
    assert ((found - expected).abs() <= 4 * UNIT * expected.abs().max()).all()
    assert sum(b.numel() * b.element_size() for b in scalar.buffers()) == sum(
        b.numel() * b.element_size() for b in fast.buffers())  # the copy is not counted as the format's bytes


def test_bytes_match_the_files_blocks(smollm2, file, q4):
    model, _ = smollm2
    block_bytes = sum(tensor_bytes(e) for e in file.tensors.values() if e.kind == gguf.GGMLQuantizationType.Q4_1)
    matrices = sum(m.packed.numel() + 2 * m.scales_and_zeros.numel() for m in q4.modules() if isinstance(m, Q4Linear))
    assert matrices == block_bytes  # 16 bytes of codes and two bfloat16 numbers per 32 weights, as in the file
    c = model.config
    norms = (2 * c.num_layers + 1) * c.d_model
    assert weight_bytes(q4) == block_bytes + 2 * c.vocab_size * c.d_model + 4 * norms  # bfloat16 table, float32 norms
    assert isinstance(model.blocks[0].feed_forward.gate_up, nn.Linear), "the original model must stay float32"


def test_logits_against_float32(smollm2, q4):
    model, tokenizer = smollm2
    both = quality({"float32": model, "q4": q4}, tokenizer, new_tokens=64)
    found, reference = both["q4"], both["float32"]["perplexity"]
    # measured: largest difference 0.5-0.6, teacher-forced 99%, perplexity within 1% of float32's
    assert found["largest_logit_difference"] < 1.5
    assert found["teacher_forced_agreement"] >= 0.95
    assert found["free_running_agreement"] >= 0.3
    assert abs(found["perplexity"] / reference - 1) < 0.05
    assert found["text_tokens"] == len(tokenizer.encode(HELD_OUT_TEXT))


def test_contract(smollm2, file):
    model, _ = smollm2
    assert_contract_error(lambda: to_q4("model"), "model", kind=TypeError)
    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed.blocks[3].feed_forward.down.weight[0, 0] += 1
    assert_contract_error(lambda: to_q4(changed, file), "blk.3.ffn_down.weight", "from_gguf", kind=ValueError)
    layer = Q4Linear(*q4_1_blocks(file.blocks(TENSORS[0])))
    assert_contract_error(lambda: layer(torch.ones(2, 576, dtype=torch.float16)), "x", kind=TypeError)
    assert_contract_error(lambda: layer(torch.ones(2, 5)), "x", kind=ValueError)
    assert_contract_error(lambda: Q4Linear(torch.zeros(4, 33), torch.zeros(4, 1), torch.zeros(4, 1)), "codes",
                          kind=ValueError)
