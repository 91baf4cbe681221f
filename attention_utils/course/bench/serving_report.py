"""The serving bench's README table and figure, in both languages (lesson 17)."""

from __future__ import annotations

from pathlib import Path

NAMES = {"one": ("one at a time", "逐个处理"), "static": ("static batches", "静态批处理"),
         "continuous": ("continuous batching", "连续批处理")}


def serving_markdown(results: dict) -> str:
    """The README section: how it was measured, the three policies, and the page budget in float32 and int8."""
    env, work = results["environment"], results["workload"]
    load = [f"{x:.1f}" for x in results.get("load_average", [])]
    load_en, load_zh = ", ".join(load) or "not recorded", "、".join(load) or "未记录"
    lines = [
        f"Written by `python -m attention_utils.course.bench --serving` on {env['date']}: {env['cpu']}, {env['threads']} "
        f"threads, torch {env['torch']}. SmolLM2-135M in float32 serves {work['requests']} seeded requests (prompts of "
        f"{work['prompt_lengths'][0]}-{work['prompt_lengths'][1]} tokens, {work['new_tokens'][0]}-{work['new_tokens'][1]} "
        f"new tokens, arriving over {work['last_arrival']} steps) with at most {work['max_batch']} sequences a step. "
        f"Load average at the end of the run: {load_en}.",
        "",
        f"由 `python -m attention_utils.course.bench --serving` 于 {env['date']} 生成：{env['cpu']}，{env['threads']} 个线程，"
        f"torch {env['torch']}。SmolLM2-135M（float32）处理 {work['requests']} 个按种子生成的请求（提示词 "
        f"{work['prompt_lengths'][0]}-{work['prompt_lengths'][1]} 个词元，生成 {work['new_tokens'][0]}-{work['new_tokens'][1]} "
        f"个词元，在 {work['last_arrival']} 步之内陆续到达），每步最多 {work['max_batch']} 个序列。运行结束时的平均负载：{load_zh}。",
        "",
        "| policy / 策略 | tokens/s / 每秒词元数 | TTFT p50 (s) | TTFT p95 (s) | TPOT p50 (ms) | steps / 步数 |",
        "|---|---|---|---|---|---|",
    ]
    for policy, (en, zh) in NAMES.items():
        row = results["policies"][policy]
        lines.append(f"| {en} / {zh} | {row['tokens_per_s']:.1f} | {row['ttft_p50']:.2f} | {row['ttft_p95']:.2f} | "
                     f"{1000 * row['tpot_p50']:.0f} | {row['steps']} |")
    lines += ["", "| budget (MiB) / 预算 | cache / 缓存 | pages / 页数 | most sequences / 最多同时运行 | tokens/s / 每秒词元数 |"
              " preemptions / 抢占次数 |", "|---|---|---|---|---|---|"]
    for row in results["budget"]:
        mib = row["budget_pages"] * results["page_bytes"]["float32"] / 2**20
        lines.append(f"| {mib:.1f} | {row['kind']} | {row['pages']} | {row['most_running']} | {row['tokens_per_s']:.1f} | "
                     f"{row['preemptions']} |")
    lines += ["", *(("✅ " if item["passed"] else "❌ ") + item["target"] for item in results.get("checks", []))]
    return "\n".join([*lines, "", "![Serving a stream of requests](figures/bench_serving_en.png)", "",
                      "![处理一串请求](figures/bench_serving_zh.png)"])


def plot_serving(results: dict, folder: Path, language: str) -> Path:
    """Three panels: sequences per step (static and continuous), tokens/s per policy, tokens/s against the budget."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ...language import text
    from ...plotting.fonts import set_language

    set_language(language)
    zh = language == "zh"
    figure = Figure(figsize=(14, 4.4), layout="constrained")
    FigureCanvasAgg(figure)
    timeline, bars, budget = figure.subplots(1, 3)
    for index, policy in enumerate(("static", "continuous")):
        running = results["policies"][policy]["running_per_step"]
        timeline.step(range(len(running)), running, where="post", color=f"C{index + 1}", label=NAMES[policy][zh])
    timeline.set(title=text("sequences in each step", "每一步里的序列数"), xlabel=text("step", "步"))
    timeline.legend(fontsize=8)
    rates = [results["policies"][policy]["tokens_per_s"] for policy in NAMES]
    bars.bar([NAMES[policy][zh] for policy in NAMES], rates, color=["C0", "C1", "C2"])
    bars.set(title=text("output tokens per second", "每秒输出的词元数"))
    mib = results["page_bytes"]["float32"] / 2**20
    for index, kind in enumerate(("float32", "int8")):
        rows = [row for row in results["budget"] if row["kind"] == kind]
        budget.plot([row["budget_pages"] * mib for row in rows], [row["tokens_per_s"] for row in rows], "o-",
                    color=f"C{index + 3}", label=kind)
        for row in rows:
            budget.annotate(str(row["most_running"]), (row["budget_pages"] * mib, row["tokens_per_s"]),
                            textcoords="offset points", xytext=(4, 4), fontsize=8)
    budget.set(title=text("tokens per second against the cache budget\n(numbers: most sequences at once)",
                          "每秒词元数与缓存预算\n（数字：同时运行的最多序列数）"),
               xlabel=text("cache budget (MiB)", "缓存预算（MiB）"))
    budget.legend(fontsize=8)
    env = results["environment"]
    figure.suptitle(text(f"SmolLM2-135M serving one seeded stream; {env['cpu']}, {env['threads']} threads",
                         f"SmolLM2-135M 处理同一串按种子生成的请求；{env['cpu']}，{env['threads']} 个线程"))
    path = folder / f"bench_serving_{language}.png"
    figure.savefig(path, dpi=110)
    return path
