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
from collections.abc import Callable, Hashable
from pathlib import Path

from .checks import bilingual, check_size, shown
from .language import check_language, get_language, table
from .same_process import STEP_NAMES, same_process_pairs

ROOT = Path(__file__).resolve().parents[1]
SAVED = ROOT / "figures" / "bench_results.json"  # what lesson 8 and the README quote
SAVED_KERNEL = ROOT / "figures" / "bench_kernel.json"  # what lesson 9 quotes
SAVED_RECURRENT = ROOT / "figures" / "bench_recurrent.json"  # lesson 16's tables (explorers/lesson16) read it
SAVED_RECALL = ROOT / "figures" / "bench_recall.json"  # lesson 16's recall grid (make bench, or --recall)
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
            read = results if isinstance(results, _Read) else _Read(results, "", [])  # one list of nulls read
            try:
                return function(read, *args, **kwargs)
            except (KeyError, TypeError) as error:  # a field of a hand-edited file is missing, or null where read
                field = repr(error.args[0]) if isinstance(error, KeyError) else read.nulls[-1] if read.nulls else None
                if field is None:
                    raise
                raise ValueError(bilingual(
                    f"the saved results of load_saved(results.{saved}) lack the field {field} (missing or null): run "
                    "`make bench` again, or `git checkout -- figures/` to bring back the committed file.",
                    f"load_saved(results.{saved}) 读出的结果缺少字段 {field}（不存在或为 null）：请重新运行 `make bench`，"
                    "或者用 `git checkout -- figures/` 找回仓库里保存的那一份。")) from None
        return checked
    return decorate


class _Read(dict):
    """Saved results that note each null they hand out ("['roofs']['bandwidth_gb_s']"): a TypeError then names it."""

    def __init__(self, data: dict, path: str, nulls: list[str]) -> None:
        super().__init__(data)
        self.path, self.nulls = path, nulls

    def __getitem__(self, key: object) -> object:
        return self._wrap(key, super().__getitem__(key))

    def _wrap(self, key: object, value: object) -> object:
        path = f"{self.path}[{key!r}]"
        if value is None:
            self.nulls.append(path)
        if isinstance(value, list):
            return [_Read(v, f"{path}[{i}]", self.nulls) if isinstance(v, dict) else v for i, v in enumerate(value)]
        return _Read(value, path, self.nulls) if isinstance(value, dict) else value


def at_length(rows: dict[int, dict], length: object) -> dict:
    """The saved row measured at `length`, or an error that lists the lengths measured (a quick run saves fewer)."""
    row = rows.get(length) if isinstance(length, Hashable) and not isinstance(length, bool) else None
    if row is None:
        raise ValueError(bilingual(f"length={shown(length)} was not measured; the saved lengths are {sorted(rows)}.",
                                   f"没有测量过 length={shown(length, True)}；已保存的长度有 {sorted(rows)}。"))
    return row


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Exponent k of y ~ x^k: least-squares slope on log-log axes (nan with fewer than two points)."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y > 0]
    if len(points) < 2:
        return math.nan
    return statistics.linear_regression(*zip(*points)).slope


def by_run(rows: list[dict]) -> dict[tuple[str, str, int], dict]:
    """Index summary rows by (implementation, mode, length)."""
    return {(row["implementation"], row["mode"], row["length"]): row for row in rows}


@reads("SAVED", "rows", "implementation", "interleaved")
def headline(results: dict, language: str | None = None) -> list[str]:
    """The numbers lesson 8 quotes, all at T=1024, in `language` (default: the current one): every same-process pair
    with its own two medians and their ratio (once per round), then the training runs."""
    zh = (language or get_language()) == "zh"
    same, index = results["interleaved"], by_run(results["rows"])
    date, rounds = same.get("date", results["environment"]["date"]), same.get("repeats", 1)
    lines = [f"推理，T = {same['length']}，同一进程（{date} 测量）：每对紧挨着、交替先后地各调用 {same['calls']} 次，{rounds} 轮；"
             "每项是这一对自己的两个中位数和它们的比值" if zh else
             f"inference, T = {same['length']}, one process (measured {date}): each pair called back to back in alternating order, "
             f"{same['calls']} calls each, {rounds} round{'s' * (rounds > 1)}; each entry is the pair's own two medians and their ratio"]
    for first, second in (key.split("/") for key in same["ratios"]):
        unit, pairs = ("毫秒" if zh else "ms"), [p for p in same_process_pairs(same) if (p["first"], p["second"]) == (first, second)]
        shown = ("；" if zh else ";  ").join(
            f"{p['first_ms']:.0f} / {p['second_ms']:.0f} {unit} = {p['ratio']:.2f}" if p["first_ms"] is not None else
            f"{p['ratio']:.2f}（两步都还属于别的对，这一对自己的中位数没有保存）" if zh else
            f"{p['ratio']:.2f} (both steps belong to other pairs too; this pair's own medians were not saved)" for p in pairs)
        lines.append(f"  {' / '.join(STEP_NAMES[key][zh] for key in (first, second))}{'：' if zh else ': '}{shown}")
    train = {key: index[key, "training", 1024] for key in ("fused", "fused_dropout", "book")}
    ms = {key: row["median_ms"] for key, row in train.items()}
    mib = {key: row["memory_mib"] for key, row in train.items()}
    ratios = (ms["fused_dropout"] / ms["fused"], ms["fused_dropout"] / ms["book"], ms["fused"] / ms["book"])
    if zh:
        return lines + [
            f"训练，各自独立的进程（耗时、额外峰值内存）：融合模块 {ms['fused']:.0f} 毫秒、{mib['fused']:.0f} MiB；带 dropout 的融合模块 "
            f"{ms['fused_dropout']:.0f} 毫秒、{mib['fused_dropout']:.0f} MiB；书中模块（不带 dropout）{ms['book']:.0f} 毫秒、{mib['book']:.0f} MiB",
            "  耗时之比：带 dropout 的融合模块 / 融合模块 = {:.2f}；带 dropout 的融合模块 / 书中模块 = {:.2f}；融合模块 / 书中模块 = {:.2f}".format(*ratios)]
    return lines + [
        f"training, separate processes (time, extra peak memory): fused {ms['fused']:.0f} ms, {mib['fused']:.0f} MiB; fused with dropout "
        f"{ms['fused_dropout']:.0f} ms, {mib['fused_dropout']:.0f} MiB; book (no dropout) {ms['book']:.0f} ms, {mib['book']:.0f} MiB",
        "  time ratios: fused with dropout / fused = {:.2f}; fused with dropout / book = {:.2f}; fused / book = {:.2f}".format(*ratios)]


# Lesson 12: decoding with and without a KV cache (make bench, or python -m attention_utils.course.bench --decode).
SAVED_DECODE = ROOT / "figures" / "bench_decode.json"


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
    row = at_length(model_rows(results), length)
    env = results["environment"]
    values = dict(t=length, prefill=row["prefill_ms"], step=row["decode_ms"], ratio=row["prefill_over_decode"],
                  weights=row["weight_bytes"] / 1e6, cache=row["cache_bytes"] / 1e6, calls=results["workload"]["calls"],
                  date=env["date"], cpu=env["cpu"], threads=env["threads"])
    if language == "zh":
        return ["make bench（{date}，{cpu}，{threads} 个线程），float32，批大小 1，每种交替计时 {calls} 次的中位数：".format(**values),
                "  预填充 {t} 个词元：{prefill:.0f} 毫秒".format(**values),
                "  在有 {t} 个词元的缓存上解码一个词元：{step:.1f} 毫秒".format(**values),
                "  预填充的耗时是一步解码的 {ratio:.1f} 倍（词元数是 {t} 倍）".format(**values),
                "  一步解码读取的字节：权重 {weights:.0f} MB，缓存 {cache:.1f} MB".format(**values)]
    return ["make bench ({date}, {cpu}, {threads} threads), float32, batch 1, medians of {calls} alternating calls each:"
            .format(**values),
            "  prefill of {t} tokens: {prefill:.0f} ms".format(**values),
            "  one decode step against a cache of {t} tokens: {step:.1f} ms".format(**values),
            "  the prefill takes {ratio:.1f}x as long as one step (for {t}x the tokens)".format(**values),
            "  bytes one decode step reads: weights {weights:.0f} MB, cache {cache:.1f} MB".format(**values)]


# Lesson 14: the same --model run's formats, batches and roofs (rows named by format, batch and phase).
FORMATS = ("float32", "bfloat16", "int8")
SHOWN_ZH = {"matmul floor": "矩阵乘法下限"}  # how the Chinese tables name a row
ROW_FIELDS = ("flops", "weight_bytes", "cache_bytes", "ms")  # what roofline_point reads from a timing row
TRANSFORMERS = "transformers float32"  # `make bench` writes its rows only where transformers is installed
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
    if not isinstance(row, dict) or not all(isinstance(row.get(k), (int, float)) for k in ROW_FIELDS):
        raise (ValueError if isinstance(row, dict) else TypeError)(bilingual(
            f"row must be one timing row with {', '.join(ROW_FIELDS)}, such as model_timing(results, 'float32'), not the "
            f"whole results; got {shown(row)}.",
            f"row 必须是一行计时记录（含 {', '.join(ROW_FIELDS)}），例如 model_timing(results, 'float32')，而不是整份结果；"
            f"实际是 {shown(row, True)}。"))
    return {"intensity": row["flops"] / (row["weight_bytes"] + row["cache_bytes"]), "gflop_s": row["flops"] / row["ms"] / 1e6}


def _has_transformers(results: dict) -> bool:
    """Whether the bench could time transformers (it writes no rows of it where transformers is missing)."""
    return any(row["format"] == TRANSFORMERS for row in results["timings"])


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
        "transformers": ms(TRANSFORMERS) / ms("float32") if _has_transformers(results) else None,  # > 1: the package is faster
        "best_format": ms("float32") / ms(best),
        "batch8": batch * ms("float32") / ms("float32", batch),  # tokens per second at batch 8 over batch 1
        "free_running": quality["free_running_agreement"], "teacher_forced": quality["teacher_forced_agreement"],
        "perplexity": ppl,
    }
    passes = {key: measured[key] is not None and measured[key] >= TARGETS[key]
              for key in ("floor", "transformers", "best_format", "batch8")}
    passes |= {key: measured[key] >= TARGETS["agreement"] for key in ("free_running", "teacher_forced")}
    passes["perplexity"] = abs(ppl) <= TARGETS["perplexity"]
    return {"best": best, "batch": batch, "measured": measured, "passes": passes}


@reads("SAVED_MODEL", "timings", "format")
def model_verdict_lines(results: dict, language: str = "en") -> list[str]:
    """One line per target of issue 25: what was measured, the target, ✅ or ❌."""
    v = model_verdicts(results)
    m, ok = v["measured"], {key: "✅" if passed else "❌" for key, passed in v["passes"].items()}
    if m["transformers"] is None:  # not measured: say so instead of a number
        ok["transformers"], m["transformers"] = "➖", math.nan
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
    if ok["transformers"] == "➖":
        en[1], zh[1] = "➖ transformers was not measured (not installed where `make bench` ran)", "➖ 没有测量 transformers（运行 `make bench` 的机器上没有安装它）"
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
    for fmt in (f for f in (*FORMATS, "q4", TRANSFORMERS, "llama.cpp", "matmul floor") if any(
            r["format"] == f for r in results["timings"])):  # q4 from issue 48's bench on; llama.cpp where installed
        step = model_timing(results, fmt)
        prefill = [r for r in results["timings"] if (r["format"], r["phase"]) == (fmt, "prefill")]
        q = results["quality"][fmt] if fmt in FORMATS else None  # the bench measures the quality of its formats only
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
    names = [n for n in (*FORMATS, "q4", "matmul floor") if any(r["format"] == n for r in results["timings"])]
    headers = ["批大小" if language == "zh" else "batch"] + [
        f"{SHOWN_ZH.get(n, n)}（毫秒/步，词元/秒）" if language == "zh" else f"{n} (ms/step, tokens/s)" for n in names]
    rows = [[b] + [f"{model_timing(results, n, b)['ms']:.1f}, {1e3 * b / model_timing(results, n, b)['ms']:.0f}"
                   for n in names] for b in batches]
    return table(headers, rows)
