"""Lesson 8 checkers accept right answers and explain typical wrong ones (weight order, bytes, SDPA's mask)."""

import torch
from torch.nn import functional as F

import attention_utils as au
from attention_utils.exercises import lesson08


def verdict(capsys) -> str:
    return capsys.readouterr().out


def by_hand(mha, order=("W_query", "W_key", "W_value"), bias=True, out_proj=True):
    """A hand-made fused copy of mha, with one of the usual mistakes switched on by the arguments."""
    has_bias = mha.W_query.bias is not None
    fused = au.FusedMultiHeadAttention(mha.d_in, mha.d_out, mha.context_length, 0.0, mha.num_heads, has_bias)
    with torch.no_grad():
        fused.qkv.weight.copy_(torch.cat([getattr(mha, name).weight for name in order]))
        if bias and has_bias:
            fused.qkv.bias.copy_(torch.cat([getattr(mha, name).bias for name in order]))
        if out_proj:
            fused.out_proj.load_state_dict(mha.out_proj.state_dict())
    return fused


def test_fused_by_hand(capsys):
    lesson08.check_fused_by_hand(...)
    assert "Not yet" in verdict(capsys)
    lesson08.check_fused_by_hand(lambda mha: None)  # the template's body: nothing returned yet
    assert "Replace the ..." in verdict(capsys)
    lesson08.check_fused_by_hand(lambda mha: mha)
    out = verdict(capsys)
    assert "Not yet" in out and "three projections" in out
    lesson08.check_fused_by_hand(lambda mha: by_hand(mha, order=("W_key", "W_query", "W_value")))
    out = verdict(capsys)
    assert "Not yet" in out and "wrong order" in out
    lesson08.check_fused_by_hand(lambda mha: by_hand(mha, bias=False))
    out = verdict(capsys)
    assert "Not yet" in out and "biases" in out
    lesson08.check_fused_by_hand(lambda mha: by_hand(mha, out_proj=False))
    out = verdict(capsys)
    assert "Not yet" in out and "out_proj" in out
    lesson08.check_fused_by_hand(lambda mha: au.FusedMultiHeadAttention(4, 6, 8, 0.0, num_heads=3, qkv_bias=True))
    assert "Not yet" in verdict(capsys)
    lesson08.check_fused_by_hand(by_hand(lesson08._source_module(*lesson08.SOURCES[0])))  # a module, not a function
    assert "function itself" in verdict(capsys)
    lesson08.check_fused_by_hand(by_hand)
    assert "Correct" in verdict(capsys)


def test_fused_by_hand_refuses_from_multihead(capsys):
    lesson08.check_fused_by_hand(au.FusedMultiHeadAttention.from_multihead)
    out = verdict(capsys)
    assert "Not yet" in out and "from_multihead" in out
    lesson08.check_fused_by_hand(lambda mha: au.FusedMultiHeadAttention.from_multihead(mha))
    assert "from_multihead" in verdict(capsys)
    alias = au.FusedMultiHeadAttention.from_multihead
    lesson08.check_fused_by_hand(lambda mha: alias(mha))
    assert "from_multihead" in verdict(capsys)
    # the shortcut is switched off only while the learner's function runs
    torch.manual_seed(8)
    mha = au.MultiHeadAttention(4, 6, 8, 0.0, num_heads=3, qkv_bias=True)
    x = torch.rand(1, 5, 4)
    assert torch.allclose(au.FusedMultiHeadAttention.from_multihead(mha)(x), mha(x), atol=1e-6)


def test_a_failing_function_gets_its_error_named(capsys):
    def broken(mha):
        raise KeyError("W_qkv")

    lesson08.check_fused_by_hand(broken)
    out = verdict(capsys)
    assert "Not yet" in out and "KeyError" in out


def test_checker_leaves_the_random_stream_alone(capsys):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    lesson08.check_fused_by_hand(by_hand)
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


def test_merged_mask(capsys):
    padding = torch.tensor(lesson08.PADDING)  # (2, 5), True = padding
    right = ~(au.causal_mask(5) | padding[:, None, None, :])  # the module's own recipe, written out
    lesson08.check_merged_mask(...)
    assert "Not yet" in verdict(capsys)
    lesson08.check_merged_mask(right)
    assert "Correct" in verdict(capsys)
    by_rule = torch.tensor([[[[j <= i and not padding[b, j] for j in range(5)] for i in range(5)]] for b in range(2)])
    lesson08.check_merged_mask(by_rule)
    assert "Correct" in verdict(capsys)
    for wrong, words in (
        (~right, "Invert it"),
        (~au.causal_mask(5).expand(2, 1, 5, 5), "padding keys are not"),
        ((~padding)[:, None, None, :].expand(2, 1, 5, 5), "the future is not"),
        (right[:, 0], "head dimension"),
        (right.float(), "boolean"),
        (torch.ones(2, 1, 5, 5, dtype=torch.bool), "j <= i"),
    ):
        lesson08.check_merged_mask(wrong)
        out = verdict(capsys)
        assert "Not yet" in out and words in out, (words, out)
    hides_queries = ~au.causal_mask(5) & ~padding[:, None, :, None]
    lesson08.check_merged_mask(hides_queries)
    assert "not as queries" in verdict(capsys)


def test_merged_mask_gives_the_modules_numbers():
    torch.manual_seed(1)
    fused = au.FusedMultiHeadAttention(3, 4, 5, 0.0, num_heads=2)
    x = torch.rand(2, 5, 3)
    padding = torch.tensor(lesson08.PADDING)
    queries, keys, values = fused.project_heads(x)
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=lesson08._expected_merged())
    assert torch.allclose(fused.combine_heads(context), fused(x, padding_mask=padding), atol=1e-6)
