"""The saved model benches as lesson 14's exercises read them: each expected answer is computed here from the JSON.

Both machines' files (`figures/bench_model.json`, `figures/bench_model_bf16_cpu.json`) are read through `results`, so
an exercise's answer follows a re-run of `make bench` without an edit.
"""

from __future__ import annotations

from .. import results

# Exercise 1 reads the saved bench: each format's weight bytes and decode step at batch 1.
SAVED_ROWS = ("float32", "bfloat16", "int8")


def close(found: float, expected: float, share: float = 0.02) -> bool:
    """Whether `found` is within `share` of `expected`, relatively."""
    return abs(found - expected) <= share * abs(expected)


def saved_runs() -> tuple[dict, dict]:
    """The two saved model benches: the first machine's (figures/bench_model.json) and the second's (bfloat16 instructions)."""
    return results.load_saved(results.SAVED_MODEL), results.load_saved(results.SAVED_MODEL_BF16)


def step_ms(run: dict, name: str) -> float:
    """One saved decode row's median ms at batch 1."""
    return next(r["ms"] for r in run["timings"] if (r["format"], r["batch"], r["phase"]) == (name, 1, "decode"))


def saved_steps(with_cache: bool = False) -> dict[str, tuple[float, float]]:
    """(weight MB, decode ms) of float32, bfloat16 and int8 at batch 1 on the first machine; with_cache adds the cache's MB."""
    first = saved_runs()[0]
    rows = {r["format"]: r for r in first["timings"] if (r["batch"], r["phase"]) == (1, "decode")}
    return {name: ((rows[name]["weight_bytes"] + with_cache * rows[name]["cache_bytes"]) / 1e6, rows[name]["ms"]) for name in SAVED_ROWS}


def saved_ridge() -> float:
    """The bench's ridge on the first machine: float32's compute roof (GFLOP/s) over its bandwidth roof (GB/s)."""
    roofs = results.model_roofs(saved_runs()[0])
    return roofs["matmul_gflop_s"] / roofs["bandwidth_gb_s"]


def outside_products_ms(run: dict) -> dict[str, float]:
    """Each format's batch-1 step minus its one-row products timed alone (float32: the matmul floor; bfloat16: its
    F.linear; int8: its kernel, whose line also quantizes the table the int8 model keeps in bfloat16). Both times are
    rounded to 0.1 ms first, as the lesson prints them, so the feedback shows the difference a learner computes."""
    kernel = run["int8_kernel"]
    products = {"float32": step_ms(run, "matmul floor"), "bfloat16": kernel["bfloat16_linear_ms"], "int8": kernel["int8_kernel_ms"]}
    return {name: round(step_ms(run, name), 1) - round(ms, 1) for name, ms in products.items()}


def saved_bfloat16_roofs() -> tuple[float, float, float, float]:
    """bfloat16's compute roof (GFLOP/s) and the bandwidth roof (GB/s) of the first machine, then the same two of the second."""
    first, second = saved_runs()
    return (first["format_roofs"]["bfloat16"], first["roofs"]["bandwidth_gb_s"],
            second["format_roofs"]["bfloat16"], second["roofs"]["bandwidth_gb_s"])


def one_row_bound_ms(roof: float, bandwidth: float, megabytes: float) -> float:
    """The roofline's least time for bfloat16 one-row products of `megabytes`: 2 FLOPs per 2-byte weight, so MFLOP = MB."""
    return max(megabytes / roof, megabytes / bandwidth)


def saved_one_row_bfloat16() -> tuple[float, float, float]:
    """Every weight matrix × one vector with bfloat16 F.linear: ms on the first and on the second machine, and its MB."""
    first, second = (run["int8_kernel"] for run in saved_runs())
    return first["bfloat16_linear_ms"], second["bfloat16_linear_ms"], first["bfloat16_bytes"] / 1e6


def fitted_line(with_cache: bool = False) -> tuple[float, float]:
    """Bandwidth (GB/s) and fixed cost (ms) of t = W / B + t0 through the float32 and bfloat16 rows (W with the cache's
    bytes too if with_cache, as section 5's formula counts them)."""
    steps = saved_steps(with_cache)
    (w32, t32), (w16, t16) = steps["float32"], steps["bfloat16"]
    bandwidth = (w32 - w16) / (t32 - t16)  # MB per ms = GB/s
    return bandwidth, t32 - w32 / bandwidth
