"""Dropout scales kept values by 1/(1-p), keeps the expectation, and is off in eval()."""

import pytest
import torch

import attention_utils as au


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_kept_weights_are_scaled_by_one_over_keep_probability(p):
    module = au.CausalAttention(3, 4, 6, dropout=p)
    x = torch.randn(2, 6, 3)
    _, clean = module.eval()(x, return_weights=True)
    _, dropped = module.train()(x, return_weights=True)
    kept = dropped != 0
    assert kept.any() and (~kept & (clean != 0)).any()
    assert torch.allclose(dropped[kept], clean[kept] / (1 - p), atol=1e-6)


def test_expectation_is_preserved():
    torch.manual_seed(123)
    module = au.MultiHeadAttention(3, 4, 6, dropout=0.5, num_heads=2).train()
    x = torch.randn(1, 6, 3)
    _, clean = module.eval()(x, return_weights=True)
    module.train()
    mean = torch.stack([module(x, return_weights=True)[1] for _ in range(4000)]).mean(dim=0)
    # 4000 draws: the standard error of each mean is below 0.016, so 0.06 is ~4 sigma
    assert (mean - clean).abs().max().item() < 0.06
    # a wrong scale (1/p instead of 1/(1-p)) would still pass at p=0.5, so check p=0.2 too
    drop = torch.nn.functional.dropout(torch.ones(1_000_000), p=0.2, training=True)
    assert abs(drop.mean().item() - 1.0) < 0.005 and abs(drop.max().item() - 1.25) < 1e-6


def test_eval_turns_dropout_off():
    module = au.MultiHeadAttention(3, 4, 6, dropout=0.5, num_heads=2).eval()
    x = torch.randn(2, 6, 3)
    assert torch.equal(module(x), module(x))
    module.dropout.p = 0.0  # the same weights without dropout at all
    assert torch.equal(module(x), module.train()(x))
