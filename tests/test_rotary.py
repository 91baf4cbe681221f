"""Rotary positions: against second implementations (complex numbers), the relative promise, the two layouts, and inside modules."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils import training
from attention_utils.modules import MultiHeadAttention
from attention_utils.rotary import apply_rotary, extended_context, halves_order, ntk_base, rotary_frequencies, to_halves_layout
from attention_utils.tiny_model import TinyAttentionModel


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


def rotate_halves_by_complex_numbers(x: torch.Tensor, start: int, base: float) -> torch.Tensor:
    """The halves layout written the other way: feature i and i + d/2 are the complex number x_i + j x_{i+d/2}."""
    num_tokens, half = x.shape[-2], x.shape[-1] // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float64) / (2 * half))
    m = torch.arange(start, start + num_tokens, dtype=torch.float64)
    pairs = torch.complex(x[..., :half].double(), x[..., half:].double()) * torch.exp(1j * torch.outer(m, theta))
    return torch.cat((pairs.real, pairs.imag), dim=-1)


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 16), tokens=st.integers(1, 6), start=st.integers(0, 5000),
       base=st.sampled_from([10000.0, 100000.0, 500.0]), seed=st.integers(0, 2**16))
def test_halves_layout_equals_complex_multiplication(half, tokens, start, base, seed):
    x = torch.randn(3, tokens, 2 * half, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    expected = rotate_halves_by_complex_numbers(x, start, base)
    torch.testing.assert_close(apply_rotary(x, start, base, layout="halves"), expected, rtol=0, atol=1e-9)


# --------------------------------------------------------------------------------------------------
# Rotary positions inside MultiHeadAttention and the tiny model


def attention_by_complex_numbers(mha: MultiHeadAttention, x: torch.Tensor, start: int, base: float,
                                 factor: float = 1.0) -> torch.Tensor:
    """The rotary module's output, recomputed head by head with complex numbers and an explicit causal loop.

    With `factor`, positions are divided by it (position interpolation)."""
    b, num_tokens, _ = x.shape
    heads, size = mha.num_heads, mha.head_dim
    with torch.no_grad():
        projected = [layer(x).double().view(b, num_tokens, heads, size) for layer in (mha.W_query, mha.W_key, mha.W_value)]
    queries, keys, values = projected
    theta = base ** (-torch.arange(0, size, 2, dtype=torch.float64) / size)
    turn = torch.exp(1j * torch.outer(torch.arange(start, start + num_tokens, dtype=torch.float64) / factor, theta))
    as_pairs = lambda v: torch.complex(v[..., 0::2], v[..., 1::2])  # noqa: E731 - interleaved pairs
    q, k = as_pairs(queries) * turn[None, :, None], as_pairs(keys) * turn[None, :, None]  # (b, T, h, size/2)
    context = torch.zeros(b, num_tokens, heads, size, dtype=torch.float64)
    for t in range(num_tokens):  # query t sees keys 0..t
        scores = (q[:, t, None] * k[:, : t + 1].conj()).real.sum(-1) / size**0.5  # (b, t+1, h)
        context[:, t] = torch.einsum("bsh,bshd->bhd", torch.softmax(scores, dim=1), values[:, : t + 1])
    with torch.no_grad():
        return mha.out_proj(context.reshape(b, num_tokens, heads * size).float()).double()


@settings(max_examples=25, deadline=None)
@given(heads=st.integers(1, 3), half=st.integers(1, 4), tokens=st.integers(1, 7), start=st.integers(0, 300),
       seed=st.integers(0, 2**16))
def test_multi_head_attention_with_rotary_positions_equals_a_second_implementation(heads, half, tokens, start, seed):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(5, heads * 2 * half, 8, 0.0, heads, rotary_base=10000.0).eval()
    x = torch.randn(2, tokens, 5)
    with torch.no_grad():
        ours = mha(x, start_position=start).double()
    torch.testing.assert_close(ours, attention_by_complex_numbers(mha, x, start, 10000.0), rtol=0, atol=2e-5)


@settings(max_examples=25, deadline=None)
@given(shift=st.integers(1, 5000), layout=st.sampled_from(["interleaved", "halves"]), seed=st.integers(0, 2**16))
def test_moving_a_whole_sequence_leaves_a_rotary_module_unchanged(shift, layout, seed):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(4, 8, 6, 0.0, 2, rotary_base=10000.0, rotary_layout=layout).double().eval()
    x = torch.randn(3, 6, 4, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(mha(x, start_position=shift), mha(x), rtol=0, atol=1e-9)


def test_without_rotary_positions_every_number_stays():
    torch.manual_seed(0)
    plain = MultiHeadAttention(4, 8, 6, 0.0, 2)
    torch.manual_seed(0)
    explicit = MultiHeadAttention(4, 8, 6, 0.0, 2, rotary_base=None)
    torch.manual_seed(0)
    rotary = MultiHeadAttention(4, 8, 6, 0.0, 2, rotary_base=10000.0)
    x = torch.randn(2, 6, 4)
    with torch.no_grad():
        assert torch.equal(plain(x), explicit(x)) and torch.equal(plain(x), plain(x, start_position=7))
        assert not torch.allclose(plain(x), rotary(x), atol=1e-4)  # the same weights, turned: the switch does something
    assert rotary.state_dict().keys() == plain.state_dict().keys()  # rotation adds no weights: checkpoints move both ways


def test_the_layouts_agree_inside_the_module_after_reordering_the_rows():
    torch.manual_seed(3)
    interleaved = MultiHeadAttention(4, 12, 6, 0.0, 2, rotary_base=10000.0).eval()
    halves = MultiHeadAttention(4, 12, 6, 0.0, 2, rotary_base=10000.0, rotary_layout="halves").eval()
    halves.load_state_dict(interleaved.state_dict())
    x = torch.randn(2, 6, 4)
    with torch.no_grad():
        assert not torch.allclose(halves(x), interleaved(x), atol=1e-4)  # the wrong layout: other numbers, no error
        for name in ("W_query", "W_key"):
            getattr(halves, name).weight.copy_(to_halves_layout(getattr(interleaved, name).weight, 2))
        torch.testing.assert_close(halves(x), interleaved(x), rtol=0, atol=1e-6)


def test_values_are_never_turned():
    """With one token, attention returns its value: a turned value would change with the position."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(3, 4, 2, 0.0, 1, rotary_base=10000.0).eval()
    x = torch.randn(1, 1, 3)
    with torch.no_grad():
        torch.testing.assert_close(mha(x, start_position=57), mha.out_proj(mha.W_value(x)))


@pytest.mark.parametrize(
    "build, error, names",
    [
        (lambda: MultiHeadAttention(4, 6, 5, 0.0, 2, rotary_base=10000.0), ValueError, ("d_out", "num_heads")),
        (lambda: MultiHeadAttention(4, 8, 5, 0.0, 2, rotary_base="10000"), TypeError, ("rotary_base",)),
        (lambda: MultiHeadAttention(4, 8, 5, 0.0, 2, rotary_base=1.0), ValueError, ("rotary_base",)),
        (lambda: MultiHeadAttention(4, 8, 5, 0.0, 2, rotary_base=10000.0, rotary_layout="split"), ValueError,
         ("rotary_layout",)),
        (lambda: MultiHeadAttention(4, 8, 5, 0.0, 2, rotary_base=10000.0, rotary_layout=None), TypeError,
         ("rotary_layout",)),
        (lambda: MultiHeadAttention(4, 8, 5, 0.0, 2, rotary_base=10000.0)(torch.randn(1, 3, 4), start_position=-1),
         ValueError, ("start_position",)),
        (lambda: MultiHeadAttention(4, 8, 5, 0.0, 2, rotary_base=10000.0)(torch.randn(1, 3, 4), start_position=1.5),
         TypeError, ("start_position",)),
    ],
)
def test_bad_rotary_settings_get_one_sentence_in_each_language(build, error, names):
    with pytest.raises(error) as caught:
        build()
    english, chinese = str(caught.value).split("\n")
    assert all(name in english and name in chinese for name in names)


def test_rotary_settings_are_keyword_only():
    with pytest.raises(TypeError):
        MultiHeadAttention(4, 8, 5, 0.0, 2, False, 10000.0)


@dataclass(frozen=True)
class PreviousToken:
    """Random tokens; each position from 1 on answers the token before it: only positions can solve it."""

    length: int = 12
    vocab_size: int = 8

    def batch(self, batch_size: int, generator: torch.Generator):
        tokens = torch.randint(0, self.vocab_size, (batch_size, self.length), generator=generator)
        return tokens, tokens.roll(1, dims=1), (torch.arange(self.length) >= 1).expand(batch_size, -1)


def test_the_rotary_tiny_model_is_causal_and_has_no_position_weights():
    torch.manual_seed(0)
    model = TinyAttentionModel(8, 12, d_model=16, num_heads=2, num_layers=2, positions="rotary").eval()
    assert model.position_embedding is None and all(layer.rotary_base == 10000.0 for layer in model.layers)
    tokens = torch.randint(0, 8, (3, 12))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 8
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    torch.testing.assert_close(before[:, :7], after[:, :7])
    assert not torch.allclose(before[:, 7:], after[:, 7:])


def test_the_rotary_tiny_model_learns_what_only_positions_can_tell():
    task = PreviousToken()
    held_out = training.held_out_batch(task, 0)
    results = {}
    for kind in ("none", "rotary"):
        torch.manual_seed(0)
        model = TinyAttentionModel(8, 12, d_model=16, num_heads=1, positions=kind)
        training.train(model, task, steps=150, seed=0, progress=False)
        results[kind] = training.accuracy(model, held_out)
    assert results["rotary"] > 0.95 > 0.6 > results["none"]  # without positions, the previous token is out of reach


def test_the_rotary_tiny_model_needs_heads_whose_features_pair_up():
    with pytest.raises(ValueError) as caught:
        TinyAttentionModel(8, 12, d_model=6, num_heads=2, positions="rotary")
    english, chinese = str(caught.value).split("\n")
    assert "d_model" in english and "d_model" in chinese


# --------------------------------------------------------------------------------------------------
# Context extension: position interpolation and NTK-aware scaling (lesson 11, section 7)


def interpolated_by_complex_numbers(x: torch.Tensor, start: int, base: float, factor: float) -> torch.Tensor:
    """Interleaved pairs as complex numbers, turned at the fractional positions m / factor."""
    num_tokens, half = x.shape[-2], x.shape[-1] // 2
    theta = torch.tensor([base ** (-2 * i / (2 * half)) for i in range(half)], dtype=torch.float64)
    m = torch.arange(start, start + num_tokens, dtype=torch.float64) / factor
    pairs = torch.complex(x[..., 0::2].double(), x[..., 1::2].double()) * torch.exp(1j * torch.outer(m, theta))
    return torch.stack((pairs.real, pairs.imag), dim=-1).flatten(-2)


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 16), tokens=st.integers(1, 6), start=st.integers(0, 5000),
       factor=st.floats(1.0, 64.0), seed=st.integers(0, 2**16))
def test_position_interpolation_equals_complex_multiplication_at_fractional_positions(half, tokens, start, factor, seed):
    x = torch.randn(2, tokens, 2 * half, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    expected = interpolated_by_complex_numbers(x, start, 10000.0, factor)
    torch.testing.assert_close(apply_rotary(x, start, interpolation=factor), expected, rtol=0, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(half=st.integers(1, 16), k=st.integers(0, 500), factor=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_interpolating_by_s_at_position_s_k_is_turning_at_position_k(half, k, factor, seed):
    x = torch.randn(3, 2 * half, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    positions = torch.arange(k, k + 3)  # tokens at s k, s (k + 1), s (k + 2) count as k, k + 1, k + 2
    torch.testing.assert_close(apply_rotary(x, factor * positions, interpolation=factor), apply_rotary(x, positions),
                               rtol=0, atol=1e-9)


def test_the_ntk_base_by_hand():
    assert ntk_base(100.0, 4, 4) == pytest.approx(1600.0)  # 100 * 4 ** (4 / 2)
    assert ntk_base(10000.0, 32, 4) == pytest.approx(43872.9, abs=0.1)  # 10000 * 4 ** (16 / 15) = 10000 * 4.38729...
    assert ntk_base(10000.0, 32, 1) == 10000.0  # a factor of 1 changes nothing


@settings(max_examples=30, deadline=None)
@given(half=st.integers(2, 64), base=st.sampled_from([500.0, 10000.0, 500000.0]), factor=st.floats(1.0, 32.0))
def test_the_ntk_base_slows_the_slowest_pair_by_the_factor_and_keeps_pair_0(half, base, factor):
    head_dim = 2 * half
    before, after = rotary_frequencies(head_dim, base), rotary_frequencies(head_dim, ntk_base(base, head_dim, factor))
    assert after[0].item() == before[0].item() == 1.0
    assert after[-1].item() == pytest.approx(before[-1].item() / factor, rel=1e-9)
    assert bool((after <= before * (1 + 1e-12)).all()) and bool((after >= before / factor * (1 - 1e-12)).all())


def test_extended_context_matches_second_implementations_and_puts_everything_back():
    torch.manual_seed(4)
    mha = MultiHeadAttention(5, 8, 12, 0.0, 2, rotary_base=10000.0).eval()
    x = torch.randn(2, 12, 5)
    with torch.no_grad():
        plain = mha(x)
        with extended_context(mha, "ntk", 4) as same:
            assert same is mha
            ntk = mha(x).double()
        with extended_context(mha, "interpolation", 3):
            interpolated = mha(x).double()
        after = mha(x)
    hand_base = 10000.0 * 4 ** (4 / 2)  # head_dim 4: base * s ** (d / (d - 2))
    torch.testing.assert_close(ntk, attention_by_complex_numbers(mha, x, 0, hand_base), rtol=0, atol=2e-5)
    torch.testing.assert_close(interpolated, attention_by_complex_numbers(mha, x, 0, 10000.0, factor=3.0), rtol=0, atol=2e-5)
    assert torch.equal(after, plain) and mha.rotary_base == 10000.0 and mha.rotary_interpolation == 1.0


def test_extended_context_reaches_every_layer_of_the_tiny_model_and_restores_it_after_an_error():
    torch.manual_seed(0)
    model = TinyAttentionModel(8, 12, d_model=16, num_heads=2, num_layers=2, positions="rotary")
    with pytest.raises(RuntimeError):
        with extended_context(model, "ntk", 2):
            assert all(layer.rotary_base == pytest.approx(10000.0 * 2 ** (8 / 6)) for layer in model.layers)
            raise RuntimeError("stop")
    assert all(layer.rotary_base == 10000.0 and layer.rotary_interpolation == 1.0 for layer in model.layers)


@pytest.mark.parametrize(
    "call, error, names",
    [
        (lambda: apply_rotary(torch.randn(3, 4), interpolation=0.5), ValueError, "interpolation"),
        (lambda: apply_rotary(torch.randn(3, 4), interpolation="2"), TypeError, "interpolation"),
        (lambda: apply_rotary(torch.randn(3, 4), interpolation=float("inf")), ValueError, "interpolation"),
        (lambda: ntk_base(10000.0, 2, 4), ValueError, "head_dim"),
        (lambda: ntk_base(10000.0, 32, 0.5), ValueError, "factor"),
        (lambda: ntk_base(1.0, 32, 2), ValueError, "base"),
        (lambda: extended_context(MultiHeadAttention(4, 8, 5, 0.0, 2, rotary_base=10000.0), "yarn", 2).__enter__(),
         ValueError, "method"),
        (lambda: extended_context(MultiHeadAttention(4, 8, 5, 0.0, 2, rotary_base=10000.0), "ntk", True).__enter__(),
         TypeError, "factor"),
        (lambda: extended_context(MultiHeadAttention(4, 8, 5, 0.0, 2), "ntk", 2).__enter__(), ValueError, "rotary"),
        (lambda: extended_context("model", "ntk", 2).__enter__(), TypeError, "model"),
    ],
)
def test_bad_context_extension_settings_get_one_sentence_in_each_language(call, error, names):
    with pytest.raises(error) as caught:
        call()
    english, chinese = str(caught.value).split("\n")
    assert names in english and names in chinese
