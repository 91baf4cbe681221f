"""Lesson 18's readers of the saved speculative-decoding bench (figures/bench_speculative.json): a table and verdicts."""

from __future__ import annotations

from ..language import check_language, table

DRAFT_NAMES = {"prompt lookup": ("prompt lookup", "提示查找"), "int8": ("int8 model", "int8 模型"),
               "bfloat16": ("bfloat16 model", "bfloat16 模型"), "q4": ("q4 model", "q4 模型"),
               "q4 compiled": ("q4 model, compiled", "q4 模型（编译后）"), "early exit": ("early exit", "提前退出")}
TARGET_SPEEDUP, TARGET_CLOSE = 1.5, 0.2  # the targets: best draft ≥ 1.5×; measured within 20% of predicted


def draft_name(draft: str, language: str = "en") -> str:
    """A draft's name as the tables print it, in one language."""
    return DRAFT_NAMES[draft][language == "zh"]


def speculative_table(results: dict, language: str = "en") -> str:
    """One row per draft and k: alpha, tokens per pass (measured, expected), d, speed-up (measured, predicted), same tokens."""
    headers = (["草稿", "k", "α", "每次前向的词元", "按 α 的期望", "d", "实测加速比", "预测加速比", "输出相同"] if language == "zh" else
               ["draft", "k", "α", "tokens per pass", "expected from α", "d", "speed-up", "predicted", "same tokens"])
    rows = [[draft_name(r["draft"], language), r["k"], f"{r['alpha']:.2f}", f"{r['tokens_per_pass']:.2f}",
             f"{r['expected_tokens_per_pass']:.2f}", f"{r['draft_cost']:.2f}", f"{r['speedup']:.2f}×",
             f"{r['predicted']:.2f}×", str(r["same"])] for r in results["summary"]]
    return table(headers, rows)


def best_rows(results: dict) -> dict[str, dict]:
    """Each draft's fastest row (its best k) in the saved run."""
    best: dict[str, dict] = {}
    for row in results["summary"]:
        if row["draft"] not in best or row["speedup"] > best[row["draft"]]["speedup"]:
            best[row["draft"]] = row
    return best


def speculative_verdict_lines(results: dict, language: str = "en") -> list[str]:
    """The targets checked against the saved run, and every (draft, k) slower than plain decoding, in one language."""
    check_language(language)

    def text(en: str, zh: str) -> str:  # this call's language, not the session's
        return zh if language == "zh" else en
    best = best_rows(results)
    top = max(best.values(), key=lambda r: r["speedup"])
    same = all(r["same"] for r in results["summary"])
    lines = [("✅ " if top["speedup"] >= TARGET_SPEEDUP else "❌ ") + text(
        f"fastest: {draft_name(top['draft'], 'en')} at k = {top['k']}, {top['speedup']:.2f}× plain float32 greedy decoding "
        f"(target ≥ {TARGET_SPEEDUP}×)",
        f"最快：{draft_name(top['draft'], 'zh')}，k = {top['k']}，普通 float32 贪心解码的 {top['speedup']:.2f} 倍（目标 ≥ {TARGET_SPEEDUP} 倍）"),
        ("✅ " if same else "❌ ") + text(f"every run gave plain greedy decoding's tokens: {same}",
                                        f"每次运行的输出都与普通贪心解码相同：{same}")]
    for name, row in best.items():
        off = row["speedup"] / row["predicted"] - 1
        lines.append(("✅ " if abs(off) <= TARGET_CLOSE else "❌ ") + text(
            f"{draft_name(name, 'en')} (k = {row['k']}): measured {row['speedup']:.2f}×, predicted {row['predicted']:.2f}× "
            f"({off:+.0%}; target within ±{TARGET_CLOSE:.0%})",
            f"{draft_name(name, 'zh')}（k = {row['k']}）：实测 {row['speedup']:.2f} 倍，预测 {row['predicted']:.2f} 倍"
            f"（相差 {off:+.0%}；目标在 ±{TARGET_CLOSE:.0%} 以内）"))
    slower = [r for r in results["summary"] if round(r["speedup"], 2) < 1]  # as printed: 0.998 reads 1.00×, not slower
    lines.append(text("slower than the model alone: ", "比模型单独解码还慢的：") + (
        (", " if language == "en" else "、").join(f"{draft_name(r['draft'], language)} k = {r['k']} ({r['speedup']:.2f}×)" for r in slower)
        or text("none", "没有")))
    return lines
