"""Checkers for lesson 15: the cache bytes of an MLA layer, of a KIVI int4 cache, and the sequences that fit in memory."""

from __future__ import annotations

from . import as_whole_number, checker, feedback, missing

# Exercise 1: DeepSeek-V2's attention sizes (its configuration: kv_lora_rank 512, qk_rope_head_dim 64,
# 60 layers; 128 heads of 128 for the keys' content part and the values), cached in bfloat16.
LATENT_DIM, ROPE_DIM, LAYERS, BYTES_PER_VALUE = 512, 64, 60, 2
HEADS, HEAD_DIM = 128, 128
# Exercises 2 and 3: SmolLM2's cache (30 layers, 3 key/value heads of 64) in KIVI's int4, a float16 scale and offset
# per group: keys per channel over 32 tokens, values per token (one group of 64); then sequences of 4,096 tokens in 8 GiB.
SMOL_LAYERS, SMOL_KV_HEADS, SMOL_HEAD_DIM, KEY_GROUP, META_BYTES = 30, 3, 64, 32, 2
SEQUENCE, BUDGET = 4096, 8 * 2**30


def _kivi_bytes(code_bytes: float = 0.5, meta: int = META_BYTES, keys: bool = True, values: bool = True,
                key_meta_per_token: float | None = None, value_groups: int = 1, heads: int = SMOL_KV_HEADS) -> int:
    """Bytes per token over all layers; the arguments give the right count and each slip the checkers name."""
    key_meta = 2 * meta * SMOL_HEAD_DIM / KEY_GROUP if key_meta_per_token is None else key_meta_per_token
    per_head = (keys * (SMOL_HEAD_DIM * code_bytes + key_meta)
                + values * (SMOL_HEAD_DIM * code_bytes + 2 * meta * value_groups))
    return round(SMOL_LAYERS * heads * per_head)


def _mla_bytes() -> int:
    return (LATENT_DIM + ROPE_DIM) * LAYERS * BYTES_PER_VALUE


@checker
def check_mla_bytes(answer: object) -> None:
    """Exercise 1: bytes an MLA cache holds per token, over all layers."""
    if missing(answer):
        return
    found, expected = as_whole_number(answer), _mla_bytes()
    if found is None:
        return feedback(False, "Give a whole number of bytes.", "请用整数给出字节数。")
    mha = 2 * HEADS * HEAD_DIM * LAYERS * BYTES_PER_VALUE
    if found == expected:
        return feedback(True, f"({LATENT_DIM} + {ROPE_DIM}) × {LAYERS} × {BYTES_PER_VALUE} = {expected:,} bytes per token; "
                        f"multi-head attention with {HEADS} heads of {HEAD_DIM} would keep {mha:,}, {mha / expected:.0f} times as many.",
                        f"({LATENT_DIM} + {ROPE_DIM}) × {LAYERS} × {BYTES_PER_VALUE} = {expected:,} 字节/词元；"
                        f"{HEADS} 个 {HEAD_DIM} 维头的多头注意力要保存 {mha:,} 字节，是它的 {mha / expected:.0f} 倍。")
    if found == 2 * expected:
        return feedback(False, "The latent replaces both the keys and the values: it is cached once, not twice "
                        "(or: bfloat16 takes 2 bytes, not 4).",
                        "潜在向量同时代替了键和值，只缓存一份，不是两份（或者：bfloat16 每个数占 2 个字节，不是 4 个）。")
    if found == LATENT_DIM * LAYERS * BYTES_PER_VALUE:
        return feedback(False, "The decoupled rotary key is cached too, beside the latent.",
                        "解耦出来的旋转键也要缓存，它和潜在向量放在一起。")
    if found == expected // BYTES_PER_VALUE:
        return feedback(False, "That is the count of numbers; each bfloat16 number takes 2 bytes.",
                        "这是数的个数；每个 bfloat16 数占 2 个字节。")
    if found == mha:
        return feedback(False, "That is plain multi-head attention's cache; MLA keeps only the latent and the rotary key.",
                        "这是普通多头注意力的缓存；MLA 只保存潜在向量和旋转键。")
    feedback(False, "Multiply: (latent_dim + rope_dim) × layers × bytes per number.",
             "把这些乘起来：(latent_dim + rope_dim) × 层数 × 每个数的字节数。")


KIVI_SLIPS = {  # a wrong answer: what it most likely missed
    _kivi_bytes(meta=0): ("Count the scales and offsets too: 2 numbers of 2 bytes per group.",
                          "缩放系数和偏移也要算进去：每组 2 个数，每个 2 字节。"),
    _kivi_bytes(meta=4): ("float16 takes 2 bytes per number, not 4 (4 is float32, what the lesson's cache keeps).",
                          "float16 每个数占 2 字节，不是 4 字节（4 字节是 float32，课里的缓存用的是它）。"),
    _kivi_bytes(code_bytes=1): ("Two 4-bit codes share one byte: 64 codes take 32 bytes.", "两个 4 位编码共用一个字节：64 个编码占 32 字节。"),
    _kivi_bytes(values=False): ("Keys and values are both cached: add the values' bytes.", "键和值都要缓存：把值的字节也加上。"),
    _kivi_bytes(keys=False): ("Keys and values are both cached: add the keys' bytes.", "键和值都要缓存：把键的字节也加上。"),
    _kivi_bytes(heads=9): ("The cache keeps SmolLM2's 3 key/value heads (GQA), not its 9 query heads.",
                           "缓存保存的是 SmolLM2 的 3 个键值头（GQA），不是 9 个查询头。"),
    _kivi_bytes(value_groups=2): ("Values are grouped per token: the 64 numbers of one head share one scale and offset.",
                                  "值按词元分组：一个头的 64 个数共用一个缩放系数和一个偏移。"),
    _kivi_bytes(key_meta_per_token=2 * META_BYTES): (
        "Keys are grouped per channel over 32 tokens: 64 channels × 2 numbers × 2 bytes per 32 tokens, 8 bytes per token.",
        "键按通道分组、每组 32 个词元：每 32 个词元有 64 个通道 × 2 个数 × 2 字节，平均每个词元 8 字节。"),
    _kivi_bytes() // SMOL_LAYERS: ("That is one layer; the cache has 30.", "这是一层的字节数；缓存有 30 层。"),
}


@checker
def check_kivi_bytes(answer: object) -> None:
    """Exercise 2: bytes per token of SmolLM2's cache in KIVI int4 with float16 metadata, all layers."""
    if missing(answer):
        return
    found, expected = as_whole_number(answer), _kivi_bytes()
    if found is None:
        return feedback(False, "Give a whole number of bytes.", "请用整数给出字节数。")
    if found == expected:
        float32 = 2 * SMOL_LAYERS * SMOL_KV_HEADS * SMOL_HEAD_DIM * 4
        return feedback(True, f"Per layer and head: keys 32 + 8, values 32 + 4 bytes; × 3 heads × 30 layers = {expected:,} bytes "
                        f"per token; float32 keeps {float32:,}, {float32 / expected:.1f} times as many.",
                        f"每层每个头：键 32 + 8 字节，值 32 + 4 字节；× 3 个头 × 30 层 = 每个词元 {expected:,} 字节，"
                        f"float32 要 {float32:,} 字节，是它的 {float32 / expected:.1f} 倍。")
    if found in KIVI_SLIPS:
        return feedback(False, *KIVI_SLIPS[found])
    feedback(False, "Per layer and head: 64 codes of half a byte for the key and for the value, plus each one's share of "
             "a scale and an offset (2 bytes each); then × 3 heads × 30 layers.",
             "每层每个头：键和值各有 64 个半字节的编码，再加上各自分摊到的缩放系数和偏移（各 2 字节）；然后 × 3 个头 × 30 层。")


def _sequences(bytes_per_token: int, budget: float = BUDGET) -> int:
    return int(budget // (SEQUENCE * bytes_per_token))


@checker
def check_sequences(answer: object) -> None:
    """Exercise 3: whole sequences of SEQUENCE tokens that fit in BUDGET bytes with the cache of exercise 2."""
    if missing(answer):
        return
    found, per_token = as_whole_number(answer), _kivi_bytes()
    expected = _sequences(per_token)
    if found is None:
        return feedback(False, "Give a whole number of sequences.", "请用整数给出序列数。")
    if found == expected:
        float32 = _sequences(2 * SMOL_LAYERS * SMOL_KV_HEADS * SMOL_HEAD_DIM * 4)
        return feedback(True, f"8 × 2**30 // (4,096 × {per_token:,}) = {expected}; float32's cache fits {float32}, so the "
                        "batch, and lesson 14's tokens per second, can grow that much.",
                        f"8 × 2**30 // (4,096 × {per_token:,}) = {expected}；float32 的缓存只装得下 {float32} 个，"
                        "批次（以及第 14 课的每秒词元数）可以相应变大。")
    if found == expected + 1:
        return feedback(False, "Round down: a sequence that does not fit whole cannot run.", "要向下取整：装不下的那条序列不能运行。")
    if found == _sequences(per_token, 8e9):
        return feedback(False, "8 GiB is 8 × 2**30 bytes, not 8 × 10**9.", "8 GiB 是 8 × 2**30 字节，不是 8 × 10**9。")
    if found == _sequences(2 * SMOL_LAYERS * SMOL_KV_HEADS * SMOL_HEAD_DIM * 4):
        return feedback(False, "That is the float32 cache; use exercise 2's int4 bytes per token.",
                        "这是 float32 缓存的结果；请用练习 2 算出的 int4 每个词元的字节数。")
    if found in {_sequences(wrong) for wrong in KIVI_SLIPS}:
        return feedback(False, "The division is right; check exercise 2's bytes per token first.",
                        "除法是对的；请先核对练习 2 的每个词元字节数。")
    feedback(False, "Divide the budget by one sequence's bytes (4,096 tokens × bytes per token) and round down.",
             "用内存预算除以一条序列的字节数（4,096 个词元 × 每个词元的字节数），再向下取整。")
