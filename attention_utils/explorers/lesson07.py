"""Lesson 7's explorer: one module's projected features cut into 1, 2, 3, ... heads, and what one head then looks at."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..functional import causal_mask, scaled_dot_product_attention
from ..language import text
from ..modules import MultiHeadAttention
from ..plotting.heatmaps import show_heatmaps
from .widgets import explore

Layer = tuple[MultiHeadAttention, torch.Tensor]  # a module and the one sentence (1, T, d_in) it reads


def weights_when_cut(module: MultiHeadAttention, x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Attention weights (num_heads, T, T) of one sentence x (1, T, d_in) when the module's projected features form num_heads heads."""
    T, size = x.shape[1], module.d_out // num_heads
    with torch.no_grad():
        q, k, v = (layer(x).view(1, T, num_heads, size).transpose(1, 2)  # each (1, num_heads, T, size)
                   for layer in (module.W_query, module.W_key, module.W_value))
        _, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(T))
    return weights[0]


def draw_head(layer: Layer, tokens: Sequence[str], num_heads: int, head: int) -> Figure:
    """The weights of one head when the layer's features are cut into num_heads heads, on a fixed 0-to-1 colour scale."""
    module, x = layer
    head = min(head, num_heads - 1)
    size = module.d_out // num_heads
    return show_heatmaps(weights_when_cut(module, x, num_heads)[head][None, None],
                         xlabel=text("keys", "键"), ylabel=text("queries", "查询"),
                         titles=[text(f"head {head} of {num_heads} (d_h = {size})", f"头 {head}（共 {num_heads} 个，d_h = {size}）")],
                         xticklabels=tokens, yticklabels=tokens, figsize=(6, 4.4), vmin=0, vmax=1)


def show_heads(random_layer: Layer, hand_layer: Layer, tokens: Sequence[str]) -> None:
    """Choose the weights (random or hand-set), the number of heads (a divisor of d_out) and one head to look at."""
    layers = {"random": random_layer, "hand": hand_layer}
    width = random_layer[0].d_out
    layer_control = widgets.Dropdown(options=[(text("random (seed 123)", "随机初始化（种子 123）"), "random"),
                                              (text("hand-set: previous token / itself", "手工设定：前一个词元 / 它自己"), "hand")],
                                     value="random", description=text("weights", "权重"))
    num_heads_control = widgets.Dropdown(options=[n for n in range(1, width + 1) if width % n == 0], value=3,
                                         description=text("heads", "头数"))
    head_control = widgets.ToggleButtons(options=list(range(3)), value=0, description=text("head", "头"))
    num_heads_control.observe(lambda change: setattr(head_control, "options", list(range(change["new"]))), names="value")
    explore(lambda layer, num_heads, head: draw_head(layers[layer], tokens, num_heads, head),
            layer=layer_control, num_heads=num_heads_control, head=head_control)
