"""Saved benchmark results, as the lessons read them: `make bench` writes them, nothing here measures.

Lessons 8 and 9 (and the README) quote numbers from the JSON files in `figures/`, so a lesson
shows the same numbers on every machine and never waits for a timing run.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from .language import get_language

ROOT = Path(__file__).resolve().parents[1]
SAVED = ROOT / "figures" / "bench_results.json"  # what lesson 8 and the README quote
SAVED_KERNEL = ROOT / "figures" / "bench_kernel.json"  # what lesson 9 quotes


def load_saved(path: Path = SAVED) -> dict:
    """The results of the last full `make bench`, as committed next to the figures."""
    return json.loads(path.read_text(encoding="utf-8"))


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Exponent k of y ~ x^k: least-squares slope on log-log axes (nan with fewer than two points)."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y > 0]
    if len(points) < 2:
        return math.nan
    return statistics.linear_regression(*zip(*points)).slope


def by_run(rows: list[dict]) -> dict[tuple[str, str, int], dict]:
    """Index summary rows by (implementation, mode, length)."""
    return {(row["implementation"], row["mode"], row["length"]): row for row in rows}


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
