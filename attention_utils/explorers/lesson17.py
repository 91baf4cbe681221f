"""Lesson 17's figures and explorer: which request runs in each step of a scheduler, and what a policy changes.

The explorer serves one stream of requests on a small model with random weights (two layers, so each
redraw takes a moment): what it shows is the schedule, the steps and the pages, which depend only on
the requests' lengths and the scheduler's settings, never on the model's size or its tokens.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from ..checks import bilingual, check_size, shown
from ..inference.scheduler import POLICIES, Request, Scheduler, StepRecord
from ..language import text
from .widgets import explore

POLICY_NAMES = {"one": ("one at a time", "逐个处理"), "static": ("static batches", "静态批处理"),
                "continuous": ("continuous batching", "连续批处理")}
MOST_STEPS = 2000  # cells of the timeline: a longer schedule would draw for a long time


def timeline(steps: list[StepRecord], count: int) -> torch.Tensor:
    """(requests, steps): 0 where a request is not fed, 1 where it decodes one token, 2 where it feeds prompt tokens."""
    if not isinstance(steps, list) or not all(isinstance(step, StepRecord) for step in steps) or not steps:
        raise TypeError(bilingual(f"steps must be a scheduler's non-empty list of StepRecord (scheduler.steps), got "
                                  f"{shown(steps)}.",
                                  f"steps 必须是调度器记下的非空 StepRecord 列表（scheduler.steps），实际是 {shown(steps, True)}。"))
    count = check_size(count, "count")
    grid = torch.zeros(count, len(steps), dtype=torch.long)
    started: set[int] = set()
    for column, step in enumerate(steps):
        for index, fed in step.fed:
            if index >= count:
                raise ValueError(bilingual(f"steps feed request {index}, but count={count}; pass the number of requests.",
                                           f"steps 里有第 {index} 个请求，而 count={count}；请传入请求的个数。"))
            grid[index, column] = 2 if fed > 1 or index not in started else 1
            started.add(index)
    return grid


def draw_timeline(steps: list[StepRecord], count: int, title: str = "") -> Figure:
    """One row per request, one column per step: grey waiting or done, orange prompt tokens, blue a decode token."""
    grid = timeline(steps, count)
    if grid.shape[1] > MOST_STEPS:
        raise ValueError(bilingual(f"steps holds {grid.shape[1]} steps; the timeline draws at most {MOST_STEPS}.",
                                   f"steps 有 {grid.shape[1]} 步；时间线最多画 {MOST_STEPS} 步。"))
    fig, ax = plt.subplots(figsize=(10, 0.35 * count + 1.6), layout="constrained")
    ax.imshow(grid.numpy(), aspect="auto", interpolation="nearest", vmin=0, vmax=2,
              cmap=ListedColormap(["#eeeeee", "C0", "C1"]))
    ax.set(xlabel=text("step", "步"), ylabel=text("request", "请求"), title=title)
    ax.set_yticks(range(count))
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for colour in ("C1", "C0")]
    ax.legend(handles, [text("prompt tokens (prefill)", "提示词（预填充）"), text("one new token (decode)", "一个新词元（解码）")],
              loc="upper right", fontsize=8)
    return fig


def draw_running(running: dict[str, list[int]]) -> Figure:
    """Sequences in each step under each policy (a saved bench's `running_per_step`), one line per policy."""
    if not isinstance(running, dict) or not running or not set(running) <= set(POLICY_NAMES) or not all(
            isinstance(v, list) and v and all(isinstance(n, int) and n >= 0 for n in v) for v in running.values()):
        raise TypeError(bilingual(
            f"running must map policy names ({', '.join(POLICY_NAMES)}) to lists of sequences per step, got {shown(running)}.",
            f"running 必须把策略名（{'、'.join(POLICY_NAMES)}）对应到每一步的序列数列表，实际是 {shown(running, True)}。"))
    fig, ax = plt.subplots(figsize=(9, 3.6), layout="constrained")
    for policy, counts in running.items():
        ax.step(range(len(counts)), counts, where="post", color=f"C{list(POLICY_NAMES).index(policy)}",
                label=text(*POLICY_NAMES[policy]))
    ax.set(xlabel=text("step", "步"), ylabel=text("sequences in the step", "这一步里的序列数"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def small_model(seed: int = 0) -> torch.nn.Module:
    """A two-layer Llama with random weights: cheap steps, for watching schedules (its tokens mean nothing)."""
    from ..models.llama import LlamaConfig, LlamaModel

    config = LlamaConfig(vocab_size=64, context_length=512, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2,
                         d_ff=48, rotary_base=10000.0, norm_eps=1e-5)
    torch.manual_seed(check_size(seed, "seed", minimum=0))
    return LlamaModel(config).eval()


def draw_schedule(stream: list[Request], policy: str, max_batch: int, num_pages: int, chunk: int,
                  page_size: int = 4, model: torch.nn.Module | None = None) -> Figure:
    """Serve `stream` on the small model with these settings (chunk 0: no chunks) and draw its timeline."""
    scheduler = Scheduler(model or small_model(), num_pages, page_size, policy, max_batch, chunk or None)
    served = scheduler.run(stream)
    preempted = sum(s.preemptions for s in served)
    most = max(step.pages_in_use for step in scheduler.steps)
    title = text(f"{POLICY_NAMES[policy][0]}: {len(scheduler.steps)} steps, {preempted} preemptions, at most {most} of "
                 f"{num_pages} pages in use",
                 f"{POLICY_NAMES[policy][1]}：{len(scheduler.steps)} 步，抢占 {preempted} 次，最多占用 {num_pages} 页中的 {most} 页")
    return draw_timeline(scheduler.steps, len(stream), title)


def show_schedule(stream: list[Request], page_size: int = 4) -> None:
    """The explorer: the policy, the batch limit, the page budget and the chunk size, and the schedule they give."""
    model = small_model()
    longest = max(-(-(len(r.prompt) + r.max_new_tokens) // page_size) + 1 for r in Scheduler(
        model, 4096, page_size).check_requests(stream))  # the fewest pages that still serve every request
    explore(
        lambda policy, max_batch, num_pages, chunk: draw_schedule(stream, policy, max_batch, num_pages, chunk, page_size,
                                                                  model),
        max_batch=widgets.IntSlider(value=4, min=1, max=8, description=text("max batch", "最大批")),
        num_pages=widgets.IntSlider(value=4 * longest, min=longest, max=6 * longest, description=text("pages", "页数")),
        chunk=widgets.IntSlider(value=0, min=0, max=32, step=4, description=text("chunk", "段长")),
        policy=widgets.Dropdown(options=[(text(*POLICY_NAMES[p]), p) for p in POLICIES], value="continuous",
                                description=text("policy", "策略")),
    )
