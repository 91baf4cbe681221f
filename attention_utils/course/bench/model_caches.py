"""Lesson 15's part of the bench: the real model's cache in four kinds, its bytes and the decode step it costs.

In one fresh process SmolLM2 (float32, batch 1) fills, for each prompt length T, four caches with the
same T tokens: lesson 12's contiguous cache, the paged cache (pages of 16 tokens, one pool per layer),
and the quantized cache in int8 and int4 (keys grouped per channel, values per token). Then one
decode step of each is timed, `calls` times in alternating order (one warm call first), medians in
ms. The bytes are what each cache holds after the prefill: int8 and int4 read fewer bytes per step,
but each step also dequantizes what it reads, which this CPU pays for in time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ...inference.kv_cache import KVCache
from ...inference.paged_cache import PagedCache, paged_kv_cache
from ...inference.quantized_cache import quantized_kv_cache
from ...language import LANGUAGES
from ...results import ROOT, SAVED_CACHE, load_saved
from .harness import environment, run_in_child
from .model_kernels import alternate
from .report import save_json, update_readme

KINDS = ("contiguous", "paged", "int8", "int4")
NAMES = {"contiguous": ("contiguous float32", "连续存放的 float32"), "paged": ("paged float32 (16 tokens a page)", "分页的 float32（每页 16 个词元）"),
         "int8": ("int8", "int8"), "int4": ("int4", "int4")}
PAGE_SIZE = 16


@dataclass(frozen=True)
class CacheWorkload:
    """Prompt lengths and how many timed decode steps of each cache per length."""

    lengths: tuple[int, ...]
    calls: int


CACHE_FULL = CacheWorkload(lengths=(128, 512), calls=7)
CACHE_QUICK = CacheWorkload(lengths=(16,), calls=2)


def new_cache(kind: str, config: object, most_tokens: int) -> tuple[KVCache, Callable[[], int]]:
    """An empty cache of this kind for the model, and a function that returns the bytes it holds."""
    if kind == "contiguous":
        cache = KVCache(config.num_layers)
        return cache, lambda: cache.nbytes
    if kind == "paged":
        pages = math.ceil(most_tokens / PAGE_SIZE)
        pools = [PagedCache(pages, config.num_kv_heads, config.head_dim, PAGE_SIZE) for _ in range(config.num_layers)]
        return paged_kv_cache(pools), lambda: sum(pool.nbytes for pool in pools)
    cache = quantized_kv_cache(config.num_layers, bits=8 if kind == "int8" else 4)
    return cache, lambda: cache.nbytes


def measure_caches(workload: CacheWorkload, threads: int) -> dict:
    """Load SmolLM2 and measure every cache kind at every length (in this process), or say why it could not."""
    from ...models.llama import load_smollm2

    torch.set_num_threads(threads)
    try:
        model, _ = load_smollm2()
    except (FileNotFoundError, ImportError, ValueError) as error:
        return {"error": f"the model could not be loaded: {error}"}
    config = model.config
    rows = cache_rows(model, workload)
    return {"model": {"num_layers": config.num_layers, "num_kv_heads": config.num_kv_heads, "head_dim": config.head_dim},
            "rows": rows, "load_average": list(os.getloadavg())}


def cache_rows(model: torch.nn.Module, workload: CacheWorkload) -> list[dict]:
    """One row per (kind, length): the bytes held after the prefill and the median ms of one decode step."""
    rows = []
    with torch.inference_mode():
        for length in workload.lengths:
            prompt = torch.randint(1000, 10000, (1, length), generator=torch.Generator().manual_seed(0))
            steps, held = {}, {}
            for kind in KINDS:
                cache, nbytes = new_cache(kind, model.config, length + workload.calls + 1)
                state = {"next": model(prompt, cache=cache)[:, -1:].argmax(-1)}
                held[kind] = nbytes()

                def step(cache: KVCache = cache, state: dict = state) -> None:
                    state["next"] = model(state["next"], cache=cache)[:, -1:].argmax(-1)
                steps[kind] = step
            for kind, ms in alternate(steps, workload.calls).items():
                rows.append({"kind": kind, "length": length, "ms": ms, "bytes": held[kind],
                             "bytes_per_token": held[kind] / length})
    return rows


def run_caches(workload: CacheWorkload, threads: int, out: Path, quick: bool, replot: bool = False) -> dict:
    """Measure in a fresh process (or reload with replot); save the JSON and figures, and (full run) the README table."""
    if replot:
        results = load_saved(SAVED_CACHE)
    else:
        results = {"environment": environment(threads), "workload": asdict(workload),
                   **run_in_child(measure_caches, workload, threads)}
    folder = out if quick else ROOT / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    save_json(results, out / "cache.json" if quick else SAVED_CACHE)
    if "rows" in results:
        for language in LANGUAGES:
            plot_caches(results, folder, language)
        if not quick:
            update_readme(cache_markdown(results), name="cache")
    return results


def cache_markdown(results: dict) -> str:
    """The README section: how it was measured and one row per cache kind and length, in both languages."""
    env, work = results["environment"], results["workload"]
    load = [f"{x:.1f}" for x in results.get("load_average", [])]
    load_en, load_zh = ", ".join(load) or "not recorded", "、".join(load) or "未记录"
    lines = [
        f"Written by `make bench` on {env['date']}: {env['cpu']}, {env['threads']} threads, torch {env['torch']}. "
        "SmolLM2-135M in float32, batch 1, one process: for each prompt length T each cache is filled with the same T "
        f"tokens, then {work['calls']} decode steps of each are timed in alternating order (medians). Bytes are what the "
        f"cache holds after the prefill. Load average at the end of the run: {load_en}. The int8, int4 and paged caches "
        "rebuild every key and value they hold at every step (dequantize or gather), in plain torch, so their steps "
        "grow with T.",
        "",
        f"由 `make bench` 于 {env['date']} 生成：{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}。"
        "SmolLM2-135M，float32，批大小 1，同一个进程：对每个提示词长度 T，每种缓存都先装进同样的 T 个词元，"
        f"再交替地各计时 {work['calls']} 步解码（取中位数）。字节数是预填充之后缓存里保存的数据。运行结束时的平均负载：{load_zh}。"
        "int8、int4 和分页缓存每一步都要用普通的 torch 运算把保存的全部键和值重建一遍（反量化或收集各页），所以它们的一步解码随 T 变长。",
        "",
        "| cache / 缓存 | T | bytes per token / 每个词元的字节数 | decode step / 一步解码 (ms) |",
        "|---|---|---|---|",
    ]
    for row in sorted(results["rows"], key=lambda r: (r["length"], KINDS.index(r["kind"]))):
        en, zh = NAMES[row["kind"]]
        lines.append(f"| {en} / {zh} | {row['length']:,} | {row['bytes_per_token']:,.0f} | {row['ms']:.1f} |")
    return "\n".join([*lines, "", "![The cache kinds: bytes per token and decode step](figures/bench_cache_en.png)", "",
                      "![几种缓存：每个词元的字节数与一步解码的耗时](figures/bench_cache_zh.png)"])


def plot_caches(results: dict, folder: Path, language: str) -> Path:
    """Two panels: bytes per token of each cache kind, and its decode step at each length; return the PNG path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ...language import text
    from ...plotting.fonts import set_language

    set_language(language)
    figure = Figure(figsize=(11, 4.4), layout="constrained")
    FigureCanvasAgg(figure)
    bytes_ax, time_ax = figure.subplots(1, 2)
    lengths = sorted({row["length"] for row in results["rows"]})
    labels = [NAMES[kind][language == "zh"] for kind in KINDS]
    found = {(row["kind"], row["length"]): row for row in results["rows"]}
    bytes_ax.barh(labels, [found[kind, lengths[-1]]["bytes_per_token"] for kind in KINDS], color=[f"C{i}" for i in range(4)])
    bytes_ax.invert_yaxis()
    bytes_ax.set(title=text(f"bytes per token (T = {lengths[-1]:,})", f"每个词元的字节数（T = {lengths[-1]:,}）"))
    width = 0.8 / len(lengths)
    for index, length in enumerate(lengths):
        time_ax.barh([i + index * width for i in range(len(KINDS))], [found[kind, length]["ms"] for kind in KINDS],
                     height=width, label=f"T = {length:,}", color=f"C{index + 4}")
    time_ax.set_yticks([i + width * (len(lengths) - 1) / 2 for i in range(len(KINDS))], labels)
    time_ax.invert_yaxis()
    time_ax.set(title=text("one decode step (ms)", "一步解码（毫秒）"))
    time_ax.legend(fontsize=8)
    env = results["environment"]
    figure.suptitle(text(f"SmolLM2-135M, float32, batch 1; {env['cpu']}, {env['threads']} threads, torch {env['torch']}",
                         f"SmolLM2-135M，float32，批大小 1；{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}"))
    path = folder / f"bench_cache_{language}.png"
    figure.savefig(path, dpi=110)
    return path
