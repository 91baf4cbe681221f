"""Lesson 5's explorer: where and how the causal mask is applied, with each row's sum on its label."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..functional import causal_mask
from ..language import text
from ..plotting.heatmaps import show_heatmaps
from .widgets import explore

# Each way of masking: (English, Chinese) for the title and for the dropdown, one wording for both.
METHODS = {
    "before": ("-inf before softmax", "softmax 前填 -inf"),
    "renormalize": ("zero after softmax, renormalized", "softmax 后置零并重新归一化"),
    "after": ("zero after softmax, NOT renormalized", "softmax 后置零，未重新归一化"),
    "none": ("no mask", "无掩码"),
}


def masked_weights(scores: torch.Tensor, method: str) -> torch.Tensor:
    """Weights of already scaled scores under one way of masking the future."""
    hidden = causal_mask(scores.shape[-1])
    if method == "before":
        return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    weights = torch.softmax(scores, dim=-1)
    if method == "none":
        return weights
    weights = weights.masked_fill(hidden, 0.0)
    return weights / weights.sum(dim=-1, keepdim=True) if method == "renormalize" else weights


def draw_mask(scores: torch.Tensor, tokens: Sequence[str], d_k: int, num_tokens: int, method: str) -> Figure:
    """The weights of the first `num_tokens` tokens, masked one way; each row label shows the row's sum."""
    weights = masked_weights(scores[:num_tokens, :num_tokens] / math.sqrt(d_k), method)
    rows = [f"{token}  Σ={total:.2f}" for token, total in zip(tokens, weights.sum(dim=-1).tolist())]
    return show_heatmaps(weights[None, None], xlabel=text("keys", "键"), ylabel=text("queries", "查询"),
                         titles=[text(*METHODS[method])], xticklabels=list(tokens)[:num_tokens], yticklabels=rows,
                         figsize=(6.5, 4.6), cmap="Blues", vmin=0, vmax=1)


def show_mask(scores: torch.Tensor, tokens: Sequence[str], d_k: int) -> None:
    """Choose how many tokens enter and how the mask is applied; it starts with the mistake (no renormalizing)."""
    explore(lambda num_tokens, method: draw_mask(scores, tokens, d_k, num_tokens, method),
            num_tokens=widgets.IntSlider(min=1, max=len(tokens), value=len(tokens), description=text("tokens", "词元数")),
            method=widgets.Dropdown(options=[(text(*names), key) for key, names in METHODS.items()],
                                    value="after", description=text("mask", "掩码")))
