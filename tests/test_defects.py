"""The defects of the second reliability review stay fixed: one test per defect, on new inputs.

The review (../shared/findings/reliability-review-2.md) found four core-API cases and defects D4-D14
in the package's contract. Each test here feeds inputs of the same kind (not the review's exact
ones where a sibling input shows more) and compares every valid answer with an independent
reference: torch's own SDPA and softmax, a loop written in the test, or a hand calculation.
"""

from __future__ import annotations

import io
import math

import matplotlib
import numpy as np
import pytest
import torch
from torch.nn import functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import attention_utils as au  # noqa: E402
from attention_utils import tasks, training  # noqa: E402
from attention_utils.plotting.heatmaps import show_heatmaps  # noqa: E402
from attention_utils.plotting.vectors_3d import plot_vectors_3d  # noqa: E402
from attention_utils.tiny_model import TinyAttentionModel, silence_head  # noqa: E402
from contract_helpers import assert_contract_error  # noqa: E402

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
    with pytest.raises(ValueError, match="first derivative only"):  # not a silently wrong second derivative
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
    (lambda: au.MultiHeadAttentionWrapper(8000, 8000, 8, 0.0, 1000), "num_heads"),
    (lambda: TinyAttentionModel(10**12, 8), "vocab_size"),
    (lambda: TinyAttentionModel(16, 8, d_model=10**7), "d_model"),
    (lambda: TinyAttentionModel(16, 10**7), "context_length"),
])
def test_d11_sizes_beyond_memory_are_refused_with_what_fits(call, name):
    message = assert_contract_error(call, name, "at most about", "最多约为")
    english = message.splitlines()[0]
    largest = int(english.split("at most about ")[1].rstrip(".").replace(",", ""))
    assert largest >= 1


def test_d11_sizes_that_cost_hours_are_bounded():
    assert_contract_error(lambda: au.MultiHeadAttentionWrapper(4, 4, 8, 0.0, 10**12), "num_heads", "at most 1,024")
    assert_contract_error(lambda: TinyAttentionModel(8, 8, num_layers=5000), "num_layers", "at most 1,024")
    assert_contract_error(lambda: training.train(TinyAttentionModel(8, 8), tasks.ReverseTask(4, 8), 10**30, 0),
                          "steps", "at most 1,000,000")


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


def test_d13_vmap_and_torch_func_through_tiled_attention_and_online_softmax():
    q = torch.randn(3, 2, 5, 4)
    batched = torch.vmap(lambda a: au.tiled_attention(a, a, a, block_size=2, causal=True))(q)
    assert torch.allclose(batched, F.scaled_dot_product_attention(q, q, q, is_causal=True), atol=1e-6)
    grad = torch.func.grad(lambda a: au.tiled_attention(a, a, a, block_size=2).sum())(q[0])
    reference = q[0].clone().requires_grad_()
    F.scaled_dot_product_attention(reference, reference, reference).sum().backward()
    assert torch.allclose(grad, reference.grad, atol=1e-5)
    assert torch.allclose(torch.vmap(au.online_softmax)(q), torch.softmax(q, dim=-1), atol=1e-6)
    assert au.tiled_attention(*(q.to("meta"),) * 3).is_meta


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


# ---- D4: training ------------------------------------------------------------------------------------

REVERSE = tasks.ReverseTask(4, 8)


def small_model(seed: int = 0) -> TinyAttentionModel:
    torch.manual_seed(seed)
    return TinyAttentionModel(8, 8, d_model=8)


@pytest.mark.parametrize("argument, value, error", [
    ("learning_rate", -1, ValueError), ("learning_rate", 0.0, ValueError), ("learning_rate", math.inf, ValueError),
    ("learning_rate", math.nan, ValueError), ("learning_rate", "0.1", TypeError), ("learning_rate", True, TypeError),
    ("learning_rate", None, TypeError), ("seed", "1", TypeError), ("seed", 1.5, TypeError), ("seed", None, TypeError),
    ("seed", 2**64, ValueError), ("seed", -1, ValueError), ("steps", 0, ValueError), ("batch_size", 2.0, TypeError),
    ("snapshots", 0, ValueError), ("progress", "yes", TypeError), ("progress", None, TypeError),
])
def test_d4_every_training_argument_is_checked(argument, value, error):
    arguments = {"steps": 2, "seed": 0, "progress": False, argument: value}
    assert_contract_error(lambda: training.train(small_model(), REVERSE, **arguments), argument, kind=error)


def test_d4_model_and_task_are_checked_before_training():
    assert_contract_error(lambda: training.train(au.MultiHeadAttention(4, 4, 8, 0.0, 2), REVERSE, 2, 0),
                          "model", "TinyAttentionModel", kind=TypeError)
    assert_contract_error(lambda: training.train(small_model(), tasks.ReverseTask, 2, 0), "task", kind=TypeError)
    assert_contract_error(lambda: training.train(small_model(), tasks.ReverseTask(8, 16), 2, 0), "vocab_size=16")
    frozen = small_model().requires_grad_(False)
    assert_contract_error(lambda: training.train(frozen, REVERSE, 2, 0), "model", "requires_grad_(True)")
    on_meta = small_model().to("meta")
    assert_contract_error(lambda: training.train(on_meta, REVERSE, 2, 0), "model", "meta")


@pytest.mark.parametrize("make, learning_rate, hint", [
    (lambda: small_model(), 1e6, "learning_rate"),
    (lambda: small_model().half(), 3e-3, "model.float()"),  # float16 AdamW breaks down at once
])
def test_d4_a_run_that_diverges_stops_keeps_its_losses_and_gives_the_weights_back(make, learning_rate, hint):
    model = make()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    with pytest.raises(training.TrainingDiverged) as info:
        training.train(model, REVERSE, 20, 0, batch_size=4, learning_rate=learning_rate, progress=False)
    message = str(info.value)
    assert isinstance(info.value, ValueError) and "training diverged at step" in message and "训练在第" in message
    assert hint in message.splitlines()[0] and hint in message.splitlines()[1]
    step = int(message.split("at step ")[1].split(":")[0])
    losses = info.value.run.losses
    assert len(losses) == step and all(math.isfinite(loss) for loss in losses)
    assert all(torch.equal(model.state_dict()[name], value) for name, value in before.items())


def test_d4_a_shared_progress_bar_advances_once_a_step():
    from tqdm import tqdm

    with tqdm(total=7, file=io.StringIO()) as bar:
        training.train(small_model(), REVERSE, 3, 0, progress=bar)
        training.train(small_model(1), REVERSE, 4, 1, progress=bar)
        assert bar.n == 7
    alone = training.train(small_model(), REVERSE, 3, 0, progress=False).losses
    shared = training.train(small_model(), REVERSE, 3, 0, progress=tqdm(file=io.StringIO())).losses
    assert alone == shared  # the bar changes nothing else


def test_d4_held_out_batch_checks_its_seed_and_reaches_the_largest():
    assert_contract_error(lambda: training.held_out_batch(REVERSE, "1"), "seed", kind=TypeError)
    assert_contract_error(lambda: training.held_out_batch(None, 1), "task", kind=TypeError)
    inputs, targets, scored = training.held_out_batch(REVERSE, 2**64 - 1, batch_size=np.int64(3))
    assert inputs.shape == (3, 4) and torch.equal(targets, inputs.flip(1)) and scored.all()
    assert torch.equal(training.held_out_batch(REVERSE, 5, 3)[0], training.held_out_batch(REVERSE, 5, 3)[0])


# ---- D7 (the rest): restore, tasks, encode, decode, accuracy ------------------------------------------


def test_d7_restore_checks_index_model_and_causal_setting():
    model = small_model()
    run = training.train(model, REVERSE, 2, 0, snapshots=2, progress=False)
    assert_contract_error(lambda: run.restore(model, 5), "index", "0 to 2", "-3 to -1")
    assert_contract_error(lambda: run.restore(model, 1.0), "index", kind=TypeError)
    assert_contract_error(lambda: run.restore(TinyAttentionModel(8, 8, d_model=16), 0), "d_model")
    assert_contract_error(lambda: run.restore(TinyAttentionModel(8, 8, d_model=8, causal=False), 0), "causal=True")
    assert_contract_error(lambda: run.restore("model", 0), "model", kind=TypeError)
    untrained = run.restore(TinyAttentionModel(8, 8, d_model=8), np.int64(-3))
    assert all(torch.equal(untrained.state_dict()[k], v) for k, v in run.snapshots[0].items())


@pytest.mark.parametrize("make, name", [
    (lambda: tasks.ReverseTask(length=30, vocab_size=26), "length"),
    (lambda: tasks.ReverseTask(length=8, vocab_size=5), "vocab_size"),
    (lambda: tasks.RepeatTask(length=40, longest=27, vocab_size=26), "longest"),
    (lambda: tasks.RepeatTask(shortest=1), "shortest"),
    (lambda: tasks.ReverseTask(length="8"), "length"),
    (lambda: tasks.ReverseTask().batch(2, None), "generator"),
    (lambda: tasks.ReverseTask().batch(2, 123), "generator"),
    (lambda: tasks.RepeatTask().batch(-1, torch.Generator()), "batch_size"),
    (lambda: tasks.ReverseTask().batch(10**15, torch.Generator()), "batch_size"),
])
def test_d7_tasks_check_their_settings_and_never_use_the_global_generator(make, name):
    assert_contract_error(make, name)


def test_d7_task_sizes_in_numpy_form_become_plain_ints():
    task = tasks.RepeatTask(length=np.int64(12), vocab_size=torch.tensor(10))
    assert type(task.length) is int and type(task.vocab_size) is int
    inputs, _, _ = task.batch(np.int32(2), torch.Generator().manual_seed(0))
    assert inputs.shape == (2, 12) and inputs.max() < 10


@pytest.mark.parametrize("text, vocab_size, name, error", [
    ("", 16, "text", ValueError), ("abc", -1, "vocab_size", ValueError), ("abc", 0, "vocab_size", ValueError),
    ("abc", 27, "vocab_size", ValueError), ("abz", 16, "text", ValueError), ("ABC", 16, "text", ValueError),
    (iter("abc"), 5, "text", TypeError), (["a", "b"], 5, "text", TypeError), ("abc", 3.0, "vocab_size", TypeError),
])
def test_d7_encode_checks_its_arguments(text, vocab_size, name, error):
    assert_contract_error(lambda: tasks.encode(text, vocab_size), name, kind=error)


def test_d7_encode_of_nothing_asks_for_a_letter_in_chinese_too():
    message = assert_contract_error(lambda: tasks.encode("", 16), "text")
    assert "请至少输入一个字母（a 到 p）" in message and "空文本" not in message


@pytest.mark.parametrize("tokens, expected", [
    (torch.tensor([7, 4, 11]), "hel"), ([0, 25], "az"), (np.array([[1], [2]]), "bc"), (np.int64(3), "d"),
    (torch.tensor(4, dtype=torch.uint8), "e"), ([], ""),
])
def test_d7_decode_reads_ids_in_any_integer_form(tokens, expected):
    assert tasks.decode(tokens) == expected


@pytest.mark.parametrize("tokens, error", [
    (torch.tensor([-1]), ValueError), (torch.tensor([26]), ValueError), ([True, False], TypeError),
    (torch.tensor([0.0, 1.0]), TypeError), ("ab", TypeError), (None, TypeError),
])
def test_d7_decode_refuses_what_is_no_letter(tokens, error):
    assert_contract_error(lambda: tasks.decode(tokens), "tokens", kind=error)


def test_d7_accuracy_refuses_an_empty_or_integer_scored_mask():
    model = small_model()
    inputs, targets, scored = training.held_out_batch(REVERSE, 0, 6)
    assert_contract_error(lambda: training.accuracy(model, (inputs, targets, torch.zeros_like(scored))), "scored",
                          "nothing to measure")
    assert_contract_error(lambda: training.accuracy(model, (inputs, targets, torch.ones_like(inputs))), "scored",
                          "scored.bool()", kind=TypeError)
    assert_contract_error(lambda: training.accuracy(model, (inputs, targets)), "batch", kind=TypeError)
    assert_contract_error(lambda: training.accuracy(model, (inputs, targets + 8, scored)), "targets", "0 to 7")
    predictions = model.predict(inputs)[0]
    half = scored.clone()
    half[:, 2:] = False
    expected = (predictions[:, :2] == targets[:, :2]).float().mean().item()  # by hand over the scored half
    assert training.accuracy(model, (inputs, targets, half)) == pytest.approx(expected)


def test_d7_masked_loss_checks_its_three_tensors():
    logits = torch.randn(2, 3, 5)
    targets, scored = torch.randint(0, 5, (2, 3)), torch.ones(2, 3, dtype=torch.bool)
    expected = F.cross_entropy(logits.reshape(6, 5), targets.reshape(6))
    assert torch.allclose(training.masked_loss(logits, targets.int(), scored), expected)
    assert_contract_error(lambda: training.masked_loss(logits[0], targets, scored), "logits", kind=ValueError)
    assert_contract_error(lambda: training.masked_loss(logits * math.nan, targets, scored), "logits", "NaN")
    assert_contract_error(lambda: training.masked_loss(logits, targets.float(), scored), "targets", kind=TypeError)
    assert_contract_error(lambda: training.masked_loss(logits, targets, ~scored), "scored")
    assert_contract_error(lambda: training.masked_loss(logits, targets + 5, scored), "targets", "0 to 4")


# ---- D10: the plotting helpers ---------------------------------------------------------------------------


@pytest.fixture
def no_figures_left():
    yield
    plt.close("all")


@pytest.mark.parametrize("call, name, error", [
    (lambda: show_heatmaps(torch.rand(1, 2, 2, 2), "x", "y", titles=["a"]), "titles", ValueError),
    (lambda: show_heatmaps(torch.rand(1, 1, 0, 0), "x", "y"), "matrices", ValueError),
    (lambda: show_heatmaps(torch.rand(1, 1, 3, 3), "x", "y", xticklabels=["a"]), "xticklabels", ValueError),
    (lambda: show_heatmaps(torch.rand(1, 1, 3, 2), "x", "y", yticklabels="abc"), "yticklabels", TypeError),
    (lambda: show_heatmaps([[[[1.0]]]], "x", "y"), "matrices", TypeError),
    (lambda: show_heatmaps(torch.rand(1, 1, 2, 2), None, "y"), "xlabel", TypeError),
    (lambda: show_heatmaps(torch.rand(1, 1, 2, 2), "x", "y", cmap="Bluez"), "cmap", ValueError),
    (lambda: show_heatmaps(torch.rand(1, 1, 2, 2), "x", "y", vmin=1, vmax=0), "vmin", ValueError),
    (lambda: show_heatmaps(torch.rand(1, 1, 2, 2), "x", "y", figsize=(-1, 3)), "figsize", ValueError),
    (lambda: show_heatmaps(torch.rand(1, 1, 2, 2), "x", "y", annotate=None), "annotate", TypeError),
    (lambda: plot_vectors_3d(torch.rand(3, 3), None), "labels", TypeError),
    (lambda: plot_vectors_3d(torch.tensor([[1.0, math.inf, 0.0]]), ["a"]), "vectors", ValueError),
    (lambda: plot_vectors_3d(torch.tensor([[1.0, math.nan, 0.0]]), ["a"]), "vectors", ValueError),
    (lambda: plot_vectors_3d(torch.rand(3, 3), list("abc"), angle_between=(0, 10)), "angle_between", ValueError),
    (lambda: plot_vectors_3d(torch.rand(3, 3), list("abc"), highlight=10), "highlight", ValueError),
    (lambda: plot_vectors_3d(torch.zeros(2, 3), list("ab"), angle_between=(0, 1)), "angle_between", ValueError),
    (lambda: plot_vectors_3d(torch.rand(2, 3), list("ab"), ax=plt.figure().add_subplot()), "ax", TypeError),
])
def test_d10_plotting_helpers_check_every_argument(call, name, error, no_figures_left):
    assert_contract_error(call, name, kind=error)


def test_d10_numpy_input_and_non_finite_weights_are_drawn(no_figures_left):
    fig = show_heatmaps(np.eye(2)[None, None], "x", "y", xticklabels=np.array(["a", "b"]))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b"]
    weights = torch.tensor([[[[0.25, math.nan], [math.inf, 0.75]]]])
    image = show_heatmaps(weights, "x", "y").axes[0].images[0]
    assert image.get_clim() == (0.25, 0.75)  # the colour scale comes from the finite entries
    fig = plot_vectors_3d(np.array([[1.0, 0, 0], [0, 1.0, 0]]), np.array(["a", "b"]), angle_between=(0, 1))
    assert "θ = 90.0°" in [t.get_text() for t in fig.axes[0].texts]


# ---- D11 (the rest): seeds, threads and example sizes ------------------------------------------------------


def test_d11_setup_and_example_batch_refuse_what_torch_cannot_do():
    assert_contract_error(lambda: au.setup(seed=2**64), "seed", "2**64 - 1")
    assert_contract_error(lambda: au.setup(threads=10**6), "threads", "1024")
    assert_contract_error(lambda: au.setup(language=np.array(["en"])), "language")
    assert_contract_error(lambda: au.example_batch(2**40), "batch_size", "at most about")
    assert_contract_error(lambda: au.sliding_window_pairs(list(range(10**6)), 400_000), "context_length", "token_ids")
    assert au.sliding_window_pairs(np.array([5, 6, 7]), np.int64(1)) == [([5], [6]), ([6], [7])]
    assert au.sliding_window_pairs([np.int64(5), 6, 7], 2) == [([5, 6], [6, 7])]


# ---- issue 20: the Chinese of the package's messages -----------------------------------------------------------


def test_messages_read_as_chinese_written_for_chinese_readers():
    q = torch.randn(5, 4)
    overflow = assert_contract_error(lambda: au.attention_scores(q * 1e20, q * 1e20), "queries")
    assert "某个点积超过了" in overflow and "有点积" not in overflow
    dtypes = assert_contract_error(lambda: au.attention_scores(q, q.double()), "keys")
    assert "`queries` 是 torch.float32，`keys` 是 torch.float64：" in dtypes
    integers = assert_contract_error(lambda: au.stable_softmax(torch.tensor([1, 2])), "scores").splitlines()[1]
    assert integers.count("请") == 1 and "（torch.tensor" not in integers
    mask = assert_contract_error(lambda: au.scaled_dot_product_attention(q, q, q, mask=torch.ones(3, 5, 5).bool()),
                                 "mask")
    assert "它必须能广播到这个形状，而且广播后不能比它大" in mask
    width = assert_contract_error(lambda: au.attention_scores(torch.rand(3, 2), torch.rand(3, 4)), "queries")
    assert "输出维数 d_out" in width and "输出维度" not in width
    repeat = assert_contract_error(lambda: tasks.RepeatTask(length=6, longest=6), "longest")
    assert "循环片段" in repeat and "图案" not in repeat


def test_explore_checks_its_drawing_function_and_controls(no_figures_left):
    import ipywidgets as widgets

    from attention_utils.explorers.widgets import explore

    assert_contract_error(lambda: explore(42, step=widgets.IntSlider()), "draw", kind=TypeError)
    assert_contract_error(lambda: explore(lambda step: plt.figure(), step=3), "step", "IntSlider", kind=TypeError)
    assert_contract_error(lambda: explore(lambda step: None, step=widgets.IntSlider()), "draw", "return fig",
                          kind=TypeError)


def test_settings_changed_after_construction_are_named_or_take_effect():
    mha = au.MultiHeadAttention(4, 4, 8, 0.0, 2)
    mha.num_heads = 4
    assert_contract_error(lambda: mha(torch.rand(1, 3, 4)), "num_heads", "MultiHeadAttention")
    fused = au.FusedMultiHeadAttention(4, 4, 8, 0.0, 2)
    fused.d_in = 5
    assert_contract_error(lambda: fused(torch.rand(1, 3, 5)), "d_in")
    causal = au.CausalAttention(4, 4, 8, 0.0)
    causal.context_length = 20
    assert_contract_error(lambda: causal(torch.rand(1, 10, 4)), "context_length")
    model = TinyAttentionModel(16, 8, causal=True)
    model.causal = False  # a learner's switch takes effect: the masks follow it
    _, maps = model.run(torch.arange(8)[None])
    assert (maps[..., 0, 1:] > 0).all()
    model.causal = np.bool_(True)
    _, maps = model.run(torch.arange(8)[None])
    assert torch.equal(maps[..., 0, 1:], torch.zeros_like(maps[..., 0, 1:]))
    assert_contract_error(lambda: setattr(model, "causal", "no"), "causal", kind=TypeError)


def test_from_multihead_keeps_float64_weights_exact_and_works_on_meta():
    source = au.MultiHeadAttention(4, 4, 8, 0.0, 2).double().eval()
    fused = au.FusedMultiHeadAttention.from_multihead(source)
    assert torch.equal(fused.qkv.weight, torch.cat([source.W_query.weight, source.W_key.weight, source.W_value.weight]))
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    assert torch.allclose(fused(x), source(x), atol=1e-12)
    assert au.FusedMultiHeadAttention.from_multihead(au.MultiHeadAttention(4, 4, 8, 0.0, 2).to("meta")).qkv.weight.is_meta


def test_tensors_that_hold_no_values_are_refused_where_values_are_needed():
    model = small_model()
    inputs, targets, scored = training.held_out_batch(REVERSE, 0, 2)
    assert_contract_error(lambda: training.accuracy(model, (inputs.to("meta"), targets, scored)), "batch", "meta")
    assert_contract_error(lambda: tasks.decode(torch.tensor([1], device="meta")), "tokens", "meta", kind=TypeError)
    assert_contract_error(lambda: show_heatmaps(torch.ones(1, 1, 2, 2, device="meta"), "x", "y"), "matrices", "meta")


def test_an_overflow_inside_the_model_names_the_models_largest_weight():
    model = TinyAttentionModel(8, 8, d_model=8)
    with torch.no_grad():
        model.token_embedding.weight.mul_(1e20)  # finite, but a diverged run's size
    message = assert_contract_error(lambda: model(torch.zeros(1, 3, dtype=torch.long)), "token_embedding.weight",
                                    "TinyAttentionModel", "overflowed torch.float32")
    assert "|x|" not in message  # the learner passed token ids, not x
