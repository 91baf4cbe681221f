"""plot_vectors_3d draws one labelled arrow per row, marks an angle in degrees, and refuses bad input."""

import math
import warnings

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import attention_utils as au  # noqa: E402
from attention_utils.plotting import fonts, vectors_3d  # noqa: E402


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


def test_one_labelled_arrow_per_vector_and_the_angle_in_degrees():
    fonts.set_language("en")
    x = au.example_inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = vectors_3d.plot_vectors_3d(x, au.TOKENS, highlight=1, angle_between=(1, 4), title="t")
        fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.name == "3d" and ax.get_title() == "t"
    assert len(ax.collections) == 6  # one quiver per token
    journey, one = x[1].double(), x[4].double()
    degrees = math.degrees(math.acos(journey @ one / (journey.norm() * one.norm())))  # 44.86 by hand
    assert set(au.TOKENS) <= set(texts(fig))
    assert f"θ = {degrees:.1f}°" in texts(fig)
    assert ax.get_xlabel() == "feature 1"
    plt.close(fig)


def test_labels_follow_the_language_and_same_vector_has_no_arc():
    fonts.set_language("zh")
    try:
        fig = vectors_3d.plot_vectors_3d(torch.eye(3), ["x", "y", "z"], angle_between=(0, 0))
        assert fig.axes[0].get_zlabel() == "特征 3"
        assert not any(t.startswith("θ") for t in texts(fig))
        plt.close(fig)
    finally:
        fonts.set_language("en")


def test_draws_into_a_given_axes():
    fig = plt.figure()
    ax = fig.add_subplot(1, 2, 2, projection="3d")
    assert vectors_3d.plot_vectors_3d(torch.rand(2, 3), ["a", "b"], ax=ax) is fig
    assert len(ax.collections) == 2
    plt.close(fig)


@pytest.mark.parametrize("bad, error", [(torch.rand(6, 2), ValueError), (torch.rand(3), ValueError),
                                        ([[0.1, 0.2, 0.3]], TypeError)])  # a list is the wrong kind of thing
def test_refuses_anything_but_n_by_3(bad, error):
    with pytest.raises(error, match=r"\(n, 3\)"):
        vectors_3d.plot_vectors_3d(bad, ["a"] * 6)


def test_needs_one_label_per_vector():
    with pytest.raises(ValueError, match="one label per vector"):
        vectors_3d.plot_vectors_3d(torch.rand(3, 3), ["a", "b"])


def test_the_thick_arrow_can_take_another_colour_and_labels_sit_in_front():
    """Lesson 3 draws its context vector black, so orange keeps meaning the query 'journey' across lessons."""
    from contract_helpers import assert_contract_error
    from matplotlib.colors import to_rgba

    fonts.set_language("en")
    x = au.example_inputs()
    fig = vectors_3d.plot_vectors_3d(x, au.TOKENS, highlight=1, highlight_color="black")
    quivers = fig.axes[0].collections
    assert to_rgba(quivers[1].get_edgecolor()[0]) == to_rgba("black")
    assert to_rgba(quivers[0].get_edgecolor()[0]) == to_rgba("tab:blue")
    labels = [t for t in fig.axes[0].texts if t.get_text() in au.TOKENS]
    assert all(t.get_zorder() > max(q.get_zorder() for q in quivers) and t.get_bbox_patch() for t in labels)
    plt.close(fig)
    assert_contract_error(lambda: vectors_3d.plot_vectors_3d(x, au.TOKENS, highlight_color=3), "highlight_color", kind=TypeError)
    assert_contract_error(lambda: vectors_3d.plot_vectors_3d(x, au.TOKENS, highlight_color="blackish"), "highlight_color",
                          kind=ValueError)
