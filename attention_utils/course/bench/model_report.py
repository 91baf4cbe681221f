"""The real model's decode benchmark: run it (or reload it), save figures/bench_model.json, write the README section."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ...results import SAVED_MODEL, load_saved, model_rows
from .harness import environment, run_in_child
from .model_decode import ModelWorkload, measure_model
from .report import save_json, update_readme


def run_model_decode(workload: ModelWorkload, threads: int, out: Path, quick: bool, replot: bool = False) -> dict:
    """Measure in one fresh process (or, with replot, load the saved results); save the JSON and, unless quick, the README.

    A quick run writes only out/model.json; a full run saves figures/bench_model.json, which lesson 13 reads.
    """
    if replot:
        results = load_saved(SAVED_MODEL)
    else:
        results = {"environment": environment(threads), "workload": asdict(workload), **run_in_child(measure_model, workload, threads)}
    if quick:
        out.mkdir(parents=True, exist_ok=True)
        save_json(results, out / "model.json")
    else:
        save_json(results, SAVED_MODEL)
        update_readme(model_markdown(results), name="model")
    return results


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
        f"{weights_mb:.0f} MB. In one process, for each prompt length T, {work['calls']} calls of each kind in "
        "alternating order: a prefill of the T prompt tokens into an empty cache, and one decode step of one new token "
        "against a cache holding T tokens. Times are medians in ms.",
        "",
        f"由 `make bench` 于 {env['date']} 生成：{env['cpu']}，{env['threads']} 个线程，torch {env['torch']}。"
        f"模型是 {model['name']}，{model['num_layers']} 个 Transformer 模块，加载方式与第 13 课相同；权重共 "
        f"{weights_mb:.0f} MB。在同一个进程里，对每个提示词长度 T，交替地各计时 {work['calls']} 次：把 T 个提示词词元"
        "预填充进一个空缓存，以及在已有 T 个词元的缓存上解码一个新词元。表中是耗时的中位数（毫秒）。",
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
    return "\n".join(lines)
