"""Checkers for lesson 12: a real model's cache size, a cached generator without the position bug, a one-layer window."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from . import as_whole_number, checker, feedback, missing

# Exercise 1: SmolLM2-135M (its config.json), run in float32 as lesson 13 runs it, one sequence of 2048 tokens.
LAYERS, QUERY_HEADS, KV_HEADS, HEAD_DIM = 30, 9, 3, 64
TOKENS, BYTES_PER_VALUE = 2048, 4
# Exercise 2: the prompts the fixed generator is tried on, and how many tokens it adds to each.
PROMPTS = ("abcabcab", "hdkphdkphd", "mgjmgj", "bpfnebpf")
NEW_TOKENS = 8


@checker
def check_cache_bytes(answer: object) -> None:
    """Exercise 1: bytes of SmolLM2-135M's keys and values after TOKENS tokens, in float32."""
    if missing(answer):
        return
    found = as_whole_number(answer)
    if found is None:
        return feedback(False, "Give the size as a whole number of bytes.", "请用整数给出字节数。")
    per_value = KV_HEADS * HEAD_DIM * TOKENS * LAYERS  # numbers in the keys of every layer
    expected = 2 * per_value * BYTES_PER_VALUE  # keys and values, 4 bytes each
    if found == expected:
        return feedback(True, f"2 × {LAYERS} × {KV_HEADS} × {HEAD_DIM} × {TOKENS} × {BYTES_PER_VALUE} = {expected:,} bytes "
                        f"({expected / 2**20:.0f} MiB). With 9 key/value heads (no GQA) it would be three times as much.",
                        f"2 × {LAYERS} × {KV_HEADS} × {HEAD_DIM} × {TOKENS} × {BYTES_PER_VALUE} = {expected:,} 字节"
                        f"（{expected / 2**20:.0f} MiB）。如果有 9 个键值头（不用 GQA），缓存会是现在的 3 倍。")
    mistakes = [
        (expected // 2, "That is half the right size: either you counted the keys alone (or the values alone), or you "
         "used 2 bytes per number, as the 16-bit table above does. The exercise asks for float32, 4 bytes per number, "
         "and the cache keeps both keys and values.",
         "只有应有值的一半：要么只算了键（或只算了值），要么按每个数 2 字节算了（上面那张表用的是 16 位浮点数）。"
         "题目用的是 float32，每个数 4 字节，而且键和值都要存。"),
        (expected * QUERY_HEADS // KV_HEADS, "Only the key/value heads are cached: 3, not the 9 query heads.",
         "缓存里只有键值头：是 3 个，而不是 9 个查询头。"),
        (expected * 8, "That is bits; a float32 value takes 4 bytes.", "这是比特数；一个 float32 数占 4 个字节。"),
        (expected // TOKENS, "That is the cache of one token; multiply by the 2048 tokens.", "这是一个词元的缓存；还要乘以 2048 个词元。"),
        (expected // LAYERS, "That is one layer; every one of the 30 layers keeps its own keys and values.",
         "这只是一层；30 层中每一层都有自己的键和值。"),
    ]
    mistakes += [(expected * size // BYTES_PER_VALUE, f"A float32 number takes 4 bytes, not {size}.",
                  f"一个 float32 数占 4 个字节，而不是 {size} 个。") for size in (1, 8)]
    for wrong, hint_en, hint_zh in mistakes:
        if found == wrong:
            return feedback(False, hint_en, hint_zh)
    if found < expected // 1000:
        return feedback(False, "Far too small: is that MiB or GiB? Give the number of bytes.",
                        "太小了：这是 MiB 还是 GiB 的数？请给出字节数。")
    feedback(False, "Multiply: 2 (keys and values) × layers × key/value heads × head_dim × tokens × bytes per value.",
             "把这些乘起来：2（键和值）× 层数 × 键值头数 × 每个头的维数 × 词元数 × 每个数的字节数。")


def generate_slowly(model: nn.Module, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy generation the slow way, as the reference: the whole sequence through the model at every step."""
    tokens = prompt
    for _ in range(new_tokens):
        next_token = model(tokens)[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens


def _count_key_rows(model: nn.Module) -> tuple[list[int], list]:
    """A counter of the token rows each layer's key projection computes, and the hooks to remove afterwards."""
    counted = [0]

    def count(_module: nn.Module, inputs: tuple, _output: torch.Tensor) -> None:
        counted[0] += inputs[0].shape[0] * inputs[0].shape[1]  # batch x tokens

    hooks = [layer.W_key.register_forward_hook(count) for layer in model.layers if hasattr(layer, "W_key")]
    return counted, hooks


@checker
def check_fixed_generation(generate_fixed: object, model: nn.Module, encode: Callable[[str], torch.Tensor]) -> None:
    """Exercise 2: generate_fixed(model, prompt, new_tokens) gives the slow way's tokens and computes each key once."""
    if missing(generate_fixed):
        return
    if not callable(generate_fixed):
        return feedback(False, "Pass your function itself: generate_fixed, without parentheses.",
                        "请传入函数本身：generate_fixed，不要加括号。")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for text in PROMPTS:
                prompt = encode(text)
                expected = generate_slowly(model, prompt, NEW_TOKENS)
                counted, hooks = _count_key_rows(model)
                try:
                    found = generate_fixed(model, prompt, NEW_TOKENS)
                finally:
                    for hook in hooks:
                        hook.remove()
                if not isinstance(found, torch.Tensor) or tuple(found.shape) != tuple(expected.shape):
                    shape = tuple(found.shape) if isinstance(found, torch.Tensor) else type(found).__name__
                    return feedback(False, f"generate_fixed should return all tokens, shape {tuple(expected.shape)}, "
                                    f"prompt first; got {shape}.",
                                    f"generate_fixed 应返回全部词元（提示词在前），形状为 {tuple(expected.shape)}；实际是 {shape}。")
                if not torch.equal(found, expected):
                    return _explain_difference(found, expected, prompt.shape[1], text)
                once = len(model.layers) * (prompt.shape[1] + NEW_TOKENS - 1)  # every position's key, once per layer
                if counted[0] > once:
                    return feedback(False, f"The tokens are right, but the layers computed {counted[0]} key rows where a "
                                    f"cache needs {once}: only the new token should go through the model after the prompt.",
                                    f"生成的词元对了，但各层一共计算了 {counted[0]} 行键，而有缓存时只需要 {once} 行："
                                    "预填充之后，每一步只应把新词元送进模型。")
    finally:
        model.train(was_training)
    feedback(True, f"Same tokens as recomputing everything, on {len(PROMPTS)} prompts, and each key computed once. "
             "The new token's position is the number of tokens already seen.",
             f"在 {len(PROMPTS)} 个提示词上，结果都与全部重算相同，而且每个键只算了一次。新词元的位置就是已经见过的词元数。")


def _explain_difference(found: torch.Tensor, expected: torch.Tensor, prompt_length: int, text: str) -> None:
    """Say where the generated tokens first differ, and what that points to."""
    if not torch.equal(found[:, :prompt_length], expected[:, :prompt_length]):
        return feedback(False, "The prompt itself changed: return the prompt followed by the new tokens.",
                        "提示词本身被改动了：请返回提示词，后面接上新生成的词元。")
    first = int((found != expected).any(dim=0).nonzero()[0]) - prompt_length
    if first == 0:
        return feedback(False, f"On the prompt '{text}' even the first new token differs: check the prefill (the prompt "
                        "at positions 0, 1, 2, ...).",
                        f"在提示词“{text}”上，连第一个新词元都不一样：请检查预填充（提示词的位置应为 0、1、2……）。")
    feedback(False, f"On the prompt '{text}' the first new token is right and new token {first} (counted from 0) is not: "
             "the prefill works, the decode steps do not. At which position does each new token sit?",
             f"在提示词“{text}”上，第一个新词元是对的，但索引为 {first} 的新词元（从 0 开始数）不对：预填充没问题，"
             "逐词元解码出了错。每个新词元的位置应该是多少？")


@checker
def check_layer_window(answer: object) -> None:
    """Exercise 3: the smallest window for layer 0 alone, whose previous-token head reads the key one step back."""
    if missing(answer):
        return
    found = as_whole_number(answer)
    if found is None or found < 1:
        return feedback(False, "Give the window as a whole number of tokens, at least 1.", "请用不小于 1 的整数给出窗口的词元数。")
    expected = 2  # the query itself and the key one step back
    if found == expected:
        return feedback(True, "W = 2: layer 0's previous-token head reads only the key one step back, and a window of 2 "
                        "covers the query and that key. The induction head of layer 1 needs the long view, the head below "
                        "it does not: that is why models can give some layers short windows. Run the next cell to measure it.",
                        "W = 2：层 0 的前一词元头只读往回 1 步的那个键，窗口为 2 时正好覆盖查询本身和这个键。需要看得远的是层 1 的"
                        "归纳头，它下面那一层的头不需要：这就是有些模型可以只给部分层用短窗口的原因。运行下一个单元格测量一下。")
    if found == 1:
        return feedback(False, "W = 1 keeps only the query itself: the previous-token head could no longer see the token "
                        "before it.", "W = 1 只保留查询本身：前一词元头就看不到它前面的那个词元了。")
    if found >= 7:
        return feedback(False, "That is what layer 1's induction head needs (section 4). Here only layer 0 gets the window: "
                        "how far back does its head read?", "这是层 1 的归纳头所需要的（第 4 节）。这里只给层 0 加窗口："
                        "层 0 的头往回读多远？")
    feedback(False, "That works, but a smaller window works too: which key does the previous-token head read?",
             "这样可以，但更小的窗口也行：前一词元头读的是哪个键？")
