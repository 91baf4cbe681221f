"""Lesson 2's figures: the six arrows drawn by hand, the shadow of one arrow on another, and the explorer."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..language import text
from ..plotting.vectors_3d import plot_vectors_3d
from .widgets import explore


def draw_arrows(inputs: torch.Tensor, tokens: Sequence[str], query: str = "journey") -> Figure:
    """Each embedding as an arrow from the origin, drawn with plain mpl_toolkits.mplot3d calls; the query orange."""
    fig = plt.figure(figsize=(6.5, 5.5), layout="constrained")
    ax = fig.add_subplot(projection="3d")  # a 3D axes from matplotlib's mpl_toolkits.mplot3d
    for vector, token in zip(inputs.tolist(), tokens):
        color = "tab:orange" if token == query else "tab:blue"
        ax.quiver(0, 0, 0, *vector, color=color, arrow_length_ratio=0.08)  # one arrow from (0, 0, 0) to the point
        below = token in ("starts", "with")  # below their tips, clear of the journey arrow
        ax.text(*vector, token, color=color, va="top" if below else "bottom")  # the token at the tip
    ax.set(xlim=(0, 1), ylim=(0, 1), zlim=(0, 1), xlabel=text("feature 1", "特征 1"),
           ylabel=text("feature 2", "特征 2"), zlabel=text("feature 3", "特征 3"))
    ax.set_yticks([0.2, 0.4, 0.6, 0.8, 1.0])  # no 0.0 here: it would collide with feature 1's 1.0 at the corner
    ax.view_init(elev=15, azim=-35)
    ax.set_title(text("The six embeddings as arrows", "六个嵌入向量画成的箭头"))
    return fig


def face_on_view(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    """Elevation and azimuth that look along a × b, straight at the plane of the two arrows."""
    normal = torch.linalg.cross(a, b)
    return {"elev": math.degrees(math.asin(normal[2] / normal.norm())),
            "azim": math.degrees(math.atan2(normal[1], normal[0]))}


def draw_shadow(a: torch.Tensor, b: torch.Tensor, labels: Sequence[str]) -> Figure:
    """b's shadow on the line of a (thick black) and the drop line from b's tip, in the usual view and face on."""
    projection = (a @ b) / (a @ a) * a
    views = [(text("usual view", "常规视角"), {"elev": 15, "azim": -35}),
             (text("looking straight at their plane", "正对两支箭头所在的平面"), face_on_view(a, b))]
    fig = plt.figure(figsize=(9, 4.6), layout="constrained")
    for k, (title, view) in enumerate(views, start=1):
        ax = fig.add_subplot(1, 2, k, projection="3d", computed_zorder=False)  # draw in call order
        plot_vectors_3d(torch.stack([a, b]), list(labels), highlight=0, angle_between=(0, 1), title=title, ax=ax, **view)
        ax.plot(*torch.stack([torch.zeros(3), projection]).T.tolist(), color="black", linewidth=4)  # the shadow
        ax.plot(*torch.stack([b, projection]).T.tolist(), color="gray", linestyle=":", linewidth=2)  # the drop line
        ax.text(*(projection * 0.85).tolist(), text("shadow", "影子"), color="black", va="bottom" if k == 1 else "top",
                ha="right" if k == 1 else "left", zorder=100,  # face on: on the open side, clear of the drop line
                bbox={"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 0.5})
        if k == 2:  # face on, the angle label would cross the shadow: let it grow to the left instead
            next(t for t in ax.texts if t.get_text().startswith("θ")).set_horizontalalignment("right")
    ax.set_axis_off()  # the face-on view needs no box
    ax.set_zorder(-1)  # drawn first, so its empty margin no longer covers the first panel's "feature 3" label
    return fig


def draw_pair(inputs: torch.Tensor, tokens: Sequence[str], query_token: str, other_token: str,
              elevation: int, azimuth: int) -> Figure:
    """All six arrows, the query thick, the angle to the other token marked, |a| |b| cos θ worked out in the title."""
    tokens = list(tokens)
    i, j = tokens.index(query_token), tokens.index(other_token)
    x, y = inputs[i].double(), inputs[j].double()
    cosine = float((x @ y / (x.norm() * y.norm())).clamp(-1, 1))
    degrees = math.degrees(math.acos(cosine))
    title = (text(f"'{query_token}' and '{other_token}': angle {degrees:.1f}°",
                  f"“{query_token}”与“{other_token}”：夹角 {degrees:.1f}°")
             + f"\n|a| |b| cos θ = {x.norm():.3f} × {y.norm():.3f} × {cosine:.3f} = {x @ y:.4f}")
    return plot_vectors_3d(inputs, tokens, highlight=i, angle_between=(i, j), title=title, elev=elevation, azim=azimuth)


def show_pair(inputs: torch.Tensor, tokens: Sequence[str]) -> None:
    """Pick a query and another token, and turn the picture with the elevation and azimuth sliders."""
    narrow = widgets.Layout(width="190px")
    explore(lambda query_token, other_token, elevation, azimuth:
            draw_pair(inputs, tokens, query_token, other_token, elevation, azimuth),
            query_token=widgets.Dropdown(options=list(tokens), value="journey", description=text("query", "查询"),
                                         layout=narrow),
            other_token=widgets.Dropdown(options=list(tokens), value="one", description=text("other", "另一个词元"),
                                         layout=narrow),
            elevation=widgets.IntSlider(value=15, min=-90, max=90, step=5, description=text("elevation", "仰角")),
            azimuth=widgets.IntSlider(value=-35, min=-180, max=180, step=5, description=text("azimuth", "方位角")))
