"""Lesson 10's figures: sinusoidal positions, loss curves, maps before and after training, and the snapshot explorer."""

from __future__ import annotations

import copy
import functools

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from .. import tasks
from ..language import text
from ..plotting.heatmaps import show_heatmaps
from ..tiny_model import TinyAttentionModel, sinusoidal_positions
from ..training import TrainingRun
from .widgets import explore

Trained = tuple[TrainingRun, TinyAttentionModel]


def draw_sinusoidal(num_positions: int = 64, dim: int = 32, used: int = 8) -> Figure:
    """The sinusoidal table as an image, with a line under the first `used` positions (what an 8-letter task sees)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    image = ax.imshow(sinusoidal_positions(num_positions, dim).numpy(), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.axhline(used - 0.5, color="black", linestyle="--", linewidth=1)
    ax.annotate(text(f"above the line: the {used} positions of the reverse task", f"虚线以上：倒序任务用到的 {used} 个位置"), (dim - 0.5, used - 0.5),
                xytext=(-4, -4), textcoords="offset points", ha="right", va="top", fontsize=9,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.8))
    ax.set(xlabel=text("feature", "特征"), ylabel=text("position", "位置"),
           title=text(f"Sinusoidal positional embeddings, {num_positions} positions × {dim} features",
                      f"正弦式位置嵌入，{num_positions} 个位置 × {dim} 个特征"))
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def draw_losses(curves: dict[str, list[float]], level: float, level_label: str) -> Figure:
    """Training loss after every step, one line per run, and a dotted line at the loss of a blind guess."""
    fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
    for label, losses in curves.items():
        ax.plot(losses, label=label)
    ax.axhline(level, color="gray", linestyle=":", label=level_label)
    ax.set_xlabel(text("training step", "训练步数"))
    ax.set_ylabel(text("cross-entropy loss", "交叉熵损失"))
    ax.legend()
    return fig


def draw_reverse_maps(before: torch.Tensor, after: torch.Tensor, letters: str) -> Figure:
    """Each head's map (heads, T, T) before training (top row) and after (bottom row)."""
    when = [(text("step 0", "第 0 步"), 0), (text("trained", "训练后"), 1)]
    titles = [text(f"{name}, head {h}", f"{name}，头 {h}") for name, _ in when for h in range(before.shape[0])]
    return show_heatmaps(torch.stack([before, after]), xlabel=text("keys", "键"), ylabel=text("queries", "查询"),
                         titles=titles, xticklabels=list(letters), yticklabels=list(letters), annotate=False,
                         vmin=0, vmax=1, figsize=(8, 7))


def draw_repeat_maps(maps: torch.Tensor, letters: str) -> Figure:
    """The repeat model's two maps (2 layers, T, T) side by side: previous-token head, induction head."""
    titles = [text("layer 0: previous-token head", "层 0：前一词元头"), text("layer 1: induction head", "层 1：归纳头")]
    return show_heatmaps(maps[None], xlabel=text("keys", "键"), ylabel=text("queries", "查询"), titles=titles,
                         xticklabels=list(letters), yticklabels=list(letters), annotate=False, vmin=0, vmax=1,
                         figsize=(11, 5.2))


def _message(error: Exception) -> Figure:
    """A small figure holding an error message, in place of a map."""
    fig, ax = plt.subplots(figsize=(6, 1.5))
    ax.axis("off")
    ax.text(0, 0.5, str(error).replace("; ", ";\n"), va="center", fontsize=9)
    return fig


def draw_snapshot(viewers: dict[str, Trained], snapshot: int, which: tuple[str, int, int], letters: str) -> Figure:
    """One head's map on `letters`, with the weights of snapshot `snapshot`; the title gives its step and prediction."""
    name, layer, head = which
    run, viewer = viewers[name]
    try:
        predictions, maps = run.restore(viewer, snapshot).predict(tasks.encode(letters, viewer.vocab_size))
    except ValueError as error:  # letters outside the vocabulary, or too many for this model
        return _message(error)
    step, answer = run.snapshot_steps[snapshot], tasks.decode(predictions)
    title = text(f"snapshot {snapshot} (step {step}): {letters} → {answer}",
                 f"快照 {snapshot}（第 {step} 步）：{letters} → {answer}")
    return show_heatmaps(maps[layer, 0, head][None, None], xlabel=text("keys", "键"), ylabel=text("queries", "查询"),
                         titles=[title], xticklabels=list(letters), yticklabels=list(letters), annotate=False,
                         vmin=0, vmax=1, figsize=(6, 5))


def show_snapshots(reverse: Trained, repeat: Trained, letters: str = "abcdefgh") -> None:
    """The explorer: a snapshot slider, a choice of map (reverse heads, repeat layers) and the learner's letters.

    The snapshots are loaded into copies of the models, so the trained models stay as they are.
    """
    viewers = {name: (run, copy.deepcopy(model)) for name, (run, model) in (("reverse", reverse), ("repeat", repeat))}
    choices = [(text(f"reverse, head {h}", f"倒序，头 {h}"), ("reverse", 0, h)) for h in range(reverse[1].layers[0].num_heads)]
    choices += [(text(f"repeat, layer {n}", f"重复，层 {n}"), ("repeat", n, 0)) for n in range(len(repeat[1].layers))]
    last = min(len(reverse[0].snapshots), len(repeat[0].snapshots)) - 1
    explore(functools.partial(draw_snapshot, viewers),
            snapshot=widgets.IntSlider(value=last, min=0, max=last, description=text("snapshot", "快照")),
            which=widgets.Dropdown(options=choices, description=text("map", "注意力图")),
            letters=widgets.Text(value=letters, continuous_update=False, description=text("letters", "字母")))
