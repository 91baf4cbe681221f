"""Online softmax and tiled attention give torch's numbers, and the tiles stay small."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import attention_utils as au
from attention_utils.tiled import tiled_attention


@given(
    rows=st.integers(1, 4),
    length=st.integers(1, 12),
    dim=st.sampled_from([0, 1, -1]),
    spread=st.floats(0.1, 200.0),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None)
def test_online_softmax_equals_torch_softmax(rows, length, dim, spread, seed):
    generator = torch.Generator().manual_seed(seed)
    scores = spread * torch.randn(rows, length, 3, generator=generator, dtype=torch.float64)
    assert torch.allclose(au.online_softmax(scores, dim=dim), torch.softmax(scores, dim=dim), atol=1e-12)


def test_online_softmax_survives_scores_that_overflow_exp():
    scores = torch.tensor([[1000.0, 1001.0, 999.0]])  # exp(1000) is inf in float32
    assert torch.allclose(au.online_softmax(scores), torch.softmax(scores, dim=-1))


@given(
    batch=st.integers(1, 2),
    heads=st.integers(1, 3),
    length_q=st.integers(1, 19),
    length_k=st.integers(1, 19),
    head_dim=st.integers(1, 9),
    value_dim=st.integers(1, 9),
    block_q=st.integers(1, 8),
    block_k=st.integers(1, 8),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=150, deadline=None)
def test_tiled_attention_equals_sdpa(batch, heads, length_q, length_k, head_dim, value_dim, block_q, block_k, causal, seed):
    generator = torch.Generator().manual_seed(seed)
    queries = 3 * torch.randn(batch, heads, length_q, head_dim, generator=generator)
    keys = 3 * torch.randn(batch, heads, length_k, head_dim, generator=generator)
    values = torch.randn(batch, heads, length_k, value_dim, generator=generator)
    expected = F.scaled_dot_product_attention(queries, keys, values, is_causal=causal)
    found = tiled_attention(queries, keys, values, causal=causal, block_q=block_q, block_k=block_k)
    assert found.shape == expected.shape
    assert torch.allclose(found, expected, atol=1e-5)


@given(
    length_q=st.integers(1, 13),
    length_k=st.integers(1, 13),
    head_dim=st.integers(1, 6),
    block_q=st.integers(1, 6),
    block_k=st.integers(1, 6),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None)
def test_gradients_recomputed_from_the_log_sum_exp_equal_sdpas(length_q, length_k, head_dim, block_q, block_k, causal, seed):
    generator = torch.Generator().manual_seed(seed)
    shapes = ((2, length_q, head_dim), (2, length_k, head_dim), (2, length_k, 3))
    inputs = [torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True) for shape in shapes]
    expected = F.scaled_dot_product_attention(*inputs, is_causal=causal)
    upstream = torch.randn(expected.shape, generator=generator, dtype=torch.float64)
    expected_grads = torch.autograd.grad(expected, inputs, upstream)
    found = tiled_attention(*inputs, causal=causal, block_q=block_q, block_k=block_k)
    for grad, expected_grad in zip(torch.autograd.grad(found, inputs, upstream), expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-10)


@pytest.mark.parametrize("shape", [(1, 4), (6, 3), (2, 5, 3), (2, 2, 3, 7, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_one_block_size_for_both_sides_and_other_ranks(shape, causal):
    queries, keys, values = (torch.randn(shape) for _ in range(3))
    expected = F.scaled_dot_product_attention(queries, keys, values, is_causal=causal)
    for block_size in (1, 2, 3, 100):
        assert torch.allclose(tiled_attention(queries, keys, values, block_size, causal), expected, atol=1e-5)


def test_single_token_attends_to_itself():
    queries, keys, values = torch.randn(1, 1, 2), torch.randn(1, 1, 2), torch.randn(1, 1, 5)
    for causal in (False, True):
        assert torch.allclose(tiled_attention(queries, keys, values, causal=causal), values)


def test_rows_whose_keys_in_a_tile_are_all_hidden_give_no_nan():
    # e.g. blocks of 4 queries and 2 keys: in the tile (queries 4-7, keys 6-7) queries 4 and 5 see no key at all
    torch.manual_seed(0)
    queries, keys, values = (torch.randn(1, 9, 4) for _ in range(3))
    for block_q, block_k in ((1, 1), (2, 4), (4, 2), (3, 5)):
        found = tiled_attention(queries, keys, values, causal=True, block_q=block_q, block_k=block_k)
        assert not torch.isnan(found).any()
        assert torch.allclose(found, F.scaled_dot_product_attention(queries, keys, values, is_causal=True), atol=1e-6)


class LargestTensor(TorchDispatchMode):
    """Record the number of elements of every tensor an aten operation returns."""

    def __init__(self):
        super().__init__()
        self.sizes: list[tuple[str, tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for item in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(item, torch.Tensor):
                self.sizes.append((func.__name__, tuple(item.shape)))
        return result


@pytest.mark.parametrize("causal", [False, True])
def test_the_largest_intermediate_is_one_tile(causal):
    batch, heads, length, head_dim, block_q, block_k = 2, 3, 64, 4, 8, 16
    queries, keys, values = (torch.randn(batch, heads, length, head_dim) for _ in range(3))
    with LargestTensor() as record:
        output = tiled_attention(queries, keys, values, causal=causal, block_q=block_q, block_k=block_k)
    intermediates = [shape for name, shape in record.sizes if shape != tuple(output.shape)]  # all but the result
    largest = max(math.prod(shape) for shape in intermediates)
    assert largest <= batch * heads * block_q * max(block_k, head_dim)
    assert all(shape[-2:] != (length, length) for shape in intermediates)
    with LargestTensor() as explicit:  # the check itself can fail: the explicit recipe builds (T, T) tensors
        torch.softmax(queries @ keys.transpose(-2, -1), dim=-1) @ values
    assert max(math.prod(shape) for _, shape in explicit.sizes) == batch * heads * length * length


def test_training_stays_within_one_tile_too():
    batch, heads, length, head_dim, block = 2, 3, 64, 4, 8
    queries, keys, values = (torch.randn(batch, heads, length, head_dim, requires_grad=True) for _ in range(3))
    with LargestTensor() as record:
        tiled_attention(queries, keys, values, block, causal=True).sum().backward()
    assert all(shape[-2:] != (length, length) for _, shape in record.sizes)
    assert max(math.prod(shape) for _, shape in record.sizes) == batch * heads * length * head_dim  # inputs' size


def test_causal_tiles_above_the_diagonal_are_never_computed():
    length, block = 12, 4
    queries, keys, values = (torch.randn(1, length, 3) for _ in range(3))
    with LargestTensor() as full:
        tiled_attention(queries, keys, values, block, causal=False)
    with LargestTensor() as causal:
        tiled_attention(queries, keys, values, block, causal=True)
    products = [name for name, _ in causal.sizes if name.startswith("bmm")]
    # 3 block rows: 1 + 2 + 3 = 6 tiles visited instead of 9, each with two products (scores, values)
    assert len(products) == 2 * 6
    assert len([name for name, _ in full.sizes if name.startswith("bmm")]) == 2 * 9


@pytest.mark.parametrize(
    "args, error",
    [
        ((torch.randn(2, 3, 4).tolist(), torch.randn(2, 3, 4), torch.randn(2, 3, 4)), TypeError),
        ((torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 3, 4)), ValueError),  # d differs
        ((torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 5, 4)), ValueError),  # T_k differs
        ((torch.randn(2, 3, 4), torch.randn(3, 3, 4), torch.randn(3, 3, 4)), ValueError),  # batch differs
        ((torch.randn(4), torch.randn(4), torch.randn(4)), ValueError),  # no length axis
        ((torch.full((1, 3, 4), math.nan), torch.randn(1, 3, 4), torch.randn(1, 3, 4)), ValueError),
        ((torch.ones(1, 3, 4, dtype=torch.long),) * 3, TypeError),
        ((torch.randn(1, 3, 4), torch.randn(1, 3, 4, dtype=torch.float64), torch.randn(1, 3, 4)), TypeError),
    ],
)
def test_bad_inputs_get_a_bilingual_message(args, error):
    with pytest.raises(error) as caught:
        tiled_attention(*args)
    assert any("\u4e00" <= character <= "\u9fff" for character in str(caught.value))


@pytest.mark.parametrize("block_size", [0, -3, 2.5, True, "8"])
def test_block_size_must_be_a_positive_whole_number(block_size):
    x = torch.randn(1, 3, 4)
    with pytest.raises((TypeError, ValueError)):
        tiled_attention(x, x, x, block_size=block_size)


def test_causal_must_be_a_flag():
    x = torch.randn(1, 3, 4)
    with pytest.raises(TypeError):
        tiled_attention(x, x, x, causal="yes")


def test_bad_scores_for_online_softmax():
    with pytest.raises(TypeError):
        au.online_softmax([1.0, 2.0])
    with pytest.raises(ValueError):
        au.online_softmax(torch.tensor([1.0, math.inf]))
