"""Lesson 14: the real model's decode step in each weight format, its roofline point and the verdicts on the targets."""

from __future__ import annotations

import math

from ..checks import bilingual, shown
from ..language import check_language, table
from .saved import at_length, reads


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
SHOWN_ZH = {"matmul floor": "矩阵乘法下限", "float32 compiled": "float32（编译后）", "q4 compiled": "q4（编译后）",
            "float32 weights-left": "float32（权重在左）", "float32 weights-left compiled": "float32（权重在左，编译后）",
            "matmul floor weights-left": "矩阵乘法下限（权重在左）", "matmul floor q4": "矩阵乘法下限（q4）"}  # how the Chinese tables name a row
ROW_FIELDS = ("flops", "weight_bytes", "cache_bytes", "ms")  # what roofline_point reads from a timing row
TRANSFORMERS = "transformers float32"  # `make bench` writes its rows only where transformers is installed
COMPILED_ROWS = ("float32 compiled", "q4 compiled")  # torch.compile's steps, from 2026-11-29's bench on, where g++ is at hand
LEFT_ROWS = ("float32 weights-left", "float32 weights-left compiled", "matmul floor weights-left")  # W @ x.T products
TARGETS = {"floor": 0.9, "transformers": 1.1, "best_format": 2.0, "batch8": 4.0, "agreement": 0.9, "perplexity": 0.02}


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


def model_roofs(results: dict) -> dict:
    """The run's bandwidth roof and float32's compute roof, the latter from the F.linear products that measured bfloat16's
    and int8's roofs in the same loop, so every format's flat roof comes from one product size (saved as `format_roofs`;
    the run's separate `a @ b` in `roofs` used a larger product and is not a roof here)."""
    roofs, flat = results["roofs"], results["format_roofs"]  # read key by key, so a null field is named (saved.reads)
    return {"bandwidth_gb_s": roofs["bandwidth_gb_s"], "read_bytes": roofs["read_bytes"], "matmul_gflop_s": flat["float32"],
            "matmul_n": flat["n"]}


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
    """One line per target of issue 25 (the floor's as issue 41 raised it): what was measured, the target, ✅ or ❌."""
    v = model_verdicts(results)
    m, ok = v["measured"], {key: "✅" if passed else "❌" for key, passed in v["passes"].items()}
    if m["transformers"] is None:  # not measured: say so instead of a number
        ok["transformers"], m["transformers"] = "➖", math.nan
    en = [f"{ok['floor']} float32 step at {m['floor']:.2f} of its matmul floor's speed (issue 41's target ≥ 0.9)",
          f"{ok['transformers']} float32 step {m['transformers']:.2f}× as fast as transformers (target ≥ 1.1×)",
          f"{ok['best_format']} {v['best']} decodes {m['best_format']:.2f}× as fast as float32 (target ≥ 2×)",
          f"{ok['batch8']} batch {v['batch']} gives {m['batch8']:.2f}× batch 1's tokens per second (target ≥ 4×)",
          f"{ok['free_running']} {v['best']}: {m['free_running']:.0%} of tokens equal float32's, each continuing its own text "
          "(target ≥ 90%)",
          f"{ok['teacher_forced']} {v['best']}: {m['teacher_forced']:.0%} of next-token picks equal float32's along "
          "float32's text (target ≥ 90%)",
          f"{ok['perplexity']} {v['best']}: perplexity {m['perplexity']:+.1%} against float32 (target within ±2%)"]
    zh = [f"{ok['floor']} float32 一步解码的速度是矩阵乘法下限的 {m['floor']:.2f} 倍（第 41 号议题的目标 ≥ 0.9）",
          f"{ok['transformers']} float32 一步解码的速度是 transformers 的 {m['transformers']:.2f} 倍（目标 ≥ 1.1）",
          f"{ok['best_format']} {v['best']} 的解码速度是 float32 的 {m['best_format']:.2f} 倍（目标 ≥ 2）",
          f"{ok['batch8']} 批大小 {v['batch']} 每秒生成的词元数是批大小 1 的 {m['batch8']:.2f} 倍（目标 ≥ 4）",
          f"{ok['free_running']} {v['best']} 各自生成时，{m['free_running']:.0%} 的词元与 float32 相同（目标 ≥ 90%）",
          f"{ok['teacher_forced']} {v['best']} 沿 float32 的续写（教师强制）预测时，{m['teacher_forced']:.0%} 的下一个词元与 "
          "float32 相同（目标 ≥ 90%）",
          f"{ok['perplexity']} {v['best']} 的困惑度比 float32 变化 {m['perplexity']:+.1%}（目标在 ±2% 以内）"]
    if ok["transformers"] == "➖":
        en[1], zh[1] = "➖ transformers was not measured (not installed where `make bench` ran)", "➖ 没有测量 transformers（运行 `make bench` 的机器上没有安装它）"
    return zh if language == "zh" else en


@reads("SAVED_MODEL", "timings", "format", "compiled")
def compile_line(results: dict, fmt: str, language: str = "en") -> str:
    """One format's batch-1 step eager against compiled, as the saved run timed them in one loop, with its compile time
    and greedy-token check; the saving is the difference of the printed times, so a reader can redo it."""
    eager, compiled, built = model_timing(results, fmt)["ms"], model_timing(results, f"{fmt} compiled")["ms"], results["compiled"][fmt]
    less = round(eager, 1) - round(compiled, 1)
    if language == "zh":
        same, of = built["same_greedy_tokens"].split(" of ")
        return (f"{fmt} 不编译 {eager:.1f} 毫秒，编译后 {compiled:.1f} 毫秒：每步少 {less:.1f} 毫秒"
                f"（编译用了 {built['compile_seconds']:.0f} 秒；贪心词元：{of} 个里 {same} 个相同）")
    return (f"{fmt:8} eager {eager:5.1f} ms, compiled {compiled:5.1f} ms: {less:4.1f} ms less per step "
            f"(compiling took {built['compile_seconds']:.0f} s; greedy tokens equal: {built['same_greedy_tokens']})")


@reads("SAVED_MODEL", "timings", "format", "roofs")
def step_split(results: dict) -> dict[str, float]:
    """The float32 batch-1 step in three parts (ms), if its products take inside a step what they take alone: the
    products' weight bytes at the bandwidth roof, the rest of the products' time (the matmul floor beyond those bytes),
    and the time outside the products (the cache's read among it)."""
    step, floor = model_timing(results, "float32"), model_timing(results, "matmul floor")
    bytes_ms = floor["weight_bytes"] / (results["roofs"]["bandwidth_gb_s"] * 1e6)
    return {"bytes": bytes_ms, "slow products": floor["ms"] - bytes_ms, "outside products": step["ms"] - floor["ms"],
            "step": step["ms"]}


def step_factors(results: dict, loop: str = "formats") -> tuple[float, float, float]:
    """Section 3's split of the float32 batch-1 step: its bytes' ms at the bandwidth roof (weights and cache), that over
    one prefill token's ms, and the measured step over its bytes' ms. loop="lesson 13" splits the same step and prefill
    as lesson 13's loop of the run timed them (the appendix compares the two loops)."""
    step, prefill = model_timing(results, "float32"), model_timing(results, "float32", phase="prefill")
    step_ms, token_ms = step["ms"], prefill["ms"] / prefill["length"]
    if loop == "lesson 13":
        row = at_length(model_rows(results), step["length"])
        step_ms, token_ms = row["decode_ms"], row["prefill_ms"] / row["length"]
    elif loop != "formats":
        raise ValueError(bilingual(f"loop must be 'formats' or 'lesson 13', not {shown(loop)}.",
                                   f"loop 只能是 'formats' 或 'lesson 13'，不能是 {shown(loop, True)}。"))
    bytes_ms = (step["weight_bytes"] + step["cache_bytes"]) / (results["roofs"]["bandwidth_gb_s"] * 1e6)
    return bytes_ms, bytes_ms / token_ms, step_ms / bytes_ms


def chosen_rows(results: dict, rows: tuple[str, ...]) -> tuple[str, ...]:
    """The formats a table was asked to show, each one this run timed: a clear error names any other."""
    timed = {r["format"] for r in results["timings"]}
    if isinstance(rows, str) or not isinstance(rows, (tuple, list)):
        raise TypeError(bilingual(f"rows must be a tuple of format names, such as ('float32', 'q4'), not {shown(rows)}.",
                                  f"rows 必须是由格式名组成的元组，例如 ('float32', 'q4')，不能是 {shown(rows, True)}。"))
    unknown = [name for name in rows if name not in timed]
    if unknown:
        raise ValueError(bilingual(f"rows names {unknown}, which this run did not time; it timed {sorted(timed)}.",
                                   f"rows 里的 {unknown} 这次运行没有计时；计过时的有 {sorted(timed)}。"))
    return tuple(rows)


@reads("SAVED_MODEL", "timings", "format")
def model_format_table(results: dict, language: str = "en", rows: tuple[str, ...] | None = None,
                       quality: bool = True) -> str:
    """Batch 1, prompt of the saved length: per format the bytes, decode step, prefill and (with quality) the quality
    against float32; rows picks the formats to show, so a lesson can print each where it introduces it."""

    headers = (["权重格式", "权重（MB）", "一步解码（毫秒）", "预填充（毫秒）", "解码速度（相对 float32）"] if language == "zh" else
               ["format", "weights (MB)", "decode step (ms)", "prefill (ms)", "decode speed vs float32"])
    if quality:
        headers += (["各自生成一致率", "教师强制一致率", "最大 logit 差", "困惑度"] if language == "zh" else
                    ["free-running agreement", "teacher-forced agreement", "largest logit diff", "perplexity"])
    base = model_timing(results, "float32")["ms"]
    timed = {r["format"] for r in results["timings"]}
    # q4 from issue 48's bench on; llama.cpp where installed; a row the run did not time is left out
    shown_rows = (*FORMATS, "q4", TRANSFORMERS, "llama.cpp", *COMPILED_ROWS, *LEFT_ROWS, "matmul floor", "matmul floor q4")
    if rows is not None:
        shown_rows = chosen_rows(results, rows)
    table_rows = []
    for fmt in (f for f in shown_rows if f in timed):
        step = model_timing(results, fmt)
        prefill = [r for r in results["timings"] if (r["format"], r["phase"]) == (fmt, "prefill")]
        # measured for every format (a missing one is named), not for transformers, llama.cpp, compiled steps or floors
        q = results["quality"][fmt] if fmt in FORMATS or fmt in results["quality"] else None
        shown_name = SHOWN_ZH.get(fmt, fmt) if language == "zh" else fmt
        cells = [shown_name, f"{step['weight_bytes'] / 1e6:.0f}", f"{step['ms']:.1f}",
                 f"{prefill[0]['ms']:.0f}" if prefill else "-",
                 "-" if fmt.startswith("matmul floor") else f"{base / step['ms']:.2f}{' 倍' if language == 'zh' else '×'}"]  # a floor decodes nothing
        if quality:
            cells += ([f"{q['free_running_agreement']:.0%}", f"{q['teacher_forced_agreement']:.0%}",
                       f"{q['largest_logit_difference']:.2f}", f"{q['perplexity']:.2f}"] if q else ["-"] * 4)
        table_rows.append(cells)
    return table(headers, table_rows)


@reads("SAVED_MODEL", "timings", "format")
def model_batch_table(results: dict, language: str = "en", rows: tuple[str, ...] | None = None) -> str:
    """Decode step and tokens per second at every saved batch size, per format, and the floor's step; rows picks the
    formats (columns) to show."""

    batches = sorted({r["batch"] for r in results["timings"] if r["format"] == "float32" and r["phase"] == "decode"})
    every_batch = (*FORMATS, "q4", "float32 weights-left", "matmul floor weights-left", "matmul floor", "matmul floor q4")  # not the compiled rows
    names = [n for n in (every_batch if rows is None else chosen_rows(results, rows)) if any(r["format"] == n for r in results["timings"])]
    headers = ["批大小" if language == "zh" else "batch"] + [
        f"{SHOWN_ZH.get(n, n)}（毫秒/步，词元/秒）" if language == "zh" else f"{n} (ms/step, tokens/s)" for n in names]
    rows = [[b] + [f"{model_timing(results, n, b)['ms']:.1f}, {1e3 * b / model_timing(results, n, b)['ms']:.0f}"
                   for n in names] for b in batches]
    return table(headers, rows)


MACHINE_ROWS = (("decode", 1, ("float32", "bfloat16", "int8", "q4", "float32 weights-left", *COMPILED_ROWS,
                               "float32 weights-left compiled", "matmul floor", "matmul floor weights-left",
                               "matmul floor q4", TRANSFORMERS,
                               "llama.cpp")),
                ("decode", 8, ("float32", "bfloat16", "int8", "q4", "float32 weights-left")),
                ("prefill", 1, ("float32", "bfloat16")))  # what lesson 14 compares between the two saved machines


def machine_name(results: dict, language: str = "en") -> str:
    """A saved run's machine in a few words: its torch kernels and whether its CPU has bfloat16 instructions."""
    check_language(language)
    if not isinstance(results, dict):
        raise TypeError(bilingual(f"results must be a dict that results.load_saved() returns, got {shown(results)}.",
                                  f"results 必须是 results.load_saved() 返回的字典，实际是 {shown(results, True)}。"))
    kernel = results.get("kernel") or {}
    has_bf16 = kernel.get("avx512_bf16") or kernel.get("amx_bf16")
    unknown = not has_bf16 and "avx512_bf16" in kernel and kernel["avx512_bf16"] is None  # kernel_path without /proc/cpuinfo
    if language == "zh":
        return f"{kernel.get('cpu_capability', '?')}，" + ("bfloat16 指令未知" if unknown else f"{'有' if has_bf16 else '无'} bfloat16 指令")
    return f"{kernel.get('cpu_capability', '?')}, " + ("bfloat16 instructions unknown" if unknown else
                                                       f"{'with' if has_bf16 else 'no'} bfloat16 instructions")


@reads("SAVED_MODEL_BF16", "timings", "format", "roofs", "environment")
def second_run(results: dict) -> dict:
    """The second machine's saved run, checked as every reader checks the first (load_saved(SAVED_MODEL_BF16))."""
    return results


@reads("SAVED_MODEL", "timings", "format")
def model_machines_table(first: dict, second: dict, language: str = "en") -> str:
    """The same steps on the two saved machines (ms), and how long the second takes against the first; '-' if not measured.

    A run that saved each row's quartiles (the middle half of its rounds) shows them beside the median."""
    def row(results: dict, fmt: str, batch: int, phase: str) -> dict | None:
        found = [r for r in results["timings"] if (r["format"], r["batch"], r["phase"]) == (fmt, batch, phase)]
        return found[0] if found else None

    def shown_ms(found: dict | None) -> str:
        if found is None:
            return "-"
        spread = found.get("quartiles_ms")
        if not spread:
            return f"{found['ms']:.1f}"
        return f"{found['ms']:.1f}（{spread[0]:.1f}–{spread[1]:.1f}）" if zh else f"{found['ms']:.1f} ({spread[0]:.1f}–{spread[1]:.1f})"

    second = second_run(second)
    zh = language == "zh"
    phases = {"decode": "一步解码" if zh else "decode step", "prefill": "预填充" if zh else "prefill"}
    headers = ["计时项目" if zh else "step", *(f"{machine_name(r, language)}（毫秒）" if zh else f"{machine_name(r)} (ms)"
                                           for r in (first, second)), "后者耗时是前者的" if zh else "second ÷ first"]
    if any("quartiles_ms" in r for run in (first, second) for r in run["timings"]):
        headers[0] += "（中位数，括号里是四分位数）" if zh else " (median, quartiles in brackets)"
    rows = []
    for phase, batch, names in MACHINE_ROWS:
        for fmt in names:
            found = row(first, fmt, batch, phase), row(second, fmt, batch, phase)
            if found == (None, None):
                continue
            a, b = (None if r is None else r["ms"] for r in found)
            parts = [SHOWN_ZH.get(fmt, fmt) if zh else fmt, phases[phase]] + (
                [f"批大小 {batch}" if zh else f"batch {batch}"] if batch != 1 else [])
            rows.append([("，" if zh else ", ").join(parts), *(shown_ms(r) for r in found),
                         "-" if None in (a, b) else f"{b / a:.2f}{' 倍' if zh else '×'}"])
    return table(headers, rows)
