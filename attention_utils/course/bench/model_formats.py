"""Lesson 14's part of the real model's bench: weight formats, batches, the two roofs, and each format's quality.

model_decode.measure_model calls `measure_formats` in the same process, after lesson 13's rows, so
everything in figures/bench_model.json shares one machine moment. At one prompt length (128 tokens):

- decode: one step of the package in float32, bfloat16, int8 and q4 (the file's own 4-bit blocks,
  models/q4_weights.py) and of float32 with its products written weights-left (inference/row_products.py)
  at every batch size, transformers in float32 on the same GGUF at batch 1,
  llama.cpp on the same file at batch 1 when llama-cpp-python is installed (optional; never in CI),
  and the matmul floor (one F.linear per float32 weight matrix, nothing else; the same products
  weights-left; and q4's products alone, each Q4Linear and the bfloat16 output layer) at every batch size;
  all of them in one loop, one call each per round, the order reversed every other round; medians and
  quartiles;
- the overhead measured away: float32 and q4 decode steps compiled by torch.compile over a fixed-size
  cache (models/compiled_decode.py), in the same loop at batch 1, when a C++ compiler is at hand;
  their compile time, and whether their greedy tokens equal the eager steps';
- prefill: the prompt into an empty cache, the formats and transformers, alternating the same way;
- the two roofs: a large read (memory bandwidth) and a large float32 matmul (throughput, saved; lesson 14
  takes float32's roof from the next item's products instead, results.model_roofs); and, in
  model_kernels.py, a compute roof per format, int8's kernel alone against bfloat16, a profile, and the
  batch-1 floors and the bandwidth roof on one thread and on all of them;
- quality of each format against float32: free-running greedy agreement over `new_tokens` tokens of
  8 held-out prompts (each format continues its own text, so one early difference changes the rest),
  teacher-forced top-1 agreement (along float32's continuation, does the format pick float32's next
  token), the largest logit difference and the perplexity on a held-out text.

Each timing row is named by format, batch and phase and carries the FLOPs and bytes of its call
(inference/decode_cost.py, with the bytes the format's weights really take), so a reader can place it
on the roofline.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ...inference.batched_generation import generate_batch, left_pad
from ...inference.decode_cost import forward_cost
from ...inference.kv_cache import KVCache
from ...inference.held_out import HELD_OUT_TEXT
from ...inference.row_products import weights_left, weights_left_product
from ...inference.weight_formats import to_format, weight_bytes
from ...models.compiled_decode import CompiledDecoder
from ...models.gguf_file import find_model_file, read_gguf, tensor_bytes
from ...models.q4_weights import Q4Linear, kernel_path, to_q4
from .model_kernels import (alternate, attention_by_length, format_roofs, int8_against_bfloat16, on_one_thread, one_query_attention, profile_step, quartiles,
                            seconds, thread_rows, timed_rounds)

# Prompts the lesson never tunes on (written for this bench); perplexity is scored on lesson 15's held-out text,
# so the weight formats and the caches stand on one picture.
HELD_OUT = ["The largest ocean on Earth is", "A recipe for bread needs flour, water and",
            "In 1969, the first people to walk on the Moon", "def fibonacci(n):\n    if n <",
            "My favourite season is autumn because", "The heart pumps blood through",
            "To make a paper plane, first fold", "The train left the station at"]
TRANSFORMERS = "transformers float32"
FLOOR = "matmul floor"
LEFT = "weights-left"  # the float32 products written W @ x.T: "float32 weights-left", "matmul floor weights-left"
LLAMA_CPP = "llama.cpp"  # llama-cpp-python on the same file, when it is installed (never in CI)
COMPILED = "compiled"  # a format's decode step under torch.compile: "float32 compiled", "q4 compiled"
COMPILED_TOKENS = 256  # the fixed cache's length: the prompt, the timed steps and room to spare


def roofs(read_mib: int, matmul_n: int, repeats: int = 5) -> dict:
    """Memory bandwidth (a sum over a large float32 tensor: each byte read once) and float32 matmul throughput."""
    big = torch.ones(read_mib * 2**20 // 4)
    a, b = torch.randn(matmul_n, matmul_n), torch.randn(matmul_n, matmul_n)
    reads, products = [], []
    for _ in range(repeats):
        reads.append(seconds(big.sum))
        products.append(seconds(lambda: a @ b))
    return {"bandwidth_gb_s": big.numel() * 4 / statistics.median(reads) / 1e9, "read_bytes": big.numel() * 4,
            "matmul_gflop_s": 2 * matmul_n**3 / statistics.median(products) / 1e9, "matmul_n": matmul_n}


def repeat_cache(cache: KVCache, batch: int) -> KVCache:
    """The same cache for `batch` identical sequences: each layer's keys and values repeated along the batch."""
    for layer in cache.layers:  # the bench's shortcut: B copies of one prefill instead of a prefill of B rows
        layer._keys, layer._values = layer._keys.repeat(batch, 1, 1, 1), layer._values.repeat(batch, 1, 1, 1)
    return cache


def fixed_prompt(length: int) -> torch.Tensor:
    """Token ids (1, length), the same every run: the prompt every row of lesson 14's part decodes after."""
    return torch.randint(1000, 10000, (1, length), generator=torch.Generator().manual_seed(0))


def package_step(model: torch.nn.Module, prompt: torch.Tensor, batch: int) -> tuple[Callable[[], None], KVCache]:
    """One decode step of `batch` sequences against a cache of the prompt, ready to call again and again."""
    cache = KVCache(model.config.num_layers)
    last = model(prompt, cache=cache)[:, -1:].argmax(-1).repeat(batch, 1)  # (batch, 1)
    repeat_cache(cache, batch)
    state = {"next": last}

    def step() -> None:
        state["next"] = model(state["next"], cache=cache)[:, -1:].argmax(-1)
    return step, cache


def step_at_length(model: torch.nn.Module, length: int) -> tuple[Callable[[], None], KVCache]:
    """A decode step against `length` cached tokens at every call (the token it adds is forgotten after it), and its cache."""
    step, cache = package_step(model, fixed_prompt(length), 1)

    def step_and_forget() -> None:
        step()
        cache.truncate(length)
    return step_and_forget, cache


def transformers_step(reference: torch.nn.Module, prompt: torch.Tensor) -> Callable[[], None]:
    """One decode step of transformers' model with its own cache (DynamicCache), batch 1."""
    from transformers import DynamicCache

    cache = DynamicCache()
    state = {"next": reference(prompt, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)}

    def step() -> None:
        state["next"] = reference(state["next"], past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
    return step


def floor_step(matrices: list[torch.Tensor], batch: int, left: bool = False) -> Callable[[], None]:
    """Only the matrix products of a decode step: one F.linear per weight matrix on `batch` vectors (or weights-left)."""
    vectors = {width: torch.randn(batch, width) for width in {w.shape[1] for w in matrices}}
    product = weights_left_product if left else F.linear

    def step() -> None:
        for weight in matrices:
            product(vectors[weight.shape[1]], weight)
    return step


def q4_floor_step(q4: torch.nn.Module, batch: int) -> Callable[[], None]:
    """Only the matrix products of a q4 decode step: each Q4Linear (the int4 kernel, with its bfloat16 conversions) on
    `batch` vectors, and the bfloat16 table as the output layer, as the q4 model calls them."""
    layers = [m for m in q4.modules() if isinstance(m, Q4Linear)]
    table = q4.token_embedding.weight
    vectors = {width: torch.randn(batch, width) for width in {layer.in_features for layer in layers}}
    last = torch.randn(batch, table.shape[1]).to(table.dtype)

    def step() -> None:
        for layer in layers:
            layer(vectors[layer.in_features])
        last @ table.T
    return step


def q4_product_bytes(q4: torch.nn.Module) -> int:
    """The bytes q4_floor_step reads: every Q4Linear's packed codes, scales and zeros, and the bfloat16 table."""
    layers = [m for m in q4.modules() if isinstance(m, Q4Linear)]
    return sum(b.nbytes for layer in layers for b in layer.buffers()) + q4.token_embedding.weight.nbytes


def load_reference() -> torch.nn.Module:
    """transformers' Llama on the same GGUF file, float32, offline (ImportError if transformers is missing)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModelForCausalLM

    path = find_model_file()
    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


def measure_formats(model: torch.nn.Module, tokenizer, workload) -> dict:
    """Every timing row, the roofs and the quality per format, in this process (model: float32 as lesson 13 loads it)."""
    config, length = model.config, workload.format_length
    models = {name: model if name == "float32" else to_q4(model) if name == "q4" else
              weights_left(model) if name == f"float32 {LEFT}" else to_format(model, name) for name in workload.formats}
    sizes = {name: weight_bytes(m) for name, m in models.items()}
    file_bytes = sum(tensor_bytes(entry) for entry in read_gguf().tensors.values())
    try:
        reference, missing = load_reference(), None
    except (ImportError, OSError, ValueError) as error:
        reference, missing = None, f"transformers could not load the file: {error}"
    prompt = fixed_prompt(length)
    matrices = [p for p in model.parameters() if p.dim() == 2]  # every weight matrix once; the embedding is the output layer
    found = {"roofs": roofs(256 if workload.calls > 2 else 64, 2048 if workload.calls > 2 else 512)}
    decode, caches = {}, {}
    for name, m in models.items():
        for batch in workload.batches:
            decode[name, batch], caches[name, batch] = package_step(m, prompt, batch)
    for batch in workload.batches:
        decode[FLOOR, batch] = floor_step(matrices, batch)
        if f"float32 {LEFT}" in models:
            decode[f"{FLOOR} {LEFT}", batch] = floor_step(matrices, batch, left=True)
        if "q4" in models:
            decode[f"{FLOOR} q4", batch] = q4_floor_step(models["q4"], batch)
    if reference is not None:
        decode[TRANSFORMERS, 1] = transformers_step(reference, prompt)
    compiled = {name: compiled_step(models[name], prompt) for name in workload.compiled}
    for name, (step, _) in compiled.items():
        if step is not None:
            decode[f"{name} {COMPILED}", 1] = step
    llama_cpp = llama_cpp_step(prompt, torch.get_num_threads())
    if llama_cpp is not None:
        decode[LLAMA_CPP, 1] = llama_cpp
    decode_rounds = timed_rounds(decode, workload.calls)
    decode_ms = {key: statistics.median(found) for key, found in decode_rounds.items()}
    prefill = {(name, 1): (lambda m=m: m(prompt, cache=KVCache(config.num_layers))) for name, m in models.items()}
    if reference is not None:
        prefill[TRANSFORMERS, 1] = lambda: reference(prompt, use_cache=True)
    prefill_ms = alternate(prefill, workload.prefill_calls)
    rows = []
    for phase, measured in (("decode", decode_ms), ("prefill", prefill_ms)):
        for (name, batch), ms in measured.items():
            new, earlier = (1, length) if phase == "decode" else (length, 0)
            cost = forward_cost(config, new, earlier, batch=batch)
            held = {FLOOR: sum(w.numel() * 4 for w in matrices), LLAMA_CPP: file_bytes, **sizes,
                    f"{FLOOR} q4": q4_product_bytes(models["q4"]) if "q4" in models else None}.get(
                name.removesuffix(f" {COMPILED}").removesuffix(f" {LEFT}"), sizes["float32"])
            cache = cost.cache_bytes if not name.startswith(FLOOR) else 0
            if name in ("bfloat16", "int8", LLAMA_CPP):  # bfloat16 compute, or llama.cpp's float16 cache: 2 bytes a number
                cache //= 2
            rows.append({"format": name, "batch": batch, "phase": phase, "length": length, "ms": ms,
                         "flops": cost.flops - cost.attention_flops if name.startswith(FLOOR) else cost.flops,  # floors: products only
                         "weight_bytes": held, "cache_bytes": cache}
                        | ({"quartiles_ms": quartiles(decode_rounds[name, batch])} if phase == "decode" else {}))
    found.update(kernels(model, matrices, prompt, workload, models.get("bfloat16")))
    found["int8_kernel"]["bandwidth_gb_s"] = found["roofs"]["bandwidth_gb_s"]  # the roof its rows are read against
    found.update(timings=rows, weight_bytes=sizes, file_bytes=file_bytes, transformers_error=missing, kernel=kernel_path(),
                 llama_cpp="measured" if llama_cpp is not None else "not installed (pip install llama-cpp-python)",
                 compiled={name: found for name, (_, found) in compiled.items()},
                 quality=quality(models, tokenizer, workload.new_tokens))
    return found


def kernels(model: torch.nn.Module, matrices: list[torch.Tensor], prompt: torch.Tensor, workload,
            bfloat16: torch.nn.Module | None = None) -> dict:
    """Lesson 14's kernel rows, in this process: a roof per format, int8's kernel alone at one row and two, a profile
    of float32 steps (and of bfloat16's, given its model), and attention's own time at each of lesson 13's lengths."""
    step, _ = package_step(model, prompt, 1)
    floors = {FLOOR: floor_step(matrices, 1), f"{FLOOR} {LEFT}": floor_step(matrices, 1, left=True)}
    by_length = {length: step_at_length(model, length)[0] for length in workload.lengths}
    found = {"format_roofs": format_roofs(1024 if workload.calls > 2 else 256, workload.calls),
             "int8_kernel": int8_against_bfloat16(matrices, workload.calls), "profile": profile_step(step),
             "attention_by_length": attention_by_length(by_length),
             "threads": thread_rows(floors, 256 * 2**20 if workload.calls > 2 else 64 * 2**20, workload.calls)}
    if bfloat16 is not None:
        found["profile_bfloat16"] = profile_step(package_step(bfloat16, prompt, 1)[0])
    return found


def compiled_step(model: torch.nn.Module, prompt: torch.Tensor, check_tokens: int = 16) -> tuple[Callable[[], None] | None, dict]:
    """A compiled decode step after the prompt (batch 1), ready to call again and again, and what compiling it found.

    The first step compiles (its seconds are saved). Then `check_tokens` greedy tokens from the prompt are
    compared with the eager model's; the step is timed only when they are equal, and None when it cannot compile.
    """
    decoder = CompiledDecoder(model, COMPILED_TOKENS)
    eager_tokens, cache = [], KVCache(model.config.num_layers)
    token = model(prompt, cache=cache)[:, -1:].argmax(-1)
    for _ in range(check_tokens):
        eager_tokens.append(int(token))
        token = model(token, cache=cache)[:, -1:].argmax(-1)
    token, found = decoder.prefill(prompt)[:, -1:].argmax(-1), {"max_tokens": COMPILED_TOKENS}
    try:
        found["compile_seconds"] = seconds(lambda: decoder.step(token))
    except RuntimeError as error:  # no C++ compiler: the row is left out and the reason saved
        return None, {**found, "error": str(error).splitlines()[0]}
    decoder.prefill(prompt)
    compiled_tokens = []
    for _ in range(check_tokens):
        compiled_tokens.append(int(token))
        token = decoder.step(token)[:, -1:].argmax(-1)
    found["same_greedy_tokens"] = f"{sum(a == b for a, b in zip(compiled_tokens, eager_tokens))} of {check_tokens}"
    if compiled_tokens != eager_tokens:
        return None, found
    state = {"next": token}

    def step() -> None:
        state["next"] = decoder.step(state["next"])[:, -1:].argmax(-1)
    return step, found


def llama_cpp_step(prompt: torch.Tensor, threads: int) -> Callable[[], None] | None:
    """One decode step of llama.cpp on the same GGUF file after the same prompt, batch 1; None without llama-cpp-python."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    engine = Llama(model_path=str(find_model_file()), n_ctx=4 * prompt.shape[1], n_threads=threads, verbose=False)
    engine.eval(prompt[0].tolist())
    state = {"next": int(prompt[0, -1])}

    def step() -> None:
        engine.eval([state["next"]])  # one token against llama.cpp's own cache
        state["next"] = int(engine.scores[engine.n_tokens - 1].argmax())  # its greedy pick, as the other steps
    return step


def require_bf16_cpu(saved: str) -> None:
    """Refuse `--bf16-cpu` on a CPU without bfloat16 instructions: its run would be saved as the second machine's."""
    path = kernel_path()
    if not (path["avx512_bf16"] or path["amx_bf16"]):
        raise SystemExit("--bf16-cpu: this CPU has no bfloat16 instructions (avx512_bf16 or amx_bf16 in /proc/cpuinfo); "
                         f"run the bench without it, into {saved}")


@torch.no_grad()
def quality(models: dict, tokenizer, new_tokens: int) -> dict:
    """Against float32: free-running and teacher-forced greedy agreement, largest logit difference, perplexity on the held-out text."""
    prompts = [tokenizer.encode(prompt) for prompt in HELD_OUT]
    runs = {name: generate_batch(m, prompts, new_tokens, KVCache(m.config.num_layers)) for name, m in models.items()}
    reference = runs["float32"]
    tokens, padding = reference.tokens, torch.cat([left_pad(prompts)[1], torch.zeros_like(reference.new_tokens,
                                                                                          dtype=torch.bool)], dim=1)
    text = torch.tensor([tokenizer.encode(HELD_OUT_TEXT)])
    logits = {name: m(text).float()[0, :-1] for name, m in models.items()}
    found = {}
    for name, m in models.items():
        start = reference.padding.shape[1] - 1  # the scores at this place choose the first new token
        forced = m(tokens[:, :-1], padding_mask=padding[:, :-1])[:, start:].argmax(-1)  # along float32's text
        free = runs[name].new_tokens == reference.new_tokens
        found[name] = {
            "free_running_agreement": free.float().mean().item(),
            "continuations_identical": int(free.all(dim=1).sum()),
            "first_difference": [int(row.float().argmin()) if not row.all() else None for row in free],
            "teacher_forced_agreement": (forced == reference.new_tokens).float().mean().item(),
            "largest_logit_difference": (logits[name] - logits["float32"]).abs().max().item(),
            "perplexity": F.cross_entropy(logits[name], text[0, 1:]).exp().item(),
            "prompts": len(prompts), "new_tokens": new_tokens, "text_tokens": text.shape[1],
        }
    return found


def attention_growth(workload, threads: int, turns: int = 15) -> dict:
    """Lesson 14's reason for the step's growth with T, alone in a process: attention_by_length at lesson 13's lengths,
    with more turns than the full run gives it (a minute, so the spread can be saved beside the medians), and the roofs
    read on the same one thread, so a cached token's cost can be set against its bytes and FLOPs on this machine; and
    one_query_attention, the step's attention alone three ways, so that cost can be split into reading and working."""
    from ...models.llama import load_smollm2
    with on_one_thread():
        one_thread = roofs(256, 1024) if workload.calls > 2 else roofs(16, 128)
    torch.set_num_threads(threads)
    model, _ = load_smollm2()
    with torch.inference_mode():
        steps = {length: step_at_length(model, length)[0] for length in workload.lengths}
        found = attention_by_length(steps, turns=turns if workload.calls > 2 else 1)
    alone = one_query_attention(model.config, workload.lengths, turns if workload.calls > 2 else 1)
    return found | {"roofs": one_thread, "one_query": alone}


def quality_split(new_tokens: int, threads: int) -> dict:
    """Lesson 14's control for the quality rows: int8 weights with float32 arithmetic against float32, so weight rounding
    is measured without bfloat16's; float32 sums barely depend on the CPU, so one machine's run serves the lesson."""
    from ...models.llama import load_smollm2
    torch.set_num_threads(threads)
    model, tokenizer = load_smollm2()
    return quality({"float32": model, "int8 float32": to_format(model, "int8", torch.float32)}, tokenizer, new_tokens)
