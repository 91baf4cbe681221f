"""Checkers for lesson 14's six exercises, each answer computed from the saved benches.

The bench's line (1), float32's ridge (2), bfloat16's ridge and a prediction for the second machine (3), a per-row int8
quantizer (4), an 8B model on a GPU (5) and section 3's split on the second machine (6).
"""

from __future__ import annotations

import math
import numbers

import torch

from .. import results
from . import as_real_number, checker, feedback, missing
from .saved_model_bench import (close, fitted_line, one_row_bound_ms, outside_products_ms, saved_bfloat16_roofs, saved_one_row_bfloat16,
                                saved_ridge, saved_runs, saved_steps, step_ms)

CHOICES = {"1": "embedding", "2": "kernel", "3": "outside"}  # exercise 1c: why int8 misses its prediction; 2 is right
# Exercise 2: float32 weights, 2 FLOPs per weight per token (one multiply, one add).
FLOAT32 = 4  # bytes a weight
# Exercise 5: an 8-billion-weight model in bfloat16 on one H100 (datasheet: HBM3 bandwidth), with a Llama-3-8B-like
# cache (32 layers, 32 query heads sharing 8 key-value heads of 128 numbers), 64 sequences of 8,192 tokens.
GPU_MODEL_WEIGHTS, BFLOAT16, GPU_TB_S, GPU_MEMORY_GIB = 8e9, 2, 3.35, 80
GPU_LAYERS, GPU_HEADS, GPU_KV_HEADS, GPU_HEAD_DIM, GPU_BATCH, GPU_LENGTH = 32, 32, 8, 128, 64, 8192


@checker
def check_fit(bandwidth_gb_s: object, overhead_ms: object) -> None:
    """Exercise 1a: the bandwidth and fixed cost that the float32 and bfloat16 rows of the saved bench give."""
    if missing(bandwidth_gb_s) or missing(overhead_ms):
        return
    found, fixed = as_real_number(bandwidth_gb_s), as_real_number(overhead_ms)
    if found is None or fixed is None:
        return feedback(False, "Give two numbers: GB per second and milliseconds.", "请给出两个数：每秒的 GB 数和毫秒数。")
    bandwidth, t0 = fitted_line()
    w32, t32 = saved_steps()["float32"]
    with_cache = fitted_line(with_cache=True)
    if close(found, with_cache[0], 0.005) and abs(fixed - with_cache[1]) <= 0.3 and not close(found, bandwidth, 0.005):
        return feedback(True, f"With the cache's bytes in W, as section 5's formula counts them: B ≈ {with_cache[0]:.1f} GB/s and "
                        f"t0 ≈ {with_cache[1]:.1f} ms (the weights alone give {bandwidth:.1f} and {t0:.1f}; the small cache moves "
                        "the fit a little). Halving the bytes cannot halve a step that pays t0 as well.",
                        f"把缓存的字节也算进 W，正是第 5 节公式的算法：B ≈ {with_cache[0]:.1f} GB/s，t0 ≈ {with_cache[1]:.1f} 毫秒"
                        f"（只算权重则是 {bandwidth:.1f} 和 {t0:.1f}；缓存很小，只让拟合挪动一点）。一步还要付出 t0，所以字节数减半，耗时减不到一半。")
    if close(found, bandwidth, 0.01) and abs(fixed - t0) <= 0.3:
        return feedback(True, f"Subtracting the two rows removes t0: B = ΔW / Δt ≈ {bandwidth:.1f} GB/s, then "
                        f"t0 = {t32:.1f} − {w32:.0f} / B ≈ {t0:.1f} ms. Halving the bytes cannot halve a step that "
                        "pays t0 as well.",
                        f"两行相减，t0 就消掉了：B = ΔW / Δt ≈ {bandwidth:.1f} GB/s；再由 t0 = {t32:.1f} − {w32:.0f} / B "
                        f"得 t0 ≈ {t0:.1f} 毫秒。一步还要付出 t0，所以字节数减半，耗时减不到一半。")
    w16, t16 = saved_steps()["bfloat16"]
    for name, zh, (w, t) in (("float32", "float32", (w32, t32)), ("bfloat16", "bfloat16", (w16, t16))):
        if close(found, w / t, 0.01):
            return feedback(False, f"That is {name}'s bytes over its time: it counts the fixed cost as reading. Use both rows.",
                            f"这是 {zh} 的字节数除以它的耗时：把固定开销也算成了读内存的时间。请用两行数据一起求。")
    if close(found, saved_bfloat16_roofs()[1], 0.02):
        return feedback(False, "That is the bench's bandwidth roof, a measurement; B here is the slope of the line through the two rows.",
                        "这是基准测试测得的带宽屋顶；这里的 B 是穿过两行数据的那条直线的斜率。")
    if close(found, bandwidth * 1e3, 0.03) or close(found, bandwidth / 1e3, 0.03):
        return feedback(False, "Check the units: MB per ms is GB per second.", "检查单位：每毫秒的 MB 数就是每秒的 GB 数。")
    feedback(False, "Write t = W / B + t0 for both rows and subtract one from the other: t0 cancels.",
             "对两行各写出 t = W / B + t0，再相减：t0 就消掉了。")


@checker
def check_int8_prediction(int8_ms: object) -> None:
    """Exercise 1b: int8's decode step as the fitted line predicts it from int8's weight bytes."""
    if missing(int8_ms):
        return
    found = as_real_number(int8_ms)
    if found is None:
        return feedback(False, "Give a number of milliseconds.", "请给出一个毫秒数。")
    bandwidth, t0 = fitted_line()
    w8, measured = saved_steps()["int8"]
    expected = w8 / bandwidth + t0
    if close(found, expected, 0.05):
        return feedback(True, f"{w8:.0f} MB / {bandwidth:.1f} GB/s + {t0:.1f} ms ≈ {expected:.1f} ms; the bench measured "
                        f"{measured:.1f} ms.",
                        f"{w8:.0f} MB / {bandwidth:.1f} GB/s + {t0:.1f} 毫秒 ≈ {expected:.1f} 毫秒；基准测试实测是 "
                        f"{measured:.1f} 毫秒。")
    if close(found, measured, 0.02):
        return feedback(False, "That is what the bench measured; predict it from int8's bytes with the line of 1a.",
                        "这是基准测试实测的耗时；请用练习 1（a）的直线，由 int8 的字节数来预测。")
    if close(found, w8 / bandwidth, 0.05):
        return feedback(False, "Add the fixed cost t0: every step pays it.", "还要加上固定开销 t0：每一步都要付出它。")
    feedback(False, "t = int8's weight MB / B + t0, with B and t0 from 1a.", "t = int8 的权重 MB 数 / B + t0，B 和 t0 取自练习 1（a）。")


@checker
def check_int8_outside(int8_ms: object, bfloat16_ms: object) -> None:
    """Exercise 1c, first part: int8's and bfloat16's batch-1 steps minus their one-row products timed alone."""
    if missing(int8_ms) or missing(bfloat16_ms):
        return
    found = as_real_number(int8_ms), as_real_number(bfloat16_ms)
    if None in found:
        return feedback(False, "Give two numbers of milliseconds: int8's first, then bfloat16's.",
                        "请给出两个毫秒数：先写 int8 的，再写 bfloat16 的。")
    outside = outside_products_ms(saved_runs()[0])
    expected = outside["int8"], outside["bfloat16"]
    right = all(abs(f - e) <= 0.2 for f, e in zip(found, expected))  # within 0.2 ms: the two differ by 0.3, in this order
    if not right and all(abs(f - e) <= 0.2 for f, e in zip(found, expected[::-1])):
        return feedback(False, "Those are the right two numbers in the other order: int8's first, then bfloat16's.",
                        "两个数都对，只是顺序反了：先写 int8 的，再写 bfloat16 的。")
    if right:
        return feedback(True, f"int8 leaves {expected[0]:.1f} ms outside its one-row products and bfloat16 {expected[1]:.1f} (from the printed times): about the "
                        "same, so option 3 does not hold: int8's miss is in its products. Read the direction, not the size: the steps and the "
                        "kernels come from two loops, so this holds only if the loops shift both formats alike (and the int8 kernel line "
                        "also quantizes the table).",
                        f"按打印出来的时间算，int8 在只乘一个向量的矩阵乘法之外剩下 {expected[0]:.1f} 毫秒，bfloat16 剩下 {expected[1]:.1f} 毫秒，差不多，"
                        "所以选项 3 站不住：int8 比预测慢的部分在矩阵乘法里。只看方向，别看大小：一步和内核来自两个循环，只有两个循环对两种格式的影响相同，"
                        "这个结论才成立（而且 int8 内核那一行连嵌入表也量化了）。")
    if close(found[0], saved_steps()["int8"][1] - step_ms(saved_runs()[0], "matmul floor"), 0.03):
        return feedback(False, "That subtracts float32's products (the matmul floor); subtract int8's own, the int8 kernel line.",
                        "这减的是 float32 的矩阵乘法（矩阵乘法下限）；请减去 int8 自己的，即 int8 内核那一行。")
    feedback(False, "Take each format's batch-1 step (printed at the top of this cell, or section 7's table) minus its one-row products (section 7's kernel lines: "
             "the int8 kernel, bfloat16 F.linear).",
             "用每种格式批大小 1 的一步（这个单元格开头打印的，或第 7 节的表）减去它只乘一个向量的矩阵乘法（第 7 节单独给内核计时的几行：int8 内核、"
             "bfloat16 F.linear）。")


@checker
def check_int8_miss(reason: object) -> None:
    """Exercise 1c: the letter of the reason why int8's step is slower than its bytes predict."""
    if missing(reason):
        return
    whole = isinstance(reason, numbers.Real) and not isinstance(reason, bool) and float(reason).is_integer()
    picked = CHOICES.get(reason.strip() if isinstance(reason, str) else str(int(reason)) if whole else "")
    if picked is None:
        return feedback(False, "Give one option's number: 1, 2 or 3.", "请给出一个选项的序号：1、2 或 3。")
    if picked == "kernel":
        first = saved_runs()[0]
        kernel = first["int8_kernel"]
        read = kernel["int8_bytes"] / kernel["int8_kernel_ms"] / 1e6  # GB/s
        bf16_read = kernel["bfloat16_bytes"] / kernel["bfloat16_linear_ms"] / 1e6  # GB/s
        return feedback(True, f"The int8 kernel alone read its {kernel['int8_bytes'] / 1e6:.0f} MB at {read:.1f} GB/s, about half "
                        f"bfloat16's F.linear's {bf16_read:.1f}, so it took nearly as long for half the bytes "
                        f"({kernel['int8_kernel_ms']:.1f} against {kernel['bfloat16_linear_ms']:.1f} ms); the appendix, for section 7, estimates "
                        f"most of its time as paid once per weight read. Option 1 does not hold: the {saved_steps()['int8'][0]:.0f} MB already "
                        "count the bfloat16 table. Option 3 is what the subtraction below tests.",
                        f"单独计时时，int8 内核读它的 {kernel['int8_bytes'] / 1e6:.0f} MB，速度只有 {read:.1f} GB/s，约为 bfloat16 "
                        f"的 F.linear（{bf16_read:.1f} GB/s）的一半，所以字节数只有一半，耗时却差不多（{kernel['int8_kernel_ms']:.1f} "
                        f"毫秒对 {kernel['bfloat16_linear_ms']:.1f} 毫秒）；附录“第 7 节补充”估计，它的时间大半是每读一遍权重付一次的。"
                        f"选项 1 站不住：{saved_steps()['int8'][0]:.0f} MB 里已经算上了 bfloat16 的嵌入表。选项 3 对不对，下面的减法来检验。")
    if picked == "embedding":
        w8 = saved_steps()["int8"][0]
        return feedback(False, f"The {w8:.0f} MB already count the bfloat16 embedding table: the prediction used int8's real bytes.",
                        f"{w8:.0f} MB 里已经算上了 bfloat16 的嵌入表：预测用的正是 int8 实际读取的字节数。")
    feedback(False, "Test it with the subtraction below: if option 3 held, int8's step would leave more time outside its "
             "one-row products than bfloat16's.",
             "用下面的减法检验一下：要是选项 3 成立，int8 的一步在只乘一个向量的矩阵乘法之外剩下的时间，应该比 bfloat16 的多。")


@checker
def check_outside(outside_ms: object) -> None:
    """Exercise 1d: float32's time outside its matrix products, its decode step minus the matmul floor."""
    if missing(outside_ms):
        return
    found = as_real_number(outside_ms)
    if found is None:
        return feedback(False, "Give a number of milliseconds.", "请给出一个毫秒数。")
    expected, (bandwidth, t0) = outside_products_ms(saved_runs()[0])["float32"], fitted_line()
    roof, bfloat16_out = saved_bfloat16_roofs()[1], outside_products_ms(saved_runs()[0])["bfloat16"]
    if close(found, expected, 0.03):
        return feedback(True, f"{expected:.1f} ms outside the products, against the line's t0 ≈ {t0:.1f} ms, and its B ≈ {bandwidth:.1f} "
                        f"GB/s against the bench's roof, {roof:.1f}. The line assumed both formats read at one rate and pay one fixed "
                        f"cost, but each format's products read at their own rate (section 7's kernel lines), and outside them bfloat16's "
                        f"step leaves {bfloat16_out:.1f} ms against float32's {expected:.1f} (from two loops: read the direction, not the size): "
                        "B and t0 fit these two rows; they are not "
                        "the memory's speed and a step's true overhead.",
                        f"矩阵乘法之外是 {expected:.1f} 毫秒，而直线给出的 t0 ≈ {t0:.1f} 毫秒；它的 B ≈ {bandwidth:.1f} GB/s 也远低于"
                        f"基准测试的屋顶 {roof:.1f} GB/s。那条直线假定两种格式以同一个速率读字节、付同一份固定开销，可每种格式的矩阵乘法"
                        f"各有各的读取速度（第 7 节单独给内核计时的几行），矩阵乘法之外，bfloat16 剩下 {bfloat16_out:.1f} 毫秒，float32 只剩 {expected:.1f} 毫秒"
                        "（来自两个不同的循环，只能看方向，不能看大小）："
                        "B 和 t0 只是恰好穿过这两行的直线的参数，不是内存的速度，"
                        "也不是一步真正的固定开销。")
    if close(found, t0, 0.03):
        return feedback(False, "That is t0 from the line of 1a; read the two rows of the table instead: step minus floor.",
                        "这是练习 1（a）直线给出的 t0；请直接读表里的两行：一步解码减去矩阵乘法下限。")
    feedback(False, "Subtract the matmul floor's batch-1 step from float32's (section 3's table).",
             "用 float32 批大小 1 的一步解码减去矩阵乘法下限（第 3 节的表）。")


@checker
def check_ridge_batch(answer: object) -> None:
    """Exercise 2: the batch b at which a float32 decode step's weights reach the bench's ridge (the cache left out)."""
    if missing(answer):
        return
    found = as_real_number(answer)
    if found is None:
        return feedback(False, "Give a batch size.", "请给出一个批大小。")
    ridge = saved_ridge()
    expected = FLOAT32 * ridge / 2  # 2 FLOPs per token per 4-byte weight: b / 2 FLOPs per byte
    if found in (math.floor(expected), math.ceil(expected)) or abs(found - expected) < 0.3:  # 11 or 12 for 11.9, or about 11.9
        return feedback(True, f"A float32 step does 2b / {FLOAT32} = b / 2 FLOPs per byte, so it reaches the ridge, {ridge:.1f}, at "
                        f"b ≈ {expected:.1f}: between the table's batches 8 and 16. Part (b) asks how near the compute roof the floor runs there.",
                        f"float32 一步解码每字节做 2b / {FLOAT32} = b / 2 次浮点运算，所以在 b ≈ {expected:.1f} 时到达脊点 {ridge:.1f}，"
                        "落在表里批大小 8 和 16 之间。（b）问的是矩阵乘法下限在这里离算力屋顶有多近。")
    if close(found, ridge, 0.05):
        return feedback(False, f"{ridge:.1f} is the ridge itself, in FLOPs per byte; find the b whose b / 2 FLOPs per byte equal it.",
                        f"{ridge:.1f} 是脊点本身（每字节的浮点运算次数）；要求的是使 b / 2 等于它的 b。")
    if close(found, ridge / 2, 0.05) or close(found, ridge * FLOAT32, 0.05):
        return feedback(False, "A float32 step does 2 FLOPs per 4-byte weight per token: b / 2 FLOPs per byte, so b = 2 × ridge.",
                        "float32 的一步解码，每个 4 字节的权重对每个词元做 2 次浮点运算：每字节 b / 2 次，所以 b = 2 × 脊点。")
    feedback(False, "Set b / 2 (a float32 step's FLOPs per byte at batch b) equal to the ridge printed above.",
             "令 b / 2（批大小为 b 时 float32 一步解码每字节的浮点运算次数）等于上面打印的脊点。")


@checker
def check_floor_share(answer: object) -> None:
    """Exercise 2b: the share of the compute roof the matmul floor reaches at batch 16, on paper past the ridge."""
    if missing(answer):
        return
    found = as_real_number(answer)
    if found is None:
        return feedback(False, "Give a fraction, such as 0.5.", "请给出一个小数，例如 0.5。")
    first = saved_runs()[0]
    row, roof = results.model_timing(first, "matmul floor", 16), results.model_roofs(first)["matmul_gflop_s"]
    gflop_s = 2 * row["weight_bytes"] / FLOAT32 * 16 / row["ms"] / 1e6  # 2 FLOPs per weight per row; FLOPs per ms / 1e6
    expected = gflop_s / roof
    if close(found, expected, 0.03):
        return feedback(True, f"2 × {row['weight_bytes'] / FLOAT32 / 1e6:.1f} M weights × 16 rows in {row['ms']:.1f} ms is "
                        f"{gflop_s:.1f} GFLOP/s, {expected:.2f} of the {roof:.1f} GFLOP/s roof: on paper past the ridge, yet far "
                        "from bound by arithmetic, since a few-row kernel most likely does not run the way the large matmul that "
                        "measured the roof does.",
                        f"2 × {row['weight_bytes'] / FLOAT32 / 1e8:.3f} 亿个权重 × 16 行，用了 {row['ms']:.1f} 毫秒，合 {gflop_s:.1f} GFLOP/s，"
                        f"是 {roof:.1f} GFLOP/s 这道屋顶的 {expected:.2f} 倍：纸面上已经过了脊点，却还远没有受算力限制，"
                        "因为只乘几行的内核很可能和测屋顶的那次大矩阵乘法工作方式不同。")
    if close(found, 100 * expected, 0.03):
        return feedback(False, "That is a percentage; give the share as a fraction.", "这是百分数；请写成小数。")
    if close(found, gflop_s, 0.03):
        return feedback(False, "That is the floor's GFLOP/s; divide it by the compute roof.", "这是矩阵乘法下限的 GFLOP/s；再除以算力屋顶。")
    if close(found, expected / 16, 0.03) or close(found, expected * FLOAT32, 0.03):
        return feedback(False, "Count 2 FLOPs per weight for each of the 16 rows, and 4 bytes a float32 weight.",
                        "每个权重对 16 行中的每一行各做 2 次浮点运算；float32 的每个权重是 4 字节。")
    feedback(False, "Divide the floor's FLOPs (2 × weights × 16) by its time to get GFLOP/s, then by the compute roof.",
             "用矩阵乘法下限的浮点运算次数（2 × 权重个数 × 16）除以它的耗时，得到 GFLOP/s，再除以算力屋顶。")


@checker
def check_bfloat16_ridge(ridge: object, speedup: object) -> None:
    """Exercise 3: bfloat16's ridge on the second machine, and how much faster the roofline says one-row products get there."""
    if missing(ridge) or missing(speedup):
        return
    found, faster = as_real_number(ridge), as_real_number(speedup)
    if found is None or faster is None:
        return feedback(False, "Give two numbers: FLOPs per byte, and how many times as fast.",
                        "请给出两个数：每字节的浮点运算次数，以及速度是原来的几倍。")
    roof, bandwidth, second_roof, second_bandwidth = saved_bfloat16_roofs()
    first_ms, second_ms, megabytes = saved_one_row_bfloat16()
    bounds = one_row_bound_ms(roof, bandwidth, megabytes), one_row_bound_ms(second_roof, second_bandwidth, megabytes)
    expected, predicted = second_roof / second_bandwidth, bounds[0] / bounds[1]
    second = saved_runs()[1]
    if close(found, roof / bandwidth, 0.03):
        return feedback(False, "That is the first machine's ridge, section 7's; (a) asks for the second machine's: its bfloat16 "
                        "roof over its bandwidth roof (the second line).",
                        "这是第一台机器的脊点，第 7 节算过；（a）问的是第二台机器的：用它的 bfloat16 屋顶除以它的带宽屋顶（第二行）。")
    if close(found, second["format_roofs"]["float32"] / second_bandwidth, 0.03):
        return feedback(False, "That divides float32's compute roof by the bandwidth; bfloat16's ridge uses bfloat16's own compute "
                        "roof (the second line's first number).",
                        "这是用 float32 的算力屋顶除以带宽；bfloat16 的脊点要用 bfloat16 自己的算力屋顶（第二行的第一个数）。")
    if close(found, second_bandwidth / second_roof, 0.03):
        return feedback(False, "That is bandwidth over throughput: the ridge is GFLOP/s divided by GB/s.",
                        "这是带宽除以算力；脊点是 GFLOP/s 除以 GB/s。")
    if not close(found, expected, 0.03):
        return feedback(False, "The ridge is where the roofs meet: the second machine's bfloat16 GFLOP/s divided by its GB/s.",
                        "脊点是两道屋顶的交点：第二台机器的 bfloat16 GFLOP/s 除以它的 GB/s。")
    if close(faster, first_ms / second_ms, 0.03):
        return feedback(False, "That is what the bench measured; (b) asks what the roofline predicts.",
                        "这是基准测试实测的倍数；（b）问的是屋顶线模型预测的倍数。")
    if close(faster, second_roof / roof, 0.03):
        return feedback(False, f"That is the ratio of the compute roofs; but on the second machine bfloat16's ridge is at "
                        f"{expected:.1f} FLOPs per byte, so a 1-FLOP-per-byte product is bound by its bytes there. Take each "
                        "machine's bound: the larger of FLOPs / roof and bytes / bandwidth.",
                        f"这是两道算力屋顶之比；可是第二台机器上 bfloat16 的脊点在每字节 {expected:.1f} 次浮点运算，"
                        "每字节 1 次的乘法在那里受带宽限制。请取每台机器的下限：“浮点运算 / 算力屋顶”与“字节数 / 带宽屋顶”中较大的那个。")
    if close(faster, second_bandwidth / bandwidth, 0.03):
        return feedback(False, "That is the ratio of the bandwidth roofs; but on the first machine a 1-FLOP-per-byte bfloat16 "
                        "product is right of the ridge (section 7), so its bound there is FLOPs / roof.",
                        "这是两道带宽屋顶之比；可是在第一台机器上，每字节 1 次浮点运算的 bfloat16 乘法在脊点右边（第 7 节），"
                        "那里的下限是“浮点运算 / 算力屋顶”。")
    if not close(faster, predicted, 0.03):
        return feedback(False, "Each machine's least time is the larger of FLOPs / roof and bytes / bandwidth (MFLOP = MB here); "
                        "divide the first machine's by the second's.",
                        "每台机器的耗时下限是“浮点运算 / 算力屋顶”与“字节数 / 带宽屋顶”中较大的那个（这里 MFLOP 数等于 MB 数）；"
                        "用第一台的下限除以第二台的。")
    feedback(True, f"On the second machine the ridge is {second_roof:.1f} / {second_bandwidth:.1f} ≈ {expected:.1f} FLOPs per byte, "
             "so a batch-1 bfloat16 step (about 1 FLOP per byte) sits far left of it, bound by its bytes: "
             f"{bounds[1]:.1f} ms at its roofs for its one-row products, against the first machine's {bounds[0]:.1f} ms by "
             f"arithmetic (section 7): {predicted:.2f} times as fast. The bench measured {first_ms / second_ms:.2f} times"
             f"{', slower' if second_ms > first_ms else ''} ({first_ms:.1f} to {second_ms:.1f} ms), {second_ms / bounds[1]:.1f} "
             "times the second machine's bound. That bears on the second machine's kernel, another bfloat16 path, not on the "
             "first machine's: roofs measured with large products need not predict one-row kernels.",
             f"第二台机器上，脊点是 {second_roof:.1f} / {second_bandwidth:.1f} ≈ {expected:.1f}，即每字节 {expected:.1f} 次浮点运算，"
             f"所以批大小 1 的 bfloat16 一步（每字节约 1 次）远在它左边，受带宽限制：按两道屋顶，只乘一个向量的那些乘法要 {bounds[1]:.1f} 毫秒，"
             f"而第一台机器上按运算要 {bounds[0]:.1f} 毫秒（第 7 节）：速度应是第一台的 {predicted:.2f} 倍。基准测试实测只是 "
             f"{first_ms / second_ms:.2f} 倍{'，反而变慢了' if second_ms > first_ms else ''}（从 {first_ms:.1f} 毫秒到 {second_ms:.1f} 毫秒），"
             f"是第二台机器下限的 {second_ms / bounds[1]:.1f} 倍。这说的是第二台机器的内核，它走的是另一条 bfloat16 路径，说明不了第一台："
             "用大矩阵乘法测出的屋顶，未必能预测只乘一个向量的内核。")


def _int8_problem(found: object, weight: torch.Tensor) -> tuple[str, str] | None:
    """What is wrong with a learner's (codes, scales) for `weight`, in both languages; None when nothing is."""
    if found is None:
        return "Your function returns None: return the codes and the scales, as (codes, scales).", "你的函数返回了 None：请返回编码和缩放系数，写成 (codes, scales)。"
    if not (isinstance(found, tuple) and len(found) == 2 and all(isinstance(t, torch.Tensor) for t in found)):
        return "Return two tensors: (codes, scales).", "请返回两个张量：(codes, scales)。"
    codes, scales = found
    rows = weight.shape[0]
    if codes.shape != weight.shape or scales.numel() != rows:
        return (f"codes should have the matrix's shape {tuple(weight.shape)}, and scales one number per row ({rows}).",
                f"codes 的形状应与矩阵相同，即 {tuple(weight.shape)}；scales 每行一个数，共 {rows} 个。")
    scales = scales.detach().reshape(-1, 1).float()
    per_row = weight.abs().amax(dim=1, keepdim=True) / 127
    if torch.allclose(scales, torch.full_like(scales, weight.abs().max().item() / 127), rtol=1e-5):
        return ("Every row has the same scale: one scale for the whole matrix. Take each row's own largest |w|: "
                "w.abs().amax(dim=1, keepdim=True) / 127.",
                "每一行的缩放系数都一样：这是整个矩阵共用一个缩放系数。请取每一行自己的最大 |w|："
                "w.abs().amax(dim=1, keepdim=True) / 127。")
    if torch.allclose(scales, per_row, rtol=5e-3) and not torch.allclose(scales, per_row, rtol=1e-5):  # half precision
        return ("Your scales are each row's largest |w| / 127, but rounded (half precision?): keep them in float32.",
                "你的缩放系数确实是每行最大的 |w| / 127，只是被舍入了（半精度？）：请保持 float32。")
    if not torch.allclose(scales, per_row, rtol=1e-5):
        return "A row's scale is its largest |w| divided by 127, so its largest weight becomes ±127.", "每一行的缩放系数是这一行最大的 |w| 除以 127，这样最大的权重正好变成 ±127。"
    if codes.dtype != torch.int8:
        return "Store the codes as int8, 1 byte each: round, then .to(torch.int8).", "编码要存成 int8，每个 1 字节：先舍入，再 .to(torch.int8)。"
    if ((codes.float() * scales - weight).abs() > per_row / 2 * (1 + 1e-5)).any():
        if torch.equal(codes, (weight / per_row).to(torch.int8)):
            return ("The codes are cut, not rounded: .to(torch.int8) drops the fraction. Round first: torch.round(w / s).to(torch.int8).",
                    "编码是截断的，不是舍入的：.to(torch.int8) 会直接丢掉小数部分。请先舍入：torch.round(w / s).to(torch.int8)。")
        return "Some weights come back more than half a step (s / 2) from their value: round w / s to the nearest integer.", "有的权重还原后与原值相差超过半个步长（s / 2）：请把 w / s 舍入到最近的整数。"
    return None


@checker
def check_int8_rows(quantize: object, weight: object) -> None:
    """Exercise 4: the learner's int8_rows(w) -> (codes, scales) on a weight matrix: one scale per row, its largest
    |w| / 127, codes rounded and stored as int8, so every weight comes back within half a step."""
    if missing(quantize):
        return
    if not callable(quantize):
        return feedback(False, "Define a function int8_rows(w) and pass the function itself.", "请定义函数 int8_rows(w)，并把函数本身传进来。")
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.is_floating_point():
        return feedback(False, "Pass a 2-d float weight matrix as the second argument, such as model.blocks[0].attention.qkv.weight.",
                        "第二个参数请传一个二维的浮点权重矩阵，例如 model.blocks[0].attention.qkv.weight。")
    matrix = weight.detach().float()
    try:
        found = quantize(matrix.clone())
    except Exception as error:  # the learner's code: say what it raised
        return feedback(False, f"Your function raised {type(error).__name__}: {error}", f"你的函数出错了：{type(error).__name__}：{error}")
    problem = _int8_problem(found, matrix)
    if problem is not None:
        return feedback(False, *problem)
    codes, scales = found
    worst = ((codes.float() * scales.reshape(-1, 1).float() - matrix).abs() / (matrix.abs().amax(dim=1, keepdim=True) / 127)).max().item()
    rows, size = matrix.shape[0], matrix.numel()
    feedback(True, f"All {size:,} weights come back within half a step (the worst at {worst:.3f} of a step). As int8 codes and "
             f"float32 scales the matrix takes {(size + 4 * rows) / 1e6:.2f} MB, against {4 * size / 1e6:.2f} MB in float32.",
             f"{size:,} 个权重还原后都在半个步长以内（最差的是 {worst:.3f} 个步长）。存成 int8 编码加 float32 缩放系数，这个矩阵占 "
             f"{(size + 4 * rows) / 1e6:.2f} MB，float32 要 {4 * size / 1e6:.2f} MB。")


@checker
def check_gpu_estimate(tokens_per_second: object, cache_share: object) -> None:
    """Exercise 5: the most tokens a second an 8B bfloat16 model can decode at batch 1 on one H100 (its weights read
    once a step at the datasheet bandwidth, the cache left out), and its cache's bytes over its weights' at batch 64."""
    if missing(tokens_per_second) or missing(cache_share):
        return
    found, share = as_real_number(tokens_per_second), as_real_number(cache_share)
    if found is None or share is None:
        return feedback(False, "Give two numbers: tokens a second, and how many times the weights' bytes.",
                        "请给出两个数：每秒的词元数，以及是权重字节数的几倍。")
    step_bytes = GPU_MODEL_WEIGHTS * BFLOAT16
    most = GPU_TB_S * 1e12 / step_bytes  # a step reads every weight once
    per_token = 2 * GPU_LAYERS * GPU_KV_HEADS * GPU_HEAD_DIM * BFLOAT16  # a key and a value per layer and key-value head
    expected = per_token * GPU_LENGTH * GPU_BATCH / step_bytes
    if close(found, 2 * most, 0.03):
        return feedback(False, "That counts 1 byte a weight: bfloat16 takes 2.", "这是按每个权重 1 字节算的：bfloat16 每个权重占 2 字节。")
    if close(found, most / 1e3, 0.03) or close(found, most * 1e3, 0.03):
        return feedback(False, "Check the units: 3.35 TB/s is 3.35e12 bytes a second.", "检查单位：3.35 TB/s 是每秒 3.35e12 字节。")
    if not close(found, most, 0.03):
        return feedback(False, "At batch 1 a step reads every weight once: tokens a second ≤ bandwidth / (weights × 2 bytes).",
                        "批大小 1 时，一步把每个权重读一遍：每秒词元数 ≤ 带宽 / （权重个数 × 2 字节）。")
    slips = {expected / 2: ("Count both the key and the value of every cached token.", "每个缓存词元既有键也有值，两个都要算。"),
             expected * 2: ("The cache is bfloat16 here: 2 bytes a number.", "这里的缓存是 bfloat16：每个数 2 字节。"),
             expected * GPU_HEADS / GPU_KV_HEADS: (f"Only the {GPU_KV_HEADS} key-value heads are cached, not all {GPU_HEADS} query heads.",
                                                   f"缓存的只是 {GPU_KV_HEADS} 个键值头，而不是全部 {GPU_HEADS} 个查询头。"),
             expected / GPU_BATCH: ("Each of the 64 sequences reads its own cache: multiply by the batch.", "64 条序列各读各的缓存：要乘以批大小。"),
             expected / GPU_LAYERS: ("Every layer keeps its own keys and values: multiply by the 32 layers.", "每一层都存着自己的键和值：要乘以 32 层。")}
    for wrong, (en, zh) in slips.items():
        if close(share, wrong, 0.03):
            return feedback(False, en, zh)
    if not close(share, expected, 0.03):
        return feedback(False, "Cache bytes = 2 (key, value) × layers × key-value heads × head size × 2 bytes × tokens × batch; "
                        "divide by the weights' 16 GB.",
                        "缓存字节数 = 2（键和值）× 层数 × 键值头数 × 每个头的维数 × 2 字节 × 词元数 × 批大小；再除以权重的 16 GB。")
    together, memory = (step_bytes + per_token * GPU_LENGTH * GPU_BATCH) / 1e9, GPU_MEMORY_GIB * 2**30 / 1e9  # GB: weights and cache; the H100's binary 80 GiB
    feedback(True, f"{GPU_TB_S} TB/s / {step_bytes / 1e9:.0f} GB ≈ {most:.0f} tokens a second at most, however fast the GPU "
             f"computes. At batch {GPU_BATCH} and {GPU_LENGTH:,} tokens the cache is {per_token * GPU_LENGTH * GPU_BATCH / 1e9:.1f} GB, "
             f"{expected:.1f} times the weights: a batch shares one read of the weights but not of the cache. Weights and cache "
             f"together, {together:.0f} GB, take nearly all of one H100's "
             f"memory (the datasheet's {GPU_MEMORY_GIB} GB are binary: about {memory:.0f} GB), with about {memory - together:.0f} GB left for activations: that is why serving "
             "shrinks the cache and manages it by pages (lessons 15 and 17).",
             f"{GPU_TB_S} TB/s / {step_bytes / 1e9:.0f} GB ≈ 每秒最多 {most:.0f} 个词元，不管 GPU 算得多快。批大小 {GPU_BATCH}、"
             f"{GPU_LENGTH:,} 个词元时，缓存有 {per_token * GPU_LENGTH * GPU_BATCH / 1e9:.1f} GB，是权重的 {expected:.1f} 倍：一个批次共用一次权重读取，"
             f"却不共用缓存。权重加缓存共 {together:.0f} GB，差不多占满一块 H100 的"
             f"显存（数据手册上的 {GPU_MEMORY_GIB} GB 按二进制计，约合 {memory:.0f} GB），留给激活值的只剩约 {memory - together:.0f} GB：所以推理服务要缩小缓存，还要按页管理它（第 15、17 课）。")


@checker
def check_step_factors(bytes_ms: object, against_prefill: object, against_bytes: object) -> None:
    """Exercise 6: section 3's two factors on the second machine's saved float32 rows."""
    if missing(bytes_ms) or missing(against_prefill) or missing(against_bytes):
        return
    found = [as_real_number(x) for x in (bytes_ms, against_prefill, against_bytes)]
    if None in found:
        return feedback(False, "Give three numbers: milliseconds, then two ratios.", "请给出三个数：一个毫秒数，再加两个倍数。")
    first, second = saved_runs()
    (ms, prefill, step), mine = results.step_factors(second), results.step_factors(first)
    tokens = results.model_timing(second, "float32", phase="prefill")["length"]
    if close(found[0], ms * second["roofs"]["bandwidth_gb_s"] / first["roofs"]["bandwidth_gb_s"], 0.03):
        return feedback(False, "That divides by the first machine's roof; use the second machine's, printed above.",
                        "这是除以第一台机器的屋顶得到的；请用上面打印的第二台机器的屋顶。")
    if not close(found[0], ms, 0.03):  # 3% also takes the weights alone, leaving out the small cache
        return feedback(False, "The step's bytes (weights and cache) over the bandwidth roof: MB / (GB/s) = ms.",
                        "一步的字节数（权重加缓存）除以带宽屋顶：MB / (GB/s) = 毫秒。")
    if close(found[1], prefill / tokens, 0.05):
        return feedback(False, f"Divide the prefill's time by its {tokens} tokens first: a prefill token's time.",
                        f"先把预填充的耗时除以它的 {tokens} 个词元，得到预填充每个词元的耗时。")
    if close(found[1], 1 / prefill, 0.05) or close(found[2], 1 / step, 0.05):
        return feedback(False, "Turn the ratio over: how many times as long, so the longer time on top.",
                        "把比值倒过来：问的是“是几倍”，耗时长的放在分子上。")
    if not (close(found[1], prefill, 0.05) and close(found[2], step, 0.05)):
        return feedback(False, "(b) is (a) over one prefill token's ms; (c) the measured step's ms over (a).",
                        "（b）是（a）除以预填充每个词元的毫秒数；（c）是实测一步的毫秒数除以（a）。")
    feedback(True, f"{ms:.1f} ms of bytes at the roof, {prefill:.1f} times a prefill token's time, and the step {step:.1f} times "
             f"its bytes: the same two-part answer as the first machine's {mine[1]:.1f} and {mine[2]:.1f}. The second machine's "
             "higher roof shrinks the bytes' time more than its faster prefill shrinks a prefill token's, and its products read "
             "further below that roof (section 3's bar), so the second factor grows.",
             f"按屋顶读字节要 {ms:.1f} 毫秒，是预填充每个词元耗时的 {prefill:.1f} 倍；实测的一步是读字节时间的 {step:.1f} 倍："
             f"和第一台机器的 {mine[1]:.1f} 倍、{mine[2]:.1f} 倍是同样的两段式答案。第二台机器的屋顶更高，读字节的时间缩短得比"
             "预填充每个词元的耗时更多；它的矩阵乘法离屋顶又更远（第 3 节的条形图），所以第二个倍数变大了。")
