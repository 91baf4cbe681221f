"""Lesson 1's explorer: one query's dot products (or cosine similarities) with every token, as bars."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..language import text
from .widgets import explore

MEASURES = {"dot": ("dot product", "点积"), "cosine": ("cosine similarity", "余弦相似度")}


def draw_scores(inputs: torch.Tensor, tokens: Sequence[str], query_token: str, measure: str) -> Figure:
    """Bars of the query's score with every token; the closest other token is orange, the values on top."""
    q = list(tokens).index(query_token)
    if measure == "dot":
        values = inputs @ inputs[q]
    else:
        unit = inputs / inputs.norm(dim=1, keepdim=True)
        values = unit @ unit[q]
    others = values.clone()
    others[q] = float("-inf")  # the query itself does not count as its closest token
    closest = int(others.argmax())
    fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
    bars = ax.bar(list(tokens), values.tolist(), color=["tab:orange" if i == closest else "tab:blue" for i in range(len(tokens))])
    ax.bar_label(bars, fmt="%.2f", fontsize=8)  # the values: cosines differ in the second decimal
    name = text(*MEASURES[measure])
    ax.set_title(text(f"{name} with query '{query_token}'", f"与查询“{query_token}”的{name}"))
    ax.set_ylabel(name)
    ax.set_ylim(0, 1.15 * float(values.max()))  # room for the labels on top
    return fig


def show_scores(inputs: torch.Tensor, tokens: Sequence[str]) -> None:
    """Pick a query token and a measure (dot product or cosine); the bars redraw."""
    explore(lambda query_token, measure: draw_scores(inputs, tokens, query_token, measure),
            query_token=widgets.Dropdown(options=list(tokens), value="journey", description=text("query", "查询")),
            measure=widgets.ToggleButtons(options=[(text("dot product", "点积"), "dot"),
                                                   (text("cosine", "余弦相似度"), "cosine")],
                                          value="dot", description=text("measure", "度量")))
