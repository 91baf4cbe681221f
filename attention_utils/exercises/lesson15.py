"""Checkers for lesson 15: the cache bytes of an MLA layer, the grouping that suits an outlier channel, pages for a batch."""

from __future__ import annotations

from . import as_whole_number, checker, feedback, missing

# Exercise 1: DeepSeek-V2's attention sizes (its configuration: kv_lora_rank 512, qk_rope_head_dim 64,
# 60 layers; 128 heads of 128 for the keys' content part and the values), cached in bfloat16.
LATENT_DIM, ROPE_DIM, LAYERS, BYTES_PER_VALUE = 512, 64, 60, 2
HEADS, HEAD_DIM = 128, 128
# Exercise 3: a batch of sequences of these lengths, pages of 16 tokens.
LENGTHS = (37, 5, 64, 100, 17)
PAGE_SIZE = 16


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


def _grouping(answer: object) -> str | None:
    """'channel' or 'token' from the ways a learner writes them ('Channel', 'per-channel', 'channels', 'by token'), else None."""
    if not isinstance(answer, str):
        return None
    words = answer.strip().lower().replace("-", " ").replace("_", " ").split()
    words = [word for word in words if word not in ("per", "by", "each", "wise", "grouping", "group", "groups")]
    word = words[0].removesuffix("wise").removesuffix("s") if len(words) == 1 else ""
    return word if word in ("channel", "token") else None


@checker
def check_grouping(answer: object) -> None:
    """Exercise 2: one key channel is 50 times larger than the others in every token; which grouping suits keys."""
    if missing(answer):
        return
    grouping = _grouping(answer)
    if grouping is None:
        return feedback(False, "Answer with the string 'channel' or 'token'.", "请用字符串 'channel' 或 'token' 回答。")
    if grouping == "channel":
        return feedback(True, "One scale per channel gives the large channel its own range, and the small channels keep "
                        "fine steps; per token, the large channel would set the step of every channel in that token.",
                        "每个通道一个缩放系数，大通道有自己的取值范围，小通道仍保留细小的步长；按词元分组时，"
                        "大通道会决定这个词元里所有通道的步长。")
    feedback(False, "Per token, the outlier sets the range of the whole group: the step grows 50 times and the small "
             "channels round to a few codes. Which grouping gives the outlier a group of its own?",
             "按词元分组时，离群通道决定整组的范围：步长变成原来的 50 倍，小通道只剩几个编码可用。"
             "哪种分组能让离群通道单独成组？")


@checker
def check_pages(answer: object) -> None:
    """Exercise 3: pages of PAGE_SIZE tokens that the batch LENGTHS holds."""
    if missing(answer):
        return
    found = as_whole_number(answer)
    expected = sum(-(-n // PAGE_SIZE) for n in LENGTHS)
    if found is None:
        return feedback(False, "Give a whole number of pages.", "请用整数给出页数。")
    if found == expected:
        slots = expected * PAGE_SIZE
        return feedback(True, f"{expected} pages: {slots} token slots for {sum(LENGTHS)} tokens; a cache reserved at "
                        f"the longest length would hold {len(LENGTHS) * max(LENGTHS)} slots.",
                        f"共 {expected} 页：{slots} 个词元槽位装 {sum(LENGTHS)} 个词元；按最长序列预留的缓存要占 "
                        f"{len(LENGTHS) * max(LENGTHS)} 个槽位。")
    if found == -(-sum(LENGTHS) // PAGE_SIZE):
        return feedback(False, "A page belongs to one sequence: round up each sequence's pages, then add.",
                        "一页只属于一个序列：先对每个序列分别向上取整，再相加。")
    if found == sum(n // PAGE_SIZE for n in LENGTHS):
        return feedback(False, "A part-filled last page is still a page: round up, not down.",
                        "没填满的最后一页也占一整页：要向上取整，而不是向下取整。")
    feedback(False, "For each sequence: ceil(length / 16); then add them up.",
             "对每个序列求 ceil(长度 / 16)，再把它们加起来。")
