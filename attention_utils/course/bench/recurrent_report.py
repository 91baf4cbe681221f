"""Lesson 16's benchmark report: the saved JSON, the README section in both languages, and the figure."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ...language import LANGUAGES
from ...explorers.lesson16 import crossovers
from ...results import ROOT, SAVED_RECURRENT, load_saved
from .harness import environment
from .recurrent import LAYERS, NAMES, RecurrentWorkload, measure_all_recurrent
from .report import save_json, update_readme

MIB = 2**20


def run_recurrent(workload: RecurrentWorkload, threads: int, out: Path, quick: bool, replot: bool = False) -> dict:
    """Measure (or reload with replot), then write the JSON and figures; a full run also saves for lesson 16 and the README."""
    if replot:
        results = load_saved(SAVED_RECURRENT)
    else:
        results = {"environment": environment(threads), "workload": asdict(workload),
                   **measure_all_recurrent(workload, threads)}
    results["checks"] = [{"target": target, "passed": passed} for target, passed in recurrent_check(results)]
    folder = out if quick else ROOT / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    save_json(results, out / "recurrent.json" if quick else SAVED_RECURRENT)
    for language in LANGUAGES:
        plot_recurrent(results, folder, language)
    if not quick:
        update_readme(recurrent_markdown(results), name="recurrent")
    return results


def recurrent_check(results: dict) -> list[tuple[str, bool]]:
    """The claims lesson 16 makes: the states keep the same bytes at every T; the cache grows in proportion to T."""
    rows = sorted(results["rows"], key=lambda r: r["length"])
    flat = all(r[f"{key}_bytes"] == rows[0][f"{key}_bytes"] for r in rows for key in ("linear", "delta"))
    work = results["workload"]
    exact = all(r["softmax_bytes"] == 2 * r["length"] * work["d_model"] * 4 for r in rows)
    return [("the linear and delta-rule states take the same bytes at every T", flat),
            ("the KV cache takes exactly 2 x T x d_model x 4 bytes", exact)]


def recurrent_markdown(results: dict) -> str:
    """The README section: how it was measured, the table, the crossovers, in English and in Chinese."""
    env, work = results["environment"], results["workload"]
    found = crossovers(results)
    head_dim = work["d_model"] // work["num_heads"]
    lines = [
        f"Written by `make bench` on {env['date']}: {env['cpu']}, {threads_en(env)}, torch {env['torch']}. "
        f"One layer of d_model {work['d_model']} with {work['num_heads']} heads of {head_dim}, batch 1, float32, random "
        "weights. For each context length T one fresh process fills a KV cache (softmax attention) and a state per head "
        f"(linear attention, delta rule) with the same T tokens, then times {work['calls']} decode steps of each layer in "
        "rotated order. Times are medians in ms per new token; memory is what the layer keeps between tokens.",
        "",
        f"由 `make bench` 于 {env['date']} 生成：{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}。"
        f"一个注意力层，d_model {work['d_model']}，{work['num_heads']} 个头，每头 {head_dim} 维，批大小 1，float32，权重随机。"
        "对每个上下文长度 T，在一个全新的进程里用同样的 T 个词元填好 KV 缓存（softmax 注意力）和每个头的状态（线性注意力、delta 规则），"
        f"再轮流给三个层各计时 {work['calls']} 步解码。表中时间是每个新词元耗时的中位数（毫秒），内存是层在两步解码之间保存的数据。",
        "",
        *markdown_table(results),
        "",
        found["en"],
        "",
        found["zh"],
    ]
    if results["notes"]:
        lines += ["", *(f"- {note}" for note in results["notes"])]
    return "\n".join([
        *lines, "",
        "![One decode step: time and memory against the context length](figures/bench_recurrent_en.png)", "",
        "![一步解码：耗时和内存随上下文长度的变化](figures/bench_recurrent_zh.png)",
    ])


def markdown_table(results: dict) -> list[str]:
    """One row per context length: ms per decode step of each layer, and the bytes each keeps."""
    lines = ["| T | softmax + KV cache / softmax + KV 缓存 (ms) | linear attention / 线性注意力 (ms) | delta rule / delta 规则 (ms) "
             "| cache / 缓存 (MiB) | state / 状态 (MiB) |", "|---|---|---|---|---|---|"]
    for r in sorted(results["rows"], key=lambda r: r["length"]):
        lines.append(f"| {r['length']:,} | {r['softmax_ms']:.2f} | {r['linear_ms']:.2f} | {r['delta_ms']:.2f} | "
                     f"{r['softmax_bytes'] / MIB:.2f} | {r['linear_bytes'] / MIB:.2f} |")
    return lines


def threads_en(env: dict) -> str:
    """'1 thread', '2 threads'."""
    return f"{env['threads']} thread" + ("" if env["threads"] == 1 else "s")


def plot_recurrent(results: dict, folder: Path, language: str) -> Path:
    """Time per decode step and bytes kept against T, one line per layer, crossovers marked; return the PNG path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    from ...language import text
    from ...plotting.fonts import set_language

    set_language(language)
    rows = sorted(results["rows"], key=lambda r: r["length"])
    lengths = [r["length"] for r in rows]
    figure = Figure(figsize=(12, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    time_ax, memory_ax = figure.subplots(1, 2)
    for index, key in enumerate(LAYERS):
        name = NAMES[key][language == "zh"]
        time_ax.plot(lengths, [r[f"{key}_ms"] for r in rows], marker="o", color=f"C{index}", label=name)
        memory_ax.plot(lengths, [r[f"{key}_bytes"] / MIB for r in rows], marker="o", color=f"C{index}", label=name)
    found = crossovers(results)
    if found["time"] is not None:
        time_ax.axvline(found["time"], color="gray", linestyle=":",
                        label=text(f"crossover, T ≈ {found['time']:,.0f}", f"交叉点，T ≈ {found['time']:,.0f}"))
    memory_ax.axvline(found["memory"], color="gray", linestyle=":",
                      label=text(f"crossover, T = {found['memory']:,.0f}", f"交叉点，T = {found['memory']:,.0f}"))
    time_ax.set(title=text("time of one decode step", "一步解码的耗时"), ylabel=text("ms per token", "毫秒 / 词元"),
                yscale="log")
    memory_ax.set(title=text("memory kept between tokens", "两步解码之间保存的内存"), ylabel="MiB", yscale="log")
    for ax in (time_ax, memory_ax):
        ax.set_xscale("log")
        ax.set_xlabel(text("tokens in the context T", "上下文中的词元数 T"))
        ax.set_xticks(lengths, [f"{t:,}" for t in lengths])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    env, work = results["environment"], results["workload"]
    figure.suptitle(text(
        f"One layer, d_model {work['d_model']}, {work['num_heads']} heads, batch 1; {threads_en(env)}, torch {env['torch']}",
        f"单层，d_model {work['d_model']}，{work['num_heads']} 个头，批大小 1；{env['threads']} 个线程，torch {env['torch']}",
    ))
    path = folder / f"bench_recurrent_{language}.png"
    figure.savefig(path, dpi=110)
    return path
