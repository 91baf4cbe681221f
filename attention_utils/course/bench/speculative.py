"""Lesson 18's part of the bench: speculative decoding on SmolLM2, its cost of checking and its speed-up per draft.

In one fresh process, SmolLM2 in float32 at batch 1: the two roofs of lesson 14; one pass over k + 1 new
tokens after a prompt, k = 0..8, timed in alternating order (medians); one decode step of each draft
against one of the model (its cost d in decode steps); then greedy decoding of a fixed set of prompts,
plain and speculative with each draft and k, each run timed whole (prefill included). Every speculative run's
tokens are compared with plain decoding's; the predicted speed-up uses the measured alpha, c(k) and d only.
All of it once more with the model's products written weights-left (inference/row_products.py), for the
model that checks and for plain decoding alike (the int8, bfloat16 and q4 drafts unchanged, the early exit taken
from the weights-left model): the kernel torch picks for one row and for a few rows changes c(k) and d, and
this part shows how much of the speed-up that decides. The full run adds the q4 draft with its step compiled
(models/compiled_decode.py), lesson 14's leanest decode step, when torch.compile can build CPU kernels.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ...inference.flex_window import can_compile
from ...inference.generation import generate
from ...inference.kv_cache import KVCache
from ...inference.row_products import weights_left
from ...inference.speculative import ModelDraft, PromptLookup, early_exit, speculative_greedy
from ...inference.speculative_cost import expected_tokens, roofline_pass_cost, verification_cost
from ...inference.weight_formats import to_format, weight_bytes
from ...explorers.lesson18 import plot_costs, plot_speedups
from ...models.compiled_decode import CompiledDecoder, CompiledDraft
from ...models.q4_weights import to_q4
from ...language import LANGUAGES
from ...results import ROOT, SAVED_SPECULATIVE, SAVED_SPECULATIVE_BF16, load_saved, machine_name
from .harness import environment, run_in_child
from .model_formats import alternate, kernel_path, require_bf16_cpu, roofs
from .report import save_json, update_readme

DRAFTS = ("prompt lookup", "int8", "bfloat16", "q4", "q4 compiled", "early exit")
NAMES = {"prompt lookup": ("prompt lookup", "提示查找"), "int8": ("the model in int8", "int8 的同一模型"),
         "bfloat16": ("the model in bfloat16", "bfloat16 的同一模型"),
         "q4": ("the model in q4 (its file's 4-bit blocks)", "q4 的同一模型（文件自带的 4 位块）"),
         "q4 compiled": ("the model in q4, its step compiled", "解码步编译后的 q4 模型"), "early exit": ("early exit", "提前退出")}
TABLE_HEAD = ["| draft / 草稿 | k | alpha | tokens per pass / 每次前向的词元 | d | speed-up / 加速比 | predicted / 预测 | "
              "same tokens / 输出相同 |", "|---|---|---|---|---|---|---|---|"]
PROMPTS = ("Monday, Tuesday, Wednesday, Thursday,", "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n",
           "The cat sat on the mat. The dog sat on the", "Once upon a time, there was a little")


@dataclass(frozen=True)
class SpeculativeWorkload:
    """What the part runs: prompts, new tokens, the ks tried, the early exit's layers, and the timing rounds."""

    prompts: tuple[str, ...]
    new_tokens: int
    ks: tuple[int, ...]
    most: int  # the verification cost is timed for k = 0..most
    exit_layers: int
    calls: int
    read_mib: int
    matmul_n: int
    compiled_draft: bool = False  # the q4 draft's step also compiled: a minute or two to compile, so only the full run


SPECULATIVE_FULL = SpeculativeWorkload(PROMPTS, new_tokens=32, ks=(2, 4, 8), most=8, exit_layers=8, calls=5,
                                       read_mib=256, matmul_n=1024, compiled_draft=True)
SPECULATIVE_QUICK = SpeculativeWorkload(PROMPTS[:1], new_tokens=8, ks=(2,), most=2, exit_layers=8, calls=2,
                                        read_mib=16, matmul_n=256)


def draft_models(model: torch.nn.Module, layers: int, compiled_tokens: int | None = None) -> dict[str, object]:
    """The model drafts: the model in int8, bfloat16 and q4 (lesson 14's formats; q4 reads the file's own 4-bit blocks,
    the very weights the float32 model was read from), its first `layers` blocks, and, given `compiled_tokens` where
    torch.compile can build CPU kernels, q4's step compiled over a cache of that many tokens (lesson 14's CompiledDecoder)."""
    models = {"int8": to_format(model, "int8"), "bfloat16": to_format(model, "bfloat16"), "q4": to_q4(model),
              "early exit": early_exit(model, layers)}
    if compiled_tokens and can_compile():
        models["q4 compiled"] = CompiledDecoder(models["q4"], compiled_tokens)
    return models


def make_draft(name: str, models: dict[str, torch.nn.Module]) -> object:
    """A fresh draft of this kind for one run (a model draft carries a cache of the run's text)."""
    if name == "prompt lookup":
        return PromptLookup(3)
    if isinstance(models[name], CompiledDecoder):
        return CompiledDraft(models[name])
    return ModelDraft(models[name], KVCache(models[name].config.num_layers))


def seconds(call) -> tuple[float, object]:
    began = time.perf_counter()
    found = call()
    return time.perf_counter() - began, found


def measure_speculative(workload: SpeculativeWorkload, threads: int) -> dict:
    """Load SmolLM2 and measure the costs and every (draft, k) run in this process, or say why it could not."""
    from ...models.llama import load_smollm2

    torch.set_num_threads(threads)
    try:
        model, tokenizer = load_smollm2()
    except (FileNotFoundError, ImportError, ValueError) as error:
        return {"error": f"the model could not be loaded: {error}"}
    c = model.config
    found = {"roofs": roofs(workload.read_mib, workload.matmul_n)}
    with torch.inference_mode():
        prompts = [torch.tensor([tokenizer.encode(p)]) for p in workload.prompts]
        context = prompts[0].shape[1]
        found["verification_ms"] = {str(k): ms for k, ms in verification_cost(model, prompts[0], workload.most, workload.calls).items()}
        bandwidth, flops = found["roofs"]["bandwidth_gb_s"] * 1e9, found["roofs"]["matmul_gflop_s"] * 1e9
        found["roofline_cost"] = {str(k): roofline_pass_cost(c, k, context, bandwidth, flops) for k in range(workload.most + 1)}
        longest = max(p.shape[1] for p in prompts) + workload.new_tokens + max(workload.ks) + 1
        models = draft_models(model, workload.exit_layers, longest if workload.compiled_draft else None)
        if "q4 compiled" in models:
            try:
                found["compile_seconds"] = seconds(lambda: compile_both(models["q4 compiled"], prompts[0]))[0]
            except RuntimeError as error:  # torch.compile could not build it: the draft is left out, the reason saved
                del models["q4 compiled"]
                found["compiled_draft_left_out"] = str(error).splitlines()[0]
        elif workload.compiled_draft:
            found["compiled_draft_left_out"] = "torch.compile cannot build CPU kernels here (no C++ compiler, or ATEN_CPU_CAPABILITY=default)"
        found["draft_step_ms"] = draft_steps({"model": model, **models}, prompts[0], workload.calls)
        found["weight_bytes"] = {name: weight_bytes(getattr(m, "model", m)) for name, m in {"model": model, **models}.items()}
        found["runs"] = runs(model, models, prompts, workload)
        left = weights_left(model)
        left_drafts = {**models, "early exit": early_exit(left, workload.exit_layers)}  # its first layers, weights-left too
        found["weights_left"] = {
            "verification_ms": {str(k): ms for k, ms in verification_cost(left, prompts[0], workload.most, workload.calls).items()},
            "draft_step_ms": draft_steps({"model": left, **left_drafts}, prompts[0], workload.calls),
            "runs": runs(left, left_drafts, prompts, workload),
            "plain_tokens_equal_nn_linear": all(torch.equal(generate(left, p, workload.new_tokens, KVCache(c.num_layers)).tokens,
                                                            generate(model, p, workload.new_tokens, KVCache(c.num_layers)).tokens)
                                                for p in prompts)}
    found["context"], found["load_average"] = context, list(os.getloadavg())
    return found


def disturbed(results: dict, tolerance: float = 0.15) -> list[str]:
    """A warning for each part whose decode step, timed twice (the one-token pass of c(k), and d's denominator), disagrees
    by more than `tolerance`: the machine was busy during part of the run, and d and the predictions carry it."""
    lines = []
    for name, part in (("nn.Linear", results), ("weights-left", results.get("weights_left", {}))):
        if "verification_ms" in part and "draft_step_ms" in part:
            ratio = part["draft_step_ms"]["model"] / part["verification_ms"]["0"]
            if abs(ratio - 1) > tolerance:
                lines.append(f"warning: {name}: one decode step took {part['draft_step_ms']['model']:.1f} ms beside the drafts and "
                             f"{part['verification_ms']['0']:.1f} ms beside the passes ({ratio:.2f}x): the machine was busy; run again")
    return lines


def draft_steps(models: dict[str, torch.nn.Module], prompt: torch.Tensor, calls: int) -> dict[str, float]:
    """Median ms of one decode step of the model and of each model draft, in alternating order."""
    steps = {}
    for name, m in models.items():
        if isinstance(m, CompiledDecoder):
            steps[name] = compiled_draft_step(m, prompt)
            continue
        cache = KVCache(m.config.num_layers)
        m(prompt, cache=cache)
        start = cache.position

        def step(m=m, cache=cache, start=start) -> None:
            m(prompt[:, -1:], cache=cache)
            cache.truncate(start)
        steps[name] = step
    return alternate(steps, calls)


def compile_both(decoder: CompiledDecoder, prompt: torch.Tensor) -> None:
    """Compile a draft's step for one new token and for two (after a pass that kept every drafted token), before any timing."""
    for new in (1, 2):
        decoder.prefill(prompt[:, :-new])
        decoder.step(torch.tensor([prompt[0, -new:].tolist()]))  # made as CompiledDraft makes its tokens


def compiled_draft_step(decoder: CompiledDecoder, prompt: torch.Tensor) -> Callable[[], None]:
    """One step of a compiled draft after the prompt, rewound after each call so that every call is the same step."""
    decoder.prefill(prompt)
    token = torch.tensor([[int(prompt[0, -1])]])  # made as CompiledDraft makes its tokens: a view's strides would recompile

    def step() -> None:
        decoder.step(token)
        decoder.rewind(prompt.shape[1])
    return step


def runs(model: torch.nn.Module, models: dict[str, torch.nn.Module], prompts: list[torch.Tensor],
         workload: SpeculativeWorkload) -> list[dict]:
    """Plain greedy decoding of every prompt (timed before and after the rest), then every draft and k."""
    layers, rows = model.config.num_layers, []
    plain = {i: [] for i in range(len(prompts))}
    for i, prompt in enumerate(prompts):
        plain[i].append(seconds(lambda: generate(model, prompt, workload.new_tokens, KVCache(layers)))[0])
    reference = [generate(model, p, workload.new_tokens, KVCache(layers)).tokens for p in prompts]
    for name in [name for name in DRAFTS if name == "prompt lookup" or name in models]:  # no compiled draft in a quick run
        for k in workload.ks:
            for i, prompt in enumerate(prompts):
                draft = make_draft(name, models)
                took, run = seconds(lambda: speculative_greedy(model, prompt, workload.new_tokens, KVCache(layers), draft, k=k))
                rows.append({"draft": name, "k": k, "prompt": i, "seconds": took, "passes": run.passes,
                             "drafted": run.drafted, "accepted": run.accepted,
                             "refused": sum(1 for m, kept in run.history if kept < m),
                             "proposed": [m for m, _ in run.history], "same": torch.equal(run.tokens, reference[i])})
    for i, prompt in enumerate(prompts):
        plain[i].append(seconds(lambda: generate(model, prompt, workload.new_tokens, KVCache(layers)))[0])
    rows += [{"draft": "plain", "prompt": i, "seconds": statistics.median(times)} for i, times in plain.items()]
    return rows


def summary(results: dict) -> list[dict]:
    """One row per (draft, k) over all prompts: alpha, tokens per pass, measured and predicted speed-ups, same tokens.

    alpha is pooled: tokens kept over tokens checked (kept ones and each pass's first refusal). The prediction
    takes each pass's proposal length m: expected tokens (1 - alpha^(m+1)) / (1 - alpha) over c(m) + m d, with
    c and d measured (a pass and a draft step against a decode step), or with lesson 14's roofline and bytes.
    """
    plain = sum(r["seconds"] for r in results["runs"] if r["draft"] == "plain")
    measured = {int(k): ms / results["verification_ms"]["0"] for k, ms in results["verification_ms"].items()}
    roofline = {int(k): cost for k, cost in results["roofline_cost"].items()}
    steps, sizes = results["draft_step_ms"], results["weight_bytes"]
    rows = []
    for name in [name for name in DRAFTS if any(r["draft"] == name for r in results["runs"])]:  # a run saved before q4 has none
        for k in results["workload"]["ks"]:
            mine = [r for r in results["runs"] if r["draft"] == name and r.get("k") == k]
            accepted, passes = sum(r["accepted"] for r in mine), sum(r["passes"] for r in mine)
            alpha = accepted / max(accepted + sum(r["refused"] for r in mine), 1)
            proposed = [m for r in mine for m in r["proposed"]]
            tokens = sum(expected_tokens(alpha, m) for m in proposed)
            d = 0.0 if name == "prompt lookup" else steps[name] / steps["model"]
            d_bytes = 0.0 if name == "prompt lookup" else sizes[name] / sizes["model"]
            rows.append({"draft": name, "k": k, "alpha": alpha, "tokens_per_pass": (accepted + passes) / passes,
                         "expected_tokens_per_pass": tokens / len(proposed), "mean_proposed": statistics.mean(proposed),
                         "draft_cost": d, "speedup": plain / sum(r["seconds"] for r in mine),
                         "predicted": tokens / sum(measured[m] + m * d for m in proposed),
                         "predicted_roofline": tokens / sum(roofline[m] + m * d_bytes for m in proposed),
                         "same": all(r["same"] for r in mine)})
    return rows


def run_speculative(workload: SpeculativeWorkload, threads: int, out: Path, quick: bool, replot: bool = False,
                    bf16_cpu: bool = False) -> dict:
    """Measure in a fresh process (or reload with replot); save the JSON and figures, and (full run) the README table.

    With bf16_cpu (only on a CPU with bfloat16 instructions) the run goes to figures/bench_speculative_bf16_cpu.json,
    the second machine lesson 18 reads beside the first, and draws no figure.
    """
    if bf16_cpu:
        require_bf16_cpu("figures/bench_speculative.json")
    saved = SAVED_SPECULATIVE_BF16 if bf16_cpu else SAVED_SPECULATIVE
    if replot:
        results = load_saved(saved)
    else:
        results = {"environment": environment(threads), "workload": asdict(workload), "kernel": kernel_path(),
                   **run_in_child(measure_speculative, workload, threads)}
        if "runs" in results:
            results["summary"] = summary(results)
            results["summary_weights_left"] = summary({**results, **results["weights_left"]})
            for line in disturbed(results):
                print(line)
    folder = out if quick else ROOT / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    save_json(results, out / "speculative.json" if quick else saved)
    if "summary" in results:
        if not bf16_cpu:
            for language in LANGUAGES:
                plot_speculative(results, folder, language)
        if not quick:
            update_readme(speculative_markdown(load_saved(SAVED_SPECULATIVE)), name="speculative")
    return results


def speculative_markdown(results: dict) -> str:
    """The README section: how it was measured, then one row per draft and k, in both languages."""
    env, work = results["environment"], results["workload"]
    load = [f"{x:.1f}" for x in results.get("load_average", [])]
    lines = [
        f"Written by `make bench` on {env['date']}: {env['cpu']}, {env['threads']} threads, torch {env['torch']}. "
        f"SmolLM2-135M in float32, batch 1, one process: greedy decoding of {len(work['prompts'])} fixed prompts, "
        f"{work['new_tokens']} new tokens each, plain and speculative with each draft and k (whole runs timed, prefill "
        f"included). c(k) is one pass over k + 1 tokens against one decode step ({work['calls']} alternating calls, "
        "medians); d is one step of the draft against one of the model. The prediction uses only alpha, c and d. "
        f"Load average at the end: {', '.join(load) or 'not recorded'}.",
        "",
        f"由 `make bench` 于 {env['date']} 生成：{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}。"
        f"SmolLM2-135M，float32，批大小 1，同一个进程：对 {len(work['prompts'])} 个固定的提示词各做 {work['new_tokens']} "
        "个新词元的贪心解码，分别用普通解码和每种草稿、每个 k 的投机解码（整次运行计时，含预填充）。c(k) 是一次检查 k + 1 个词元的前向"
        f"与一步解码的耗时之比（交替调用 {work['calls']} 次，取中位数）；d 是草稿模型一步与原模型一步之比。预测只用到 alpha、c 和 d。"
        f"运行结束时的平均负载：{'、'.join(load) or '未记录'}。",
        "",
        *TABLE_HEAD,
    ]
    lines += summary_rows(results["summary"])
    if "summary_weights_left" in results:
        left = results["weights_left"]
        lines += ["", "The same with the model's products written weights-left (`W @ x.T`, lesson 14), for the model that checks "
                  f"and for plain decoding alike (the early exit is its first layers): one decode step {left['draft_step_ms']['model']:.1f} ms against "
                  f"{results['draft_step_ms']['model']:.1f} with `nn.Linear`; plain greedy tokens equal `nn.Linear`'s: "
                  f"{'yes' if left['plain_tokens_equal_nn_linear'] else 'NO'}.", "",
                  "模型的矩阵乘法改成权重在左（`W @ x.T`，第 14 课）之后再测一遍，检查用的模型和普通解码都这样算（提前退出取的是它的前几层）：一步解码 "
                  f"{left['draft_step_ms']['model']:.1f} 毫秒，用 `nn.Linear` 时是 {results['draft_step_ms']['model']:.1f} 毫秒；"
                  f"普通贪心解码的词元与 `nn.Linear` 的{'相同' if left['plain_tokens_equal_nn_linear'] else '不同'}。", "",
                  *TABLE_HEAD, *summary_rows(results["summary_weights_left"])]
    lines += second_machine_rows()
    return "\n".join([*lines, "", "![Speculative decoding: the cost of checking and the speed-up per draft](figures/bench_speculative_en.png)",
                      "", "![投机解码：检查的代价与每种草稿的加速比](figures/bench_speculative_zh.png)"])


def second_machine_rows() -> list[str]:
    """The same bench on a CPU with bfloat16 instructions (figures/bench_speculative_bf16_cpu.json), when it was saved."""
    if not SAVED_SPECULATIVE_BF16.is_file():
        return []
    second = load_saved(SAVED_SPECULATIVE_BF16)
    env, steps = second["environment"], (second["draft_step_ms"]["model"], second["weights_left"]["draft_step_ms"]["model"])
    return ["", f"The same bench on a second machine kind, {env['date']}: {env['cpu']}, {env['threads']} threads, "
            f"{machine_name(second)} (`make bench BENCH_ARGS=\"--speculative --bf16-cpu\"`, saved in "
            f"`figures/bench_speculative_bf16_cpu.json`). One decode step {steps[0]:.1f} ms with `nn.Linear`, "
            f"{steps[1]:.1f} ms weights-left.{compiled_note(second, 'en')} The first table uses `nn.Linear`, the second weights-left.", "",
            f"同一个基准测试在第二种机器上的结果，{env['date']}：{env['cpu']}，{env['threads']} 个线程，{machine_name(second, 'zh')}"
            f"（`make bench BENCH_ARGS=\"--speculative --bf16-cpu\"`，保存在 `figures/bench_speculative_bf16_cpu.json`）。"
            f"一步解码用 `nn.Linear` 是 {steps[0]:.1f} 毫秒，权重在左是 {steps[1]:.1f} 毫秒。{compiled_note(second, 'zh')}"
            "下面第一张表用 `nn.Linear`，第二张用权重在左。", "",
            *TABLE_HEAD, *summary_rows(second["summary"]), "", *TABLE_HEAD, *summary_rows(second["summary_weights_left"])]


def compiled_note(results: dict, language: str) -> str:
    """How long the compiled q4 draft took to compile, or why it was left out, in one language; nothing for a quick run."""
    if "compiled_draft_left_out" in results:
        reason = results["compiled_draft_left_out"].rstrip(".")
        return f" The compiled q4 draft was left out: {reason}." if language == "en" else f"编译后的 q4 草稿没有测：{reason}。"
    if "compile_seconds" not in results:
        return ""
    took = results["compile_seconds"]
    return (f" Compiling the q4 draft's step took {took:.0f} s, before any timing." if language == "en" else
            f"编译 q4 草稿的解码步用了 {took:.0f} 秒，在所有计时之前。")


def summary_rows(summary_list: list[dict]) -> list[str]:
    """The README table's rows, one per draft and k."""
    return [f"| {NAMES[row['draft']][0]} / {NAMES[row['draft']][1]} | {row['k']} | {row['alpha']:.2f} | "
            f"{row['tokens_per_pass']:.2f} | {row['draft_cost']:.2f} | {row['speedup']:.2f}× | {row['predicted']:.2f}× | "
            f"{'yes / 是' if row['same'] else 'NO / 否'} |" for row in summary_list]


def plot_speculative(results: dict, folder: Path, language: str) -> Path:
    """Two panels: c(k) measured and from the roofline; measured and predicted speed-up per draft and k."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ...language import text
    from ...plotting.fonts import set_language

    set_language(language)
    figure = Figure(figsize=(11, 4.4), layout="constrained")
    FigureCanvasAgg(figure)
    cost_ax, speed_ax = figure.subplots(1, 2)
    plot_costs(cost_ax, results)  # the lesson's own panels (explorers/lesson18.py), side by side
    plot_speedups(speed_ax, results)
    env = results["environment"]
    figure.suptitle(text(f"SmolLM2-135M, float32, batch 1; {env['cpu']}, {env['threads']} threads, torch {env['torch']}",
                         f"SmolLM2-135M，float32，批大小 1；{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}"))
    path = folder / f"bench_speculative_{language}.png"
    figure.savefig(path, dpi=110)
    return path
