"""Lesson 17's part of the bench: SmolLM2 serving one seeded stream of requests, in one fresh process.

- policies: the same stream served one at a time, in static batches and continuously (tokens per
  second, TTFT p50/p95, TPOT p50); the one-at-a-time and continuous runs keep their logits, so the
  batch-invariance numbers compare each request batched against the same request at batch 1;
- budget: the stream all at once under a fixed budget of bytes, spent on float32 pages or on int8
  pages (QuantizedPagedCache): how many sequences ran together at most, and tokens per second;
- chunked prefill: short requests decoding when a long prompt arrives, with and without chunks:
  the longest gap between two tokens of the short ones;
- prefix cache: requests that share a system prompt, with and without the cache: prompt tokens
  computed and TTFT.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ...inference.paged_cache import PagedCache
from ...inference.quantized_pages import QuantizedPagedCache
from ...inference.scheduler import Request, serve
from ...inference.serving_stream import longest_gap, random_stream, summarize
from ...results import ROOT, SAVED_SERVING
from .harness import environment, run_in_child
from .report import save_json

PAGE_SIZE = 16
POLICIES = ("one", "static", "continuous")


@dataclass(frozen=True)
class ServingWorkload:
    """The stream's size and shape, the batch limit, the byte budgets (in float32 pages) and the other parts' sizes."""

    requests: int
    prompt_lengths: tuple[int, int]
    new_tokens: tuple[int, int]
    last_arrival: int
    max_batch: int
    budgets: tuple[int, ...]  # float32 pages; the int8 run gets the same bytes as int8 pages
    long_prompt: int
    chunk: int
    system_prompt: int
    seed: int = 17


SERVING_FULL = ServingWorkload(requests=10, prompt_lengths=(16, 96), new_tokens=(8, 24), last_arrival=10, max_batch=8,
                               budgets=(16, 32), long_prompt=384, chunk=64, system_prompt=96)
SERVING_QUICK = ServingWorkload(requests=5, prompt_lengths=(4, 20), new_tokens=(2, 6), last_arrival=4, max_batch=4,
                                budgets=(6, 12), long_prompt=48, chunk=16, system_prompt=32)


def measure_serving(work: ServingWorkload, threads: int) -> dict:
    """Load SmolLM2 and run every part of the bench in this process, or say why the model could not be loaded."""
    from ...models.llama import load_smollm2

    torch.set_num_threads(threads)
    try:
        model, _ = load_smollm2()
    except (FileNotFoundError, ImportError, ValueError) as error:
        return {"error": f"the model could not be loaded: {error}"}
    vocab = model.config.vocab_size
    stream = random_stream(work.seed, work.requests, work.prompt_lengths, work.new_tokens, work.last_arrival, vocab)
    serve(model, stream[:2], "continuous")  # one warm-up run, not measured
    found, invariance = policies(model, stream, work)
    return {"policies": found, "invariance": invariance, "budget": budget(model, stream, work),
            "chunked": chunked(model, work, vocab), "prefix": prefix(model, work, vocab),
            "page_bytes": {"float32": page_bytes(PagedCache, model), "int8": page_bytes(QuantizedPagedCache, model)},
            "load_average": list(os.getloadavg())}


def page_bytes(kind: type, model: torch.nn.Module) -> int:
    """Bytes of one page number (PAGE_SIZE tokens' keys and values in every layer) for this kind of pool."""
    config = model.config
    return kind(1, config.num_kv_heads, config.head_dim, PAGE_SIZE).page_bytes * config.num_layers


def policies(model: torch.nn.Module, stream: list[Request], work: ServingWorkload) -> tuple[dict, dict]:
    """The stream under each policy with pages to spare; batch invariance from the one and continuous runs' logits."""
    found, logits = {}, {}
    for policy in POLICIES:
        served, scheduler = serve(model, stream, policy, num_pages=1024, max_batch=work.max_batch,
                                  keep_logits=policy != "static")
        found[policy] = summarize(served, scheduler.steps)
        found[policy]["running_per_step"] = [len(record.fed) for record in scheduler.steps]
        logits[policy] = served
    differences, same = [], 0
    for alone, batched in zip(logits["one"], logits["continuous"]):
        same += alone.tokens == batched.tokens
        agree = next((i for i, (a, b) in enumerate(zip(alone.tokens, batched.tokens)) if a != b), len(alone.tokens))
        differences += [(a - b).abs().max().item() for a, b in zip(alone.logits[:agree + 1], batched.logits[:agree + 1])]
    return found, {"largest_logit_difference": max(differences), "identical_continuations": same, "requests": len(stream)}


def budget(model: torch.nn.Module, stream: list[Request], work: ServingWorkload) -> list[dict]:
    """Every request at step 0 under each byte budget, as float32 pages and as int8 pages of the same bytes."""
    at_once = [Request(r.prompt, r.max_new_tokens, 0) for r in stream]
    ratio = page_bytes(PagedCache, model) / page_bytes(QuantizedPagedCache, model)
    rows = []
    for pages in work.budgets:
        for kind, pool, count in (("float32", PagedCache, pages), ("int8", QuantizedPagedCache, int(pages * ratio))):
            served, scheduler = serve(model, at_once, num_pages=count, max_batch=len(stream), pool_kind=pool)
            rows.append({"budget_pages": pages, "kind": kind, "pages": count, **summarize(served, scheduler.steps)})
    return rows


def chunked(model: torch.nn.Module, work: ServingWorkload, vocab: int) -> dict:
    """Four short requests decoding when a long prompt arrives: their longest gap between tokens, whole vs in chunks."""
    short = random_stream(work.seed + 1, 4, (8, 16), (work.long_prompt // work.chunk + 8,) * 2, 0, vocab)
    long = random_stream(work.seed + 2, 1, (work.long_prompt,) * 2, (4, 4), 0, vocab)[0]
    stream = [*short, Request(long.prompt, long.max_new_tokens, 3)]
    found = {}
    for name, chunk in (("whole", None), ("chunked", work.chunk)):
        served, scheduler = serve(model, stream, num_pages=256, max_batch=8, chunk=chunk)
        found[name] = {"longest_gap": max(longest_gap(s) for s in served[:-1]),
                       "long_ttft": served[-1].time_to_first_token,
                       "short_tpot_p50": summarize(served[:-1], scheduler.steps)["tpot_p50"]}
    return {**found, "long_prompt": work.long_prompt, "chunk": work.chunk}


def prefix(model: torch.nn.Module, work: ServingWorkload, vocab: int) -> dict:
    """Requests sharing a system prompt, one after another, with and without the prefix cache."""
    system = tuple(random_stream(work.seed + 3, 1, (work.system_prompt,) * 2, (1, 1), 0, vocab)[0].prompt)
    stream = [Request(r.prompt, r.max_new_tokens, 12 * i) for i, r in
              enumerate(random_stream(work.seed + 4, 6, (4, 12), (4, 4), 0, vocab, prefix=system))]
    found = {}
    for name, cached in (("cold", False), ("cached", True)):
        served, scheduler = serve(model, stream, num_pages=256, prefix_cache=cached)
        found[name] = summarize(served, scheduler.steps)
    prompt_tokens = sum(len(r.prompt) for r in stream)
    shared = (len(stream) - 1) * (work.system_prompt // PAGE_SIZE) * PAGE_SIZE  # full pages after the first request
    return {**found, "prompt_tokens": prompt_tokens, "shared_full_page_tokens": shared, "system_prompt": work.system_prompt}


def serving_targets(results: dict) -> list[tuple[str, bool]]:
    """The issue's targets, read from the results: (what is asked, whether this run meets it)."""
    policies, prefix = results["policies"], results["prefix"]
    speed = policies["continuous"]["tokens_per_s"] / policies["one"]["tokens_per_s"]
    smallest = min(row["budget_pages"] for row in results["budget"])
    running = {row["kind"]: row["most_running"] for row in results["budget"] if row["budget_pages"] == smallest}
    saved = prefix["cold"]["prefill_tokens"] - prefix["cached"]["prefill_tokens"]
    return [(f"continuous batching {speed:.2f}x the tokens/s of one at a time (target >= 2)", speed >= 2),
            (f"continuous p95 TTFT {policies['continuous']['ttft_p95']:.2f} s below static's "
             f"{policies['static']['ttft_p95']:.2f} s", policies["continuous"]["ttft_p95"] < policies["static"]["ttft_p95"]),
            (f"int8 ran {running['int8'] / running['float32']:.2f}x the sequences of float32 in the smallest budget "
             "(target >= 2.5)", running["int8"] >= 2.5 * running["float32"]),
            (f"prefix cache saved {saved} prefill tokens, the shared full pages hold {prefix['shared_full_page_tokens']}",
             saved == prefix["shared_full_page_tokens"])]


def run_serving(work: ServingWorkload, threads: int, out: Path, quick: bool) -> dict:
    """Measure in a fresh process; save the JSON, the figures in both languages and (full run) the README table."""
    from .serving_report import plot_serving, serving_markdown
    from ...language import LANGUAGES
    from .report import update_readme

    results = {"environment": environment(threads), "workload": asdict(work), **run_in_child(measure_serving, work, threads)}
    folder = out if quick else ROOT / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    save_json(results, out / "serving.json" if quick else SAVED_SERVING)
    if "policies" in results:
        results["checks"] = [{"target": target, "passed": passed} for target, passed in serving_targets(results)]
        save_json(results, out / "serving.json" if quick else SAVED_SERVING)
        for language in LANGUAGES:
            plot_serving(results, folder, language)
        if not quick:
            update_readme(serving_markdown(results), name="serving")
    return results
