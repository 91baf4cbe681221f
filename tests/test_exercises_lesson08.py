"""Lesson 8 checkers accept right answers and explain typical wrong ones (weight order, bytes, SDPA's mask)."""

import torch

import attention_utils as au
from attention_utils.exercises import lesson08


def verdict(capsys) -> str:
    return capsys.readouterr().out


def source() -> au.MultiHeadAttention:
    torch.manual_seed(8)  # the notebook's exercise module
    return au.MultiHeadAttention(4, 6, 8, 0.0, num_heads=3, qkv_bias=True)


def by_hand(mha: au.MultiHeadAttention, order=("W_query", "W_key", "W_value"), bias=True, out_proj=True):
    fused = au.FusedMultiHeadAttention(4, 6, 8, 0.0, num_heads=3, qkv_bias=True)
    with torch.no_grad():
        fused.qkv.weight.copy_(torch.cat([getattr(mha, name).weight for name in order]))
        if bias:
            fused.qkv.bias.copy_(torch.cat([getattr(mha, name).bias for name in order]))
        if out_proj:
            fused.out_proj.load_state_dict(mha.out_proj.state_dict())
    return fused


def test_fused_by_hand(capsys):
    mha = source()
    lesson08.check_fused_by_hand(...)
    assert "Not yet" in verdict(capsys)
    lesson08.check_fused_by_hand(mha)
    out = verdict(capsys)
    assert "Not yet" in out and "three projections" in out
    lesson08.check_fused_by_hand(by_hand(mha, order=("W_key", "W_query", "W_value")))
    out = verdict(capsys)
    assert "Not yet" in out and "wrong order" in out
    lesson08.check_fused_by_hand(by_hand(mha, bias=False))
    out = verdict(capsys)
    assert "Not yet" in out and "biases" in out
    lesson08.check_fused_by_hand(by_hand(mha, out_proj=False))
    out = verdict(capsys)
    assert "Not yet" in out and "out_proj" in out
    lesson08.check_fused_by_hand(au.FusedMultiHeadAttention(4, 6, 8, 0.0, num_heads=3))  # no qkv bias
    assert "Not yet" in verdict(capsys)
    lesson08.check_fused_by_hand(by_hand(mha))
    assert "Correct" in verdict(capsys)
    lesson08.check_fused_by_hand(au.FusedMultiHeadAttention.from_multihead(mha))
    assert "Correct" in verdict(capsys)


def test_checker_leaves_the_random_stream_alone(capsys):
    answer = by_hand(source())
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    lesson08.check_fused_by_hand(answer)
    assert "Correct" in verdict(capsys)
    assert torch.equal(torch.rand(3), expected)


def test_attention_bytes(capsys):
    lesson08.check_attention_bytes(...)
    assert "Not yet" in verdict(capsys)
    lesson08.check_attention_bytes(4 * 16 * 4096 * 4096 * 4)  # float32 sizes
    out = verdict(capsys)
    assert "Not yet" in out and "2 bytes" in out
    lesson08.check_attention_bytes(4 * 16 * 4096 * 4096)  # entries, not bytes
    assert "Not yet" in verdict(capsys)
    lesson08.check_attention_bytes(4 * 4096 * 4096 * 2)  # forgot the heads
    out = verdict(capsys)
    assert "Not yet" in out and "16 heads" in out
    lesson08.check_attention_bytes(2)  # GiB
    out = verdict(capsys)
    assert "Not yet" in out and "GiB" in out
    lesson08.check_attention_bytes("2147483648")
    assert "Not yet" in verdict(capsys)
    lesson08.check_attention_bytes(2_147_483_648)  # 2 GiB, by hand
    assert "Correct" in verdict(capsys)
    lesson08.check_attention_bytes(2**31 * 1.0)
    assert "Correct" in verdict(capsys)


def test_sdpa_mask(capsys):
    lesson08.check_sdpa_mask(...)
    assert "Not yet" in verdict(capsys)
    lesson08.check_sdpa_mask(au.causal_mask(5))  # the inverted mask
    out = verdict(capsys)
    assert "Not yet" in out and "inverted" in out
    lesson08.check_sdpa_mask(torch.ones(5, 5, dtype=torch.bool).tril(-1))  # forgot the diagonal
    out = verdict(capsys)
    assert "Not yet" in out and "itself" in out
    lesson08.check_sdpa_mask(torch.ones(5, 5).tril())  # float 0/1 would be added, hiding nothing
    assert "Not yet" in verdict(capsys)
    lesson08.check_sdpa_mask(~au.causal_mask(4))
    assert "Not yet" in verdict(capsys)
    lesson08.check_sdpa_mask(~au.causal_mask(5))
    assert "Correct" in verdict(capsys)
    lesson08.check_sdpa_mask(torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0],
                                           [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool))
    assert "Correct" in verdict(capsys)
    lesson08.check_sdpa_mask(torch.zeros(5, 5).masked_fill(au.causal_mask(5), float("-inf")))  # additive form
    assert "Correct" in verdict(capsys)
