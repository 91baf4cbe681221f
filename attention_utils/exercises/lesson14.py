"""Checkers for lesson 14: a decode step's time from its bytes, the intensity at batch B, and where batching stops helping."""

from __future__ import annotations

from . import as_real_number, checker, feedback, missing

# Exercise 1: a model of one billion parameters in bfloat16 on a machine that reads 20 GB/s.
PARAMETERS, BYTES_PER_WEIGHT, BANDWIDTH_GB_S = 1_000_000_000, 2, 20
# Exercises 2 and 3: float32 weights, 2 FLOPs per weight per token (one multiply, one add); roofs of a made-up machine.
FLOAT32, BATCH = 4, 8
ROOF_GB_S, ROOF_GFLOP_S = 40, 400


def _close(found: float, expected: float, share: float = 0.02) -> bool:
    return abs(found - expected) <= share * abs(expected)


@checker
def check_step_ms(answer: object) -> None:
    """Exercise 1: milliseconds per token of a 1B-parameter bfloat16 model at 20 GB/s, if only the weights' bytes count."""
    if missing(answer):
        return
    found, expected = as_real_number(answer), PARAMETERS * BYTES_PER_WEIGHT / (BANDWIDTH_GB_S * 1e9) * 1e3
    if found is None:
        return feedback(False, "Give a number of milliseconds.", "请给出一个毫秒数。")
    if _close(found, expected):
        return feedback(True, f"{PARAMETERS:,} weights × {BYTES_PER_WEIGHT} bytes = {PARAMETERS * BYTES_PER_WEIGHT / 1e9:g} GB "
                        f"per token; at {BANDWIDTH_GB_S} GB/s that is {expected:g} ms, or at most {1e3 / expected:g} tokens "
                        "per second, whatever the arithmetic costs.",
                        f"每个词元要读 {PARAMETERS:,} 个权重 × {BYTES_PER_WEIGHT} 字节 = {PARAMETERS * BYTES_PER_WEIGHT / 1e9:g} GB；"
                        f"按 {BANDWIDTH_GB_S} GB/s 算就是 {expected:g} 毫秒，也就是每秒最多 {1e3 / expected:g} 个词元，"
                        "与计算量无关。")
    if _close(found, 2 * expected):
        return feedback(False, "That is float32's 4 bytes a weight; bfloat16 takes 2.", "这是按 float32 每个权重 4 字节算的；bfloat16 只占 2 字节。")
    if _close(found, expected / 1e3):
        return feedback(False, "That is in seconds; the question asks for milliseconds.", "这是以秒为单位的结果；题目要的是毫秒。")
    feedback(False, "Bytes read per token (weights × bytes per weight) divided by bytes per second, then × 1,000.",
             "每个词元读取的字节数（权重个数 × 每个权重的字节数）除以每秒能读的字节数，再乘以 1,000。")


@checker
def check_intensity(answer: object) -> None:
    """Exercise 2: FLOPs per byte of weights read in a float32 decode step at batch 8 (the cache left out)."""
    if missing(answer):
        return
    found, expected = as_real_number(answer), 2 * BATCH / FLOAT32
    if found is None:
        return feedback(False, "Give a number of FLOPs per byte.", "请给出每字节的浮点运算次数。")
    if _close(found, expected):
        return feedback(True, f"Each weight is read once ({FLOAT32} bytes) and used by {BATCH} tokens (2 FLOPs each): "
                        f"2 × {BATCH} / {FLOAT32} = {expected:g} FLOPs per byte, {BATCH} times batch 1's 0.5.",
                        f"每个权重只读一次（{FLOAT32} 字节），却被 {BATCH} 个词元各用一次（每次 2 次浮点运算）："
                        f"2 × {BATCH} / {FLOAT32} = {expected:g}，是批大小 1 时 0.5 的 {BATCH} 倍。")
    if _close(found, 2 / FLOAT32):
        return feedback(False, "That is batch 1: the batch shares one read of the weights, so the FLOPs grow and the bytes do not.",
                        "这是批大小 1 的结果：整个批次共用一次权重读取，浮点运算随批大小增加，字节数却不变。")
    if _close(found, BATCH / FLOAT32):
        return feedback(False, "A multiply and an add: each weight gives 2 FLOPs per token.", "一次乘法加一次加法：每个权重对每个词元贡献 2 次浮点运算。")
    feedback(False, "FLOPs: 2 × weights × batch. Bytes: weights × 4. Divide.", "浮点运算：2 × 权重个数 × 批大小；字节：权重个数 × 4。两者相除。")


@checker
def check_ridge_batch(answer: object) -> None:
    """Exercise 3: the batch at which a float32 decode step reaches the compute roof (400 GFLOP/s, 40 GB/s)."""
    if missing(answer):
        return
    found, ridge = as_real_number(answer), ROOF_GFLOP_S / ROOF_GB_S
    expected = ridge * FLOAT32 / 2
    if found is None:
        return feedback(False, "Give a batch size.", "请给出一个批大小。")
    if _close(found, expected, 0.05):
        return feedback(True, f"The roofs meet at {ROOF_GFLOP_S} / {ROOF_GB_S} = {ridge:g} FLOPs per byte; a float32 step "
                        f"has B / 2 FLOPs per byte, so B = {expected:g}. Below it a larger batch costs almost nothing "
                        "extra per step; above it each step takes longer in proportion.",
                        f"两道屋顶在 {ROOF_GFLOP_S} / {ROOF_GB_S} = {ridge:g} 次浮点运算每字节处相交；float32 一步解码每字节做 "
                        f"B / 2 次浮点运算，所以 B = {expected:g}。在它之下，批次变大几乎不增加每步的耗时；在它之上，"
                        "每步的耗时随批大小成比例增长。")
    if _close(found, ridge, 0.05):
        return feedback(False, f"{ridge:g} is the intensity where the roofs meet, in FLOPs per byte; now find the B with "
                        "2B / 4 FLOPs per byte equal to it.",
                        f"{ridge:g} 是两道屋顶相交处的算术强度（每字节的浮点运算次数）；接着求使 2B / 4 等于它的 B。")
    feedback(False, "Set 2 × B / 4 (a float32 step's FLOPs per byte) equal to throughput / bandwidth.",
             "令 2 × B / 4（float32 一步解码每字节的浮点运算次数）等于 算力 / 内存带宽。")
