"""Lessons 12 and 14: decoding with and without a KV cache (`make bench`, or the bench's --decode)."""

from __future__ import annotations

import math
import statistics

from ..checks import bilingual, check_size, shown
from ..language import table
from .saved import at_length, reads


@reads("SAVED_DECODE", "rows", "variant")
def decode_rows(results: dict, variant: str) -> dict[int, dict]:
    """One variant's saved decode rows ("mha", "gqa", "mqa", "window"), by prompt length."""
    found = {row["length"]: row for row in results["rows"] if row["variant"] == variant}
    if not found:
        measured = list(dict.fromkeys(row["variant"] for row in results["rows"]))
        raise ValueError(bilingual(f"variant={shown(variant)} was not measured; the saved variants are {measured}.",
                                   f"没有测量过 variant={shown(variant, True)}；已保存的有 {measured}。"))
    return found


@reads("SAVED_DECODE", "rows", "variant")
def decode_table(results: dict, language: str = "en") -> str:
    """The numbers lesson 12 quotes: ms per new token with and without the cache, by length, and the cache's size."""

    mha, window = decode_rows(results, "mha"), decode_rows(results, "window")
    headers = (["T", "有缓存（毫秒）", "无缓存（毫秒）", "加速比", "缓存（MiB）", "窗口缓存（MiB）"] if language == "zh"
               else ["T", "with cache (ms)", "without (ms)", "speed-up", "cache (MiB)", "window cache (MiB)"])
    rows = [
        [length, f"{row['cached_ms']:.1f}", f"{row['full_ms']:.0f}",
         f"{row['speedup']:.1f} 倍" if language == "zh" else f"{row['speedup']:.1f}x",
         f"{row['cache_bytes'] / 2**20:.1f}", f"{window[length]['cache_bytes'] / 2**20:.1f}" if length in window else "-"]
        for length, row in sorted(mha.items())
    ]
    return table(headers, rows)


@reads("SAVED_DECODE", "rows", "variant")
def flex_summary(results: dict, language: str = "en") -> str:
    """One saved FlexAttention call with a sliding window: tiles visited, the times, and the ratios timed as neighbouring pairs."""
    flex = results["flex"]
    if "error" in flex:
        return (f"FlexAttention was not measured on the benchmark machine: {flex['error']}." if language != "zh"
                else f"基准测试的机器上没有测量 FlexAttention：{flex['error']}。")
    ms, ratio, (b, h, t, d) = flex["median_ms"], flex["ratios"], flex["shape"]
    values = dict(b=b, h=h, t=t, d=d, window=flex["window"], block=flex["block"], visited=flex["visited_tiles"],
                  causal=flex["causal_tiles"], flex=ms["flex_window"], all_tiles=ms["flex_causal_blocks"],
                  mask=ms["sdpa_mask"], sdpa=ms["sdpa_causal"], calls=flex["calls_per_pair"],
                  skip=1 / ratio["flex_window/flex_causal_blocks"], dense=1 / ratio["flex_window/sdpa_mask"],
                  honest=1 / ratio["flex_window/sdpa_causal"], kernel=ratio["flex_causal_blocks/sdpa_causal"])
    if language == "zh":
        return ("FlexAttention，在形状为 ({b}, {h}, {t}, {d}) 的张量上做一次窗口为 {window} 的注意力，分数块大小 {block}："
                "分块掩码只访问对角线及其下方 {causal} 个分数块中的 {visited} 个。每个比值都在同一进程里两两相邻、交替计时"
                "（每对各 {calls} 次）。\n"
                "  带窗口分块掩码的编译内核：{flex:.1f} 毫秒\n"
                "  同一个内核访问全部因果分数块：{all_tiles:.1f} 毫秒，耗时是带窗口分块掩码版本的 {skip:.1f} 倍\n"
                "  SDPA 加布尔窗口掩码：{mask:.1f} 毫秒，耗时是带窗口分块掩码版本的 {dense:.1f} 倍\n"
                "  不加窗口的因果 SDPA：{sdpa:.1f} 毫秒，耗时是带窗口分块掩码版本的 {honest:.1f} 倍\n"
                "  访问全部因果分数块的编译内核，耗时是因果 SDPA 的 {kernel:.1f} 倍").format(**values)
    return ("FlexAttention, one call on ({b}, {h}, {t}, {d}) with a window of {window} in tiles of {block}: the block mask "
            "visits {visited} of the {causal} tiles on or below the diagonal. Each ratio is timed as a pair of neighbours "
            "in one process, in alternating order ({calls} calls each).\n"
            "  compiled kernel with the window's block mask: {flex:.1f} ms\n"
            "  the same kernel visiting every causal tile: {all_tiles:.1f} ms, {skip:.1f}x as long as the window block mask\n"
            "  SDPA with a boolean window mask: {mask:.1f} ms, {dense:.1f}x as long as the window block mask\n"
            "  causal SDPA without a window: {sdpa:.1f} ms, {honest:.1f}x as long as the window block mask\n"
            "  the compiled kernel visiting every causal tile takes {kernel:.1f}x as long as causal SDPA").format(**values)


@reads("SAVED_DECODE", "rows", "variant")
def decode_split(results: dict, fast: str, slow: str = "mha", length: int = 128) -> dict:
    """Why `fast` ("gqa", "mqa") decodes faster than `slow` at `length`: a constant and a slope, fitted over every T.

    Each variant's time per new token is fitted as a straight line, ms = constant + slope × T, by least
    squares over the saved lengths. The constant is what a step costs whatever the length (mostly reading
    the weights); the slope is what each cached token adds (reading its key and value). The gap at
    `length` splits into the two lines' difference in constants and their difference in slopes × length.
    """
    length = check_size(length, "length")
    fits = {}
    for key in (slow, fast):
        rows = sorted(decode_rows(results, key).values(), key=lambda row: row["length"])
        fit = statistics.linear_regression([row["length"] for row in rows], [row["cached_ms"] for row in rows])
        fits[key] = (fit.intercept, fit.slope)
    weights_share = fits[slow][0] - fits[fast][0]
    cache_share = (fits[slow][1] - fits[fast][1]) * length
    slow_row, fast_row = (at_length(decode_rows(results, key), length) for key in (slow, fast))
    return {
        "length": length,
        "measured_gap_ms": slow_row["cached_ms"] - fast_row["cached_ms"],
        "weights_share_ms": weights_share,  # the difference in constants
        "cache_share_ms": cache_share,  # the difference in slopes, times the length
        "equal_at": weights_share / (fits[slow][1] - fits[fast][1]) if fits[slow][1] > fits[fast][1] else math.inf,
        "weight_bytes": {slow: slow_row.get("weight_bytes"), fast: fast_row.get("weight_bytes")},
        "cache_bytes": {slow: slow_row["cache_bytes"], fast: fast_row["cache_bytes"]},
        "fits": fits,
    }


@reads("SAVED_DECODE", "rows", "variant")
def decode_split_lines(results: dict, language: str = "en", length: int = 128) -> list[str]:
    """Lesson 12's reading of the GQA and MQA gaps: bytes a step reads, and the constant and slope shares, per variant."""
    lines = []
    for fast in ("gqa", "mqa"):
        split = decode_split(results, fast, length=length)
        weights, cache = split["weight_bytes"], split["cache_bytes"]
        (slow_c, slow_s), (fast_c, fast_s) = split["fits"]["mha"], split["fits"][fast]
        values = dict(name=fast.upper(), t=length, gap=split["measured_gap_ms"], w=split["weights_share_ms"],
                      c=split["cache_share_ms"], mha_w=weights["mha"] / 1e6, fast_w=weights[fast] / 1e6,
                      mha_mb=cache["mha"] / 1e6, fast_mb=cache[fast] / 1e6, slow_c=slow_c, slow_s=1e3 * slow_s,
                      fast_c=fast_c, fast_s=1e3 * fast_s, dc=slow_c - fast_c, ds=1e3 * (slow_s - fast_s),
                      equal=round(split["equal_at"], -1))  # to tens: the rounded constants and slopes give the same
        if language == "zh":
            lines += ["{name} 比 MHA 每步快 {gap:.1f} 毫秒（T = {t}）：其中权重更小占 {w:.1f} 毫秒（常数项之差），"
                      "缓存更小占 {c:.1f} 毫秒（斜率之差 × T）".format(**values),
                      "  拟合的每词元耗时：MHA {slow_c:.2f} 毫秒 + 每 1,000 个词元 {slow_s:.3f} 毫秒，{name} {fast_c:.2f} 毫秒 + "
                      "每 1,000 个词元 {fast_s:.3f} 毫秒；两部分在 T ≈ {dc:.3f} / {ds:.3f} × 1,000 ≈ {equal:,.0f} 时相等".format(**values),
                      "  T = {t} 时每一步读取：权重 {mha_w:.0f} MB → {fast_w:.0f} MB，缓存 {mha_mb:.1f} MB → {fast_mb:.1f} MB".format(**values)]
        else:
            lines += ["{name} is {gap:.1f} ms per step faster than MHA at T = {t}: {w:.1f} ms from smaller weights "
                      "(the difference in constants), {c:.1f} ms from a smaller cache (the difference in slopes × T)"
                      .format(**values),
                      "  fitted time per token: MHA {slow_c:.2f} ms + {slow_s:.3f} ms per 1,000 tokens, {name} {fast_c:.2f} ms + "
                      "{fast_s:.3f} ms per 1,000 tokens; the two shares would be equal at T ≈ {dc:.3f} / {ds:.3f} × 1,000 ≈ {equal:,.0f}"
                      .format(**values),
                      "  read per step at T = {t}: weights {mha_w:.0f} MB → {fast_w:.0f} MB, cache {mha_mb:.1f} MB → {fast_mb:.1f} MB"
                      .format(**values)]
    return lines


# Lesson 13: the real model's prefill and decode step (make bench, or python -m attention_utils.course.bench --model).
