"""Naive vs stable softmax, and sum normalization."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_utils as au


def test_naive_softmax_overflows_where_stable_does_not():
    scores = torch.tensor([1000.0, 999.0, 1.0])
    assert torch.isnan(au.naive_softmax(scores)).any()
    stable = au.stable_softmax(scores)
    assert torch.isfinite(stable).all()
    # e^1 / (e^1 + e^0 + e^-999) computed by hand
    assert abs(stable[0].item() - 0.7310586) < 1e-6


def test_both_match_torch_on_ordinary_inputs():
    scores = torch.randn(4, 7)
    expected = torch.softmax(scores, dim=-1)
    assert torch.allclose(au.naive_softmax(scores), expected, atol=1e-6)
    assert torch.allclose(au.stable_softmax(scores), expected, atol=1e-6)
    assert torch.allclose(au.stable_softmax(scores, dim=0), torch.softmax(scores, dim=0), atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), scale=st.floats(0.1, 500.0))
def test_rows_sum_to_one(shape, scale):
    scores = torch.randn(shape) * scale
    sums = au.stable_softmax(scores).sum(dim=-1)
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)


def test_sum_normalization_breaks_on_negative_scores():
    weights = au.sum_normalize(torch.tensor([2.0, -1.0, 0.5]))
    assert abs(weights.sum().item() - 1.0) < 1e-6 and (weights < 0).any()
    assert torch.isinf(au.sum_normalize(torch.tensor([1.0, -1.0]))).all()
