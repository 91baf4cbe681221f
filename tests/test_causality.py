"""Changing tokens after position t never changes the outputs at positions <= t."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_utils as au

CAUSAL_MODULES = {
    "CausalAttention": lambda: au.CausalAttention(4, 6, 10, 0.0),
    "MultiHeadAttentionWrapper": lambda: au.MultiHeadAttentionWrapper(4, 3, 10, 0.0, 2),
    "MultiHeadAttention": lambda: au.MultiHeadAttention(4, 6, 10, 0.0, 3),
}


@pytest.mark.parametrize("name", CAUSAL_MODULES)
@settings(max_examples=25, deadline=None)
@given(t=st.integers(0, 8), seed=st.integers(0, 2**16))
def test_future_tokens_do_not_leak(name, t, seed):
    torch.manual_seed(seed)
    module = CAUSAL_MODULES[name]().eval()
    x = torch.randn(2, 9, 4)
    changed = x.clone()
    changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :]) * 10
    with torch.no_grad():
        before, after = module(x), module(changed)
    assert torch.allclose(before[:, : t + 1], after[:, : t + 1], atol=1e-6)
    if t < 8:  # and the future does matter for later positions, so the test can fail
        assert not torch.allclose(before[:, t + 1 :], after[:, t + 1 :], atol=1e-6)


def test_shorter_sequences_than_the_context_work():
    module = au.MultiHeadAttention(4, 6, context_length=10, dropout=0.0, num_heads=3)
    assert module(torch.randn(1, 3, 4)).shape == (1, 3, 6)
