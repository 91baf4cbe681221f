"""Rotary positions: against a second implementation (complex numbers), the relative promise, the two layouts."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.rotary import apply_rotary, halves_order, to_halves_layout


def rotate_by_complex_numbers(x: torch.Tensor, start: int, base: float) -> torch.Tensor:
    """Interleaved RoPE written the other way: pair (2i, 2i+1) is the complex number x_2i + j x_2i+1, times e^{j m θ_i}."""
    num_tokens, head_dim = x.shape[-2], x.shape[-1]
    theta = 1.0 / base ** (torch.arange(head_dim // 2, dtype=torch.float64) * 2 / head_dim)
    m = torch.arange(start, start + num_tokens, dtype=torch.float64)
    turn = torch.polar(torch.ones(num_tokens, head_dim // 2, dtype=torch.float64), torch.outer(m, theta))
    pairs = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], head_dim // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2)


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 16), tokens=st.integers(1, 6), start=st.integers(0, 5000),
       base=st.sampled_from([10000.0, 100000.0, 500.0]), seed=st.integers(0, 2**16))
def test_interleaved_layout_equals_complex_multiplication(half, tokens, start, base, seed):
    x = torch.randn(2, tokens, 2 * half, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    expected = rotate_by_complex_numbers(x, start, base)
    torch.testing.assert_close(apply_rotary(x, start, base), expected, rtol=0, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 16), m=st.integers(0, 3000), n=st.integers(0, 3000), shift=st.integers(0, 3000),
       layout=st.sampled_from(["interleaved", "halves"]), seed=st.integers(0, 2**16))
def test_a_score_depends_only_on_the_offset(half, m, n, shift, layout, seed):
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, 2 * half, generator=generator, dtype=torch.float64)
    score = (apply_rotary(q, m, layout=layout) @ apply_rotary(k, n, layout=layout).T).item()
    moved = (apply_rotary(q, m + shift, layout=layout) @ apply_rotary(k, n + shift, layout=layout).T).item()
    assert moved == pytest.approx(score, abs=1e-9 * (1 + abs(score)))


@settings(max_examples=30, deadline=None)
@given(half=st.integers(1, 12), heads=st.integers(1, 4), start=st.integers(0, 500), seed=st.integers(0, 2**16))
def test_the_layouts_agree_after_permuting_the_weight_rows(half, heads, start, seed):
    head_dim, d_in = 2 * half, 5
    generator = torch.Generator().manual_seed(seed)
    w_query, w_key = torch.randn(2, heads * head_dim, d_in, generator=generator, dtype=torch.float64)
    x = torch.randn(7, d_in, generator=generator, dtype=torch.float64)

    def scores(wq, wk, layout):
        q = (x @ wq.T).view(7, heads, head_dim).transpose(0, 1)  # (heads, T, head_dim)
        k = (x @ wk.T).view(7, heads, head_dim).transpose(0, 1)
        return apply_rotary(q, start, layout=layout) @ apply_rotary(k, start, layout=layout).transpose(-1, -2)

    interleaved = scores(w_query, w_key, "interleaved")
    halves = scores(to_halves_layout(w_query, heads), to_halves_layout(w_key, heads), "halves")
    torch.testing.assert_close(halves, interleaved, rtol=0, atol=1e-9)
    if half > 1:  # the wrong layout (no permutation) gives other scores: the check can fail
        assert not torch.allclose(scores(w_query, w_key, "halves"), interleaved, atol=1e-6)


def test_the_permutation_moves_pairs_next_to_each_other_into_halves():
    assert halves_order(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    x = torch.randn(3, 8)
    torch.testing.assert_close(apply_rotary(x[..., halves_order(8)], 4, layout="halves"), apply_rotary(x, 4)[..., halves_order(8)])


@pytest.mark.parametrize(
    "call, error, names",
    [
        (lambda: apply_rotary(torch.randn(3, 5)), ValueError, "head_dim"),
        (lambda: apply_rotary(torch.randn(3, 4), layout="split"), ValueError, "layout"),
        (lambda: apply_rotary(torch.randn(3, 4), positions=-1), ValueError, "positions"),
        (lambda: apply_rotary(torch.randn(3, 4), positions=torch.arange(2)), ValueError, "positions"),
        (lambda: apply_rotary(torch.randn(3, 4), base=1.0), ValueError, "base"),
        (lambda: apply_rotary([[1.0, 2.0]]), TypeError, "x"),
        (lambda: to_halves_layout(torch.randn(10, 3), 3), ValueError, "num_heads"),
    ],
)
def test_bad_input_gets_one_sentence_in_each_language(call, error, names):
    with pytest.raises(error) as caught:
        call()
    english, chinese = str(caught.value).split("\n")
    assert names in english and names in chinese
