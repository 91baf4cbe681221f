"""The defects of the second reliability review stay fixed: one test per defect, on new inputs.

The review (../shared/findings/reliability-review-2.md) found four core-API cases and defects D4-D14
in the package's contract. Each test here feeds inputs of the same kind (not the review's exact
ones where a sibling input shows more) and compares every valid answer with an independent
reference: torch's own SDPA and softmax, a loop written in the test, or a hand calculation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

import attention_utils as au
from attention_utils.tiny_model import TinyAttentionModel, silence_head
from contract_helpers import assert_contract_error

MODULE_BUILDERS = {
    "SelfAttentionV1": lambda: au.SelfAttentionV1(4, 4),
    "SelfAttentionV2": lambda: au.SelfAttentionV2(4, 4),
    "CausalAttention": lambda: au.CausalAttention(4, 4, 8, 0.0),
    "MultiHeadAttentionWrapper": lambda: au.MultiHeadAttentionWrapper(4, 2, 8, 0.0, 2),
    "MultiHeadAttention": lambda: au.MultiHeadAttention(4, 4, 8, 0.0, 2),
    "FusedMultiHeadAttention": lambda: au.FusedMultiHeadAttention(4, 4, 8, 0.0, 2),
}


# ---- the four core-API cases --------------------------------------------------------------------


def test_core_a_device_this_machine_lacks_is_refused_with_the_devices_it_has():
    missing = "cuda:99" if torch.cuda.is_available() else "cuda"
    for device in (missing, "gpu", "tpu:0", torch.device("cuda", 7)):
        assert_contract_error(lambda: au.causal_mask(3, device=device), "device", "'cpu'", "'meta'")
    assert_contract_error(lambda: au.causal_mask(3, device=3.0), "device")
    assert au.causal_mask(3, device="meta").is_meta
    assert torch.equal(au.causal_mask(3, device=torch.device("cpu")), torch.ones(3, 3, dtype=torch.bool).triu(1))


def test_core_a_mask_on_another_device_than_the_queries_is_named():
    q = torch.randn(2, 5, 4, device="meta")
    assert_contract_error(lambda: au.scaled_dot_product_attention(q, q, q, mask=au.causal_mask(5)), "mask",
                          "meta", "mask.to('meta')")
    context, weights = au.scaled_dot_product_attention(q, q, q, mask=au.causal_mask(5, device="meta"))
    assert context.is_meta and weights.shape == (2, 5, 5)


@pytest.mark.parametrize("causal", [False, True])
def test_core_head_size_zero_gives_uniform_weights_like_torch(causal):
    queries, keys = torch.randn(2, 5, 0), torch.randn(2, 5, 0)
    values = torch.randn(2, 5, 3)
    mask = au.causal_mask(5) if causal else None
    context, weights = au.scaled_dot_product_attention(queries, keys, values, mask=mask)
    visible = torch.arange(1, 6.0)[:, None] if causal else torch.full((5, 1), 5.0)  # keys each query sees
    expected_weights = (~au.causal_mask(5) if causal else torch.ones(5, 5, dtype=torch.bool)) / visible
    assert torch.allclose(weights, expected_weights.expand(2, 5, 5))  # every score is 0: uniform, by hand
    assert torch.allclose(context, F.scaled_dot_product_attention(queries, keys, values, is_causal=causal), atol=1e-6)
    tiled = au.tiled_attention(queries, keys, values, block_size=2, causal=causal)
    assert torch.allclose(tiled, context, atol=1e-6)


def test_core_fused_module_raises_the_overflow_error_like_the_book_modules():
    x = torch.randn(2, 5, 4) * 1e30
    for name in ("MultiHeadAttention", "FusedMultiHeadAttention", "CausalAttention"):
        assert_contract_error(lambda: MODULE_BUILDERS[name]()(x), "x", "overflowed torch.float32", "x.double()", "表示范围")
    half = au.MultiHeadAttention(4, 4, 8, 0.0, 2).half()  # (the fused kernel sums float16 scores in float32)
    assert_contract_error(lambda: half((torch.randn(2, 5, 4) * 300).half()), "x", "overflowed torch.float16", "x.float()")
    assert torch.isfinite(au.FusedMultiHeadAttention(4, 4, 8, 0.0, 2)(torch.randn(2, 5, 4) * 1e4)).all()


# ---- D5: tiled attention and online softmax ------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_d5_tiled_attention_with_no_keys_gives_zeros_like_sdpa(causal):
    queries, keys, values = torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 0, 4), torch.randn(2, 0, 5)
    found = au.tiled_attention(queries, keys, values, block_size=2, causal=causal)
    assert torch.equal(found, torch.zeros(2, 3, 5))
    assert torch.equal(found, F.scaled_dot_product_attention(queries, keys, values))
    found.sum().backward()
    assert torch.equal(queries.grad, torch.zeros_like(queries))


@pytest.mark.parametrize("scale, dtype", [(1e20, torch.float32), (300.0, torch.float16), (1e160, torch.float64)])
def test_d5_tiled_attention_raises_the_overflow_error_instead_of_nan(scale, dtype):
    x = (torch.randn(1, 6, 16, dtype=torch.float64) * scale).to(dtype)
    assert_contract_error(lambda: au.tiled_attention(x, x, x, block_size=4), "queries", f"overflowed {dtype}", "表示范围")


def test_d5_online_softmax_accepts_minus_inf_as_the_contract_allows():
    scores = torch.tensor([[0.5, -math.inf, 1.0, -2.0], [-math.inf] * 4, [3.0, 3.0, -math.inf, 3.0]])
    found = au.online_softmax(scores)
    assert torch.allclose(found[[0, 2]], torch.softmax(scores[[0, 2]], dim=-1))
    assert torch.equal(found[1], torch.zeros(4))  # a row that hides everything: zeros, like stable_softmax
    assert torch.equal(found, au.stable_softmax(scores))
    for bad in (math.nan, math.inf):
        assert_contract_error(lambda: au.online_softmax(torch.tensor([0.0, bad])), "scores", "-inf")


def test_d5_online_softmax_checks_dim():
    scores = torch.randn(3, 4)
    for dim in (2, -3):
        assert_contract_error(lambda: au.online_softmax(scores, dim=dim), "dim", "-2 to 1")
    for dim in (1.0, None, "0", True, torch.tensor([0, 1])):
        assert_contract_error(lambda: au.online_softmax(scores, dim=dim), "dim", "integer", kind=TypeError)
    for dim in (np.int64(0), torch.tensor(0), 1, -1):
        assert torch.allclose(au.online_softmax(scores, dim=dim), torch.softmax(scores, dim=int(dim)))


def test_d5_tiled_backward_is_once_differentiable():
    q, k, v = (torch.randn(1, 4, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    torch.autograd.gradcheck(lambda a, b, c: au.tiled_attention(a, b, c, block_size=2, causal=True), (q, k, v))
    grad_q, = torch.autograd.grad(au.tiled_attention(q, k, v, block_size=2).pow(2).sum(), (q,), create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):  # not a silently wrong second derivative
        grad_q.sum().backward()


def test_d5_tiled_messages_name_block_size_and_only_the_rule_that_failed():
    x = torch.randn(1, 4, 3)
    assert_contract_error(lambda: au.tiled_attention(x, x, x, block_size=0), "block_size")
    assert_contract_error(lambda: au.tiled_attention(x, x, x, block_size=2.0), "block_size", "write 2")
    assert_contract_error(lambda: au.tiled_attention(x, x, x, block_q=0), "block_q")
    assert_contract_error(lambda: au.tiled_attention(x, x, x, causal="yes"), "causal")
    rules = {
        "length T_k": (x, x, torch.randn(1, 5, 3)),
        "last size d": (x, torch.randn(1, 4, 2), x),
        "leading": (x, torch.randn(2, 4, 3), torch.randn(2, 4, 3)),
        "number of dimensions": (x, x[0], x[0]),
    }
    for rule, (q, k, v) in rules.items():
        message = assert_contract_error(lambda: au.tiled_attention(q, k, v), "keys", rule)
        assert sum(other in message for other in rules if other != rule) == 0, message
        assert "), keys" not in message.splitlines()[1], "the Chinese lists the shapes with 、"


# ---- D6: modules with NaN or huge weights ---------------------------------------------------------


def parameters_of(name: str) -> list[str]:
    return [parameter for parameter, _ in MODULE_BUILDERS[name]().named_parameters()]


@pytest.mark.parametrize("name, parameter", [(name, p) for name in MODULE_BUILDERS for p in parameters_of(name)])
def test_d6_a_nan_weight_is_named_not_the_input(name, parameter):
    module = MODULE_BUILDERS[name]().eval()
    with torch.no_grad():
        module.get_parameter(parameter).view(-1)[0] = math.nan
    assert_contract_error(lambda: module(torch.randn(2, 5, 4)), parameter, "NaN", "learning_rate")


@pytest.mark.parametrize("name", sorted(MODULE_BUILDERS))
def test_d6_huge_weights_give_the_overflow_error_naming_the_weight(name):
    module = MODULE_BUILDERS[name]().eval()
    with torch.no_grad():
        for weight in module.parameters():
            weight.mul_(1e20)
    largest = max(module.named_parameters(), key=lambda pair: pair[1].abs().max())[0]
    assert_contract_error(lambda: module(torch.randn(2, 5, 4)), largest, "overflowed torch.float32", "e+19")


# ---- D7 (the model's part) ------------------------------------------------------------------------


@pytest.mark.parametrize("d_model, error, phrase", [
    (33, ValueError, "d_model=33 must be divisible by num_heads=2"), (0, ValueError, "at least 1"),
    (32.0, TypeError, "write 32"), ("32", TypeError, "integer"), (None, TypeError, "integer"),
])
def test_d7_model_sizes_are_named_as_the_learner_wrote_them(d_model, error, phrase):
    message = assert_contract_error(lambda: TinyAttentionModel(16, 8, d_model=d_model), "d_model", phrase, kind=error)
    assert "d_in" not in message and "d_out" not in message


@pytest.mark.parametrize("causal", ["no", None, 0, 1, "False"])
def test_d7_causal_must_be_a_flag(causal):
    assert_contract_error(lambda: TinyAttentionModel(16, 8, causal=causal), "causal")


def test_d7_flags_in_numpy_or_torch_form_count():
    model = TinyAttentionModel(16, 8, causal=np.bool_(False))
    assert model.causal is False and not model.layers[0].mask.any()
    assert TinyAttentionModel(16, 8, causal=torch.tensor(True)).causal is True


def test_d7_silence_head_checks_layer_and_head():
    model = TinyAttentionModel(16, 8, num_heads=2, num_layers=2)
    for layer, head, name in ((0, 0.5, "head"), (0, True, "head"), (2, 0, "layer"), (-1, 0, "layer"), (0, 2, "head"),
                              ("0", 0, "layer")):
        assert_contract_error(lambda: silence_head(model, layer, head).__enter__(), name)
    assert_contract_error(lambda: silence_head(torch.nn.Linear(2, 2), 0, 0).__enter__(), "TinyAttentionModel")
    before = model.layers[1].W_value.weight.clone()
    with silence_head(model, np.int64(1), torch.tensor(1)):
        assert torch.equal(model.layers[1].W_value.weight[16:], torch.zeros(16, 32))  # head_dim = 32 / 2
        assert torch.equal(model.layers[1].W_value.weight[:16], before[:16])
    assert torch.equal(model.layers[1].W_value.weight, before)


@pytest.mark.parametrize("mode", [True, False])
def test_d7_predict_gives_the_mode_back_even_when_it_refuses(mode):
    model = TinyAttentionModel(16, 8).train(mode)
    assert_contract_error(lambda: model.predict(torch.zeros(1, 9, dtype=torch.long)), "tokens")
    assert model.training is mode
    model.predict(torch.zeros(1, 3, dtype=torch.long))
    assert model.training is mode


def test_d7_a_nan_weight_in_the_model_is_named_with_its_layer():
    model = TinyAttentionModel(16, 8, num_layers=2)
    with torch.no_grad():
        model.layers[1].W_key.weight[3, 3] = math.nan
    assert_contract_error(lambda: model(torch.zeros(1, 4, dtype=torch.long)), "layers.1.W_key.weight")
    assert_contract_error(lambda: model.predict(torch.zeros(1, 4, dtype=torch.long)), "layers.1.W_key.weight")


# ---- D11: devices and sizes that overflow, mixed devices, scores that overflow --------------------


@pytest.mark.parametrize("call, name", [
    (lambda: au.causal_mask(10**10), "num_tokens"),
    (lambda: au.MultiHeadAttention(4, 4, 10**7, 0.0, 2), "context_length"),
    (lambda: au.CausalAttention(10**12, 4, 8, 0.0), "d_in"),
    (lambda: au.FusedMultiHeadAttention(4, 10**8, 8, 0.0, 2), "d_out"),
    (lambda: au.MultiHeadAttentionWrapper(4, 4, 8, 0.0, 10**12), "num_heads"),
    (lambda: TinyAttentionModel(10**12, 8), "vocab_size"),
    (lambda: TinyAttentionModel(16, 8, d_model=10**7), "d_model"),
    (lambda: TinyAttentionModel(16, 10**7), "context_length"),
])
def test_d11_sizes_beyond_memory_are_refused_with_what_fits(call, name):
    message = assert_contract_error(call, name, "at most about", "最多约为")
    english = message.splitlines()[0]
    largest = int(english.split("at most about ")[1].rstrip(".").replace(",", ""))
    assert largest >= 1


def test_d11_mixed_devices_and_scores_that_overflow():
    q = torch.randn(5, 4)
    assert_contract_error(lambda: au.attention_scores(q, q.to("meta")), "keys", "same device")
    assert_contract_error(lambda: au.scaled_dot_product_attention(q, q, q.to("meta")), "values", "same device")
    assert_contract_error(lambda: au.tiled_attention(q, q, q.to("meta")), "values", "same device")
    assert_contract_error(lambda: au.attention_scores(q * 1e20, q * 1e20), "queries", "overflowed", "某个点积超过了")
    assert_contract_error(lambda: au.attention_scores(q.half() * 300, q.half() * 300), "keys", "keys.float()")
    assert torch.allclose(au.attention_scores(q * 1e10, q), (q * 1e10) @ q.T)


def test_d11_fused_padding_mask_on_another_device():
    fused = au.FusedMultiHeadAttention(4, 4, 8, 0.0, 2)
    assert_contract_error(lambda: fused(torch.randn(2, 5, 4), torch.zeros(2, 5, dtype=torch.bool, device="meta")),
                          "padding_mask", "padding_mask.to('cpu')")


# ---- D12: from_multihead and a mask that is not causal ---------------------------------------------


def test_d12_from_multihead_refuses_a_layer_that_is_not_causal():
    model = TinyAttentionModel(16, 8, causal=False)
    assert_contract_error(lambda: au.FusedMultiHeadAttention.from_multihead(model.layers[0]), "causal",
                          "FusedMultiHeadAttention")
    changed = au.MultiHeadAttention(4, 4, 8, 0.0, 2)
    changed.mask[0, 1] = 0.0  # one future key no longer hidden
    assert_contract_error(lambda: au.FusedMultiHeadAttention.from_multihead(changed), "causal")
    causal_layer = TinyAttentionModel(16, 8, causal=True).layers[0].eval()
    x = torch.randn(2, 6, 32)
    assert torch.allclose(au.FusedMultiHeadAttention.from_multihead(causal_layer)(x), causal_layer(x), atol=1e-5)


# ---- D13: meta tensors and torch.vmap ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MODULE_BUILDERS))
def test_d13_meta_and_vmap_through_every_module(name):
    module = MODULE_BUILDERS[name]().eval()
    batches = torch.randn(3, 2, 5, 4)
    looped = torch.stack([module(batch) for batch in batches])
    assert torch.allclose(torch.vmap(module)(batches), looped, atol=1e-6)
    on_meta = MODULE_BUILDERS[name]().to("meta")(torch.randn(2, 5, 4, device="meta"))
    assert on_meta.is_meta and on_meta.shape == looped.shape[1:]


def test_d13_meta_and_vmap_through_the_functions_and_the_model():
    q = torch.randn(3, 2, 5, 4)
    mask = au.causal_mask(5)
    looped = torch.stack([au.scaled_dot_product_attention(b, b, b, mask=mask)[0] for b in q])
    assert torch.allclose(torch.vmap(lambda b: au.scaled_dot_product_attention(b, b, b, mask=mask)[0])(q), looped)
    meta = q.to("meta")
    assert au.scaled_dot_product_attention(meta, meta, meta, mask=mask.to("meta"))[0].is_meta
    assert au.attention_scores(meta, meta).is_meta
    model = TinyAttentionModel(16, 8).eval()
    tokens = torch.randint(0, 16, (3, 2, 5))
    assert torch.allclose(torch.vmap(model)(tokens), torch.stack([model(t) for t in tokens]), atol=1e-5)
    assert TinyAttentionModel(16, 8).to("meta")(tokens[0].to("meta")).is_meta


# ---- D14: the public helper methods lessons call ------------------------------------------------------


def test_d14_split_project_and_combine_heads_check_their_input():
    mha = au.MultiHeadAttention(4, 4, 8, 0.0, 2)
    fused = au.FusedMultiHeadAttention.from_multihead(mha)
    assert_contract_error(lambda: mha.split_heads(torch.randn(2, 5, 3)), "d_out=4")
    assert_contract_error(lambda: mha.split_heads(torch.randn(5, 4)), "x", "unsqueeze")
    assert_contract_error(lambda: mha.split_heads(torch.randn(2, 5, 4).double()), "x", "float64")
    assert_contract_error(lambda: fused.project_heads(torch.randn(2, 5, 4).double()), "x", "float64")
    assert_contract_error(lambda: fused.project_heads(torch.randn(2, 5, 3)), "d_in=4")
    assert_contract_error(lambda: fused.combine_heads(torch.randn(2, 5, 4)), "context", "4 dimensions")
    assert_contract_error(lambda: fused.combine_heads(torch.randn(2, 3, 5, 2)), "num_heads=2")
    assert_contract_error(lambda: fused.combine_heads(torch.randn(2, 2, 5, 3)), "head_dim=2")
    nan = torch.randn(2, 2, 5, 2)
    nan[0, 0, 0, 0] = math.nan
    assert_contract_error(lambda: fused.combine_heads(nan), "context", "NaN")


def test_d14_the_helpers_give_the_numbers_of_a_reshape_by_hand():
    mha = au.MultiHeadAttention(4, 4, 8, 0.0, 2)
    fused = au.FusedMultiHeadAttention.from_multihead(mha)
    x = torch.randn(5, 2, 4).transpose(0, 1)  # not contiguous: view alone would fail
    split = mha.split_heads(x)
    assert torch.equal(split[:, 1], x[..., 2:])  # head 1 holds features 2 and 3, by hand
    queries, keys, values = fused.project_heads(x)
    assert torch.allclose(queries, mha.split_heads(mha.W_query(x)), atol=1e-6)
    assert torch.allclose(values, mha.split_heads(mha.W_value(x)), atol=1e-6)
    context = torch.randn(2, 2, 5, 2)
    assert torch.allclose(fused.combine_heads(context), mha.out_proj(torch.cat([context[:, 0], context[:, 1]], -1)),
                          atol=1e-6)
