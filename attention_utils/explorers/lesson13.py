"""Lesson 13's figures: each head's share of attention on the first token, two heads' maps, and the prompt explorer."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..checks import bilingual, check_index, check_tensor, shown
from ..models.bpe_tokenizer import ByteLevelBPE
from ..models.head_scores import attention_maps, check_model
from ..language import text
from ..models.llama import model_inputs
from ..plotting.heatmaps import show_heatmaps
from .widgets import explore

MOST_TOKENS = 40  # a longer prompt makes the token labels unreadable


def _readable(label: str) -> str:
    """A token label matplotlib prints as it is: "$" would start a formula."""
    return label.replace("$", r"\$")


def draw_sinks(share: torch.Tensor) -> Figure:
    """A (layers, heads) table of the share of attention sent to the first token, one cell per head."""
    check_tensor(share, "share", ranks=(2,))
    fig = show_heatmaps(share[None, None], xlabel=text("head", "头"), ylabel=text("layer", "层"),
                        titles=[text("share of attention on the first token", "落在第一个词元上的注意力比例")],
                        cmap="Reds", annotate=False, vmin=0, vmax=1, figsize=(4.6, 8.2))
    fig.axes[0].set_yticks(range(0, share.shape[0], 2))  # every other layer: 30 labels would touch
    return fig


def draw_head_maps(maps: torch.Tensor, labels: list[str], titles: list[str]) -> Figure:
    """Maps (n, T, T) side by side with the tokens as labels."""
    labels = [_readable(label) for label in labels]
    return show_heatmaps(maps[None], xlabel=text("keys", "键"), ylabel=text("queries", "查询"), titles=titles,
                         xticklabels=labels, yticklabels=labels, annotate=False, vmin=0, vmax=1,
                         figsize=(6.2 * maps.shape[0], 6.4))


def _message(error: Exception) -> Figure:
    """A small figure that shows what is wrong with the prompt, instead of a traceback."""
    fig, ax = plt.subplots(figsize=(7, 1.4))
    ax.axis("off")
    ax.text(0, 0.5, str(error).replace("; ", ";\n"), va="center", fontsize=9, wrap=True)
    return fig


class _LastRun:
    """The maps and next-token guesses of the last prompt, so moving a slider does not run the model again."""

    def __init__(self, model: torch.nn.Module, tokenizer) -> None:
        self.model, self.tokenizer, self.prompt, self.result = model, tokenizer, None, None

    def __call__(self, prompt: str) -> tuple[list[str], torch.Tensor, list[tuple[str, float]]]:
        if prompt != self.prompt:
            ids = model_inputs(self.tokenizer, prompt, self.model.config.context_length)
            if ids.shape[1] > MOST_TOKENS:
                raise ValueError(bilingual(
                    f"This prompt has {ids.shape[1]} tokens; the explorer shows at most {MOST_TOKENS}, shorten it.",
                    f"这个提示词有 {ids.shape[1]} 个词元；探索控件最多显示 {MOST_TOKENS} 个，请缩短一些。"))
            logits, maps = attention_maps(self.model, ids)
            probabilities = logits[0, -1].softmax(dim=-1)
            top = probabilities.topk(5)
            guesses = [(_readable(label), p) for label, p in zip(self.tokenizer.labels(top.indices), top.values.tolist())]
            self.prompt, self.result = prompt, ([_readable(label) for label in self.tokenizer.labels(ids[0])], maps, guesses)
        return self.result


def draw_attention(run: _LastRun, prompt: str, layer: int, head: int) -> Figure:
    """The map of one head with the prompt's tokens as labels, and the model's five likeliest next tokens."""
    try:
        labels, maps, guesses = run(prompt)
    except (TypeError, ValueError) as error:
        return _message(error)
    layer, head = check_index(layer, "layer", maps.shape[0], "层数"), check_index(head, "head", maps.shape[1], "头数")
    weights = maps[layer, head]
    size = 2.6 + 0.2 * len(labels)
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(size + 3.6, size), width_ratios=(size, 2.4), layout="constrained")
    image = ax.imshow(weights.numpy(), cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel(text("keys", "键"))
    ax.set_ylabel(text("queries", "查询"))
    first = weights[1:, 0].mean().item() if len(labels) > 1 else 1.0
    ax.set_title(text(f"layer {layer}, head {head}: {first:.0%} of the attention on the first token",
                      f"层 {layer}，头 {head}：{first:.0%} 的注意力落在第一个词元上"), fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.6)
    names, chances = zip(*guesses)
    bars.barh(range(len(names))[::-1], chances, color="tab:orange")
    bars.set_yticks(range(len(names))[::-1], [repr(name)[1:-1] or "''" for name in names], fontsize=9)
    bars.set_xlim(0, 1)
    bars.set_xlabel(text("probability", "概率"))
    bars.set_title(text("next token", "下一个词元"), fontsize=10)
    return fig


def show_attention(model: torch.nn.Module, tokenizer, prompt: str = "The capital of France is Paris. The capital of Italy is",
                   layer: int = 18, head: int = 6) -> None:
    """The explorer: a prompt box (press Enter), a layer slider and a head slider."""
    config = check_model(model).config
    if not isinstance(tokenizer, ByteLevelBPE):
        raise TypeError(bilingual(f"tokenizer must be the ByteLevelBPE that load_smollm2() returns, got {shown(tokenizer)}.",
                                  f"tokenizer 必须是 load_smollm2() 返回的 ByteLevelBPE，实际是 {shown(tokenizer, True)}。"))
    layer = check_index(layer, "layer", config.num_layers, "层数")
    head = check_index(head, "head", config.num_heads, "头数")
    run = _LastRun(model, tokenizer)
    explore(
        lambda prompt, layer, head: draw_attention(run, prompt, layer, head),
        prompt=widgets.Text(value=prompt, continuous_update=False, description=text("prompt", "提示词"),
                            layout=widgets.Layout(width="28em")),
        layer=widgets.IntSlider(value=layer, min=0, max=config.num_layers - 1, description=text("layer", "层")),
        head=widgets.IntSlider(value=head, min=0, max=config.num_heads - 1, description=text("head", "头")),
    )
