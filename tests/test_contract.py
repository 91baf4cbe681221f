"""Generated bad input for every public callable: always a bilingual ValueError/TypeError naming the argument.

Hypothesis builds wrong types, dtypes, ranks, sizes, rates, masks, devices, indices, labels and
batches for the functions, the six modules and their helper methods, the tiled kernel, lesson 10's
model, tasks and training, and the plotting helpers. Each must raise exactly a ValueError or
TypeError (never another exception, never a result) whose message is one English line and one
Chinese line, both naming the argument. The valid edge sizes must work everywhere, and the last
tests switch single rules off to show that these tests then fail.
"""

import math
import string

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import attention_utils as au  # noqa: E402
from attention_utils import tasks, training  # noqa: E402
from attention_utils.plotting import heatmaps, vectors_3d  # noqa: E402
from attention_utils.tiny_model import TinyAttentionModel, silence_head, sinusoidal_positions  # noqa: E402
from contract_helpers import assert_contract_error  # noqa: E402

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


# ---- the tiled kernel and the public helper methods ---------------------------------------------


@FEW
@given(which=st.sampled_from(QKV), data=st.data())
def test_tiled_attention_tensors(which, data):
    args = {name: torch.rand(2, 5, 4) for name in QKV}
    kind = data.draw(st.sampled_from(["type", "dtype", "rank", "non_finite", "other_float", "other_device"]))
    args[which] = {
        "type": lambda: data.draw(not_tensors),
        "dtype": lambda: torch.ones(2, 5, 4).to(data.draw(wrong_dtypes)),
        "rank": lambda: data.draw(wrong_rank((2, 3, 4, 5), last=4)),
        "non_finite": lambda: data.draw(non_finite((2, 5, 4))),
        "other_float": lambda: torch.rand(2, 5, 4, dtype=data.draw(st.sampled_from([torch.float64, torch.float16]))),
        "other_device": lambda: torch.rand(2, 5, 4, device="meta"),
    }[kind]()
    assert_contract_error(lambda: au.tiled_attention(*(args[n] for n in QKV)), which)


@FEW
@given(argument=st.sampled_from(["block_size", "block_q", "block_k"]), value=bad_sizes, causal=st.booleans())
def test_tiled_attention_block_sizes_are_named_as_passed(argument, value, causal):
    if value is None and argument != "block_size":
        return  # block_q=None and block_k=None mean "take block_size"
    q = torch.rand(1, 4, 3)
    assert_contract_error(lambda: au.tiled_attention(q, q, q, causal=causal, **{argument: value}), argument)


@FEW
@given(flag=st.one_of(st.none(), st.integers(), words(2), st.floats()))
def test_tiled_attention_causal_flag(flag):
    q = torch.rand(1, 4, 3)
    assert_contract_error(lambda: au.tiled_attention(q, q, q, causal=flag), "causal")


@FEW
@given(data=st.data())
def test_online_softmax_scores_and_dim(data):
    kind = data.draw(st.sampled_from(["type", "dtype", "rank", "nan", "plus_inf", "dim"]))
    if kind == "dim":
        dim = data.draw(st.one_of(st.integers().filter(lambda d: not -2 <= d < 2), words(1), st.none(), st.floats()))
        assert_contract_error(lambda: au.online_softmax(torch.rand(3, 4), dim=dim), "dim")
        return
    scores = {
        "type": lambda: data.draw(not_tensors),
        "dtype": lambda: torch.ones(3, 4).to(data.draw(wrong_dtypes)),
        "rank": lambda: torch.rand([2] * data.draw(st.sampled_from([0, 6]))),
        "nan": lambda: torch.tensor([[1.0, math.nan, 2.0]]),
        "plus_inf": lambda: torch.tensor([[1.0, math.inf, -math.inf]]),
    }[kind]()
    assert_contract_error(lambda: au.online_softmax(scores), "scores")


@FEW
@given(method=st.sampled_from(["split_heads", "project_heads", "combine_heads"]), data=st.data())
def test_public_helper_methods(method, data):
    mha, fused = MODULES["MultiHeadAttention"](**GOOD), MODULES["FusedMultiHeadAttention"](**GOOD)
    call = {"split_heads": mha.split_heads, "project_heads": fused.project_heads, "combine_heads": fused.combine_heads}[method]
    shape = {"split_heads": (2, 5, 4), "project_heads": (2, 5, 3), "combine_heads": (2, 2, 5, 2)}[method]
    kind = data.draw(st.sampled_from(["type", "dtype", "rank", "last", "non_finite", "other_float"]))
    name = "context" if method == "combine_heads" else "x"
    bad = {
        "type": lambda: data.draw(not_tensors),
        "dtype": lambda: torch.ones(shape).to(data.draw(wrong_dtypes)),
        "rank": lambda: torch.rand(*shape[1:]),
        "last": lambda: torch.rand(*shape[:-1], shape[-1] + data.draw(st.integers(1, 3))),
        "non_finite": lambda: data.draw(non_finite(shape)),
        "other_float": lambda: torch.rand(shape, dtype=torch.float64),
    }[kind]()
    assert_contract_error(lambda: call(bad), name)


# ---- lesson 10's package side: the tiny model, its helpers, tasks and training ----------------------

TINY = {"vocab_size": 8, "context_length": 6, "d_model": 8, "num_heads": 2, "num_layers": 1}


@FEW
@given(argument=st.sampled_from(sorted(TINY)), value=bad_sizes)
def test_tiny_model_sizes(argument, value):
    assert_contract_error(lambda: TinyAttentionModel(**{**TINY, argument: value}), argument)


@FEW
@given(d_model=st.integers(1, 40), num_heads=st.integers(1, 7))
def test_tiny_model_heads_must_divide_d_model(d_model, num_heads):
    build = lambda: TinyAttentionModel(8, 6, d_model=d_model, num_heads=num_heads)  # noqa: E731
    if d_model % num_heads:
        message = assert_contract_error(build, "d_model", "num_heads")
        assert "d_out" not in message and "d_in" not in message
    else:
        assert build().layers[0].head_dim == d_model // num_heads


@FEW
@given(argument=st.sampled_from(["positions", "causal"]), value=st.one_of(st.none(), st.integers(), words(5), st.floats()))
def test_tiny_model_positions_and_causal(argument, value):
    if argument == "positions" and value in ("learned", "sinusoidal", "none"):
        return
    assert_contract_error(lambda: TinyAttentionModel(**TINY, **{argument: value}), argument)


@FEW
@given(data=st.data())
def test_tiny_model_tokens(data):
    model = TinyAttentionModel(**TINY)
    kind = data.draw(st.sampled_from(["type", "float", "rank", "too_long", "out_of_range", "device"]))
    tokens = {
        "type": lambda: data.draw(st.one_of(st.none(), words(3), st.lists(st.integers(0, 7), min_size=1, max_size=3))),
        "float": lambda: torch.zeros(1, 3, dtype=data.draw(st.sampled_from([torch.float32, torch.bool, torch.float64]))),
        "rank": lambda: torch.zeros([1] * data.draw(st.sampled_from([0, 1, 3])), dtype=torch.long),
        "too_long": lambda: torch.zeros(1, data.draw(st.integers(7, 12)), dtype=torch.long),
        "out_of_range": lambda: torch.tensor([[0, data.draw(st.one_of(st.integers(8, 10**6), st.integers(-10**6, -1)))]]),
        "device": lambda: torch.zeros(1, 3, dtype=torch.long, device="meta"),
    }[kind]()
    method = data.draw(st.sampled_from(["forward", "run", "predict"]))
    assert_contract_error(lambda: getattr(model, method)(tokens), "tokens")


@FEW
@given(argument=st.sampled_from(["layer", "head"]), value=st.one_of(
    st.booleans(), st.none(), words(2), st.floats(), st.integers().filter(lambda i: not 0 <= i < 2)))
def test_silence_head_indices(argument, value):
    model = TinyAttentionModel(**{**TINY, "num_layers": 2})
    indices = {"layer": 0, "head": 0, argument: value}
    assert_contract_error(lambda: silence_head(model, **indices).__enter__(), argument)


@FEW
@given(argument=st.sampled_from(["num_positions", "dim"]), value=bad_sizes)
def test_sinusoidal_positions_sizes(argument, value):
    if argument == "num_positions" and isinstance(value, int) and not isinstance(value, bool) and value == 0:
        return  # zero positions: an empty table
    sizes = {"num_positions": 4, "dim": 6, argument: value}
    assert_contract_error(lambda: sinusoidal_positions(**sizes), argument)


@FEW
@given(num_positions=st.integers(0, 12), dim=st.integers(1, 12), form=st.sampled_from([int, np.int64, torch.tensor]))
def test_sinusoidal_positions_match_the_formula_for_every_size(num_positions, dim, form):
    table = sinusoidal_positions(form(num_positions), form(dim))
    assert table.shape == (num_positions, dim)
    for t in range(num_positions):
        for column in range(dim):
            angle = t / 10000 ** (2 * (column // 2) / dim)
            expected = math.sin(angle) if column % 2 == 0 else math.cos(angle)
            assert abs(table[t, column].item() - expected) < 1e-5


@FEW
@given(task=st.sampled_from(["ReverseTask", "RepeatTask"]), data=st.data())
def test_task_settings(task, data):
    names = ["length", "vocab_size"] + (["shortest", "longest"] if task == "RepeatTask" else [])
    argument = data.draw(st.sampled_from(names))
    too_long = (task, argument) != ("RepeatTask", "length")  # a repeating sequence may be longer than a-z
    value = data.draw(st.one_of(bad_sizes, st.integers(27, 100)) if too_long else bad_sizes)
    assert_contract_error(lambda: getattr(tasks, task)(**{argument: value}), argument)


@FEW
@given(task=st.sampled_from([tasks.ReverseTask(), tasks.RepeatTask()]), data=st.data())
def test_task_batches(task, data):
    if data.draw(st.booleans()):
        assert_contract_error(lambda: task.batch(data.draw(bad_sizes), torch.Generator()), "batch_size")
    else:
        generator = data.draw(st.one_of(st.none(), st.integers(), words(2), st.just(torch.manual_seed)))
        assert_contract_error(lambda: task.batch(2, generator), "generator")


@FEW
@given(text=st.text(string.ascii_lowercase[:16], min_size=1, max_size=8), vocab_size=st.integers(16, 26))
def test_encode_then_decode_gives_the_text_back(text, vocab_size):
    tokens = tasks.encode(text, vocab_size)
    assert tokens.shape == (1, len(text)) and tokens.dtype == torch.int64
    assert tasks.decode(tokens) == text == tasks.decode(tokens.numpy()) == tasks.decode(tokens[0].tolist())


@FEW
@given(data=st.data())
def test_encode_and_decode_refuse_what_is_no_letter(data):
    kind = data.draw(st.sampled_from(["text_type", "text_letters", "vocab_size", "tokens"]))
    if kind == "text_type":
        assert_contract_error(lambda: tasks.encode(data.draw(st.one_of(st.none(), st.integers(), st.lists(words(1)))), 16),
                              "text")
    elif kind == "text_letters":
        text = data.draw(st.text(min_size=0, max_size=5).filter(lambda t: not t or set(t) - set("abcdefghijklmnop")))
        assert_contract_error(lambda: tasks.encode(text, 16), "text")
    elif kind == "vocab_size":
        assert_contract_error(lambda: tasks.encode("ab", data.draw(st.one_of(bad_sizes, st.integers(27, 1000)))),
                              "vocab_size")
    else:
        tokens = data.draw(st.one_of(st.none(), words(2), st.floats(), st.just(torch.rand(3)),
                                     st.just(torch.tensor([True])), st.integers(26, 10**9), st.integers(max_value=-1)))
        assert_contract_error(lambda: tasks.decode(tokens), "tokens")


REVERSE = tasks.ReverseTask(4, 8)
bad_rates_of_learning = st.one_of(words(3), st.none(), st.booleans(), st.just([0.1]),
                                  st.floats().filter(lambda r: not (r > 0 and math.isfinite(r))))


@FEW
@given(argument=st.sampled_from(["steps", "seed", "snapshots", "batch_size", "learning_rate", "progress"]), data=st.data())
def test_train_arguments(argument, data):
    value = {
        "steps": bad_sizes, "snapshots": bad_sizes, "batch_size": bad_sizes,
        "seed": st.one_of(bad_sizes.filter(lambda v: not (type(v) is int and v == 0)), st.integers(min_value=2**64)),
        "learning_rate": bad_rates_of_learning,
        "progress": st.one_of(st.none(), st.integers(), words(3), st.floats()),
    }[argument]
    arguments = {"steps": 1, "seed": 0, "progress": False, argument: data.draw(value)}
    model = TinyAttentionModel(8, 8, d_model=8)
    assert_contract_error(lambda: training.train(model, REVERSE, **arguments), argument)


@FEW
@given(model=st.one_of(st.none(), st.integers(), st.just(torch.nn.Linear(2, 2)), st.just(au.MultiHeadAttention(8, 8, 8, 0.0, 2))),
       task=st.one_of(st.none(), st.integers(), st.just(tasks.ReverseTask), words(3)))
def test_train_model_and_task(model, task):
    assert_contract_error(lambda: training.train(model, REVERSE, 1, 0), "model")
    assert_contract_error(lambda: training.train(TinyAttentionModel(8, 8, d_model=8), task, 1, 0), "task")


@pytest.fixture(scope="module")
def short_run():
    model = TinyAttentionModel(8, 8, d_model=8)
    return model, training.train(model, REVERSE, 2, 0, snapshots=2, progress=False)


@FEW
@given(index=st.one_of(st.booleans(), st.none(), words(2), st.floats(), st.integers().filter(lambda i: not -3 <= i < 3)))
def test_restore_index(short_run, index):
    model, run = short_run
    assert_contract_error(lambda: run.restore(model, index), "index")


@FEW
@given(data=st.data())
def test_batches_given_to_accuracy_and_masked_loss(data):
    model = TinyAttentionModel(8, 8, d_model=8)
    inputs, targets, scored = training.held_out_batch(REVERSE, 0, 3)
    kind = data.draw(st.sampled_from(["scored_dtype", "scored_empty", "targets_range", "targets_float", "shape"]))
    bad, name = {
        "scored_dtype": ((inputs, targets, scored.to(data.draw(st.sampled_from([torch.int64, torch.float32])))), "scored"),
        "scored_empty": ((inputs, targets, torch.zeros_like(scored)), "scored"),
        "targets_range": ((inputs, targets + data.draw(st.integers(8, 100)), scored), "targets"),
        "targets_float": ((inputs, targets.float(), scored), "targets"),
        "shape": ((inputs, targets[:, :2], scored), "targets"),
    }[kind]
    if data.draw(st.booleans()):
        assert_contract_error(lambda: training.accuracy(model, bad), name)
    else:
        assert_contract_error(lambda: training.masked_loss(model(inputs), *bad[1:]), name)


@FEW
@given(seed=st.one_of(bad_sizes.filter(lambda v: not (type(v) is int and v == 0)), st.integers(min_value=2**64)),
       batch_size=st.integers(1, 5))
def test_held_out_batch_seed(seed, batch_size):
    assert_contract_error(lambda: training.held_out_batch(REVERSE, seed, batch_size), "seed")


# ---- the plotting helpers -------------------------------------------------------------------------


@FEW
@given(data=st.data())
def test_show_heatmaps_arguments(data):
    argument = data.draw(st.sampled_from(["matrices", "xlabel", "titles", "xticklabels", "yticklabels", "cmap",
                                          "annotate", "figsize", "vmin"]))
    value = {
        "matrices": st.one_of(not_tensors, st.just(torch.rand(2, 2)), st.just(torch.rand(1, 1, 0, 3)),
                              st.just(torch.ones(1, 1, 2, 2, dtype=torch.complex64))),
        "xlabel": st.one_of(st.none(), st.integers(), st.floats()),
        "titles": st.one_of(words(3), st.lists(words(2), max_size=5).filter(lambda t: len(t) != 2)),
        "xticklabels": st.one_of(words(3), st.lists(words(2), max_size=5).filter(lambda t: len(t) != 3)),
        "yticklabels": st.one_of(words(3), st.lists(words(2), max_size=5).filter(lambda t: len(t) != 4)),
        "cmap": st.one_of(st.none(), st.integers(), words(5).filter(lambda c: c not in matplotlib.colormaps)),
        "annotate": st.one_of(st.none(), st.integers(), words(2)),
        "figsize": st.one_of(words(2), st.tuples(st.floats(max_value=0), st.floats()), st.just((1, 2, 3))),
        "vmin": st.one_of(words(2), st.just(math.nan), st.just(2.0)),
    }[argument]
    arguments = {"matrices": torch.rand(1, 2, 4, 3), "xlabel": "keys", "ylabel": "queries", "vmax": 1.0,
                 argument: data.draw(value)}
    try:
        assert_contract_error(lambda: heatmaps.show_heatmaps(**arguments), argument)
    finally:
        plt.close("all")


@FEW
@given(data=st.data())
def test_plot_vectors_3d_arguments(data):
    argument = data.draw(st.sampled_from(["vectors", "labels", "highlight", "angle_between", "title", "elev", "ax"]))
    value = {
        "vectors": st.one_of(not_tensors, st.just(torch.rand(3, 2)), st.just(torch.rand(0, 3)),
                             st.builds(lambda v: torch.tensor([[v, 0.0, 1.0]]), st.sampled_from([math.nan, math.inf]))),
        "labels": st.one_of(st.none(), st.integers(), words(2).filter(lambda w: len(w) != 2),
                            st.lists(words(2), max_size=4).filter(lambda t: len(t) != 2)),
        "highlight": st.one_of(st.booleans(), words(2), st.floats(), st.integers().filter(lambda i: not 0 <= i < 2)),
        "angle_between": st.one_of(st.integers(), words(3), st.tuples(st.integers(2, 9), st.integers(0, 1)),
                                   st.just((0, 1, 1))),
        "title": st.one_of(st.integers(), st.floats(), st.just(["t"])),
        "elev": st.one_of(st.none(), words(2), st.just(math.nan)),
        "ax": st.one_of(st.integers(), words(2)),
    }[argument]
    arguments = {"vectors": torch.rand(2, 3) + 0.1, "labels": ["a", "b"], argument: data.draw(value)}
    try:
        assert_contract_error(lambda: vectors_3d.plot_vectors_3d(**arguments), argument)
    finally:
        plt.close("all")


@FEW
@given(device=words(6).filter(lambda d: d.strip() not in ("cpu", "meta", "cuda", "mps", "xpu")))
def test_devices_this_machine_lacks(device):
    assert_contract_error(lambda: au.causal_mask(2, device=device), "device")


# ---- the checks can fail: each helper and each rule, switched off, is caught ------------------------------


def test_the_contract_helper_catches_every_way_of_breaking_the_contract():
    def raises(error: Exception):
        def call():
            raise error
        return call

    for broken in (lambda: 1.0,                                           # accepted
                   raises(ValueError("x must be 1")),                       # English only
                   raises(ValueError("x 必须是 1\nx must be 1")),           # Chinese first
                   raises(ValueError("y must be 1\ny 必须是 1")),           # the wrong name
                   raises(KeyError("x")),                                    # another kind of error
                   raises(torch.cuda.OutOfMemoryError("x\nx 内存")),       # torch's own error class
                   ):
        with pytest.raises((AssertionError, KeyError, RuntimeError)):
            assert_contract_error(broken, "x")
    with pytest.raises(AssertionError):
        assert_contract_error(raises(ValueError("x must be 1\nx 必须是 1")), "x", kind=TypeError)
    assert_contract_error(raises(TypeError("x must be 1\nx 必须是 1")), "x", "be 1", kind=TypeError)


def test_nan_weights_are_named():
    module = au.MultiHeadAttention(4, 4, 8, 0.0, 2)
    with torch.no_grad():
        module.out_proj.weight[0, 0] = math.nan
    assert_contract_error(lambda: module(torch.rand(1, 3, 4)), "out_proj.weight")


SWITCHED_OFF = {  # a rule, and what it does when it checks nothing: hand its input back
    ("training", "check_real"): (lambda value, *args, **kwargs: value, lambda: assert_contract_error(
        lambda: training.train(TinyAttentionModel(8, 8, d_model=8), REVERSE, 1, 0, learning_rate=-1.0, progress=False),
        "learning_rate")),
    ("modules", "check_result"): (lambda module, result, x=None: result, test_nan_weights_are_named),
    ("tasks", "_check_generator"): (lambda generator: generator, lambda: assert_contract_error(
        lambda: REVERSE.batch(2, None), "generator")),
    ("tiled", "check_no_overflow"): (lambda *args, **kwargs: None, lambda: assert_contract_error(
        lambda: au.tiled_attention(*(torch.rand(1, 4, 8) * 1e20,) * 3), "queries")),
    ("training", "_check_targets"): (lambda targets, *args: targets, lambda: assert_contract_error(
        lambda: training.accuracy(TinyAttentionModel(8, 8, d_model=8), (torch.zeros(1, 3, dtype=torch.long),) * 3),
        "scored")),
}


@pytest.mark.parametrize("module, rule", sorted(SWITCHED_OFF))
def test_each_rule_switched_off_makes_its_test_fail(monkeypatch, module, rule):
    no_check, test = SWITCHED_OFF[module, rule]
    test()  # passes with the rule in place
    monkeypatch.setattr(f"attention_utils.{module}.{rule}", no_check)
    with pytest.raises(Exception) as failure:  # an AssertionError, or torch's own error
        test()
    message = str(failure.value)
    assert isinstance(failure.value, AssertionError) or len(message.splitlines()) != 2, message
