"""Lessons 8 and 9: the numbers they quote from the kernel benchmark, and each same-process pair's own medians."""

from __future__ import annotations

from ..language import get_language
from .saved import by_run, reads

# The names lesson 8 prints for the steps of its same-process pairs, (English, Chinese).
STEP_NAMES = {"book": ("book", "书中模块"), "explicit": ("one QKV projection", "合并 QKV 投影"), "fused": ("fused module", "融合模块"),
              "bare": ("bare floor", "裸 SDPA 下限"), "bool_mask": ("boolean mask", "布尔掩码")}


def same_process_pairs(same: dict) -> list[dict]:
    """Each timed pair with its own two medians (None where not saved). Files from before the harness kept them still
    give a pair's medians when one of its steps belongs to no other pair: that step's median is then the pair's own."""
    if "pairs" in same:
        return same["pairs"]
    found, keys = [], [tuple(key.split("/")) for key in same["ratios"]]
    for first, second in keys:
        ratio, alone = same["ratios"][f"{first}/{second}"], [sum(step in pair for pair in keys) == 1 for step in (first, second)]
        first_ms = same["median_ms"][first] if alone[0] else same["median_ms"][second] * ratio if alone[1] else None
        found.append({"first": first, "second": second, "first_ms": first_ms, "ratio": ratio,
                      "second_ms": None if first_ms is None else first_ms / ratio})
    return found


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

