"""Lesson 16's layers: linear attention's three forms agree, and the delta rule equals a second implementation written here.

The second implementation of the (gated) delta rule never keeps a running state: it writes each
state as the unrolled sum S_t = Σ_i B_i A_{i+1} ⋯ A_t of the write B_i = β_i v_i k_iᵀ carried through
the later transitions A_j = α_j (I − β_j k_j k_jᵀ), in numpy, and reads S_t q_t.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.recurrent import (
    delta_rule_parallel,
    delta_rule_recurrent,
    delta_rule_step,
    feature_map,
    linear_attention_chunked,
    linear_attention_parallel,
    linear_attention_recurrent,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@st.composite
def qkv(draw, positive: bool = False):
    """Queries, keys (…, T, d_k) and values (…, T, d_v) in float64, with 0 to 2 leading sizes and T from 1."""
    lead = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    length, d_k, d_v = draw(st.integers(1, 12)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    shapes = ((*lead, length, d_k), (*lead, length, d_k), (*lead, length, d_v))
    tensors = [torch.randn(shape, generator=generator, dtype=torch.float64) for shape in shapes]
    if positive:
        tensors[0], tensors[1] = feature_map(tensors[0]), feature_map(tensors[1])
    return tensors, generator


@settings(max_examples=80, deadline=None)
@given(qkv(positive=True), st.integers(1, 13), st.booleans())
def test_the_three_forms_of_linear_attention_agree(found, chunk_size, normalize):
    (queries, keys, values), _ = found  # (T, d) when there are no leading sizes: the forms take that too
    parallel = linear_attention_parallel(queries, keys, values, normalize=normalize)
    torch.testing.assert_close(linear_attention_recurrent(queries, keys, values, normalize=normalize), parallel,
                               rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(linear_attention_chunked(queries, keys, values, chunk_size, normalize=normalize), parallel,
                               rtol=1e-10, atol=1e-10)


def test_linear_attention_by_hand():
    """Two tokens, d_k = d_v = 1: o_1 = q1 k1 v1, o_2 = q2 (k1 v1 + k2 v2); normalized: divided by q (k1 + k2)."""
    q, k, v = (torch.tensor([[a], [b]], dtype=torch.float64) for a, b in ((2.0, 3.0), (1.0, 4.0), (5.0, 6.0)))
    expected = torch.tensor([[2 * 1 * 5], [3 * (1 * 5 + 4 * 6)]], dtype=torch.float64)
    for form in (linear_attention_parallel, linear_attention_recurrent, linear_attention_chunked):
        torch.testing.assert_close(form(q, k, v), expected)
        torch.testing.assert_close(form(q, k, v, normalize=True), torch.tensor([[5.0], [87 / 15]], dtype=torch.float64))


def test_no_tokens_give_no_outputs():
    q, v = torch.zeros(2, 0, 3), torch.zeros(2, 0, 4)
    for form in (linear_attention_parallel, linear_attention_recurrent, linear_attention_chunked):
        assert form(q, q, v).shape == (2, 0, 4)
    assert delta_rule_recurrent(q, q, v, torch.zeros(2, 0)).shape == (2, 0, 4)
    assert delta_rule_parallel(q, q, v, torch.zeros(2, 0)).shape == (2, 0, 4)


def unrolled_delta_rule(queries, keys, values, beta, decay) -> np.ndarray:
    """The outputs of one sequence (T, d) from the unrolled sum of writes carried through later transitions."""
    q, k, v, b, a = (np.asarray(x, dtype=np.float64) for x in (queries, keys, values, beta, decay))
    length, d_k = k.shape
    transitions = [a[j] * (np.eye(d_k) - b[j] * np.outer(k[j], k[j])) for j in range(length)]
    outputs = []
    for t in range(length):
        state = np.zeros((v.shape[1], d_k))
        for i in range(t + 1):
            carried = b[i] * np.outer(v[i], k[i])
            for j in range(i + 1, t + 1):
                carried = carried @ transitions[j]
            state += carried
        outputs.append(state @ q[t])
    return np.stack(outputs)


@settings(max_examples=60, deadline=None)
@given(qkv(), st.booleans(), st.booleans())
def test_the_delta_rule_equals_the_unrolled_sum(found, gated, unit_keys):
    (queries, keys, values), generator = found
    if unit_keys:
        keys = torch.nn.functional.normalize(keys, dim=-1)
    beta = torch.rand(queries.shape[:-1], generator=generator, dtype=torch.float64)
    decay = 0.5 + 0.5 * torch.rand(queries.shape[:-1], generator=generator, dtype=torch.float64) if gated else None
    recurrent = delta_rule_recurrent(queries, keys, values, beta, decay)
    parallel = delta_rule_parallel(queries, keys, values, beta, decay)
    lead = queries.shape[:-2]
    for index in np.ndindex(*lead):
        alphas = np.ones(queries.shape[-2]) if decay is None else decay[index]
        expected = unrolled_delta_rule(queries[index], keys[index], values[index], beta[index], alphas)
        np.testing.assert_allclose(recurrent[index].numpy(), expected, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(parallel[index].numpy(), expected, rtol=1e-8, atol=1e-8)


def test_the_delta_rule_replaces_a_value_where_linear_attention_adds():
    """The lesson's example worked out by hand: A -> 5, B -> 7, A -> 2; the delta rule ends at S = [[2, 7]]."""
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    state = torch.zeros(1, 2)
    for key, value in ((a, 5.0), (b, 7.0), (a, 2.0)):
        state = delta_rule_step(state, key, torch.tensor([value]), 1.0)
    torch.testing.assert_close(state, torch.tensor([[2.0, 7.0]]))
    keys = torch.stack([a, b, a])[None]
    linear = linear_attention_recurrent(keys, keys, torch.tensor([[[5.0], [7.0], [2.0]]]))
    assert linear[0, -1, 0].item() == 7.0  # reading A after the writes: 5 + 2


def test_a_decay_fades_what_was_written():
    """With α = 0.5 at every token and orthogonal keys, B written at step 1 reads 7 × 0.5 at step 2."""
    keys = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]])
    values = torch.tensor([[[5.0], [7.0], [2.0]]])
    reads = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]])
    out = delta_rule_recurrent(reads, keys, values, torch.ones(1, 3), torch.full((1, 3), 0.5))
    torch.testing.assert_close(out.flatten(), torch.tensor([5.0, 7.0, 3.5]))


def test_the_state_returned_is_the_last_one():
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 3, generator=generator, dtype=torch.float64) for _ in range(3))
    k = torch.nn.functional.normalize(k, dim=-1)
    out, state = delta_rule_recurrent(q, k, v, 0.7, return_state=True)
    torch.testing.assert_close(out[:, -1], (state @ q[:, -1, :, None])[..., 0])
