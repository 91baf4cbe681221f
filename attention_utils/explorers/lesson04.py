"""Lesson 4's explorer: the weights fresh random W_q and W_k give, and whether scores and weights are symmetric."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..language import text
from ..plotting.heatmaps import show_heatmaps
from .widgets import explore


def random_matrix(init: str, shape: tuple[int, int], generator: torch.Generator) -> torch.Tensor:
    """torch.rand (every entry in [0, 1), as in the book) or torch.randn (mean 0), from `generator`."""
    if init == "rand":
        return torch.rand(*shape, generator=generator)
    return torch.randn(*shape, generator=generator)


def draw_projections(inputs: torch.Tensor, tokens: Sequence[str], d_out: int,
                     init: str, keys_from: str, matrix_seed: int) -> Figure:
    """The (6, 6) attention weights of random projections.

    The title says whether the scores are symmetric and whether the weights drawn are: with W_k = W_q the
    scores always are, the weights almost never, because each row goes through its own softmax.
    """
    generator = torch.Generator().manual_seed(matrix_seed)
    w_q = random_matrix(init, (inputs.shape[1], d_out), generator)
    w_k = w_q if keys_from == "shared" else random_matrix(init, (inputs.shape[1], d_out), generator)
    scores = (inputs @ w_q) @ (inputs @ w_k).T  # (6, 6)
    weights = torch.softmax(scores / math.sqrt(d_out), dim=-1)
    scores_symmetric, weights_symmetric = (torch.allclose(m, m.T) for m in (scores, weights))
    yes_no = {True: text("yes", "是"), False: text("no", "否")}
    title = text(f"seed {matrix_seed}: scores symmetric? {yes_no[scores_symmetric]}\n"
                 f"weights (drawn) symmetric? {yes_no[weights_symmetric]}",
                 f"种子 {matrix_seed}：分数矩阵对称吗？{yes_no[scores_symmetric]}\n"
                 f"图中的权重对称吗？{yes_no[weights_symmetric]}")
    return show_heatmaps(weights[None, None], xlabel=text("keys", "键"), ylabel=text("queries", "查询"), titles=[title],
                         xticklabels=list(tokens), yticklabels=list(tokens), figsize=(6, 4.6), vmin=0, vmax=1)


def show_projections(inputs: torch.Tensor, tokens: Sequence[str], d_out: int, seed: int) -> None:
    """Choose how the entries are drawn, a separate W_k or W_k = W_q, and the seed of the matrices."""
    explore(lambda init, keys_from, matrix_seed: draw_projections(inputs, tokens, d_out, init, keys_from, matrix_seed),
            init=widgets.ToggleButtons(options=[(text("torch.rand (positive)", "torch.rand（全为正）"), "rand"),
                                                (text("zero-mean normal", "零均值正态分布"), "randn")],
                                       value="rand", description=text("entries", "元素")),
            keys_from=widgets.ToggleButtons(options=[(text("own W_k", "单独的 W_k"), "own"),
                                                     (text("W_k = W_q", "W_k = W_q"), "shared")],
                                            value="own", description=text("keys", "键")),
            matrix_seed=widgets.IntSlider(value=seed, min=0, max=200, description=text("seed", "种子")))
