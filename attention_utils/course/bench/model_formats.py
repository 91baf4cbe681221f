"""Lesson 14's bench: the real model's prefill and decode in float32, bfloat16 and int8, batches, the two roofs.

    python -m attention_utils.course.bench.model_formats [--quick] [--threads N] [--out PATH]

Everything is timed in one process, variants in alternating order, and reported as medians, so a
ratio compares runs that shared the machine's load. Saved as JSON (default figures/bench_model.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from ...inference.batched_generation import generate_batch
from ...inference.decode_cost import forward_cost
from ...inference.kv_cache import KVCache
from ...inference.weight_formats import FORMATS, to_format, weight_bytes
from ...models.gguf_file import find_model_file
from ...models.llama import load_smollm2
from ...results import ROOT, SAVED_MODEL
from .harness import environment

# Prompts the lesson never tunes on, and a held-out text for perplexity (written for this bench).
HELD_OUT = ["The largest ocean on Earth is", "A recipe for bread needs flour, water and",
            "In 1969, the first people to walk on the Moon", "def fibonacci(n):\n    if n <", "My favourite season is autumn because",
            "The heart pumps blood through", "To make a paper plane, first fold", "The train left the station at"]
TEXT = ("The river ran past the old mill, where the wheel had stopped turning many years ago. Children from the village "
        "still came on summer afternoons to throw stones into the water and watch the rings spread toward the far bank. "
        "Their grandparents remembered the sound of the grinding stones and the smell of fresh flour, and they told "
        "stories of the miller, a tall man who whistled while he worked and gave every child a small loaf on Fridays.")


def median_ms(times: list[float]) -> float:
    return 1e3 * statistics.median(times)


def interleave(variants: dict[str, Callable[[], Callable[[], None]]], rounds: int, steps: int) -> dict[str, float]:
    """Median ms of one call of each variant: each round prepares every variant, then times `steps` calls, order alternating."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(rounds):
        order = list(variants) if index % 2 == 0 else list(variants)[::-1]
        for name in order:
            call = variants[name]()
            call()  # warm
            for _ in range(steps):
                began = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - began)
    return {name: median_ms(found) for name, found in times.items()}


def roofs(quick: bool) -> dict:
    """Memory bandwidth (one read of a large tensor) and matrix-multiply throughput (a large float32 matmul)."""
    big = torch.ones((64 if quick else 256) * 2**20 // 4)  # float32
    reads = []
    for _ in range(5):
        began = time.perf_counter()
        big.sum()
        reads.append(time.perf_counter() - began)
    n = 512 if quick else 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    products = []
    for _ in range(5):
        began = time.perf_counter()
        a @ b
        products.append(time.perf_counter() - began)
    return {"bandwidth_gb_s": big.numel() * 4 / statistics.median(reads) / 1e9,
            "read_bytes": big.numel() * 4, "matmul_gflop_s": 2 * n**3 / statistics.median(products) / 1e9, "matmul_n": n}


def decode_variants(models: dict, reference, prompt: torch.Tensor) -> dict[str, Callable]:
    """Each variant: prefill `prompt` into a fresh cache, return one decode step (the package's models, transformers, floor)."""
    from transformers import DynamicCache

    def ours(model):
        def prepare():
            cache = KVCache(model.config.num_layers)
            state = {"next": model(prompt, cache=cache)[:, -1:].argmax(-1)}

            def step():
                state["next"] = model(state["next"], cache=cache)[:, -1:].argmax(-1)
            return step
        return prepare

    def theirs():
        cache = DynamicCache()
        state = {"next": reference(prompt, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)}

        def step():
            state["next"] = reference(state["next"], past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        return step

    float32 = models.get("float32", next(iter(models.values())))
    matrices = [p.float() for name, p in float32.named_parameters() if p.dim() == 2]  # the tied embedding once: the output layer

    def floor():
        vectors = {width: torch.randn(prompt.shape[0], width) for width in {w.shape[1] for w in matrices}}

        def step():
            for weight in matrices:
                F.linear(vectors[weight.shape[1]], weight)
        return step

    variants = {f"package_{name}": ours(model) for name, model in models.items()}
    variants.update(transformers_float32=theirs, matmul_floor=floor)
    return variants


def quality(models: dict, tokenizer, new_tokens: int) -> dict:
    """Largest logit difference, greedy agreement over `new_tokens` tokens of the held-out prompts, perplexity on TEXT."""
    prompts = [tokenizer.encode(prompt) for prompt in HELD_OUT]
    text = torch.tensor([tokenizer.encode(TEXT)])
    runs = {name: generate_batch(model, prompts, new_tokens, KVCache(model.config.num_layers)) for name, model in models.items()}
    found = {}
    with torch.no_grad():
        logits = {name: model(text).float()[0, :-1] for name, model in models.items()}  # the same input for every format
    for name in models:
        nll = F.cross_entropy(logits[name], text[0, 1:])
        same = runs[name].new_tokens == runs["float32"].new_tokens
        found[name] = {
            "largest_logit_difference": (logits[name] - logits["float32"]).abs().max().item(),  # over the held-out text
            "tokens_agreeing": same.float().mean().item(),
            "continuations_identical": int(same.all(dim=1).sum()), "prompts": len(prompts),
            "perplexity": nll.exp().item(), "text_tokens": text.shape[1],
        }
    for name in found:
        found[name]["perplexity_vs_float32"] = found[name]["perplexity"] / found["float32"]["perplexity"]
    return found


def run(quick: bool, threads: int) -> dict:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, tokenizer = load_smollm2()
    models = {name: to_format(model, name) if name != "float32" else model for name in FORMATS}
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModelForCausalLM

    path = find_model_file()
    reference = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    prompt_length, rounds, steps = (16, 2, 3) if quick else (64, 3, 6)
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_length), generator=torch.Generator().manual_seed(0))
    results = {"environment": environment(threads), "load_average": os.getloadavg(), "prompt_length": prompt_length,
               "roofs": roofs(quick)}
    with torch.no_grad():
        results["decode_ms"] = interleave(decode_variants(models, reference, prompt), rounds, steps)
        prefill = {f"package_{name}": (lambda m=m: (lambda: m(prompt))) for name, m in models.items()}
        prefill["transformers_float32"] = lambda: (lambda: reference(prompt))
        results["prefill_ms"] = interleave(prefill, rounds, 2)
        batches = [1, 2, 4] if quick else [1, 2, 4, 8, 16]
        results["batches"] = {}
        for name in ("float32", "bfloat16"):
            per_batch = {}
            for batch in batches:
                rows = prompt.expand(batch, -1).contiguous()
                per_batch[str(batch)] = interleave(
                    {"step": decode_variants({name: models[name]}, reference, rows)[f"package_{name}"]}, 1, steps)["step"]
            results["batches"][name] = per_batch
    results["bytes"] = {name: weight_bytes(m) for name, m in models.items()}
    results["cost"] = {"decode": vars(forward_cost(model.config, 1, prompt_length)) | {"intensity": forward_cost(model.config, 1, prompt_length).intensity},
                       "prefill": vars(forward_cost(model.config, prompt_length)) | {"intensity": forward_cost(model.config, prompt_length).intensity}}
    results["quality"] = quality(models, tokenizer, 8 if quick else 64)
    results["roofline"] = roofline_points(results, model.config)
    results["summary"] = summary(results)
    return results


def summary(results: dict) -> dict:
    ms, batches = results["decode_ms"], results["batches"]["float32"]
    best = min(FORMATS[1:], key=lambda name: ms[f"package_{name}"])
    tokens_per_s = {b: int(b) / t * 1e3 for b, t in batches.items()}
    return {
        "package_over_floor_speed": ms["matmul_floor"] / ms["package_float32"],
        "package_over_transformers_speed": ms["transformers_float32"] / ms["package_float32"],
        "best_format": best, "best_format_speedup": ms["package_float32"] / ms[f"package_{best}"],
        "batch8_over_batch1_tokens_per_s": tokens_per_s["8"] / tokens_per_s["1"] if "8" in tokens_per_s else None,
        "tokens_per_s_float32": tokens_per_s,
    }


def roofline_points(results: dict, config) -> list[dict]:
    """Each measured run as (arithmetic intensity, GFLOP/s achieved): decode at every batch and format, and the prefill."""
    length, per_weight = results["prompt_length"], {"float32": 4, "bfloat16": 2}
    points = []
    for name, per_batch in results["batches"].items():
        for batch, ms in per_batch.items():
            cost = forward_cost(config, 1, length, batch=int(batch), bytes_per_weight=per_weight[name])
            points.append({"label": f"decode {name} B={batch}", "intensity": cost.intensity, "gflop_s": cost.flops / ms / 1e6})
    int8 = forward_cost(config, 1, length)
    int8_bytes = results["bytes"]["int8"] + int8.cache_bytes
    points.append({"label": "decode int8 B=1", "intensity": int8.flops / int8_bytes,
                   "gflop_s": int8.flops / results["decode_ms"]["package_int8"] / 1e6})
    prefill = forward_cost(config, length)
    points.append({"label": f"prefill float32 T={length}", "intensity": prefill.intensity,
                   "gflop_s": prefill.flops / results["prefill_ms"]["package_float32"] / 1e6})
    return points


def plot_roofline(results: dict, folder: Path, language: str) -> Path:
    """The roofline figure: the two measured roofs and every measured point, log-log, in `language`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ...plotting import set_language, text

    set_language(language)
    roof, points = results["roofs"], results["roofline"]
    figure = Figure(figsize=(8, 5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    xs = [0.1, 1000.0]
    ridge = roof["matmul_gflop_s"] / roof["bandwidth_gb_s"]
    axes.plot([xs[0], ridge, xs[1]], [roof["bandwidth_gb_s"] * xs[0], roof["matmul_gflop_s"], roof["matmul_gflop_s"]],
              color="black", label=text("roofs measured here", "本机测得的两道屋顶"))
    for point in points:
        colour = "crimson" if "prefill" in point["label"] else ("tab:blue" if "float32" in point["label"] else
                                                                 "tab:green" if "bfloat16" in point["label"] else "tab:orange")
        axes.scatter(point["intensity"], point["gflop_s"], color=colour, zorder=3)
        label = point["label"].replace("decode", text("decode", "解码")).replace("prefill", text("prefill", "预填充"))
        axes.annotate(label, (point["intensity"], point["gflop_s"]), fontsize=7, textcoords="offset points",
                      xytext=(4, -9 if "bfloat16" in label else 3))  # bfloat16's labels below, float32's above
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel(text("arithmetic intensity (FLOPs per byte read)", "算术强度（每读一个字节做的浮点运算次数）"))
    axes.set_ylabel(text("GFLOP/s achieved", "实际达到的 GFLOP/s"))
    env = results["environment"]
    axes.set_title(text(f"SmolLM2-135M on {env['cpu']}, {env['threads']} thread(s)",
                        f"SmolLM2-135M，{env['cpu']}，{env['threads']} 个线程"), fontsize=9)
    axes.legend(loc="lower right")
    path = folder / f"bench_model_{language}.png"
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_utils.course.bench.model_formats", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run into build/bench/quick/")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", type=Path)
    parser.add_argument("--replot", action="store_true", help="redraw the figures from the saved JSON")
    args = parser.parse_args(argv)
    if args.replot:
        return replot(args.out or SAVED_MODEL)
    out = args.out or (ROOT / "build" / "bench" / "quick" / "bench_model.json" if args.quick else SAVED_MODEL)
    began = time.perf_counter()
    results = run(args.quick, args.threads)
    results["seconds"] = time.perf_counter() - began
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    replot(out)
    print(json.dumps(results["summary"], indent=1))
    print(f"saved {out}; {results['seconds']:.0f} s")
    return 0


def replot(saved: Path) -> int:
    """Draw the roofline figure in both languages next to the JSON, from the JSON alone."""
    from ...language import LANGUAGES

    results = json.loads(saved.read_text(encoding="utf-8"))
    for language in LANGUAGES:
        print(plot_roofline(results, saved.parent, language))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
