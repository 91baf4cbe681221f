"""Lesson 14's figures: the roofline of a saved bench run with its measured points, and the explorer that moves one.

A roofline (Williams et al. 2009) puts a run at (arithmetic intensity, FLOP/s achieved). No run can
sit above the lower of two roofs: the bandwidth roof, intensity × bytes per second, and the compute
roof, the matmul throughput. Both roofs and every point come from `make bench`'s saved JSON.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter
from matplotlib.figure import Figure

from ..checks import bilingual, shown
from ..language import text
from ..plotting.labels import label_points
from ..results import (COMPILED_ROWS, FORMATS, SHOWN_ZH, chosen_rows, machine_name, model_roofs, model_timing, reads, roofline_point, second_run,
                       step_split)
from .widgets import explore

COLOURS = {"float32": "tab:blue", "bfloat16": "tab:green", "int8": "tab:orange", "q4": "tab:red", "matmul floor": "gray",
           "transformers float32": "tab:purple", "llama.cpp": "black"}


def _roof_at(intensity: float, roofs: dict) -> float:
    """The highest GFLOP/s a run of this intensity can reach: min(bandwidth × intensity, matmul throughput)."""
    return min(roofs["bandwidth_gb_s"] * intensity, roofs["matmul_gflop_s"])


@reads("SAVED_MODEL", "timings", "format", "roofs", "format_roofs", "environment")
def draw_roofline(results: dict, highlight: tuple[str, int] | None = None, rows: tuple[str, ...] | None = None,
                  gpu: tuple[float, float] | None = None) -> Figure:
    """Both roofs, every decode point (by format and batch) and the prefills; `highlight` (format, batch) circled;
    `rows` draws just the named rows (and their own compute roofs), so a lesson can add formats as it introduces them;
    `gpu` (TB/s, TFLOP/s from a datasheet) adds one GPU's two roofs, dotted, on the same axes for scale."""
    roofs, env = model_roofs(results), results["environment"]
    drawn = {r["format"] for r in results["timings"]} if rows is None else set(chosen_rows(results, rows))
    shown_formats = [f for f in (*FORMATS, "q4") if f in drawn]  # q4: issue 48 on
    measured = [(r["format"], r["batch"]) for r in results["timings"] if r["phase"] == "decode" and r["format"] in shown_formats]
    if highlight is not None and (not isinstance(highlight, tuple) or highlight not in measured):
        raise ValueError(bilingual(
            f"highlight must be a measured (format, batch), such as {measured[0]}, got {shown(highlight)}.",
            f"highlight 必须是测过的 (format, batch)，例如 {measured[0]}，实际是 {shown(highlight, True)}。"))
    fig, ax = plt.subplots(figsize=(10.5, 4.6), layout="constrained")
    ridge = roofs["matmul_gflop_s"] / roofs["bandwidth_gb_s"]
    xs = [0.05, ridge, 2000.0]
    ax.plot(xs, [_roof_at(x, roofs) for x in xs], color="black", linewidth=2,
            label=text(f"roofs measured in this bench run (float32 matmul, {roofs['matmul_n']:,}²)",
                       f"这次基准测试测得的屋顶（float32 矩阵乘法，{roofs['matmul_n']:,} × {roofs['matmul_n']:,}）"))
    dashed = {"bfloat16", "int8"} & drawn  # float32's flat roof is the black one
    for fmt, gflop_s in results["format_roofs"].items():  # one flat roof per format, where the bench measured them
        if fmt in dashed:
            start = gflop_s / roofs["bandwidth_gb_s"]  # where this format's flat roof meets the bandwidth roof
            ax.plot([start, 2000.0], [gflop_s, gflop_s], color=COLOURS[fmt], linestyle="--", linewidth=1.5,
                    label=text(f"compute roof, {fmt} ({'its weight kernel' if fmt == 'int8' else 'matmul'}, {roofs['matmul_n']:,}²)",
                               f"算力屋顶，{fmt}（{'权重内核' if fmt == 'int8' else '矩阵乘法'}，{roofs['matmul_n']:,} × {roofs['matmul_n']:,}）"))
    if gpu is not None:
        _draw_gpu_roofs(ax, gpu)
    for fmt in (*shown_formats, *(["matmul floor"] if "matmul floor" in drawn else [])):
        steps = sorted((r for r in results["timings"] if r["format"] == fmt and r["phase"] == "decode"),
                       key=lambda r: r["batch"])
        points = [roofline_point(r) for r in steps]
        ax.plot([p["intensity"] for p in points], [p["gflop_s"] for p in points], marker="o", color=COLOURS[fmt],
                zorder=1.8 if fmt == "matmul floor" else 2.2,  # the formats' points over the floor's, where they coincide
                label=text(f"decode, {fmt}, batch {steps[0]['batch']}–{steps[-1]['batch']}",
                           f"解码，{SHOWN_ZH.get(fmt, fmt)}，批大小 {steps[0]['batch']}–{steps[-1]['batch']}"))
    for row in (r for r in results["timings"] if r["phase"] == "prefill" and r["format"] in shown_formats):
        point = roofline_point(row)
        ax.scatter(point["intensity"], point["gflop_s"], marker="s", color=COLOURS[row["format"]], edgecolor="black")
    for row in (r for r in results["timings"] if r["format"] == "llama.cpp" and "llama.cpp" in drawn):  # where it was installed
        point = roofline_point(row)
        ax.scatter(point["intensity"], point["gflop_s"], marker="*", s=120, color=COLOURS["llama.cpp"],
                   label=text("decode, llama.cpp on the same file, batch 1", "解码，llama.cpp 读同一个文件，批大小 1"))
    for row in (r for r in results["timings"] if r["format"] in COMPILED_ROWS and r["format"] in drawn):  # where it could compile
        point, fmt = roofline_point(row), row["format"].split()[0]
        ax.scatter(point["intensity"], point["gflop_s"], marker="D", s=60, color=COLOURS[fmt], edgecolor="black",
                   label=text(f"decode, {fmt} compiled (torch.compile), batch 1", f"解码，{fmt}（编译后，torch.compile），批大小 1"))
    ax.scatter([], [], marker="s", color="white", edgecolor="black",
               label=text(f"prefill of {results['timings'][0]['length']} tokens", f"预填充 {results['timings'][0]['length']} 个词元"))
    if highlight is not None:
        point = roofline_point(model_timing(results, *highlight))
        ax.scatter(point["intensity"], point["gflop_s"], s=300, facecolor="none", edgecolor="crimson", linewidth=2.5)
    ax.axvline(ridge, color="black", linestyle=":", linewidth=1)
    ax.set(xscale="log", yscale="log", xlim=(0.05, 2000),
           xlabel=text("arithmetic intensity (FLOPs per byte read)", "算术强度（每读一个字节做的浮点运算次数）"),
           ylabel=text("GFLOP/s achieved", "实际达到的 GFLOP/s"))
    ax.set_title(text(f"SmolLM2-135M, {env['cpu']} ({machine_name(results)}), {env['threads']} threads, {env['date']}",
                      f"SmolLM2-135M，{env['cpu']}（{machine_name(results, 'zh')}），{env['threads']} 个线程，{env['date']}"),
                 fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside the axes: it covers no point
    return fig


def _draw_gpu_roofs(ax, gpu: tuple[float, float]) -> None:
    """A datasheet GPU's bandwidth and compute roofs, dotted: where a batch of decode steps would have to go on it."""
    if (not isinstance(gpu, tuple) or len(gpu) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf") for v in gpu)):
        raise ValueError(bilingual(f"gpu must be (TB/s, TFLOP/s), two positive numbers such as (3.35, 989), got {shown(gpu)}.",
                                   f"gpu 必须是 (TB/s, TFLOP/s)，两个正数，例如 (3.35, 989)，实际是 {shown(gpu, True)}。"))
    tb_s, tflop_s = gpu
    roofs = {"bandwidth_gb_s": tb_s * 1e3, "matmul_gflop_s": tflop_s * 1e3}
    xs = [0.05, tflop_s / tb_s, 2000.0]  # the GPU's ridge in the middle
    ax.plot(xs, [_roof_at(x, roofs) for x in xs], color="tab:purple", linestyle=":", linewidth=2,
            label=text(f"one GPU's roofs (datasheet: {tb_s} TB/s, {tflop_s} TFLOP/s)",
                       f"一块 GPU 的屋顶（数据手册：{tb_s} TB/s，{tflop_s} TFLOP/s）"))


SPLIT_PARTS = {"bytes": ("its weights read at the bandwidth roof", "按带宽屋顶读完它的权重", "tab:blue"),
               "slow products": ("the products' time beyond that (matmul floor − weights)", "矩阵乘法超出读权重的时间（矩阵乘法下限 − 权重）",
                                 "tab:orange"),
               "outside products": ("outside the products (step − matmul floor)", "矩阵乘法之外（一步 − 矩阵乘法下限）", "tab:gray")}


def draw_step_split(first: dict, second: dict | None = None) -> Figure:
    """One bar per saved machine: its float32 batch-1 step split into its weights' time at the bandwidth roof, the rest
    of the products' time alone, and the time outside the products (results.step_split), each part labelled in ms."""
    runs = [run for run in (first, second) if run is not None]
    fig, ax = plt.subplots(figsize=(10.5, 1.6 + 0.6 * len(runs)), layout="constrained")
    ordinal = (("first machine", "第一台机器"), ("second machine", "第二台机器"))
    names = [text(f"{en}: {step_split(run)['step']:.1f} ms\n{machine_name(run)}",
                  f"{zh}：{step_split(run)['step']:.1f} 毫秒\n{machine_name(run, 'zh')}") for (en, zh), run in zip(ordinal, runs)]
    left = [0.0] * len(runs)
    for part, (en, zh, colour) in SPLIT_PARTS.items():
        widths = [step_split(run)[part] for run in runs]
        bars = ax.barh(names, widths, left=left, color=colour, label=text(en, zh))
        ax.bar_label(bars, labels=[text(f"{w:.1f} ms", f"{w:.1f} 毫秒") for w in widths], label_type="center", color="white", fontsize=9)
        left = [a + w for a, w in zip(left, widths)]
    ax.invert_yaxis()  # the first machine on top
    ax.set_xlabel(text("ms per float32 decode step, batch 1", "float32 一步解码的毫秒数，批大小 1"))
    ax.set_title(text("If the products take inside a step what they take alone", "假定矩阵乘法在一步里的耗时与单独计时相同"), fontsize=9)
    fig.legend(fontsize=8, loc="outside lower center", ncol=3)
    return fig


@reads("SAVED_MODEL", "timings", "format", "quality")
def draw_bytes_quality(results: dict) -> Figure:
    """Each weight format's bytes a decode step reads (weights and cache, batch 1) against its perplexity and its largest
    logit difference from float32: the axes lessons 15 and 16 put their caches and states on."""
    shown_formats = [f for f in (*FORMATS, "q4") if f in results["quality"]]
    mb = {f: (model_timing(results, f)["weight_bytes"] + model_timing(results, f)["cache_bytes"]) / 1e6 for f in shown_formats}
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0), layout="constrained")
    for ax, key, label in ((axes[0], "perplexity", text("perplexity on the held-out text (axis: float32 ±1%)",
                                                        "留出文本上的困惑度（纵轴范围：float32 ±1%）")),
                           (axes[1], "largest_logit_difference", text("largest logit difference from float32",
                                                                      "与 float32 的最大 logit 差"))):
        values = [results["quality"][f][key] for f in shown_formats]
        for fmt, x, y in zip(shown_formats, mb.values(), values):
            ax.scatter(x, y, s=60, color=COLOURS[fmt], zorder=3)
        if key == "perplexity":
            ax.axhline(results["quality"]["float32"][key], color="grey", linestyle="--", linewidth=1)
            ax.set_ylim(0.99 * values[0], 1.01 * values[0])  # float32's ±1%: a 0.2% difference looks as small as it is
        label_points(ax, list(zip(mb.values(), values)), shown_formats)
        ax.set_xscale("log")
        ax.set_xticks([100, 150, 200, 300, 500], minor=False)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.0f}"))  # 100, 150, ... MB, not 10²
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
        ax.set(xlabel=text("MB a decode step reads (weights and cache, batch 1)", "一步解码读取的 MB（权重和缓存，批大小 1）"),
               ylabel=label)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(text(f"Bytes against quality, {results['environment']['cpu']} ({machine_name(results)})",
                      f"字节数与质量，{results['environment']['cpu']}（{machine_name(results, 'zh')}）"), fontsize=9)
    return fig


@reads("SAVED_MODEL", "timings", "format", "roofs", "format_roofs", "environment")
def point_summary(results: dict, fmt: str, batch: int) -> str:
    """What the circled point says: ms per step, tokens per second, its intensity, and how far below its roof it sits
    (bfloat16 and int8 under their own flat roof where the bench measured one, the rest under float32's)."""
    row = model_timing(results, fmt, batch)
    point = roofline_point(row)
    own = results["format_roofs"].get(fmt) if fmt in ("bfloat16", "int8") else None  # its dashed flat roof
    roofs = {**model_roofs(results), **({"matmul_gflop_s": own} if own else {})}
    share = point["gflop_s"] / _roof_at(point["intensity"], roofs)
    read = point["gflop_s"] / (results["roofs"]["bandwidth_gb_s"] * point["intensity"])  # its bytes' share of the bandwidth roof
    roof_en, roof_zh = (f"{fmt}'s own flat roof", f"{fmt} 自身算力屋顶") if own else ("the float32 matmul roof", "float32 算力屋顶")
    head = text(f"{fmt}, batch {batch}: {row['ms']:.1f} ms per step, {1e3 * batch / row['ms']:.0f} tokens/s, "
                f"{point['intensity']:.2f} FLOPs per byte; ",
                f"{fmt}，批大小 {batch}：每步 {row['ms']:.1f} 毫秒，每秒 {1e3 * batch / row['ms']:.0f} 个词元，"
                f"每字节 {point['intensity']:.2f} 次浮点运算；")
    if read >= share:  # the bandwidth roof is the lower one at this intensity
        return head + text(f"{read:.0%} of the bandwidth roof, the lower roof here",
                           f"达到带宽屋顶的 {read:.0%}（在这个算术强度上，它是较低的那道屋顶）")
    return head + text(f"{share:.0%} of {roof_en}, the lower roof here ({read:.0%} of the bandwidth roof)",
                       f"达到 {roof_zh}的 {share:.0%}（在这个算术强度上，它是较低的那道屋顶；按带宽屋顶算是 {read:.0%}）")


@reads("SAVED_MODEL", "timings", "format", "roofs", "environment")
def show_roofline(results: dict, second: dict | None = None) -> None:
    """A weight-format menu and a batch-size slider that circle one measured decode point on the roofline; with a
    second machine's results (load_saved(SAVED_MODEL_BF16)), a machine menu too."""
    runs = {text(machine_name(results), machine_name(results, "zh")): results}
    if second is not None:
        second = second_run(second)
        runs[text(machine_name(second), machine_name(second, "zh"))] = second
    batches = sorted({r["batch"] for r in results["timings"] if r["format"] == "float32" and r["phase"] == "decode"})
    formats = [f for f in (*FORMATS, "q4") if all(any(r["format"] == f for r in run["timings"]) for run in runs.values())]

    def draw(fmt: str, batch: int, machine: str) -> Figure:
        fig = draw_roofline(runs[machine], (fmt, batch))
        fig.suptitle(point_summary(runs[machine], fmt, batch), fontsize=9)
        return fig

    machines = widgets.Dropdown(options=list(runs), value=next(iter(runs)), description=text("machine", "机器"),
                                layout=widgets.Layout(width="24em"), disabled=len(runs) == 1)
    explore(
        draw,
        fmt=widgets.Dropdown(options=formats, value="float32", description=text("format", "权重格式")),
        batch=widgets.SelectionSlider(options=batches, value=batches[0], description=text("batch", "批大小")),
        machine=machines,
    )

