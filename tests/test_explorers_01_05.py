"""The explorers of lessons 1 to 5 draw their default figure and redraw it when any control moves, in both languages."""

from __future__ import annotations

import math

import matplotlib.colors
import matplotlib.pyplot as plt
import pytest
import torch
from explorer_harness import drive

import attention_utils as au
from attention_utils.explorers import lesson01, lesson02, lesson03, lesson04, lesson05
from attention_utils.plotting.fonts import set_language


@pytest.fixture(params=["en", "zh"], autouse=True)
def language(request):
    set_language(request.param)
    yield request.param
    set_language("en")
    plt.close("all")


def inputs() -> torch.Tensor:
    return au.example_inputs()


TOKENS = list(au.TOKENS)


def unit_variance(*shape: int, generator: torch.Generator) -> torch.Tensor:
    return (torch.rand(*shape, generator=generator) * 2 - 1) * math.sqrt(3)


def book_scores() -> torch.Tensor:
    torch.manual_seed(789)
    head = au.SelfAttentionV2(3, 2)
    with torch.no_grad():
        return head.W_query(inputs()) @ head.W_key(inputs()).T


@pytest.mark.parametrize("show, args", [
    (lesson01.show_scores, (inputs(), TOKENS)),
    (lesson02.show_pair, (inputs(), TOKENS)),
    (lesson03.show_temperature, (inputs() @ inputs().T, TOKENS)),
    (lesson03.show_dimension, (unit_variance, 123)),
    (lesson04.show_projections, (inputs(), TOKENS, 2, 123)),
    (lesson05.show_mask, (book_scores(), TOKENS, 2)),
], ids=["lesson01.show_scores", "lesson02.show_pair", "lesson03.show_temperature", "lesson03.show_dimension",
        "lesson04.show_projections", "lesson05.show_mask"])
def test_every_control_redraws_the_figure(show, args):
    redrawn = drive(show, *args)
    assert redrawn and all(redrawn.values()), redrawn


def test_the_closest_other_token_is_orange_for_both_measures():
    # by hand from lesson 1: among journey's other tokens, starts is closest by dot product (1.4754) and by cosine (0.9997);
    # for "step", journey leads by dot product (1.0865) but "with" by cosine (0.9611, lesson 1's exercise 3)
    orange = matplotlib.colors.to_rgba("tab:orange")
    for query, measure, closest in (("journey", "dot", "starts"), ("journey", "cosine", "starts"),
                                    ("step", "dot", "journey"), ("step", "cosine", "with")):
        figure = lesson01.draw_scores(inputs(), TOKENS, query, measure)
        coloured = [TOKENS[i] for i, bar in enumerate(figure.axes[0].patches) if bar.get_facecolor() == orange]
        assert coloured == [closest], (query, measure, coloured)


def test_the_mask_explorer_computes_what_its_title_says():
    s = torch.tensor([[1.0, 2.0], [3.0, 0.5]])
    e = torch.exp
    # written out by hand: row 0 may see only key 0; row 1 sees both keys
    before = torch.tensor([[1.0, 0.0], [e(torch.tensor(3.0)) / (e(torch.tensor(3.0)) + e(torch.tensor(0.5))),
                                        e(torch.tensor(0.5)) / (e(torch.tensor(3.0)) + e(torch.tensor(0.5)))]])
    assert torch.allclose(lesson05.masked_weights(s, "before"), before)
    assert torch.allclose(lesson05.masked_weights(s, "renormalize"), before)
    after = lesson05.masked_weights(s, "after")
    assert after[0, 1] == 0 and math.isclose(after[0, 0].item(), 1 / (1 + math.e), rel_tol=1e-6)
    assert torch.allclose(lesson05.masked_weights(s, "none").sum(dim=-1), torch.ones(2))


def test_the_face_on_view_looks_along_the_cross_product():
    a, b = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])  # their plane is the floor: look from above
    view = lesson02.face_on_view(a, b)
    assert math.isclose(view["elev"], 90.0) and math.isclose(view["azim"], 0.0)


def test_the_arrows_by_hand_draw_one_arrow_and_one_label_per_token(language):
    figure = lesson02.draw_arrows(inputs(), TOKENS)
    ax = figure.axes[0]
    assert len(ax.collections) == 6 and [t.get_text() for t in ax.texts] == TOKENS
    assert ax.get_title() == ("六个嵌入向量画成的箭头" if language == "zh" else "The six embeddings as arrows")
