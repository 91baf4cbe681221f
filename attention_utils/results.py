"""Saved benchmark results, as the lessons read them: `make bench` writes them, nothing here measures.

Lessons 8 and 9 (and the README) quote numbers from the JSON files in `figures/`, so a lesson
shows the same numbers on every machine and never waits for a timing run.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import statistics
from collections.abc import Callable
from pathlib import Path

from .checks import bilingual, shown
from .language import check_language, get_language, table

ROOT = Path(__file__).resolve().parents[1]
SAVED = ROOT / "figures" / "bench_results.json"  # what lesson 8 and the README quote
SAVED_KERNEL = ROOT / "figures" / "bench_kernel.json"  # what lesson 9 quotes
SAVED_CACHE = ROOT / "figures" / "bench_cache.json"  # what lesson 15 quotes (bench --cache writes it)


def load_saved(path: Path = SAVED) -> dict:
    """The results of the last full `make bench`, as committed next to the figures."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(bilingual(f"path must be a str or pathlib.Path such as results.SAVED_MODEL, got {shown(path)}.",
                                  f"path 必须是字符串或 pathlib.Path，例如 results.SAVED_MODEL，实际是 {shown(path, True)}。"))
    path = Path(path)
    if not path.is_file():
        missing = not path.exists()
        raise (FileNotFoundError if missing else ValueError)(bilingual(
            f"{str(path)!r} {'does not exist' if missing else 'is not a file'}; `make bench` writes the results into "
            "figures/, and `git checkout -- figures/` brings back the committed ones.",
            f"{str(path)!r} {'不存在' if missing else '不是文件'}；`make bench` 会把结果写进 figures/，"
            "`git checkout -- figures/` 可以找回仓库里保存的那一份。"))
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(bilingual(
            f"{path.name} is not readable JSON ({error}); run `make bench` again, or `git checkout -- figures/`.",
            f"{path.name} 不是可读的 JSON（{error}）；请重新运行 `make bench`，或者 `git checkout -- figures/`。")) from None
    if not isinstance(results, dict):
        raise ValueError(bilingual(f"{path.name} holds {type(results).__name__}, not the dict `make bench` writes.",
                                   f"{path.name} 里是 {type(results).__name__}，不是 `make bench` 写出的字典。"))
    return results


def reads(saved: str, table: str, column: str, *keys: str) -> Callable:
    """Decorate a function of `results`: it must get what load_saved(<saved>) returns, whose `table` rows have `column`,
    with `keys` beside it (the results of another bench would fail later with a KeyError that names nothing passed)."""
    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        takes_language = "language" in signature.parameters
        none_is_current = takes_language and signature.parameters["language"].default is None  # the package's language

        @functools.wraps(function)
        def checked(results: dict, *args, **kwargs):
            if takes_language:
                bound = signature.bind(results, *args, **kwargs)
                bound.apply_defaults()
                if not (bound.arguments["language"] is None and none_is_current):
                    check_language(bound.arguments["language"])
            rows = results.get(table) if isinstance(results, dict) else None
            if not (isinstance(rows, list) and rows and all(isinstance(row, dict) and column in row for row in rows)
                    and all(key in results for key in keys)):
                raise (ValueError if isinstance(results, dict) else TypeError)(bilingual(
                    f"results must be what results.load_saved(results.{saved}) returns (rows of '{table}' with "
                    f"'{column}'{''.join(f', {key!r}' for key in keys)}), got {shown(results)}.",
                    f"results 必须是 results.load_saved(results.{saved}) 返回的结果（'{table}' 的每行都有 '{column}'"
                    f"{''.join(f'，还有 {key!r}' for key in keys)}），实际是 {shown(results, True)}。"))
            return function(results, *args, **kwargs)
        return checked
    return decorate


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Exponent k of y ~ x^k: least-squares slope on log-log axes (nan with fewer than two points)."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y > 0]
    if len(points) < 2:
        return math.nan
    return statistics.linear_regression(*zip(*points)).slope


def by_run(rows: list[dict]) -> dict[tuple[str, str, int], dict]:
    """Index summary rows by (implementation, mode, length)."""
    return {(row["implementation"], row["mode"], row["length"]): row for row in rows}


@reads("SAVED", "rows", "implementation")
def headline(results: dict, language: str | None = None) -> list[str]:
    """The numbers lesson 8 quotes, one line each, all at T=1024, in `language` (default: the current one)."""
    index = by_run(results["rows"])
    same = results["interleaved"]
    ms = same["median_ms"]

    def training(key: str) -> dict:
        return index[key, "training", 1024]

    values = dict(
        calls=same["calls"], book=ms["book"], explicit=ms["explicit"], fused=ms["fused"], bare=ms["bare"],
        one_qkv=same["ratios"]["book/explicit"], sdpa=same["ratios"]["explicit/fused"], floor=same["fused_over_bare"],
        mask_ratio=same["ratios"]["bool_mask/fused"],
        train=training("fused")["median_ms"], train_mib=training("fused")["memory_mib"],
        drop=training("fused_dropout")["median_ms"], drop_mib=training("fused_dropout")["memory_mib"],
        book_train=training("book")["median_ms"], book_train_mib=training("book")["memory_mib"],
        drop_ratio=training("fused_dropout")["median_ms"] / training("fused")["median_ms"],
    )
    english = [
        "inference, one process, timed in alternating pairs ({calls} calls each): book {book:.0f} ms, "
        "one QKV projection {explicit:.0f} ms, fused module {fused:.0f} ms, bare floor {bare:.0f} ms",
        "  one QKV projection: {one_qkv:.2f}x as fast as the book; SDPA on top: {sdpa:.2f}x as fast again",
        "  fused module / bare floor: {floor:.3f}",
        "training, separate processes: fused {train:.0f} ms, {train_mib:.0f} MiB; fused with dropout {drop:.0f} ms, "
        "{drop_mib:.0f} MiB ({drop_ratio:.1f}x the time); book {book_train:.0f} ms, {book_train_mib:.0f} MiB",
        "boolean causal mask instead of is_causal=True (one process): {mask_ratio:.2f}x the time",
    ]
    chinese = [
        "推理，同一进程内两两交替计时（每种各调用 {calls} 次）：书中模块 {book:.0f} 毫秒，"
        "合并 QKV 投影 {explicit:.0f} 毫秒，融合模块 {fused:.0f} 毫秒，裸 SDPA 下限 {bare:.0f} 毫秒",
        "  合并 QKV 投影：速度是书中模块的 {one_qkv:.2f} 倍；再换成 SDPA：速度又是前者的 {sdpa:.2f} 倍",
        "  融合模块的耗时是裸 SDPA 下限的 {floor:.3f} 倍",
        "训练，各自独立的进程：融合模块 {train:.0f} 毫秒、{train_mib:.0f} MiB；带 dropout 的融合模块 {drop:.0f} 毫秒、"
        "{drop_mib:.0f} MiB（耗时是前者的 {drop_ratio:.1f} 倍）；书中模块 {book_train:.0f} 毫秒、{book_train_mib:.0f} MiB",
        "用布尔因果掩码代替 is_causal=True（同一进程）：耗时是融合模块的 {mask_ratio:.2f} 倍",
    ]
    chosen = chinese if (language or get_language()) == "zh" else english
    return [line.format(**values) for line in chosen]


# Lesson 12: decoding with and without a KV cache (make bench, or python -m attention_utils.course.bench --decode).
SAVED_DECODE = ROOT / "figures" / "bench_decode.json"


@reads("SAVED_DECODE", "rows", "variant")
def decode_rows(results: dict, variant: str) -> dict[int, dict]:
    """One variant's saved decode rows ("mha", "gqa", "mqa", "window"), by prompt length."""
    return {row["length"]: row for row in results["rows"] if row["variant"] == variant}


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


# Lesson 16: one decode step, KV cache against a fixed state (make bench, or python -m attention_utils.course.bench --recurrent).
SAVED_RECURRENT = ROOT / "figures" / "bench_recurrent.json"


@reads("SAVED_RECURRENT", "rows", "softmax_ms")
def recurrent_table(results: dict, language: str = "en") -> str:
    """The numbers lesson 16 quotes: ms per decode step and bytes kept, by context length, for the three layers."""

    headers = (["T", "softmax + 缓存（毫秒）", "线性注意力（毫秒）", "delta 规则（毫秒）", "缓存（MiB）", "状态（MiB）"]
               if language == "zh" else
               ["T", "softmax + cache (ms)", "linear attention (ms)", "delta rule (ms)", "cache (MiB)", "state (MiB)"])
    rows = [[f"{r['length']:,}", f"{r['softmax_ms']:.2f}", f"{r['linear_ms']:.2f}", f"{r['delta_ms']:.2f}",
             f"{r['softmax_bytes'] / 2**20:.2f}", f"{r['linear_bytes'] / 2**20:.2f}"]
            for r in sorted(results["rows"], key=lambda r: r["length"])]
    return table(headers, rows)


@reads("SAVED_RECURRENT", "rows", "softmax_ms")
def crossovers(results: dict) -> dict:
    """Where the cache starts to cost more than the delta rule's state: in bytes (exact) and in time (interpolated).

    memory: the T at which 2 × T × d_model × 4 bytes of cache equal the state's bytes. time: the first
    pair of measured lengths between which the softmax step becomes slower than the delta-rule step,
    interpolated on log axes (None if it never does, or is slower from the first length on).
    """
    rows = sorted(results["rows"], key=lambda r: r["length"])
    d_model = results["workload"]["d_model"]
    memory = rows[0]["delta_bytes"] / (2 * d_model * 4)
    when = None
    for before, after in zip(rows, rows[1:]):
        gap_before = math.log(before["softmax_ms"] / before["delta_ms"])
        gap_after = math.log(after["softmax_ms"] / after["delta_ms"])
        if gap_before < 0 <= gap_after:
            share = -gap_before / (gap_after - gap_before)
            when = math.exp(math.log(before["length"]) + share * (math.log(after["length"]) - math.log(before["length"])))
            break
    longest = rows[-1]
    ratio = longest["softmax_ms"] / longest["delta_ms"]
    grow = longest["softmax_bytes"] / rows[0]["softmax_bytes"]
    first = rows[0]
    already = first["softmax_ms"] >= first["delta_ms"]
    if when is not None:
        time_en = (f"In time, the softmax step becomes slower than the delta-rule step between T = {before['length']:,} and "
                   f"{after['length']:,} (about T = {when:,.0f})")
        time_zh = (f"在耗时上，softmax 的一步解码在 T = {before['length']:,} 和 {after['length']:,} 之间（约 T = {when:,.0f}）"
                   "开始慢于 delta 规则")
    elif already:
        time_en = (f"In time, the softmax step was already the slower one at T = {first['length']:,}, the shortest context "
                   f"measured ({first['softmax_ms']:.2f} ms against {first['delta_ms']:.2f} ms)")
        time_zh = (f"在耗时上，即使在测量的最短上下文 T = {first['length']:,} 时，softmax 的一步解码也已经更慢"
                   f"（{first['softmax_ms']:.2f} 毫秒对 {first['delta_ms']:.2f} 毫秒）")
    else:
        time_en = "In time, the softmax step stayed faster than the delta-rule step at every length measured"
        time_zh = "在耗时上，测量的每个长度下 softmax 的一步解码都比 delta 规则快"
    en = (f"The cache outgrows the state at T = {memory:,.0f} tokens. {time_en}; at T = {longest['length']:,} it takes "
          f"{ratio:.1f}× as long. From T = {first['length']:,} to {longest['length']:,} the cache grew {grow:,.0f}-fold and "
          "the states not at all.")
    zh = (f"T = {memory:,.0f} 个词元时，缓存就比状态大了。{time_zh}；到 T = {longest['length']:,} 时，耗时是 delta 规则的 "
          f"{ratio:.1f} 倍。从 T = {first['length']:,} 到 {longest['length']:,}，缓存增大到原来的 {grow:,.0f} 倍，状态则一点没变。")
    return {"memory": memory, "time": when, "en": en, "zh": zh}


@reads("SAVED_DECODE", "rows", "variant")
def decode_split(results: dict, fast: str, slow: str = "mha", length: int = 128) -> dict:
    """Why `fast` ("gqa", "mqa") decodes faster than `slow` at `length`: a constant and a slope, fitted over every T.

    Each variant's time per new token is fitted as a straight line, ms = constant + slope × T, by least
    squares over the saved lengths. The constant is what a step costs whatever the length (mostly reading
    the weights); the slope is what each cached token adds (reading its key and value). The gap at
    `length` splits into the two lines' difference in constants and their difference in slopes × length.
    """
    fits = {}
    for key in (slow, fast):
        rows = sorted(decode_rows(results, key).values(), key=lambda row: row["length"])
        fit = statistics.linear_regression([row["length"] for row in rows], [row["cached_ms"] for row in rows])
        fits[key] = (fit.intercept, fit.slope)
    weights_share = fits[slow][0] - fits[fast][0]
    cache_share = (fits[slow][1] - fits[fast][1]) * length
    slow_row, fast_row = decode_rows(results, slow)[length], decode_rows(results, fast)[length]
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
        values = dict(name=fast.upper(), t=length, gap=split["measured_gap_ms"], w=split["weights_share_ms"],
                      c=split["cache_share_ms"], mha_w=weights["mha"] / 1e6, fast_w=weights[fast] / 1e6,
                      mha_c=cache["mha"] / 2**20, fast_c=cache[fast] / 2**20, equal=split["equal_at"])
        if language == "zh":
            lines += ["{name} 比 MHA 每步快 {gap:.1f} 毫秒（T = {t}）：其中权重更小占 {w:.1f} 毫秒（常数项之差），"
                      "缓存更小占 {c:.1f} 毫秒（斜率之差 × T）".format(**values),
                      "  每一步读取：权重 {mha_w:.0f} MB → {fast_w:.0f} MB，缓存 {mha_c:.2f} MiB → {fast_c:.2f} MiB；"
                      "两部分在 T ≈ {equal:,.0f} 时相等".format(**values)]
        else:
            lines += ["{name} is {gap:.1f} ms per step faster than MHA at T = {t}: {w:.1f} ms from smaller weights "
                      "(the difference in constants), {c:.1f} ms from a smaller cache (the difference in slopes × T)"
                      .format(**values),
                      "  read per step: weights {mha_w:.0f} MB → {fast_w:.0f} MB, cache {mha_c:.2f} MiB → {fast_c:.2f} MiB; "
                      "the two shares would be equal at T ≈ {equal:,.0f}".format(**values)]
    return lines


# Lesson 13: the real model's prefill and decode step (make bench, or python -m attention_utils.course.bench --model).
SAVED_MODEL = ROOT / "figures" / "bench_model.json"


@reads("SAVED_MODEL", "rows", "weights")
def model_rows(results: dict, weights: str = "float32", batch: int = 1) -> dict[int, dict]:
    """The saved rows of one weight format and batch size, by prompt length."""
    found = {row["length"]: row for row in results["rows"] if row["weights"] == weights and row["batch"] == batch}
    if not found:
        measured = sorted({(row["weights"], row["batch"]) for row in results["rows"]})
        raise ValueError(bilingual(f"the saved results hold no rows for weights={weights!r} at batch={batch}; measured: {measured}.",
                                   f"已保存的结果里没有 weights={weights!r}、batch={batch} 的记录；测过的有：{measured}。"))
    return found


@reads("SAVED_MODEL", "rows", "weights")
def model_decode_lines(results: dict, language: str = "en", length: int = 128) -> list[str]:
    """What lesson 13 prints from the saved benchmark: prefill and decode step of the real model at one prompt length."""
    row = model_rows(results)[length]
    env = results["environment"]
    values = dict(t=length, prefill=row["prefill_ms"], step=row["decode_ms"], ratio=row["prefill_over_decode"],
                  weights=row["weight_bytes"] / 1e6, cache=row["cache_bytes"] / 2**20, calls=results["workload"]["calls"],
                  date=env["date"], cpu=env["cpu"], threads=env["threads"])
    if language == "zh":
        return ["make bench（{date}，{cpu}，{threads} 个线程），float32，批大小 1，每种交替计时 {calls} 次的中位数：".format(**values),
                "  预填充 {t} 个词元：{prefill:.0f} 毫秒".format(**values),
                "  在有 {t} 个词元的缓存上解码一个词元：{step:.1f} 毫秒".format(**values),
                "  预填充的耗时是一步解码的 {ratio:.1f} 倍（词元数是 {t} 倍）".format(**values),
                "  一步解码读取的字节：权重 {weights:.0f} MB，缓存 {cache:.1f} MiB".format(**values)]
    return ["make bench ({date}, {cpu}, {threads} threads), float32, batch 1, medians of {calls} alternating calls each:"
            .format(**values),
            "  prefill of {t} tokens: {prefill:.0f} ms".format(**values),
            "  one decode step against a cache of {t} tokens: {step:.1f} ms".format(**values),
            "  the prefill takes {ratio:.1f}x as long as one step (for {t}x the tokens)".format(**values),
            "  bytes one decode step reads: weights {weights:.0f} MB, cache {cache:.1f} MiB".format(**values)]


# Lesson 14: the same --model run's formats, batches and roofs (rows named by format, batch and phase).
FORMATS = ("float32", "bfloat16", "int8")
SHOWN_ZH = {"matmul floor": "矩阵乘法下限"}  # how the Chinese tables name a row
TARGETS = {"floor": 0.8, "transformers": 1.1, "best_format": 2.0, "batch8": 4.0, "agreement": 0.9, "perplexity": 0.02}


@reads("SAVED_MODEL", "timings", "format")
def model_timing(results: dict, fmt: str, batch: int = 1, phase: str = "decode") -> dict:
    """The saved timing row of one format ("float32", ..., "transformers float32", "matmul floor"), batch and phase."""
    found = [row for row in results["timings"] if (row["format"], row["batch"], row["phase"]) == (fmt, batch, phase)]
    if not found:
        measured = sorted({(row["format"], row["batch"]) for row in results["timings"] if row["phase"] == phase})
        raise ValueError(bilingual(
            f"the saved results hold no {phase} row for fmt={fmt!r} at batch={batch}; measured: {measured}.",
            f"已保存的结果里没有 fmt={fmt!r}、batch={batch} 的 {phase} 记录；测过的有：{measured}。"))
    return found[0]


def roofline_point(row: dict) -> dict:
    """Where a timing row sits on the roofline: FLOPs per byte read (weights + cache) and GFLOP/s achieved."""
    return {"intensity": row["flops"] / (row["weight_bytes"] + row["cache_bytes"]), "gflop_s": row["flops"] / row["ms"] / 1e6}


@reads("SAVED_MODEL", "timings", "format")
def model_verdicts(results: dict) -> dict:
    """Issue 25's targets, measured: each ratio from rows of the one process, with whether it meets its target."""
    def ms(fmt: str, batch: int = 1) -> float:
        return model_timing(results, fmt, batch)["ms"]

    best = min(FORMATS[1:], key=ms)
    batches = {r["batch"] for r in results["timings"] if (r["format"], r["phase"]) == ("float32", "decode")}
    batch = max(b for b in batches if b <= 8)  # 8, or the largest a quick run measured
    quality = results["quality"][best]
    ppl = quality["perplexity"] / results["quality"]["float32"]["perplexity"] - 1
    measured = {
        "floor": ms("matmul floor") / ms("float32"),  # speed relative to the bare products: 1 = no overhead at all
        "transformers": ms("transformers float32") / ms("float32"),  # > 1: the package is faster
        "best_format": ms("float32") / ms(best),
        "batch8": batch * ms("float32") / ms("float32", batch),  # tokens per second at batch 8 over batch 1
        "free_running": quality["free_running_agreement"], "teacher_forced": quality["teacher_forced_agreement"],
        "perplexity": ppl,
    }
    passes = {key: measured[key] >= TARGETS[key] for key in ("floor", "transformers", "best_format", "batch8")}
    passes |= {key: measured[key] >= TARGETS["agreement"] for key in ("free_running", "teacher_forced")}
    passes["perplexity"] = abs(ppl) <= TARGETS["perplexity"]
    return {"best": best, "batch": batch, "measured": measured, "passes": passes}


@reads("SAVED_MODEL", "timings", "format")
def model_verdict_lines(results: dict, language: str = "en") -> list[str]:
    """One line per target of issue 25: what was measured, the target, ✅ or ❌."""
    v = model_verdicts(results)
    m, ok = v["measured"], {key: "✅" if passed else "❌" for key, passed in v["passes"].items()}
    en = [f"{ok['floor']} float32 step at {m['floor']:.2f} of its matmul floor's speed (target ≥ 0.8)",
          f"{ok['transformers']} float32 step {m['transformers']:.2f}× as fast as transformers (target ≥ 1.1×)",
          f"{ok['best_format']} {v['best']} decodes {m['best_format']:.2f}× as fast as float32 (target ≥ 2×)",
          f"{ok['batch8']} batch {v['batch']} gives {m['batch8']:.2f}× batch 1's tokens per second (target ≥ 4×)",
          f"{ok['free_running']} {v['best']}: {m['free_running']:.0%} of tokens equal float32's, each continuing its own text "
          "(target ≥ 90%)",
          f"{ok['teacher_forced']} {v['best']}: {m['teacher_forced']:.0%} of next-token picks equal float32's along "
          "float32's text (target ≥ 90%)",
          f"{ok['perplexity']} {v['best']}: perplexity {m['perplexity']:+.1%} against float32 (target within ±2%)"]
    zh = [f"{ok['floor']} float32 一步解码的速度是矩阵乘法下限的 {m['floor']:.2f} 倍（目标 ≥ 0.8）",
          f"{ok['transformers']} float32 一步解码的速度是 transformers 的 {m['transformers']:.2f} 倍（目标 ≥ 1.1）",
          f"{ok['best_format']} {v['best']} 的解码速度是 float32 的 {m['best_format']:.2f} 倍（目标 ≥ 2）",
          f"{ok['batch8']} 批大小 {v['batch']} 每秒生成的词元数是批大小 1 的 {m['batch8']:.2f} 倍（目标 ≥ 4）",
          f"{ok['free_running']} {v['best']} 各自生成时，{m['free_running']:.0%} 的词元与 float32 相同（目标 ≥ 90%）",
          f"{ok['teacher_forced']} {v['best']} 沿 float32 的续写逐位预测时，{m['teacher_forced']:.0%} 的下一个词元与 float32 "
          "相同（目标 ≥ 90%）",
          f"{ok['perplexity']} {v['best']} 的困惑度比 float32 变化 {m['perplexity']:+.1%}（目标在 ±2% 以内）"]
    return zh if language == "zh" else en


@reads("SAVED_MODEL", "timings", "format")
def model_format_table(results: dict, language: str = "en") -> str:
    """Batch 1, prompt of the saved length: per format the bytes, decode step, prefill and quality against float32."""

    headers = (["格式", "权重（MB）", "一步解码（毫秒）", "预填充（毫秒）", "解码速度（相对 float32）", "各自生成一致率",
                "逐位一致率", "最大 logit 差", "困惑度"] if language == "zh" else
               ["format", "weights (MB)", "decode step (ms)", "prefill (ms)", "decode speed vs float32",
                "free-running agreement", "teacher-forced agreement", "largest logit diff", "perplexity"])
    base = model_timing(results, "float32")["ms"]
    rows = []
    for fmt in (*FORMATS, "transformers float32", "matmul floor"):
        step = model_timing(results, fmt)
        prefill = [r for r in results["timings"] if (r["format"], r["phase"]) == (fmt, "prefill")]
        q = results["quality"].get(fmt)
        shown = SHOWN_ZH.get(fmt, fmt) if language == "zh" else fmt
        rows.append([shown, f"{step['weight_bytes'] / 1e6:.0f}", f"{step['ms']:.1f}",
                     f"{prefill[0]['ms']:.0f}" if prefill else "-", f"{base / step['ms']:.2f}×",
                     *([f"{q['free_running_agreement']:.0%}", f"{q['teacher_forced_agreement']:.0%}",
                        f"{q['largest_logit_difference']:.2f}", f"{q['perplexity']:.2f}"] if q else ["-"] * 4)])
    return table(headers, rows)


@reads("SAVED_MODEL", "timings", "format")
def model_batch_table(results: dict, language: str = "en") -> str:
    """Decode step and tokens per second at every saved batch size, per format, and the floor's step."""

    batches = sorted({r["batch"] for r in results["timings"] if r["format"] == "float32" and r["phase"] == "decode"})
    names = (*FORMATS, "matmul floor")
    headers = ["批大小" if language == "zh" else "batch"] + [
        f"{SHOWN_ZH.get(n, n)}（毫秒/步，词元/秒）" if language == "zh" else f"{n} (ms/step, tokens/s)" for n in names]
    rows = [[b] + [f"{model_timing(results, n, b)['ms']:.1f}, {1e3 * b / model_timing(results, n, b)['ms']:.0f}"
                   for n in names] for b in batches]
    return table(headers, rows)
