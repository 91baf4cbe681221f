"""The same-process pairs of lesson 8's benchmark: the names of their steps, and each pair's own two medians."""

from __future__ import annotations

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
