"""Checkers for lesson 13: the KV cache of the real model for 1,000 tokens, an induction head found by hand, the sink."""

from __future__ import annotations

import math

import torch

from . import as_real_number, as_whole_number, checker, feedback, missing

CACHE_TOKENS = 1000
FLOAT32_BYTES = 4
SINK_CHOICES = ("a", "b", "c", "d")  # the four statements are in the lesson's text


@checker
def check_cache_bytes(answer: object, model: torch.nn.Module) -> None:
    """The bytes of keys and values the model caches for CACHE_TOKENS tokens in float32 (batch 1)."""
    if missing(answer):
        return
    config = model.config
    head_dim = config.d_model // config.num_heads
    per_token = 2 * config.num_layers * config.num_kv_heads * head_dim * FLOAT32_BYTES  # keys and values, every layer
    expected = per_token * CACHE_TOKENS
    hints = {
        per_token * CACHE_TOKENS // config.num_kv_heads * config.num_heads: (
            f"You gave every one of the {config.num_heads} query heads its own keys and values; this model keeps only "
            f"{config.num_kv_heads} key/value heads per layer.",
            f"你给 {config.num_heads} 个查询头各算了一份键和值；这个模型每层只有 {config.num_kv_heads} 个键值头。"),
        expected // 2: ("That is half: the cache keeps the keys and the values.", "只算了一半：缓存里既有键，也有值。"),
        expected // FLOAT32_BYTES: ("That counts numbers, not bytes: a float32 number takes 4 bytes.",
                                    "这是数的个数，不是字节数：一个 float32 数占 4 个字节。"),
    }
    number = as_real_number(answer)
    if number is not None and any(math.isclose(number, expected / unit, rel_tol=0.05) for unit in (1e6, 2**20)):
        return feedback(False, "That looks like megabytes; give the answer in bytes.", "这看起来是以 MB 为单位；请用字节给出答案。")
    bytes_ = as_whole_number(answer)
    if bytes_ is None:
        return feedback(False, "Give a whole number of bytes, such as 1234567.", "请给出一个整数字节数，例如 1234567。")
    if bytes_ == expected:
        return feedback(True, f"2 (keys, values) × {config.num_layers} layers × {config.num_kv_heads} key/value heads × "
                        f"{head_dim} × {CACHE_TOKENS} tokens × 4 bytes = {expected:,} bytes, about {expected / 1e6:.0f} MB. "
                        "Now measure it in the next cell.",
                        f"2（键和值）× {config.num_layers} 层 × {config.num_kv_heads} 个键值头 × {head_dim} × "
                        f"{CACHE_TOKENS} 个词元 × 4 字节 = {expected:,} 字节，约 {expected / 1e6:.0f} MB。下一个单元格来实际测量。")
    if bytes_ in hints:
        return feedback(False, *hints[bytes_])
    feedback(False, "Multiply: 2 (keys and values) × layers × key/value heads × head size × tokens × 4 bytes; "
             "read the sizes from model.config.",
             "请相乘：2（键和值）× 层数 × 键值头数 × 每个头的维数 × 词元数 × 4 字节；各个大小可以从 model.config 读出。")


@torch.no_grad()
def _induction_table(model: torch.nn.Module, tokens: torch.Tensor, period: int) -> torch.Tensor:
    """Induction scores (layers, heads), computed here apart from the package.

    Hooks keep what each attention layer receives; queries and keys come from the rows of its qkv
    weight, each interleaved feature pair is turned as one complex number, and a score is the real
    part of q times the conjugate of k (which equals the dot product of the two turned real vectors).
    """
    inputs = []
    hooks = [block.attention.register_forward_pre_hook(lambda _m, args: inputs.append(args[0][0]))
             for block in model.blocks]
    try:
        model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    num_tokens = tokens.shape[1]
    rows = torch.arange(period, num_tokens)
    table = []
    for block, x in zip(model.blocks, inputs):
        attention = block.attention
        h, g, d = attention.num_heads, attention.num_kv_heads, attention.head_dim
        weight = attention.qkv.weight.double()
        angles = torch.arange(num_tokens, dtype=torch.float64)[:, None] * attention.rotary_base ** (
            -torch.arange(0, d, 2, dtype=torch.float64) / d)  # (T, d/2)
        turn = torch.polar(torch.ones_like(angles), angles)

        def turned(part: torch.Tensor, heads: int) -> torch.Tensor:
            pairs = (x.double() @ part.T).view(num_tokens, heads, d // 2, 2)
            return torch.view_as_complex(pairs.contiguous()) * turn[:, None]  # (T, heads, d/2)

        q, k = turned(weight[: h * d], h), turned(weight[h * d : (h + g) * d], g)
        k = k[:, torch.arange(h) // (h // g)]  # query head i reads key/value head i // (h / g)
        scores = torch.einsum("qhp,khp->hqk", q, k.conj()).real / math.sqrt(d)
        scores = scores.masked_fill(torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1), float("-inf"))
        weights = scores.softmax(dim=-1)
        table.append(weights[:, rows, rows - period + 1].mean(dim=-1))
    return torch.stack(table)


def _as_token_ids(sequence: object) -> torch.Tensor | None:
    """A list of ints or an integer tensor of shape (T,) or (1, T), as (1, T); None for anything else."""
    if isinstance(sequence, (list, tuple)) and sequence and all(as_whole_number(t) is not None for t in sequence):
        return torch.tensor([[as_whole_number(t) for t in sequence]])
    if isinstance(sequence, torch.Tensor) and not sequence.is_floating_point() and sequence.dtype != torch.bool:
        if sequence.dim() == 1 or (sequence.dim() == 2 and sequence.shape[0] == 1):
            return sequence.reshape(1, -1).long()
    return None


@checker
def check_induction_head(sequence: object, layer: object, head: object, model: torch.nn.Module) -> None:
    """`sequence` repeats its first half; (layer, head) should be the head with the highest induction score on it."""
    if missing(sequence) or missing(layer) or missing(head):
        return
    tokens = _as_token_ids(sequence)
    if tokens is None:
        return feedback(False, "sequence should be token ids: a list of whole numbers or an integer tensor.",
                        "sequence 应该是词元编号：一个整数列表，或一个整数张量。")
    num_tokens, vocab = tokens.shape[1], model.config.vocab_size
    period = num_tokens // 2
    if num_tokens % 2 or period < 4 or not torch.equal(tokens[0, :period], tokens[0, period:]):
        return feedback(False, "Build the sequence as some tokens followed by the same tokens again (at least 4 each), "
                        "for example torch.cat([half, half], dim=1).",
                        "请把序列写成一段词元再接上同样的一段（每段至少 4 个），例如 torch.cat([half, half], dim=1)。")
    if tokens.min() < 0 or tokens.max() >= vocab or num_tokens > 512:
        return feedback(False, f"Use ids from 0 to {vocab - 1} and at most 512 tokens.",
                        f"请使用 0 到 {vocab - 1} 之间的编号，总长度不超过 512 个词元。")
    layer, head = as_whole_number(layer), as_whole_number(head)
    if layer is None or head is None or not (0 <= layer < len(model.blocks) and 0 <= head < model.config.num_heads):
        return feedback(False, f"layer should be 0 to {len(model.blocks) - 1} and head 0 to {model.config.num_heads - 1}.",
                        f"layer 应在 0 到 {len(model.blocks) - 1} 之间，head 应在 0 到 {model.config.num_heads - 1} 之间。")
    table = _induction_table(model, tokens, period)
    best = divmod(int(table.argmax()), table.shape[1])
    top = ", ".join(f"({i // table.shape[1]}, {i % table.shape[1]}): {v:.2f}"
                    for v, i in zip(*[t.tolist() for t in table.flatten().topk(3)]))
    yours = table[layer, head].item()
    if (layer, head) == best or yours >= table.max().item() - 0.02:
        return feedback(True, f"On your sequence, layer {layer}, head {head} scores {yours:.2f}. The top three: {top}.",
                        f"在你的序列上，层 {layer}、头 {head} 的得分是 {yours:.2f}。得分最高的三个：{top}。")
    feedback(False, f"On your sequence, layer {layer}, head {head} scores only {yours:.2f}; another head scores "
             f"{table.max().item():.2f}. Compute induction_score for every head and take the largest.",
             f"在你的序列上，层 {layer}、头 {head} 的得分只有 {yours:.2f}；另有一个头得了 {table.max().item():.2f}。"
             "请为每个头计算 induction_score，取最大的那个。")


@checker
def check_sink_reason(choice: object) -> None:
    """One letter, "a" to "d": which statement explains the attention sink."""
    if missing(choice):
        return
    letter = choice.strip().lower() if isinstance(choice, str) else None
    if letter not in SINK_CHOICES:
        return feedback(False, 'Answer with one letter: "a", "b", "c" or "d".', "请用一个字母作答：a、b、c 或 d。")
    if letter == "b":
        return feedback(True, "Softmax cannot say \"nothing here\": the weights must add up to 1. StreamingLLM (Xiao et al., "
                        "2023) found the same sinks in many models and showed that keeping the first tokens keeps them working.",
                        "softmax 没法表达“这里没什么可看的”：权重必须加起来等于 1。StreamingLLM（Xiao 等，2023）在许多模型里"
                        "都发现了这样的汇聚点，并证明只要保留最前面的几个词元，模型就能继续正常工作。")
    hints = {
        "a": ("Change the first word of the sentence and measure again: the share hardly moves, whatever the word.",
              "把句子的第一个词换掉再测一次：无论换成什么词，这个比例几乎不变。"),
        "c": ("Rotary scores depend on the distance between query and key, and the first token is the farthest from "
              "later queries.", "旋转位置编码的分数取决于查询和键之间的距离，而第一个词元离后面的查询最远。"),
        "d": ("Sinks were found in models with full-precision weights too (StreamingLLM looked at Llama-2, Falcon, "
              "Pythia and MPT).", "在全精度权重的模型里也发现了汇聚点（StreamingLLM 研究了 Llama-2、Falcon、Pythia 和 MPT）。"),
    }
    feedback(False, *hints[letter])
