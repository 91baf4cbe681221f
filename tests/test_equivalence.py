"""Different implementations of the same idea give the same numbers once their weights match."""

import math

import torch

import attention_utils as au


def reference_causal_head(x, w_q, w_k, w_v):
    """A plain-torch causal head written independently of the package (weights as x @ W)."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    future = torch.triu(torch.ones(x.shape[1], x.shape[1]), diagonal=1).bool()
    return torch.softmax(scores.masked_fill(future, -math.inf), dim=-1) @ v


def test_v1_equals_v2_after_copying_transposed_weights():
    v2 = au.SelfAttentionV2(3, 2)
    v1 = au.SelfAttentionV1(3, 2)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            # nn.Linear keeps its weight as (d_out, d_in); the raw parameter is (d_in, d_out)
            getattr(v1, name).copy_(getattr(v2, name).weight.T)
    x = torch.rand(6, 3)
    assert torch.allclose(v1(x), v2(x), atol=1e-6)


def test_wrapper_equals_a_loop_over_heads():
    wrapper = au.MultiHeadAttentionWrapper(5, 4, context_length=8, dropout=0.0, num_heads=3)
    x = torch.randn(2, 7, 5)
    expected = torch.cat(
        [reference_causal_head(x, h.W_query.weight.T, h.W_key.weight.T, h.W_value.weight.T) for h in wrapper.heads],
        dim=-1,
    )
    assert torch.allclose(wrapper(x), expected, atol=1e-6)


def test_multihead_equals_wrapper_with_matching_weights():
    num_heads, head_dim, d_in = 3, 4, 5
    wrapper = au.MultiHeadAttentionWrapper(d_in, head_dim, 8, 0.0, num_heads)
    mha = au.MultiHeadAttention(d_in, num_heads * head_dim, 8, 0.0, num_heads)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            stacked = torch.cat([getattr(h, name).weight for h in wrapper.heads], dim=0)
            getattr(mha, name).weight.copy_(stacked)
        mha.out_proj.weight.copy_(torch.eye(num_heads * head_dim))
        mha.out_proj.bias.zero_()
    x = torch.randn(2, 6, d_in)
    assert torch.allclose(mha(x), wrapper(x), atol=1e-6)


def test_state_dict_keys_match_the_book():
    mha = au.MultiHeadAttention(3, 4, 6, 0.0, 2, qkv_bias=True)
    assert set(mha.state_dict()) == {
        "mask", "W_query.weight", "W_query.bias", "W_key.weight", "W_key.bias",
        "W_value.weight", "W_value.bias", "out_proj.weight", "out_proj.bias",
    }
    assert "mask" in dict(au.CausalAttention(3, 2, 6, 0.0).named_buffers())
