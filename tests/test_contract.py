"""Generated bad input for every public callable: always a bilingual ValueError/TypeError naming the argument.

Hypothesis builds wrong types, dtypes, ranks, sizes, rates and masks. Each must raise exactly a
ValueError or TypeError (never another exception, never a result) whose message is one English
line and one Chinese line, both naming the argument. The valid edge sizes must work everywhere.
"""

import math
import string

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_utils as au
from contract_helpers import assert_contract_error

MODULES = {
    "SelfAttentionV1": lambda d_in, d_out, context_length, dropout, num_heads: au.SelfAttentionV1(d_in, d_out),
    "SelfAttentionV2": lambda d_in, d_out, context_length, dropout, num_heads: au.SelfAttentionV2(d_in, d_out),
    "CausalAttention": lambda d_in, d_out, context_length, dropout, num_heads: au.CausalAttention(
        d_in, d_out, context_length, dropout),
    "MultiHeadAttentionWrapper": au.MultiHeadAttentionWrapper,
    "MultiHeadAttention": au.MultiHeadAttention,
    "FusedMultiHeadAttention": au.FusedMultiHeadAttention,
}


def words(max_size: int, min_size: int = 0) -> st.SearchStrategy[str]:
    """ASCII strings: messages echo the bad value, and the English line must hold no Chinese."""
    return st.text(string.ascii_letters + string.digits + ". ", min_size=min_size, max_size=max_size)


GOOD = {"d_in": 3, "d_out": 4, "context_length": 6, "dropout": 0.0, "num_heads": 2}
FEW = settings(max_examples=40, deadline=None)


# ---- strategies --------------------------------------------------------------------------------

not_tensors = st.one_of(
    st.none(), st.integers(), st.floats(), words(3),
    st.lists(st.floats(allow_nan=False, width=32), min_size=1, max_size=3),
    st.just(np.zeros((1, 6, 3))),
)
bad_sizes = st.one_of(
    st.booleans(), st.none(), words(2), st.floats(allow_nan=True),
    st.integers(max_value=0), st.just(np.float64(2.0)), st.just(torch.tensor(2.5)), st.just([2]),
)
bad_rates = st.one_of(
    words(3), st.none(), st.booleans(), st.just([0.1]),
    st.floats().filter(lambda p: not 0.0 <= p < 1.0),
)
wrong_dtypes = st.sampled_from([torch.int64, torch.int32, torch.uint8, torch.bool, torch.complex64])


@st.composite
def wrong_rank(draw, allowed: tuple[int, ...], last: int = 3) -> torch.Tensor:
    """A float tensor whose rank is not in `allowed` (last dimension kept right)."""
    rank = draw(st.sampled_from([r for r in range(6) if r not in allowed]))
    shape = [draw(st.integers(1, 3)) for _ in range(rank - 1)] + ([last] if rank else [])
    return torch.rand(shape)


@st.composite
def non_finite(draw, shape: tuple[int, ...]) -> torch.Tensor:
    """A float tensor of `shape` with one NaN or inf at a random place."""
    x = torch.rand(shape)
    x.view(-1)[draw(st.integers(0, x.numel() - 1))] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    return x


@st.composite
def ill_fitting_mask(draw, scores_shape: tuple[int, ...]) -> torch.Tensor:
    """A mask that is not boolean, or whose shape does not broadcast to the scores without growing them."""
    if draw(st.booleans()):
        return torch.zeros(scores_shape, dtype=draw(st.sampled_from([torch.float32, torch.int64, torch.uint8])))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=5)))
    try:
        if torch.broadcast_shapes(shape, scores_shape) == scores_shape:
            shape = (7, *scores_shape)  # one leading dimension too many
    except RuntimeError:
        pass
    return torch.zeros(shape, dtype=torch.bool)


# ---- constructors ------------------------------------------------------------------------------


@FEW
@given(module=st.sampled_from(sorted(MODULES)), argument=st.sampled_from(["d_in", "d_out", "context_length", "num_heads"]),
       value=bad_sizes)
def test_constructor_sizes(module, argument, value):
    if module.startswith("SelfAttention") and argument in ("context_length", "num_heads"):
        return  # those classes have no such argument
    if module == "CausalAttention" and argument == "num_heads":
        return
    assert_contract_error(lambda: MODULES[module](**{**GOOD, argument: value}), argument)


@FEW
@given(module=st.sampled_from(["CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention",
                               "FusedMultiHeadAttention"]), rate=bad_rates)
def test_constructor_rates(module, rate):
    assert_contract_error(lambda: MODULES[module](**{**GOOD, "dropout": rate}), "dropout")


@FEW
@given(module=st.sampled_from(["MultiHeadAttention", "FusedMultiHeadAttention", "MultiHeadAttentionWrapper",
                               "SelfAttentionV2", "CausalAttention"]), flag=st.one_of(st.none(), st.integers(), words(2)))
def test_constructor_flags(module, flag):
    build = {"SelfAttentionV2": lambda: au.SelfAttentionV2(3, 4, qkv_bias=flag),
             "CausalAttention": lambda: au.CausalAttention(3, 4, 6, 0.0, qkv_bias=flag)}.get(
        module, lambda: MODULES[module](**GOOD, qkv_bias=flag))
    assert_contract_error(build, "qkv_bias")


@FEW
@given(d_out=st.integers(1, 30), num_heads=st.integers(1, 7))
def test_heads_that_do_not_divide_d_out(d_out, num_heads):
    for module in ("MultiHeadAttention", "FusedMultiHeadAttention"):
        build = lambda: MODULES[module](**{**GOOD, "d_out": d_out, "num_heads": num_heads})  # noqa: E731
        if d_out % num_heads:
            assert_contract_error(build, "num_heads")
        else:
            assert build().head_dim == d_out // num_heads


# ---- forward -----------------------------------------------------------------------------------


def forward_of(module: str, dtype=torch.float32):
    """The forward of a well-built module of this class."""
    return MODULES[module](**GOOD).to(dtype).eval()


RANKS_OF = {"SelfAttentionV1": (2, 3), "SelfAttentionV2": (2, 3)}


@FEW
@given(module=st.sampled_from(sorted(MODULES)), data=st.data())
def test_forward_input(module, data):
    kind = data.draw(st.sampled_from(["type", "dtype", "rank", "last_dim", "non_finite", "module_dtype", "too_long"]))
    m = forward_of(module, torch.float64 if kind == "module_dtype" else torch.float32)
    x = {
        "type": lambda: data.draw(not_tensors),
        "dtype": lambda: torch.ones(1, 4, 3).to(data.draw(wrong_dtypes)),
        "rank": lambda: data.draw(wrong_rank(RANKS_OF.get(module, (3,)))),
        "last_dim": lambda: torch.rand(1, 4, data.draw(st.integers(1, 8).filter(lambda d: d != 3))),
        "non_finite": lambda: data.draw(non_finite((2, 4, 3))),
        "module_dtype": lambda: torch.rand(1, 4, 3),
        "too_long": lambda: torch.rand(1, data.draw(st.integers(7, 20)), 3),
    }[kind]()
    if kind == "too_long" and module.startswith("SelfAttention"):
        return  # no context length: any length is fine
    assert_contract_error(lambda: m(x), "context_length" if kind == "too_long" else "x")


@FEW
@given(data=st.data())
def test_fused_padding_mask(data):
    fused = forward_of("FusedMultiHeadAttention")
    batch, tokens = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 6))
    x = torch.rand(batch, tokens, 3)
    if data.draw(st.booleans()):
        bad = torch.zeros(batch, tokens, dtype=data.draw(st.sampled_from([torch.float32, torch.int64])))
    else:
        shape = tuple(data.draw(st.lists(st.integers(0, 7), min_size=0, max_size=3)).__iter__())
        if shape == (batch, tokens):
            shape = (batch, tokens + 1)
        bad = torch.zeros(shape, dtype=torch.bool)
    assert_contract_error(lambda: fused(x, bad), "padding_mask")


@FEW
@given(module=st.sampled_from(["CausalAttention", "MultiHeadAttention", "FusedMultiHeadAttention"]), rate=bad_rates)
def test_rates_changed_after_construction(module, rate):
    m = MODULES[module](**GOOD).train()
    if module == "FusedMultiHeadAttention":
        m.dropout = rate
    else:
        m.dropout.p = rate
    assert_contract_error(lambda: m(torch.rand(1, 4, 3)), "dropout")


# ---- functional API ----------------------------------------------------------------------------

QKV = ("queries", "keys", "values")


@FEW
@given(which=st.sampled_from(QKV), data=st.data())
def test_scaled_dot_product_attention_tensors(which, data):
    args = {name: torch.rand(2, 5, 4) for name in QKV}
    kind = data.draw(st.sampled_from(["type", "dtype", "rank", "non_finite", "other_float"]))
    args[which] = {
        "type": lambda: data.draw(not_tensors),
        "dtype": lambda: torch.ones(2, 5, 4).to(data.draw(wrong_dtypes)),
        "rank": lambda: data.draw(wrong_rank((1, 2, 3, 4) if which == "queries" else (2, 3, 4), last=4)),
        "non_finite": lambda: data.draw(non_finite((2, 5, 4))),
        "other_float": lambda: torch.rand(2, 5, 4, dtype=torch.float64),
    }[kind]()
    assert_contract_error(lambda: au.scaled_dot_product_attention(*(args[n] for n in QKV)), which)


@FEW
@given(data=st.data())
def test_scaled_dot_product_attention_masks_rates_and_flags(data):
    q = torch.rand(2, 5, 4)
    kind = data.draw(st.sampled_from(["mask", "dropout_p", "training"]))
    if kind == "mask":
        call = lambda: au.scaled_dot_product_attention(q, q, q, mask=data.draw(ill_fitting_mask((2, 5, 5))))  # noqa: E731
    elif kind == "dropout_p":
        call = lambda: au.scaled_dot_product_attention(q, q, q, dropout_p=data.draw(bad_rates))  # noqa: E731
    else:
        call = lambda: au.scaled_dot_product_attention(  # noqa: E731
            q, q, q, training=data.draw(st.one_of(st.none(), st.integers(), words(2))))
    assert_contract_error(call, kind)


@FEW
@given(function=st.sampled_from([au.sum_normalize, au.naive_softmax, au.stable_softmax]), data=st.data())
def test_normalizations(function, data):
    kind = data.draw(st.sampled_from(["type", "dtype", "rank", "nan", "dim"]))
    if kind == "dim":
        dim = data.draw(st.one_of(st.integers().filter(lambda d: not -2 <= d < 2), words(1), st.none()))
        assert_contract_error(lambda: function(torch.rand(3, 4), dim=dim), "dim")
        return
    scores = {
        "type": lambda: data.draw(not_tensors),
        "dtype": lambda: torch.ones(3, 4).to(data.draw(wrong_dtypes)),
        "rank": lambda: data.draw(wrong_rank((1, 2, 3, 4), last=4)),
        "nan": lambda: torch.tensor([[1.0, math.nan, 2.0]]),
    }[kind]()
    assert_contract_error(lambda: function(scores), "scores")


@FEW
@given(size=bad_sizes.filter(lambda v: not (isinstance(v, int) and not isinstance(v, bool) and v == 0)))
def test_causal_mask_size(size):
    assert_contract_error(lambda: au.causal_mask(size), "num_tokens")


@FEW
@given(data=st.data())
def test_data_helpers_and_setup(data):
    kind = data.draw(st.sampled_from(["batch_size", "context_length", "token_ids", "seed", "threads", "language"]))
    bad_size = data.draw(bad_sizes.filter(lambda v: not (kind in ("batch_size", "seed") and isinstance(v, int)
                                                          and not isinstance(v, bool) and v == 0)))
    call = {
        "batch_size": lambda: au.example_batch(bad_size),
        "context_length": lambda: au.sliding_window_pairs([1, 2, 3, 4], bad_size),
        "token_ids": lambda: au.sliding_window_pairs(data.draw(st.one_of(
            words(4, min_size=1), st.lists(st.floats(), min_size=1, max_size=3), st.none(),
            st.lists(st.booleans(), min_size=1, max_size=3))), 2),
        "seed": lambda: au.setup(seed=bad_size),
        "threads": lambda: au.setup(threads=bad_size),
        "language": lambda: au.setup(language=data.draw(words(3).filter(lambda t: t not in ("en", "zh")))),
    }[kind]
    assert_contract_error(call, kind)


@FEW
@given(thing=st.one_of(st.none(), st.integers(), st.sampled_from([
    au.MultiHeadAttentionWrapper(3, 4, 6, 0.0, 2), au.CausalAttention(3, 4, 6, 0.0), torch.nn.Linear(3, 4)])))
def test_from_multihead_refuses_other_things(thing):
    assert_contract_error(lambda: au.FusedMultiHeadAttention.from_multihead(thing), "MultiHeadAttention")


# ---- the valid edges ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(MODULES))
@pytest.mark.parametrize("batch, tokens", [(0, 6), (2, 0), (2, 1), (2, 6), (0, 0)])
def test_edge_sizes_work_in_every_module(module, batch, tokens):
    m = forward_of(module)
    out = m(torch.rand(batch, tokens, 3))
    width = GOOD["d_out"] * (GOOD["num_heads"] if module == "MultiHeadAttentionWrapper" else 1)
    assert out.shape == (batch, tokens, width) and torch.isfinite(out).all()


@pytest.mark.parametrize("tokens", [0, 1, 6])
def test_edge_sizes_work_in_the_functional_api(tokens):
    q = torch.rand(2, tokens, 4)
    context, weights = au.scaled_dot_product_attention(q, q, q, mask=au.causal_mask(tokens))
    assert context.shape == (2, tokens, 4) and weights.shape == (2, tokens, tokens)
    assert au.stable_softmax(q).shape == q.shape and au.causal_mask(tokens).shape == (tokens, tokens)


def test_fused_padding_edges():
    fused = forward_of("FusedMultiHeadAttention")
    for batch, tokens in [(0, 4), (2, 0), (2, 1)]:
        out = fused(torch.rand(batch, tokens, 3), torch.zeros(batch, tokens, dtype=torch.bool))
        assert out.shape == (batch, tokens, 4)
