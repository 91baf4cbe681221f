"""The real model's decode benchmark: run it (or reload it), save figures/bench_model.json, write the README section."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ...language import LANGUAGES
from ...results import (
    ROOT, SAVED_ATTENTION_GROWTH, SAVED_MODEL, SAVED_MODEL_BF16, SAVED_QUALITY_SPLIT, SHOWN_ZH, TRANSFORMERS, load_saved, machine_name, model_batch_table,
    model_format_table, model_machines_table, model_roofs, model_rows, model_timing, model_verdict_lines,
)
from .harness import environment, run_in_child
from .model_decode import ModelWorkload, measure_model
from .model_formats import attention_growth, quality_split, require_bf16_cpu
from .report import save_json, update_readme


def run_model_decode(workload: ModelWorkload, threads: int, out: Path, quick: bool, replot: bool = False,
                     bf16_cpu: bool = False) -> dict:
    """Measure in one fresh process (or, with replot, load the saved results); save the JSON and, unless quick, the README.

    A quick run writes only out/model.json; a full run saves figures/bench_model.json, which lessons 13 and 14 read.
    With bf16_cpu (only on a CPU with bfloat16 instructions) it saves figures/bench_model_bf16_cpu.json instead, the
    second machine lesson 14 reads beside the first, and draws no figure.
    """
    if bf16_cpu:
        require_bf16_cpu("figures/bench_model.json")
    saved = SAVED_MODEL_BF16 if bf16_cpu else SAVED_MODEL
    if replot:
        results = load_saved(saved)
    else:
        results = {"environment": environment(threads), "workload": asdict(workload), **run_in_child(measure_model, workload, threads)}
    folder = out if quick else ROOT / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    save_json(results, out / "model.json" if quick else saved)
    if "timings" in results and not bf16_cpu:
        for language in LANGUAGES:
            plot_roofline(results, folder, language)
    if not quick:
        update_readme(model_markdown(load_saved(SAVED_MODEL)), name="model")
    return results


def run_attention_growth(workload: ModelWorkload, threads: int, out: Path, quick: bool) -> dict:
    """SDPA's own time a step at each of lesson 13's lengths, in a fresh process; save figures/bench_attention_growth.json
    (a quick run: out/attention_growth.json only)."""
    results = {"environment": environment(threads), "attention_by_length": run_in_child(attention_growth, workload, threads)}
    out.mkdir(parents=True, exist_ok=True)
    save_json(results, out / "attention_growth.json" if quick else SAVED_ATTENTION_GROWTH)
    return results


def run_quality_split(workload: ModelWorkload, threads: int, out: Path, quick: bool) -> dict:
    """Measure int8 weights with float32 arithmetic against float32 in a fresh process; save figures/bench_quality_split.json
    (a quick run: out/quality_split.json only)."""
    results = {"environment": environment(threads), "quality": run_in_child(quality_split, workload.new_tokens, threads)}
    out.mkdir(parents=True, exist_ok=True)
    save_json(results, out / "quality_split.json" if quick else SAVED_QUALITY_SPLIT)
    return results


def plot_roofline(results: dict, folder: Path, language: str) -> Path:
    """Lesson 14's roofline figure (the explorer's drawing, nothing circled) saved as bench_model_<language>.png."""
    import matplotlib.pyplot as plt

    from ...explorers.lesson14 import draw_roofline
    from ...plotting.fonts import set_language

    set_language(language)
    figure = draw_roofline(results)
    path = folder / f"bench_model_{language}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def model_markdown(results: dict) -> str:
    """The README section in both languages: the set-up, then one table row per (weights, batch, prompt length)."""
    if "error" in results:
        english = f"The real model was not measured: {results['error']}"
        chinese = f"没有测量真实模型：{results['error']}"
        return f"{english}\n\n{chinese}"
    env, work, model = results["environment"], results["workload"], results["model"]
    weights_mb = results["rows"][0]["weight_bytes"] / 1e6
    lines = [
        f"Written by `make bench` on {env['date']}: {env['cpu']}, {env['threads']} threads, torch {env['torch']}. "
        f"{model['name']}, {model['num_layers']} blocks, loaded as lesson 13 loads it; its weights take "
        f"{weights_mb:.0f} MB. In one process, {work['calls']} rounds in alternating order, each timing at every "
        "prompt length T a prefill of the T prompt tokens into an empty cache and one decode step of one new token "
        "against a cache holding T tokens. Times are medians in ms.",
        "",
        f"由 `make bench` 于 {env['date']} 生成：{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}。"
        f"模型是 {model['name']}，{model['num_layers']} 个 Transformer 模块，加载方式与第 13 课相同；权重共 "
        f"{weights_mb:.0f} MB。在同一个进程里交替进行 {work['calls']} 轮计时，每一轮对每个提示词长度 T 都计时两件事："
        "把 T 个提示词词元预填充进一个空缓存，以及在已有 T 个词元的缓存上解码一个新词元。表中是耗时的中位数（毫秒）。",
        "",
        "| weights / 权重格式 | batch / 批大小 | T | prefill / 预填充 (ms) | decode step / 一步解码 (ms) | "
        "prefill ÷ step / 预填充 ÷ 一步 | cache / 缓存 (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in sorted(results["rows"], key=lambda r: (r["weights"], r["batch"], r["length"])):
        lines.append(f"| {row['weights']} | {row['batch']} | {row['length']} | {row['prefill_ms']:.0f} | "
                     f"{row['decode_ms']:.1f} | {row['prefill_over_decode']:.1f}× | {row['cache_bytes'] / 2**20:.2f} |")
    longest = max(model_rows(results))
    row = model_rows(results)[longest]
    lines += [
        "",
        f"At T = {longest} a pass over {longest} tokens costs {row['prefill_over_decode']:.1f}× one decode step, not "
        f"{longest}×: a step reads every weight once ({weights_mb:.0f} MB) plus the cache "
        f"({row['cache_bytes'] / 2**20:.1f} MiB), and does little arithmetic per byte it reads.",
        "",
        f"在 T = {longest} 时，把 {longest} 个词元算一遍的耗时是一步解码的 {row['prefill_over_decode']:.1f} 倍，而不是 "
        f"{longest} 倍：一步解码要把每个权重读一遍（{weights_mb:.0f} MB），再加上缓存（{row['cache_bytes'] / 2**20:.1f} MiB），"
        "而每读一个字节只做很少的运算。",
    ]
    return "\n".join(lines + formats_markdown(results) + second_machine_markdown(results))


def formats_markdown(results: dict) -> list[str]:
    """Lesson 14's part: formats at batch 1, batches, issue 25's targets, the roofline figure; both languages."""
    if "timings" not in results:
        return []
    roofs, length = model_roofs(results), results["workload"]["format_length"]  # float32's roof beside the other formats'
    load = ", ".join(f"{x:.1f}" for x in results["load_average"])
    return [
        "", f"Lesson 14's part of the same process, at a prompt of {length} tokens (load average {load}). Roofs: a read of "
        f"{roofs['read_bytes'] / 2**20:.0f} MiB at {roofs['bandwidth_gb_s']:.1f} GB/s; a {roofs['matmul_n']}×{roofs['matmul_n']} "
        f"float32 F.linear at {roofs['matmul_gflop_s']:.0f} GFLOP/s. Agreement with float32 over {HELD} held-out prompts; perplexity on lesson 15's held-out text (every prediction).", "",
        f"第 14 课的部分，同一进程，提示词 {length} 个词元（负载 {load}）。两道屋顶：读取 {roofs['read_bytes'] / 2**20:.0f} MiB 为 "
        f"{roofs['bandwidth_gb_s']:.1f} GB/s；{roofs['matmul_n']}×{roofs['matmul_n']} 的 float32 F.linear 为 "
        f"{roofs['matmul_gflop_s']:.0f} GFLOP/s。一致率是与 float32 在 {HELD} 个留出提示词上比较的结果；困惑度在第 15 课的留出文本上计算（所有预测）。", "",
        "```", model_format_table(results), "", model_batch_table(results), "```", "",
        "The package's targets, checked against this run (lesson 14 prints the measured ratios without them and explains "
        "each; with a fixed cost t0 > 0 halving the bytes gives less than 2×):", "",
        *[f"- {line}" for line in model_verdict_lines(results) + q4_lines(results) + left_lines(results)], "",
        "辅助包的各项目标与这次运行的核对（第 14 课只打印实测的比值，不列目标，并逐一解释；固定开销 t0 > 0 时，字节数减半带来的加速"
        "不到 2 倍）：", "",
        *[f"- {line}" for line in model_verdict_lines(results, "zh") + q4_lines(results, "zh") + left_lines(results, "zh")], "",
        "![Lesson 14: the roofline of the bench machine with the measured decode and prefill points](figures/bench_model_en.png)",
        "", "![第 14 课：基准测试机器的屋顶线图与实测的解码、预填充各点](figures/bench_model_zh.png)",
    ]


HELD = 8


def second_machine_markdown(results: dict) -> list[str]:
    """The same bench on a CPU with bfloat16 instructions (figures/bench_model_bf16_cpu.json), beside this run, when saved."""
    if not SAVED_MODEL_BF16.is_file() or "timings" not in results:
        return []
    second = load_saved(SAVED_MODEL_BF16)
    env, load = second["environment"], ", ".join(f"{x:.1f}" for x in second["load_average"])
    return [
        "", f"The same bench on a second machine kind, {env['date']}: {env['cpu']}, {env['threads']} threads, "
        f"{machine_name(second)} (`make bench BENCH_ARGS=\"--model --bf16-cpu\"`, saved in "
        f"`figures/bench_model_bf16_cpu.json`; load average {load}). Lesson 14 reads it beside the run above.", "",
        f"同一个基准测试在第二种机器上的结果，{env['date']}：{env['cpu']}，{env['threads']} 个线程，{machine_name(second, 'zh')}"
        f"（`make bench BENCH_ARGS=\"--model --bf16-cpu\"`，保存在 `figures/bench_model_bf16_cpu.json`；负载 {load}）。"
        "第 14 课把它和上面那次放在一起读。", "",
        "```", model_machines_table(results, second), "", model_format_table(second), "", model_batch_table(second), "```", "",
        "The targets against the second machine's run:", "",
        *[f"- {line}" for line in model_verdict_lines(second) + q4_lines(second) + left_lines(second)], "",
        "第二种机器上这次运行与各项目标的核对：", "",
        *[f"- {line}" for line in model_verdict_lines(second, "zh") + q4_lines(second, "zh") + left_lines(second, "zh")],
    ]


def q4_lines(results: dict, language: str = "en") -> list[str]:
    """Issue 48's targets: q4 against float32 (with the kernel path the CPU allowed) and against llama.cpp when measured."""
    if not any(r["format"] == "q4" for r in results["timings"]):
        return []
    q4, base = model_timing(results, "q4")["ms"], model_timing(results, "float32")["ms"]
    kernel, speed = results.get("kernel", {}), base / q4
    has_bf16 = kernel.get("avx512_bf16") or kernel.get("amx_bf16")
    mark = "✅" if speed >= Q4_TARGETS["float32"] else "❌"
    en = [f"{mark} q4 (the file's 4-bit blocks) decodes {speed:.2f}× as fast as float32 at batch 1 (target ≥ 3×); torch's "
          f"CPU kernels: {kernel.get('cpu_capability', '?')}, {'with' if has_bf16 else 'without'} bfloat16 instructions"]
    zh = [f"{mark} q4（文件自带的 4 位块）在批大小 1 时解码速度是 float32 的 {speed:.2f} 倍（目标 ≥ 3）；torch 的 CPU "
          f"内核：{kernel.get('cpu_capability', '?')}，{'有' if has_bf16 else '没有'} bfloat16 指令"]
    if any(r["format"] == "llama.cpp" for r in results["timings"]):
        other = model_timing(results, "llama.cpp")["ms"]
        mark = "✅" if q4 / other <= Q4_TARGETS["llama.cpp"] else "❌"
        en.append(f"{mark} llama.cpp on the same file: {other:.1f} ms per token; q4's step takes {q4 / other:.2f}× as "
                  "long (target ≤ 1.5×)")
        zh.append(f"{mark} llama.cpp 读同一个文件：每个词元 {other:.1f} 毫秒；q4 一步用时是它的 {q4 / other:.2f} 倍（目标 ≤ 1.5）")
    else:
        en.append("llama.cpp was not measured: llama-cpp-python is not installed (optional, see the install notes above)")
        zh.append("没有测量 llama.cpp：没有安装 llama-cpp-python（可选，安装方法见上文）")
    found_en, found_zh = compiled_lines(results)
    floor_en, floor_zh = q4_floor_lines(results)
    return (zh + found_zh + floor_zh) if language == "zh" else (en + found_en + floor_en)


def q4_floor_lines(results: dict) -> tuple[list[str], list[str]]:
    """Issue 48's lean step: what a q4 step spends beyond its products alone (the int4 kernels and the output layer)."""
    ms = {r["format"]: r["ms"] for r in results["timings"] if r["batch"] == 1 and r["phase"] == "decode"}
    if "matmul floor q4" not in ms:
        return [], []
    floor = ms["matmul floor q4"]
    steps = [(name, ms[name] - floor) for name in ("q4", "q4 compiled") if name in ms]
    marks = ["✅" if rest <= floor else "❌" for _, rest in steps]
    en = [f"{mark} {name}: {floor + rest:.1f} ms, of which its products alone take {floor:.1f} and the rest {rest:.1f} "
          "(target: the rest no larger than the products)" for mark, (name, rest) in zip(marks, steps)]
    zh = [f"{mark} {SHOWN_ZH.get(name, name)}：{floor + rest:.1f} 毫秒，其中只算矩阵乘法 {floor:.1f} 毫秒，其余 {rest:.1f} 毫秒"
          "（目标：其余部分不超过矩阵乘法）" for mark, (name, rest) in zip(marks, steps)]
    return en, zh


def compiled_lines(results: dict) -> tuple[list[str], list[str]]:
    """The steps compiled by torch.compile (when the bench could compile them) against the floor, float32 and llama.cpp."""
    ms = {r["format"]: r["ms"] for r in results["timings"] if r["batch"] == 1 and r["phase"] == "decode"}
    en, zh = [], []
    if "float32 compiled" in ms:
        floor = ms["matmul floor"] / ms["float32 compiled"]
        mark = "✅" if floor >= 0.9 else "❌"
        en.append(f"{mark} float32 compiled (torch.compile): {ms['float32 compiled']:.1f} ms, {against(floor, 0.9)} of the "
                  f"matmul floor's speed (issue 41's target ≥ 0.9; eager: {ms['matmul floor'] / ms['float32']:.2f})")
        zh.append(f"{mark} float32 编译后（torch.compile）：{ms['float32 compiled']:.1f} 毫秒，速度是矩阵乘法下限的 {against(floor, 0.9)} 倍"
                  f"（第 41 号议题的目标 ≥ 0.9；不编译时 {ms['matmul floor'] / ms['float32']:.2f}）")
    if "q4 compiled" in ms:
        q4 = ms["q4 compiled"]
        base = ms.get("float32 compiled", ms["float32"])
        which = "float32 compiled" if "float32 compiled" in ms else "float32"
        mark = "✅" if base / q4 >= Q4_TARGETS["float32"] else "❌"
        en.append(f"{mark} q4 compiled: {q4:.1f} ms, {base / q4:.2f}× as fast as {which} (target ≥ 3×)")
        zh.append(f"{mark} q4 编译后：{q4:.1f} 毫秒，速度是 {which.replace(' compiled', '（编译后）')} 的 {base / q4:.2f} 倍（目标 ≥ 3）")
        if "llama.cpp" in ms:
            mark = "✅" if q4 / ms["llama.cpp"] <= Q4_TARGETS["llama.cpp"] else "❌"
            en.append(f"{mark} q4 compiled takes {q4 / ms['llama.cpp']:.2f}× as long as llama.cpp (target ≤ 1.5×)")
            zh.append(f"{mark} q4 编译后一步用时是 llama.cpp 的 {q4 / ms['llama.cpp']:.2f} 倍（目标 ≤ 1.5）")
    return en, zh


def left_lines(results: dict, language: str = "en") -> list[str]:
    """float32 with its products written weights-left (W @ x.T): its step and floor against nn.Linear's, its reading
    speed against the read roof, and q4 against it (issue 41's floor and issue 48's 3x read against the faster float32)."""
    ms = {r["format"]: r["ms"] for r in results["timings"] if r["batch"] == 1 and r["phase"] == "decode"}
    if "float32 weights-left" not in ms:
        return []
    left, floor_left = ms["float32 weights-left"], ms["matmul floor weights-left"]
    rate = model_timing(results, "float32 weights-left")["weight_bytes"] / left / 1e6  # GB/s over the whole step
    roof, q4 = results["roofs"]["bandwidth_gb_s"], ms.get("q4 compiled", ms.get("q4"))
    q4_name = "q4 compiled" if "q4 compiled" in ms else "q4"
    mark = "✅" if floor_left / left >= 0.9 else "❌"
    en = [f"float32 weights-left (W @ x.T): {left:.1f} ms against nn.Linear's {ms['float32']:.1f} ({ms['float32'] / left:.2f}×); "
          f"its products alone {floor_left:.1f} ms against {ms['matmul floor']:.1f}; the whole step reads the weights at "
          f"{rate:.1f} GB/s (read roof {roof:.1f})",
          f"{mark} float32 weights-left at {against(floor_left / left, 0.9)} of its own matmul floor's speed "
          "(issue 41's target ≥ 0.9)"]
    zh = [f"float32 权重在左（W @ x.T）：{left:.1f} 毫秒，nn.Linear 的写法是 {ms['float32']:.1f}（速度是它的 {ms['float32'] / left:.2f} 倍）；"
          f"只算矩阵乘法 {floor_left:.1f} 毫秒，nn.Linear 是 {ms['matmul floor']:.1f}；整步读权重的速度是 {rate:.1f} GB/s"
          f"（读取屋顶 {roof:.1f}）",
          f"{mark} float32 权重在左时，速度是它自己的矩阵乘法下限的 {against(floor_left / left, 0.9)} 倍（第 41 号议题的目标 ≥ 0.9）"]
    if "float32 weights-left compiled" in ms:
        compiled = ms["float32 weights-left compiled"]
        mark = "✅" if floor_left / compiled >= 0.9 else "❌"
        en.append(f"{mark} float32 weights-left compiled: {compiled:.1f} ms, {against(floor_left / compiled, 0.9)} of its own "
                  "matmul floor's speed (issue 41's target ≥ 0.9)")
        zh.append(f"{mark} float32 权重在左并编译：{compiled:.1f} 毫秒，速度是它自己的矩阵乘法下限的 {against(floor_left / compiled, 0.9)} 倍"
                  "（第 41 号议题的目标 ≥ 0.9）")
        if TRANSFORMERS in ms:
            mark = "✅" if ms[TRANSFORMERS] / compiled >= 1.1 else "❌"
            en.append(f"{mark} float32 weights-left compiled: {ms[TRANSFORMERS] / compiled:.2f}× transformers' speed on the "
                      "same file (issue 41's target ≥ 1.1×)")
            zh.append(f"{mark} float32 权重在左并编译：速度是 transformers（同一个文件）的 {ms[TRANSFORMERS] / compiled:.2f} 倍"
                      "（第 41 号议题的目标 ≥ 1.1）")
    base = "float32 weights-left compiled" if "float32 weights-left compiled" in ms else "float32 weights-left"
    if q4 is not None:  # read against the faster float32 step
        mark = "✅" if ms[base] / q4 >= Q4_TARGETS["float32"] else "❌"
        en.append(f"{mark} {q4_name} against {base}: {ms[base] / q4:.2f}× as fast (target ≥ 3×)")
        q4_zh = SHOWN_ZH.get(q4_name, q4_name + " ")  # "q4（编译后）" closes with a full-width bracket; plain "q4" needs a space
        zh.append(f"{mark} {q4_zh}与 {SHOWN_ZH[base]}相比：速度是它的 {ms[base] / q4:.2f} 倍（目标 ≥ 3）")
    return zh if language == "zh" else en


def against(value: float, target: float) -> str:
    """A ratio to two decimals, or as many more (up to four) as it takes not to round across its target (0.8996: not 0.90)."""
    for places in range(2, 5):
        shown = f"{value:.{places}f}"
        if (float(shown) >= target) == (value >= target):
            break
    return shown


Q4_TARGETS = {"float32": 3.0, "llama.cpp": 1.5}  # issue 48: q4's speed over float32, its time over llama.cpp's
