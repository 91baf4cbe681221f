"""Lesson 18's figures and explorer: the cost of checking k + 1 tokens, and the speed-up a draft buys."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..checks import bilingual, shown
from ..inference.speculative_cost import predicted_speedup
from ..language import text
from .widgets import explore


def pass_costs(results: dict) -> dict[int, float]:
    """c(k) from the saved bench: one pass over k + 1 tokens in decode steps (the k = 0 pass is one decode step)."""
    base = results["verification_ms"]["0"]
    return {int(k): ms / base for k, ms in sorted(results["verification_ms"].items(), key=lambda item: int(item[0]))}


def plot_costs(ax: Axes, results: dict) -> None:
    """On ax: c(k) measured, from lesson 14's roofline, and k + 1 separate decode steps (the bench's figure uses it too)."""
    costs = pass_costs(results)
    ks = list(costs)
    ax.plot(ks, list(costs.values()), "o-", label=text("measured (saved bench)", "实测（保存的基准测试）"))
    ax.plot(ks, [results["roofline_cost"][str(k)] for k in ks], "s--", label=text("roofline (lesson 14)", "屋顶线（第 14 课）"))
    ax.plot(ks, [k + 1 for k in ks], ":", color="gray", label=text("k + 1 decode steps", "k + 1 步解码"))
    ax.set(xlabel=text("drafted tokens k", "草稿词元数 k"), ylabel=text("cost in decode steps", "折合解码步数"),
           title=text("c(k): checking k + 1 tokens in one pass", "c(k)：一次前向检查 k + 1 个词元"))
    ax.legend(fontsize=8)


def plot_speedups(ax: Axes, results: dict) -> None:
    """On ax: measured speed-up per draft and k as bars, the cost model's prediction as a black mark."""
    from ..results.speculative import DRAFT_NAMES

    ks, drafts = results["workload"]["ks"], [name for name in DRAFT_NAMES if any(r["draft"] == name for r in results["summary"])]
    width = 0.8 / len(ks)
    for index, k in enumerate(ks):
        rows = [next(r for r in results["summary"] if r["draft"] == name and r["k"] == k) for name in drafts]
        xs = [i + index * width for i in range(len(drafts))]
        ax.bar(xs, [r["speedup"] for r in rows], width=width, color=f"C{index}", label=f"k = {k}")
        ax.scatter(xs, [r["predicted"] for r in rows], marker="_", s=200, color="black", zorder=3,
                   label=text("predicted", "预测") if index == 0 else None)
    ax.axhline(1, color="gray", linewidth=1)
    ax.set_xticks([i + width * (len(ks) - 1) / 2 for i in range(len(drafts))], [text(*DRAFT_NAMES[name]) for name in drafts])
    ax.set(ylabel=text("speed-up over plain decoding", "相对普通解码的加速比"),
           title=text("greedy speculative decoding on the saved prompts", "在保存的提示词上做贪心投机解码"))
    ax.legend(fontsize=8)


def draw_costs(results: dict) -> Figure:
    """c(k) measured, from lesson 14's roofline, and k + 1 separate decode steps."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8), layout="constrained")
    plot_costs(ax, results)
    return fig


def draw_speedups(results: dict) -> Figure:
    """The saved runs: measured speed-up per draft and k as bars, the cost model's prediction as a black mark."""
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    plot_speedups(ax, results)
    return fig


def draw_both_ways(results: dict) -> Figure:
    """One run's speed-ups twice: with nn.Linear, and with the products weights-left for the model and plain decoding alike."""
    fig, axes = plt.subplots(2, 1, figsize=(9, 6.6), layout="constrained", sharey=True)
    plot_speedups(axes[0], results)
    plot_speedups(axes[1], {**results, "summary": results["summary_weights_left"]})
    axes[0].set_title(text("nn.Linear: against plain decoding with nn.Linear", "nn.Linear：与用 nn.Linear 的普通解码相比"))
    axes[1].set_title(text("weights-left: against plain decoding written weights-left", "权重在左：与写成权重在左的普通解码相比"))
    return fig


def draw_speedup(results: dict, alpha: float, draft_cost: float) -> Figure:
    """Predicted speed-up against k for one alpha and one draft cost d, with the saved c(k)."""
    costs = pass_costs(results)
    speed = {k: predicted_speedup(alpha, k, cost, draft_cost) for k, cost in costs.items()}
    best = max(speed, key=speed.get)
    fig, ax = plt.subplots(figsize=(6.5, 3.8), layout="constrained")
    ax.plot(list(speed), list(speed.values()), "o-", color="C2")
    ax.axhline(1, color="gray", linewidth=1)
    ax.scatter([best], [speed[best]], s=120, facecolors="none", edgecolors="C3", zorder=3)
    ax.set(xlabel=text("drafted tokens k", "草稿词元数 k"), ylabel=text("predicted speed-up", "预测的加速比"), ylim=(0, None),
           title=text(f"α = {alpha:.2f}, d = {draft_cost:.2f}: best k = {best}, {speed[best]:.2f}×",
                      f"α = {alpha:.2f}，d = {draft_cost:.2f}：最佳 k = {best}，{speed[best]:.2f} 倍"))
    return fig


def cost_runs(results: dict, second: dict | None = None) -> dict[str, dict]:
    """The measured c(k) the explorer offers, by a name in the current language: the saved run's, and with the second
    machine's run (load_saved(SAVED_SPECULATIVE_BF16)) its own with nn.Linear and with weights-left products."""
    runs = {text("this lesson's run (nn.Linear)", "本课这次运行（nn.Linear）"): results}
    if second is not None:
        if not isinstance(second, dict) or not {"verification_ms", "weights_left"} <= set(second):
            raise (TypeError if not isinstance(second, dict) else ValueError)(bilingual(
                f"second must be what load_saved(results.SAVED_SPECULATIVE_BF16) returns, got {shown(second)}.",
                f"second 必须是 load_saved(results.SAVED_SPECULATIVE_BF16) 返回的结果，实际是 {shown(second, True)}。"))
        runs[text("second machine, nn.Linear", "第二台机器，nn.Linear")] = second
        runs[text("second machine, weights-left", "第二台机器，权重在左")] = {**second, **second["weights_left"]}
    return runs


def show_speedup(results: dict, second: dict | None = None) -> None:
    """Sliders for the acceptance rate alpha and the draft's cost d, and a menu of measured c(k): the predicted
    speed-up over k redraws."""
    runs = cost_runs(results, second)
    explore(
        lambda alpha, draft_cost, costs: draw_speedup(runs[costs], alpha, draft_cost),
        alpha=widgets.FloatSlider(value=0.8, min=0.0, max=1.0, step=0.01, description=text("alpha", "接受率 α")),
        draft_cost=widgets.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.01, description=text("draft cost d", "草稿开销 d")),
        costs=widgets.Dropdown(options=list(runs), value=next(iter(runs)), description=text("c(k) of", "c(k) 来自"),
                               layout=widgets.Layout(width="28em"), disabled=len(runs) == 1),
    )
