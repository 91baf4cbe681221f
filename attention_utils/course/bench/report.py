"""The report: summaries of the raw samples, the targets, the README section and the figures."""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from ...results import ROOT, by_run, loglog_slope
from .implementations import IMPLEMENTATIONS, MODES, SAME_PROCESS, Workload


def reference_length(lengths: Sequence[int]) -> int:
    """The length the README table, the traps and the same-process check report: 1024 when measured."""
    return 1024 if 1024 in lengths else max(lengths)


def series(rows: list[dict], key: str, mode: str) -> list[dict]:
    """One implementation's rows in one mode, shortest sequence first."""
    return sorted((r for r in rows if r["implementation"] == key and r["mode"] == mode), key=lambda r: r["length"])


def summarize(samples: dict, workload: Workload) -> dict:
    """Medians, speed-ups, fused/floor ratios and fitted exponents from the raw samples."""
    rows = [
        {
            "implementation": key,
            "label": IMPLEMENTATIONS[key].label[0],
            "mode": mode,
            "length": length,
            "median_ms": 1e3 * statistics.median(sample["times"]),
            "min_ms": 1e3 * min(sample["times"]),
            "max_ms": 1e3 * max(sample["times"]),
            "calls": len(sample["times"]),
            "memory_mib": statistics.median(sample["memory_mib"]),
        }
        for (key, mode, length), sample in samples.items()
    ]
    index = by_run(rows)
    for row in rows:
        wrapper = index.get(("wrapper", row["mode"], row["length"]))
        row["speedup_vs_wrapper"] = wrapper["median_ms"] / row["median_ms"] if wrapper else math.nan
    ratios = [
        {"mode": mode, "length": length, "fused_over_bare": fused["median_ms"] / index["bare", mode, length]["median_ms"]}
        for (key, mode, length), fused in index.items()
        if key == "fused" and ("bare", mode, length) in index
    ]
    fits = [
        {
            "implementation": key,
            "mode": mode,
            "time_exponent": loglog_slope([r["length"] for r in own], [r["median_ms"] for r in own]),
            "memory_exponent": loglog_slope([r["length"] for r in own], [r["memory_mib"] for r in own]),
        }
        for key in IMPLEMENTATIONS
        for mode in MODES
        if (own := series(rows, key, mode))
    ]
    return {"workload": asdict(workload), "rows": rows, "ratios": ratios, "fits": fits}


def check(results: dict) -> list[tuple[str, bool]]:
    """The targets, as ratios of medians from this run: (description, passed) pairs.

    The check cost is judged in one process with interleaved calls: fused/bare ratios from separate
    processes are still printed, but on a shared machine they swing by more than the 3% at stake.
    """
    index = by_run(results["rows"])
    fused, book = index["fused", "inference", 1024], index["book", "inference", 1024]
    speedup = book["median_ms"] / fused["median_ms"]
    memory = fused["memory_mib"] / book["memory_mib"]
    same_process = results["interleaved"]
    return [
        (f"fused at least 2.5x faster than the book's module, inference T=1024: {speedup:.2f}x", speedup >= 2.5),
        (f"fused needs at most 15% of the book's extra peak memory, inference T=1024: {memory:.1%}", memory <= 0.15),
        (
            f"fused at most 1.03x the bare floor, one process, {same_process['calls']} interleaved calls each, "
            f"inference T={same_process['length']}: {same_process['fused_over_bare']:.3f}",
            same_process["fused_over_bare"] <= 1.03,
        ),
    ]


def markdown(results: dict) -> str:
    """The README section: the English half, then the Chinese half, each with its set-up line, table, notes,
    traps, same-process check and figures."""
    return "\n".join(half(results, "en") + [""] + half(results, "zh"))


def _pick(language: str, en: str, zh: str) -> str:
    """The English or the Chinese string, by the language of the half being written (not the session's)."""
    return zh if language == "zh" else en


def _tidy(chinese: str) -> str:
    """Chinese typography: no space after a full-width closing bracket (“（下限）327 毫秒”) or between two CJK characters."""
    return re.sub(r"(?<=[\u4e00-\u9fff]) +(?=[\u4e00-\u9fff])", "", re.sub(r"）[ ]+", "）", chinese))


def _timed(label: str, ms: float, language: str) -> str:
    """'label 123 ms' / 'label 123 毫秒'."""
    return f"{label} {ms:.0f} ms" if language == "en" else _tidy(f"{label} {ms:.0f} 毫秒")


TABLE_HEADERS = {
    "en": ("implementation", "inference ms", "× wrapper", "MiB", "training ms", "× wrapper", "MiB",
           "time ~ T^k", "memory ~ T^k"),
    "zh": ("实现", "推理耗时（毫秒）", "速度是包装器的几倍", "MiB", "训练耗时（毫秒）", "速度是包装器的几倍", "MiB",
           "耗时 ~ T^k", "内存 ~ T^k"),
}
MODE_NAMES = {"inference": ("inference", "推理"), "training": ("training", "训练")}
FIGURES = {
    "en": ("Benchmark: time per call against sequence length", "Benchmark: extra peak memory against sequence length"),
    "zh": ("基准测试：每次调用耗时与序列长度", "基准测试：额外峰值内存与序列长度"),
}


def half(results: dict, language: str) -> list[str]:
    """One language's half of the README section, as lines."""
    env, work = results["environment"], results["workload"]
    length = reference_length(work["lengths"])
    index = by_run(results["rows"])
    notes = results["notes"] if language == "en" else [note_zh(note) for note in results["notes"]]
    time_figure, memory_figure = FIGURES[language]
    return [
        setup_line(env, work, length, language),
        "",
        *table(results, length, language),
        "",
        *(f"- {note}" for note in notes),
        "",
        traps(index, length, language),
        "",
        same_process_line(results["interleaved"], language),
        "",
        f"![{time_figure}](figures/bench_time_{language}.png)",
        "",
        f"![{memory_figure}](figures/bench_memory_{language}.png)",
    ]


def setup_line(env: dict, work: dict, length: int, language: str) -> str:
    """Where, when and what was measured, and how to read the numbers."""
    rounds = work["rounds"]
    if language == "zh":
        return (
            f"由 `make bench` 于 {env['date']} 生成：{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}；"
            f"批大小 {work['batch']}，d_model {work['d_model']}，{work['num_heads']} 个头（GPT-2 small），T = {length}。"
            f"时间取全部计时调用的中位数（括号里是最小值–最大值），每个配置分别在 {rounds} 个新启动的进程中测量；"
            "内存是一次调用额外占用的峰值常驻内存；指数是在双对数坐标上对 "
            f"T = {'、'.join(map(str, work['lengths']))} 做最小二乘拟合得到的斜率。"
        )
    return (
        f"Written by `make bench` on {env['date']}: {env['cpu']}, {env['threads']} threads, torch {env['torch']}; "
        f"batch {work['batch']}, d_model {work['d_model']}, {work['num_heads']} heads (GPT-2 small), T = {length}. "
        "Times are medians of all timed calls (min–max), each configuration measured in "
        f"{rounds} fresh process{'' if rounds == 1 else 'es'}; memory is the extra peak resident memory of one call; "
        f"exponents are least-squares slopes on log-log axes over T = {', '.join(map(str, work['lengths']))}."
    )


def table(results: dict, length: int, language: str) -> list[str]:
    """The markdown table at one length: time (min–max), speed-up over the wrapper and memory per mode, exponents."""
    index = by_run(results["rows"])
    fits = {(f["implementation"], f["mode"]): f for f in results["fits"]}
    opening, closing = _pick(language, " (", "（"), _pick(language, ")", "）")
    lines = ["| " + " | ".join(TABLE_HEADERS[language]) + " |", "|" + "---|" * len(TABLE_HEADERS[language])]
    for key, implementation in IMPLEMENTATIONS.items():
        rows = [index.get((key, mode, length)) for mode in MODES]
        if not any(rows):
            continue
        cells = [_pick(language, *implementation.label)]
        for row in rows:
            cells += (
                [
                    f"{row['median_ms']:.0f}{opening}{row['min_ms']:.0f}–{row['max_ms']:.0f}{closing}",
                    f"{row['speedup_vs_wrapper']:.1f}",
                    f"{row['memory_mib']:.0f}",
                ]
                if row
                else ["–"] * 3
            )
        fit = fits.get((key, "inference")) or fits[key, "training"]
        mode = _pick(language, *MODE_NAMES[fit["mode"]])
        cells += [f"{fit['time_exponent']:.2f}{opening}{mode}{closing}", f"{fit['memory_exponent']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# The harness writes its notes in English; the Chinese half says the same, pattern by pattern.
NOTES_ZH = (
    (r"Implementations that store \(T, T\) matrices are not trained beyond T=(\d+), "
     r"to keep the full run under 15 minutes on 2 cores\.",
     "存下 (T, T) 矩阵的实现，训练只测到 T={0}，这样在 2 个核心上完整测一遍不超过 15 分钟。"),
    (r"torch\.compile is measured for inference only: compiling the backward in every process would dominate the run\.",
     "torch.compile 只测推理：如果每个进程都要编译反向传播，编译会占去测量的大部分时间。"),
    (r"torch\.compile is left out of --quick: compiling takes longer than the whole quick run\.",
     "--quick 不测 torch.compile：编译一次比整个简短测量还要久。"),
    (r"The measurements took (\d+) s\.", "测量共用时 {0} 秒。"),
    (r"(.+) stopped at (inference|training), T=(\d+): (.+)", "{0} 在{1}、T={2} 时中止：{3}"),
)


def note_zh(note: str) -> str:
    """The Chinese of one of the harness's notes (an unknown note stays English rather than being guessed)."""
    names = {en: zh for en, zh in [implementation.label for implementation in IMPLEMENTATIONS.values()]}
    names.update(MODE_NAMES.values())
    for pattern, chinese in NOTES_ZH:
        if found := re.fullmatch(pattern, note):
            return _tidy(chinese.format(*(names.get(part, part) for part in found.groups())))
    return note


def same_process_line(same_process: dict, language: str) -> str:
    """The same-process comparison of the steps lesson 8 attributes the speed-up to."""
    ms, calls, length = same_process["median_ms"], same_process["calls"], same_process["length"]
    steps = _pick(language, "; ", "，").join(
        _timed(_pick(language, *IMPLEMENTATIONS[key].label), ms[key], language) for key in SAME_PROCESS
    )
    if language == "zh":
        return (
            f"在同一进程内把相邻的两步配成一对，紧挨着、交替先后地计时（每种各调用 {calls} 次，推理，T={length}；"
            f"即使机器繁忙，比较也是公平的）：{steps}。融合模块的耗时是裸 SDPA 下限的 {same_process['fused_over_bare']:.3f} 倍。"
        )
    return (
        f"Timed in one process, as pairs of neighbouring steps called back to back in alternating order "
        f"({calls} calls each, inference, T={length}; fair even on a busy machine): {steps}. "
        f"The fused module took {same_process['fused_over_bare']:.3f}x the time of the bare floor."
    )


def traps(index: dict, length: int, language: str) -> str:
    """The traps in one language, each with what it cost in this run."""

    def cost(key: str, mode: str) -> str:
        slow, fused = index.get((key, mode, length)), index.get(("fused", mode, length))
        return f"{slow['median_ms'] / fused['median_ms']:.1f}" if slow and fused else "?"

    mask, native = cost("bool_mask", "inference"), cost("torch_mha", "inference")
    dropout = cost("fused_dropout", "training")
    if language == "zh":
        return (
            "陷阱：SDPA 的布尔 `attn_mask` 中 True 表示“可以关注”，与辅助包和 `nn.MultiheadAttention` 的约定正好相反，"
            f"掩码写反就会悄悄看到未来；用张量传因果掩码而不用 `is_causal=True`，耗时是融合模块的 {mask} 倍"
            "（内核必须计算上三角）；只要 `dropout_p > 0`，CPU 上的 SDPA 就会改走数学实现（math 后端），"
            f"按公式逐步计算并存下完整矩阵，训练时耗时是融合模块的 {dropout} 倍；"
            f"`nn.MultiheadAttention` 推理时的快速路径会丢掉 `is_causal`、改用完整掩码，耗时是融合模块的 {native} 倍。"
            f"以上均为 T={length} 时的测量结果。"
        )
    return (
        "Traps: SDPA reads a boolean `attn_mask` as True = may attend, the opposite of this package and of "
        "`nn.MultiheadAttention`, so an inverted mask silently looks into the future; a causal mask passed as a "
        f"tensor instead of `is_causal=True` takes {mask}x as long (the kernel must visit the upper triangle); any "
        f"`dropout_p > 0` sends CPU SDPA to its math fallback ({dropout}x as long in training); and the inference "
        f"fast path of `nn.MultiheadAttention` drops `is_causal` and applies the full mask ({native}x as long). "
        f"Times at T={length}, relative to the fused module."
    )


def update_readme(section: str, readme: Path = ROOT / "README.md", name: str = "bench") -> None:
    """Replace what lies between the README's markers <!-- name:start --> and <!-- name:end -->, keeping the markers."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    head, rest = readme.read_text(encoding="utf-8").split(start, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(f"{head}{start}\n{section}\n{end}{tail}", encoding="utf-8")


def plot(results: dict, folder: Path, language: str) -> list[Path]:
    """Time and memory against length, log-log, one line per implementation; return the PNG paths."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from ...language import text
    from ...plotting.fonts import set_language

    set_language(language)
    fits = {(f["implementation"], f["mode"]): f for f in results["fits"]}
    work, env = results["workload"], results["environment"]
    emphasis = {
        "fused": dict(color="crimson", linewidth=5, alpha=0.6, zorder=4),
        "bare": dict(color="black", linestyle="--", linewidth=1.8, zorder=5),
    }
    titles = {
        "inference": text("inference (forward)", "推理（前向）"),
        "training": text("training (forward + backward)", "训练（前向 + 反向）"),
    }
    paths = []
    for quantity, column, ylabel in (
        ("time", "median_ms", text("time per call (ms)", "每次调用耗时（毫秒）")),
        ("memory", "memory_mib", text("extra peak memory (MiB)", "额外峰值内存（MiB）")),
    ):
        figure = Figure(figsize=(13, 5.5), layout="constrained")
        FigureCanvasAgg(figure)  # render with Agg, whatever backend pyplot is using
        for ax, mode in zip(figure.subplots(1, 2), MODES):
            for index, (key, implementation) in enumerate(IMPLEMENTATIONS.items()):
                own = series(results["rows"], key, mode)
                if not own:
                    continue
                x = [r["length"] for r in own]
                style = emphasis.get(key, dict(color=f"C{index}", linewidth=1.2))
                power = f"T^{fits[key, mode][quantity + '_exponent']:.2f}"
                label = text(f"{implementation.label[0]}  ({power})", f"{implementation.label[1]}（{power}）")
                ax.plot(x, [r[column] for r in own], marker="o", markersize=3, label=label, **style)
                if quantity == "time":  # the spread of the timed calls
                    low, high = [r["min_ms"] for r in own], [r["max_ms"] for r in own]
                    ax.fill_between(x, low, high, color=style["color"], alpha=0.08)
            if quantity == "memory":  # slopes 1 and 2, drawn from the floor's and the book's first points
                for power, key, label, linestyle in ((1, "bare", "guide ∝ T", ":"), (2, "book", "guide ∝ T²", "-.")):
                    own = series(results["rows"], key, mode)
                    x = [r["length"] for r in own]
                    guide = [own[0][column] * (t / x[0]) ** power for t in x]
                    ax.plot(x, guide, color="dimgrey", linestyle=linestyle, linewidth=1.6,
                            label=text(label, label.replace("guide", "参考线")))
            ax.set(xscale="log", yscale="log", title=titles[mode], ylabel=ylabel)
            ax.set_xlabel(text("sequence length T", "序列长度 T"))
            ax.set_xticks(work["lengths"], [str(t) for t in work["lengths"]])
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
        figure.suptitle(
            text(
                f"GPT-2-small attention: batch {work['batch']}, d_model {work['d_model']}, {work['num_heads']} heads; "
                f"{env['threads']} threads, torch {env['torch']}",
                f"GPT-2 small 注意力层：批大小 {work['batch']}，d_model {work['d_model']}，{work['num_heads']} 个头；"
                f"{env['threads']} 个线程，torch {env['torch']}",
            )
        )
        path = folder / f"bench_{quantity}_{language}.png"
        figure.savefig(path, dpi=110)
        paths.append(path)
    return paths


def report(results: dict) -> str:
    """A plain-text summary for the terminal."""
    lines = [f"{key}: {value}" for key, value in results["environment"].items()]
    for row in sorted(results["rows"], key=lambda r: (r["mode"], r["length"], r["median_ms"])):
        lines.append(
            f"{row['mode']:9} T={row['length']:<5} {row['label']:38} {row['median_ms']:9.1f} ms "
            f"({row['min_ms']:.1f}–{row['max_ms']:.1f}, {row['calls']} calls) {row['memory_mib']:8.1f} MiB "
            + ("" if math.isnan(row["speedup_vs_wrapper"]) else f"{row['speedup_vs_wrapper']:6.2f}x the wrapper")
        )
    lines += [f"fused/bare {r['mode']:9} T={r['length']:<5} {r['fused_over_bare']:.3f}" for r in results["ratios"]]
    lines += [
        f"exponents {f['implementation']:13} {f['mode']:9} time {f['time_exponent']:.2f}, memory {f['memory_exponent']:.2f}"
        for f in results["fits"]
    ]
    return "\n".join(lines + results["notes"])


def write(results: dict, folder: Path) -> None:
    """Save the results as JSON (everything) and CSV (one row per implementation, mode and length)."""
    folder.mkdir(parents=True, exist_ok=True)
    save_json(results, folder / "results.json")
    with open(folder / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(results["rows"][0]))
        writer.writeheader()
        writer.writerows(results["rows"])


def save_json(results: dict, path: Path) -> None:
    """Write results as indented UTF-8 JSON."""
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


