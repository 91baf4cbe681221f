"""The decode benchmark's report: its targets, the README section in both languages, and the figures."""

from __future__ import annotations

from pathlib import Path

from ...language import LANGUAGES
from ...results import ROOT, SAVED_DECODE, decode_rows, flex_summary, load_saved
from .decode import VARIANTS, DecodeWorkload, label, measure_all_decode
from .harness import environment
from .report import save_json, update_readme

MIB = 2**20


def run_decode(workload: DecodeWorkload, threads: int, out: Path, quick: bool, replot: bool = False) -> dict:
    """Measure (or, with replot, load the saved results), then write the JSON, the figures and, unless quick, the README.

    A quick run writes only into `out`; a full run saves figures/bench_decode.json, the figures and the README section.
    """
    if replot:
        results = load_saved(SAVED_DECODE)
    else:
        from dataclasses import asdict

        results = {"environment": environment(threads), "workload": asdict(workload), **measure_all_decode(workload, threads)}
    results["checks"] = [{"target": target, "passed": passed} for target, passed in decode_check(results)]
    folder = out if quick else ROOT / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    save_json(results, out / "decode.json" if quick else SAVED_DECODE)
    for language in LANGUAGES:
        plot_decode(results, folder, language)
    if not quick:
        update_readme(decode_markdown(results), name="decode")
    return results


def decode_check(results: dict) -> list[tuple[str, bool]]:
    """The targets: the cache at least 5x as fast at the longest length (one process), and bytes = formula."""
    longest = max(row["length"] for row in results["rows"])
    mha = decode_rows(results, "mha")[longest]
    exact = all(row["cache_bytes"] == row["formula_bytes"] for row in results["rows"])
    return [
        (f"MHA with a KV cache at least 5x as fast per new token as recomputing, T={longest}, one process: "
         f"{mha['speedup']:.1f}x", mha["speedup"] >= 5.0),
        ("cache bytes equal 2 x layers x kv_heads x head_dim x tokens x 4 for every run", exact),
    ]


def decode_markdown(results: dict) -> str:
    """The README section: setup, one table per length, the window and FlexAttention lines, in English and Chinese."""
    env, work = results["environment"], results["workload"]
    longest = max(work["lengths"])
    head_dim = work["d_model"] // work["num_heads"]
    lines = [
        f"Written by `make bench` on {env['date']}: {env['cpu']}, {env['threads']} threads, torch {env['torch']}. "
        f"A stack of {work['num_layers']} attention layers of GPT-2 small (d_model {work['d_model']}, "
        f"{work['num_heads']} query heads of {head_dim}; LayerNorm and a residual connection around each, no feed-forward "
        f"layers, random weights), batch 1, float32. For each prompt length T, one fresh process prefills T tokens, then "
        f"times {work['calls']} calls of each kind in alternating order: one decode step with the KV cache, and the "
        "whole sequence recomputed without it. Times are medians in ms per new token; the speed-up is their ratio.",
        "",
        f"由 `make bench` 于 {env['date']} 生成：{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}。"
        f"模型是 GPT-2 small 的 {work['num_layers']} 个注意力层（d_model {work['d_model']}，{work['num_heads']} 个查询头，"
        f"每头 {head_dim} 维；每层外面套一个 LayerNorm 和残差连接，没有前馈网络，权重随机），批大小 1，float32。"
        f"对每个提示词长度 T，在一个全新的进程里先预填充 T 个词元，再交替地各计时 {work['calls']} 次：带 KV 缓存的一步解码，"
        "以及不用缓存、把整个序列重新算一遍。表中是每个新词元耗时的中位数（毫秒），加速比是两者之比。",
        "",
        "| T | variant / 变体 | with cache / 有缓存 (ms) | without / 无缓存 (ms) | speed-up / 加速比 | cache / 缓存 (MiB) |",
        "|---|---|---|---|---|---|",
    ]
    for row in sorted(results["rows"], key=lambda r: (r["length"], list(VARIANTS).index(r["variant"]))):
        lines.append(
            f"| {row['length']} | {label(row, 'en')} · {label(row, 'zh')} | {row['cached_ms']:.1f} | {row['full_ms']:.0f} | "
            f"{row['speedup']:.1f}× | {row['cache_bytes'] / MIB:.2f} |"
        )
    mha = decode_rows(results, "mha")[longest]
    lines += [
        "",
        f"At T = {longest} the cache makes each new token {mha['speedup']:.1f}× as fast (MHA). Its size is exactly "
        "2 × layers × key/value heads × head_dim × tokens × 4 bytes in every run; with the window it stops growing at "
        f"W = {work['window']} tokens.",
        "",
        f"在 T = {longest} 时，有了缓存，生成每个新词元的速度是不用缓存时的 {mha['speedup']:.1f} 倍（MHA）。每次运行中缓存的大小都正好是 "
        f"2 × 层数 × 键值头数 × 每个头的维数 × 词元数 × 4 字节；加上滑动窗口后，缓存长到 W = {work['window']} 个词元就不再增长。",
    ]
    lines += ["", *flex_lines(results)]
    if results["notes"]:
        lines += ["", *(f"- {note}" for note in results["notes"])]
    return "\n".join([
        *lines, "",
        "![Decoding: time per new token and cache size against prompt length](figures/bench_decode_en.png)", "",
        "![逐词元解码：每个新词元的耗时和缓存大小随提示词长度的变化](figures/bench_decode_zh.png)",
    ])


def flex_lines(results: dict) -> list[str]:
    """The FlexAttention result in English, then in Chinese (the lines lesson 12 prints), its indented lines as a list."""
    lines = []
    for language in ("en", "zh"):
        first, *rest = flex_summary(results, language).split("\n")
        lines += [first, "", *(f"- {line.strip()}" for line in rest), ""]
    return lines[:-1]


def plot_decode(results: dict, folder: Path, language: str) -> Path:
    """Time per new token and cache memory against the prompt length, one line per variant; return the PNG path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from ...language import text
    from ...plotting.fonts import set_language

    set_language(language)
    work = results["workload"]
    figure = Figure(figsize=(13, 5.2), layout="constrained")
    FigureCanvasAgg(figure)
    time_ax, memory_ax = figure.subplots(1, 2)
    for index, key in enumerate(VARIANTS):
        rows = sorted(decode_rows(results, key).values(), key=lambda r: r["length"])
        if not rows:
            continue
        lengths = [r["length"] for r in rows]
        name = label(rows[0], language)
        time_ax.plot(lengths, [r["cached_ms"] for r in rows], marker="o", color=f"C{index}",
                     label=text(f"{name}: with cache", f"{name}：有缓存"))
        if key == "mha":
            time_ax.plot(lengths, [r["full_ms"] for r in rows], marker="s", color="black", linestyle="--",
                         label=text(f"{name}: recompute everything", f"{name}：全部重算"))
        memory_ax.plot(lengths, [r["cache_bytes"] / MIB for r in rows], marker="o", color=f"C{index}", label=name)
    time_ax.set(xscale="log", yscale="log", title=text("time per new token", "每个新词元的耗时"),
                ylabel=text("ms per token", "毫秒 / 词元"))
    memory_ax.set(title=text("KV cache memory", "KV 缓存占用的内存"), ylabel="MiB")
    for ax in (time_ax, memory_ax):
        ax.set_xlabel(text("tokens in the context T", "上下文中的词元数 T"))
        ax.set_xticks(work["lengths"], [str(t) for t in work["lengths"]])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    time_ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    time_ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    time_ax.yaxis.set_minor_formatter(NullFormatter())
    env = results["environment"]
    figure.suptitle(text(
        f"Decoding with {work['num_layers']} GPT-2-small attention layers, batch 1; {env['threads']} threads, torch {env['torch']}",
        f"用 GPT-2 small 的 {work['num_layers']} 个注意力层逐词元解码，批大小 1；{env['threads']} 个线程，torch {env['torch']}",
    ))
    path = folder / f"bench_decode_{language}.png"
    figure.savefig(path, dpi=110)
    return path
