"""The real model's decoding (lesson 13): a prefill of T tokens and one decode step with the cache, timed apart.

One process loads the model once. For each prompt length T it fills a cache with the prompt; then, in
`calls` rounds of alternating order, it times for every T a prefill of the T prompt tokens into an empty
cache (one pass over T tokens) and one decode step of one new token against the cache of T tokens. Both
sides of a ratio, and every T, share the process, the weights in memory and the machine's moment. Medians are saved with the bytes a decode step reads: every weight once (the tied
embedding table once, as the output layer) plus the cache.

A row names its weight format and batch size; lesson 13 reads the float32 rows at batch 1. Lesson 14's
part (model_formats.py: formats, batches, roofs, quality) runs after them in the same process and saves
its rows under "timings", named by format, batch and phase.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from ...inference.kv_cache import KVCache, kv_cache_bytes
from .model_kernels import alternate


@dataclass(frozen=True)
class ModelVariant:
    """How the model runs: its weight format (as stored in torch) and the batch size."""

    weights: str = "float32"
    batch: int = 1


@dataclass(frozen=True)
class ModelWorkload:
    """The prompt lengths, how many calls of each kind to time per length, and the variants."""

    lengths: tuple[int, ...]
    calls: int
    variants: tuple[ModelVariant, ...] = (ModelVariant(),)
    # lesson 14: weight formats and batch sizes at one prompt length, and greedy tokens per held-out prompt
    formats: tuple[str, ...] = ("float32", "bfloat16", "int8", "q4", "float32 weights-left")
    batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    format_length: int = 128
    prefill_calls: int = 5
    new_tokens: int = 64
    compiled: tuple[str, ...] = ()  # formats also timed compiled: a minute or two each to compile, so only the full run


MODEL_FULL = ModelWorkload(lengths=(32, 128, 512), calls=15, compiled=("float32", "q4", "float32 weights-left"))
MODEL_QUICK = ModelWorkload(lengths=(8, 16), calls=2, batches=(1, 2), format_length=16, prefill_calls=2, new_tokens=4)


def prompt_ids(length: int, batch: int, vocab_size: int) -> torch.Tensor:
    """Fixed token ids (batch, length): the same every run, spread over the vocabulary (the content does not change the time)."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(1000, min(vocab_size, 10000), (batch, length), generator=generator)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of every parameter once: what one decode step reads from memory besides the cache.

    The embedding table is read twice per step in principle (one row for the input, all of it as the
    output layer), but the input row is one of the table's rows: counting the table once is the whole read.
    """
    return sum(p.numel() * p.element_size() for p in model.parameters())


def measure_lengths(model: torch.nn.Module, variant: ModelVariant, lengths: tuple[int, ...], calls: int) -> list[dict]:
    """Prefill and one decode step at every prompt length, all in one alternating loop; medians in ms, one row per length.

    Every length is timed in each round, so a change in the machine's load hits all lengths alike: timed one
    length after another, a quiet run once showed steps that fell with T. A decode step adds one token, then
    the cache is cut back, so every step of a length sees the same T cached tokens.
    """
    config = model.config
    new = prompt_ids(1, variant.batch, config.vocab_size)
    model(new, cache=KVCache(config.num_layers))  # one-off costs, untimed
    calls_by_kind, caches = {}, {}
    for length in lengths:
        ids = prompt_ids(length, variant.batch, config.vocab_size)
        caches[length] = cache = KVCache(config.num_layers)
        model(ids, cache=cache)  # the cache the decode steps extend

        def prefill(ids: torch.Tensor = ids) -> None:
            model(ids, cache=KVCache(config.num_layers))

        def decode(cache: KVCache = cache, length: int = length) -> None:
            model(new, cache=cache)
            cache.truncate(length)  # back to T cached tokens for the next round
        calls_by_kind["prefill", length], calls_by_kind["decode", length] = prefill, decode
    ms = alternate(calls_by_kind, calls)
    return [{
        "weights": variant.weights,
        "batch": variant.batch,
        "length": length,
        "prefill_ms": ms["prefill", length],
        "decode_ms": ms["decode", length],
        "prefill_over_decode": ms["prefill", length] / ms["decode", length],
        "cache_bytes": caches[length].nbytes,
        "formula_cache_bytes": kv_cache_bytes(config.num_layers, config.num_kv_heads, config.head_dim, length,
                                              batch=variant.batch),
        "weight_bytes": weight_bytes(model),
    } for length in lengths]


def load_model(variant: ModelVariant, float32: torch.nn.Module | None = None) -> torch.nn.Module:
    """SmolLM2-135M from the installed package (or a copy of `float32`), in the variant's weight format."""
    from ...inference.weight_formats import to_format
    from ...models.gguf_file import read_gguf
    from ...models.llama import LlamaModel

    model = float32 if float32 is not None else LlamaModel.from_gguf(read_gguf())
    return model if variant.weights == "float32" else to_format(model, variant.weights)


def measure_model(workload: ModelWorkload, threads: int) -> dict:
    """In one process: every variant at every length, then lesson 14's part; an error dict when the model is missing."""
    from ...models.bpe_tokenizer import ByteLevelBPE
    from ...models.gguf_file import read_gguf
    from .model_formats import measure_formats

    torch.set_num_threads(threads)
    try:
        file = read_gguf()
        float32 = load_model(ModelVariant())
        models = {variant: load_model(variant, float32) for variant in workload.variants}
        tokenizer = ByteLevelBPE.from_gguf(file)
    except (FileNotFoundError, ImportError, ValueError) as error:
        return {"error": f"the model could not be loaded: {error}"}
    config = float32.config
    rows = []
    with torch.inference_mode():
        for variant, model in models.items():
            rows += measure_lengths(model, variant, workload.lengths, workload.calls)
        formats = measure_formats(float32, tokenizer, workload) if workload.formats else {}
    return {
        "model": {"name": "SmolLM2-135M-Instruct (Q4_1 file, dequantized)", "num_layers": config.num_layers,
                  "d_model": config.d_model, "num_heads": config.num_heads, "num_kv_heads": config.num_kv_heads,
                  "head_dim": config.head_dim},
        "rows": rows,
        "load_average": list(os.getloadavg()),
        **formats,
    }
