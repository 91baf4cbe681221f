"""The weights-left product (W @ x.T) computes nn.Linear's numbers, shares the model's weights, and decodes the same tokens."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attention_utils.inference.generation import generate
from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.row_products import MOST_ROWS, WeightsLeftLinear, weights_left, weights_left_product
from contract_helpers import assert_contract_error
from tiny_models import tiny_llama


@pytest.mark.parametrize("shape", [(1, 24), (2, 24), (5, 24), (MOST_ROWS, 24), (MOST_ROWS + 1, 24), (3, 1, 24), (2, 7, 24)])
def test_the_product_equals_a_float64_product(shape):
    generator = torch.Generator().manual_seed(len(shape) * 100 + shape[0])
    x, weight = torch.randn(shape, generator=generator), torch.randn(40, 24, generator=generator)
    found = weights_left_product(x, weight)
    assert found.shape == (*shape[:-1], 40)
    torch.testing.assert_close(found, (x.double() @ weight.double().T).float(), rtol=1e-5, atol=1e-5)


def test_a_layer_shares_the_weight_and_bias_and_adds_the_bias():
    linear = nn.Linear(24, 12)
    layer = WeightsLeftLinear(linear)
    assert layer.weight is linear.weight and layer.bias is linear.bias
    x = torch.randn(3, 24)
    torch.testing.assert_close(layer(x), linear(x), rtol=1e-5, atol=1e-6)
    assert_contract_error(lambda: layer(torch.randn(3, 25)), "x", "(..., 24)", kind=ValueError)
    assert_contract_error(lambda: layer(torch.randn(3, 24, dtype=torch.float64)), "x", "float32", kind=TypeError)
    assert_contract_error(lambda: layer([0.5] * 24), "x", "float32", kind=TypeError)


def test_the_model_copy_shares_every_weight_and_decodes_the_same_tokens():
    model = tiny_llama(16, 4, 2, seed=5)  # float64: rounding far below any score gap
    left = weights_left(model)
    assert all(a is b for a, b in zip(model.parameters(), left.parameters()))
    assert not any(isinstance(m, WeightsLeftLinear) for m in model.modules()) and model.scores_product is None
    assert sum(isinstance(m, WeightsLeftLinear) for m in left.modules()) == 2 * 4  # QKV, output, gate-and-up, down
    prompt = torch.randint(0, 30, (2, 6), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(left(prompt), model(prompt), rtol=1e-12, atol=1e-12)
    with torch.no_grad():
        mine = generate(left, prompt[:1], 12, KVCache(2)).tokens
        theirs = generate(model, prompt[:1], 12, KVCache(2)).tokens
    assert torch.equal(mine, theirs)


def test_something_that_is_not_a_module_is_refused():
    assert_contract_error(lambda: weights_left("SmolLM2"), "model", "LlamaModel", kind=TypeError)


def test_smollm2_weights_left_decodes_its_greedy_tokens_and_a_speculative_pass_agrees(smollm2):
    """The real model: 16 greedy tokens equal, and the scores of a 5-token pass (the few-row path) within float32 rounding."""
    model, tokenizer = smollm2
    left = weights_left(model)
    prompt = torch.tensor([tokenizer.encode("The capital of France is")])
    layers = model.config.num_layers
    with torch.no_grad():
        assert torch.equal(generate(left, prompt, 16, KVCache(layers)).tokens, generate(model, prompt, 16, KVCache(layers)).tokens)
        mine, theirs = KVCache(layers), KVCache(layers)
        left(prompt, cache=mine)
        model(prompt, cache=theirs)
        block = torch.tensor([[11, 22, 33, 44, 55]])
        torch.testing.assert_close(left(block, cache=mine), model(block, cache=theirs), rtol=1e-4, atol=1e-4)
