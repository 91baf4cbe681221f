"""The explorers and figures of lessons 6-8 draw, redraw on every control, and show what the lessons compute."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from explorer_harness import drive  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import attention_utils as au  # noqa: E402
from attention_utils.explorers import lesson06, lesson07, lesson08  # noqa: E402
from attention_utils.plotting.fonts import set_language  # noqa: E402

TOKENS = list(au.TOKENS)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(params=["en", "zh"])
def language(request):
    """Each explorer runs in both languages; the package is left in English afterwards."""
    set_language(request.param)
    yield request.param
    set_language("en")


def causal_weights() -> torch.Tensor:
    """Lesson 6's weights: SelfAttentionV2 with seed 789 on the running example, causally masked."""
    torch.manual_seed(789)
    layer = au.SelfAttentionV2(3, 2)
    x = au.example_inputs()
    with torch.no_grad():
        _, weights = au.scaled_dot_product_attention(layer.W_query(x), layer.W_key(x), layer.W_value(x), mask=au.causal_mask(6))
    return weights


def test_dropout_explorer_redraws_on_every_control(language):
    redrawn = drive(lesson06.show_dropout, causal_weights(), TOKENS)
    assert len(redrawn) == 2 and all(redrawn.values()), redrawn


def test_dropout_figure_keeps_what_the_coins_keep():
    weights = causal_weights()
    coins = torch.rand(6, 6, generator=torch.Generator().manual_seed(1))
    figure = lesson06.draw_dropout(weights, TOKENS, coins, p=0.3)
    shown = torch.tensor(figure.axes[0].images[0].get_array())
    expected = torch.where(coins >= 0.3, weights / 0.7, torch.zeros(()))  # written entry by entry: keep and scale, or 0
    assert torch.allclose(shown.float(), expected, atol=1e-6)
    bars = [patch.get_width() for patch in figure.axes[1].patches]
    assert bars == pytest.approx(expected.sum(dim=-1).tolist(), abs=1e-6)  # the row sums


def test_plots_of_lesson_6_draw_the_data_they_are_given(language):
    rates = torch.tensor([0.1, 0.5, 0.8])
    kept = 1 - rates  # an exact draw: the fraction kept is 1 - p
    figure = lesson06.draw_scale_means(rates, kept)
    right_scale, wrong_scale = (line.get_ydata() for line in figure.axes[0].lines[:2])
    assert list(right_scale) == pytest.approx([1.0, 1.0, 1.0])
    assert list(wrong_scale) == pytest.approx([9.0, 1.0, 0.25])  # (1 - p) / p
    errors = torch.tensor([[0.3, 0.1, 0.03], [0.5, 0.2, 0.05]])
    figure = lesson06.draw_error_shrinks([10, 100, 1000], errors)
    assert list(figure.axes[0].lines[0].get_ydata()) == pytest.approx([0.4, 0.15, 0.04])  # the mean of the runs


def test_heads_explorer_redraws_on_every_control(language):
    torch.manual_seed(123)
    random_layer = au.MultiHeadAttention(3, 12, 6, 0.0, num_heads=3)
    hand_layer = au.MultiHeadAttention(6, 12, 6, 0.0, num_heads=2)
    redrawn = drive(lesson07.show_heads, (random_layer, au.example_batch()[:1]), (hand_layer, torch.eye(6)[None]), TOKENS)
    assert len(redrawn) == 3 and all(redrawn.values()), redrawn


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_cutting_the_features_is_what_a_module_with_that_many_heads_computes(num_heads):
    torch.manual_seed(5)
    module = au.MultiHeadAttention(3, 12, 6, 0.0, num_heads=3)
    other = au.MultiHeadAttention(3, 12, 6, 0.0, num_heads=num_heads)
    other.load_state_dict(module.state_dict())  # the same weights, cut into another number of heads
    x = torch.rand(1, 6, 3)
    with torch.no_grad():
        _, expected = other(x, return_weights=True)
    assert torch.allclose(lesson07.weights_when_cut(module, x, num_heads), expected[0], atol=1e-6)


def test_memory_explorer_redraws_on_every_control(language):
    redrawn = drive(lesson08.show_memory, lambda b, h, t, size: b * h * t * t * size, lambda b, d, t, size: 4 * b * t * d * size)
    assert len(redrawn) == 3 and all(redrawn.values()), redrawn


def test_memory_figure_plots_the_formulas_it_is_given():
    figure = lesson08.draw_memory(lambda b, h, t, size: b * h * t * t * size, lambda b, d, t, size: 4 * b * t * d * size,
                                  T=2048, batch_size=8, number_format="float32")
    matrix, kernel = (line.get_ydata() for line in figure.axes[0].lines[:2])
    at_2048 = lesson08.LENGTHS.index(2048)
    assert matrix[at_2048] == pytest.approx(1.5)  # 8 * 12 * 2048 * 2048 * 4 bytes = 1.5 GiB
    assert kernel[at_2048] == pytest.approx(8 * 4 * 2048 * 768 * 4 / 2**30)
    assert "1.5 GiB" in figure.axes[0].get_title()


def test_readable_sizes():
    assert lesson08.readable(3 * 2**30) == "3.0 GiB"
    assert lesson08.readable(1536 * 2**20) == "1.5 GiB"
    assert lesson08.readable(200 * 2**20) == "200.0 MiB"


def test_the_recorder_sees_what_sdpa_runs():
    q = k = v = torch.rand(1, 2, 5, 4)
    fused = lesson08.aten_ops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)).split(", ")
    assert fused == ["_scaled_dot_product_flash_attention_for_cpu"]
    with_dropout = lesson08.aten_ops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.5))
    assert "bmm" in with_dropout and "bernoulli_" in with_dropout and "flash" not in with_dropout
    assert lesson08.aten_ops(lambda: q.transpose(1, 2).permute(0, 2, 1, 3).view(1, 10, 4)) == ""  # layout only
    assert lesson08.aten_ops(lambda: q + 1) == "add"
