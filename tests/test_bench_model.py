"""The real model's decode benchmark: it times what it says, counts bytes by hand, and the README and lesson 13 quote the saved file."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from attention_utils import results
from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.weight_formats import to_format
from attention_utils.models import q4_weights
from attention_utils.course.bench import model_decode, model_formats, model_kernels, model_report

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "13_a_real_language_model.ipynb"
# SmolLM2-135M by hand: 134,515,008 parameters (its published configuration, tied embeddings), 4 bytes each in float32
WEIGHT_BYTES = 134_515_008 * 4
PER_TOKEN = 2 * 30 * 3 * 64 * 4  # keys and values, 30 layers, 3 key/value heads of 64, float32


def test_every_length_is_timed_both_ways_and_counted_by_hand(smollm2):
    model = smollm2[0]
    torch.set_num_threads(1)
    with torch.inference_mode():
        rows = model_decode.measure_lengths(model, model_decode.ModelVariant(), lengths=(8, 16), calls=2)
    assert [row["length"] for row in rows] == [8, 16]
    for row in rows:
        assert row["weight_bytes"] == WEIGHT_BYTES
        assert row["cache_bytes"] == row["formula_cache_bytes"] == row["length"] * PER_TOKEN  # the steps were cut back
        assert row["prefill_ms"] > 0 and row["decode_ms"] > 0
        assert row["prefill_over_decode"] == pytest.approx(row["prefill_ms"] / row["decode_ms"])
        assert (row["weights"], row["batch"]) == ("float32", 1)


def test_a_variant_in_another_format_is_a_converted_copy(smollm2):
    model = smollm2[0]
    int8 = model_decode.load_model(model_decode.ModelVariant(weights="int8"), model)
    assert model_decode.weight_bytes(model) == WEIGHT_BYTES  # the float32 model is left as it was
    assert int8 is not model and not isinstance(int8.blocks[0].feed_forward.gate_up, torch.nn.Linear)


def test_calls_alternate_and_every_call_is_timed():
    order = []
    medians = model_formats.alternate({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, rounds=3)
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]  # one warm call each, then a b, b a, a b
    assert set(medians) == {"a", "b"} and all(ms >= 0 for ms in medians.values())


def test_quartiles_are_the_middle_half_of_the_timings():
    assert model_kernels.quartiles([5.0, 1.0, 4.0, 2.0, 3.0]) == [2.0, 4.0]  # by hand: sorted 1..5, inclusive
    assert model_kernels.quartiles([1.0, 2.0, 3.0, 100.0]) == [1.75, 27.25]  # 1 + 0.75, 3 + 0.25 * 97
    assert model_kernels.quartiles([7.0]) == [7.0, 7.0]


def test_thread_rows_time_each_call_on_one_thread_and_on_all_taking_turns():
    threads = torch.get_num_threads()
    seen = []
    try:
        torch.set_num_threads(2)
        found = model_kernels.thread_rows({"a": lambda: seen.append(torch.get_num_threads())}, 2**20, rounds=3)
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(threads)
    assert found["threads"] == [1, 2] and set(found["a"]) == {"1", "2"} and set(found["bandwidth_gb_s"]) == {"1", "2"}
    assert seen == [1, 2, 1, 2, 2, 1, 1, 2]  # warm calls, then rounds taking turns, the order reversed every other round
    assert all(v > 0 for v in found["bandwidth_gb_s"].values())


def test_a_repeated_cache_holds_the_same_tokens_for_every_row(smollm2):
    model = smollm2[0]
    step, cache = model_formats.package_step(model, torch.tensor([[1000, 2000, 3000]]), batch=4)
    keys = cache[0].keys
    assert keys.shape[0] == 4 and all(torch.equal(keys[0], keys[row]) for row in range(4))
    with torch.inference_mode():
        step()  # four rows decode from the same state
    assert cache.position == 4 and torch.equal(cache[5].keys[0], cache[5].keys[3])


def test_lesson_14_rows_are_named_and_counted():
    saved = results.load_saved(results.SAVED_MODEL)
    names = {(row["format"], row["batch"], row["phase"]) for row in saved["timings"]}
    batches = saved["workload"]["batches"]
    for fmt in ("float32", "bfloat16", "int8", "matmul floor"):
        assert {(fmt, b, "decode") for b in batches} <= names
    assert ("transformers float32", 1, "decode") in names and ("transformers float32", 1, "prefill") in names
    row = results.model_timing(saved, "float32", 8)
    length = saved["workload"]["format_length"]
    assert row["weight_bytes"] == WEIGHT_BYTES and row["cache_bytes"] == 8 * (length + 1) * PER_TOKEN
    assert results.model_timing(saved, "int8")["weight_bytes"] < results.model_timing(saved, "bfloat16")["weight_bytes"]
    matrices = 30 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) + 576 * 49152  # by hand: q, o; k, v; the MLP; the table
    for b in batches:  # a floor row counts its products only; a step adds attention's FLOPs
        assert results.model_timing(saved, "matmul floor", b)["flops"] == 2 * matrices * b
        assert results.model_timing(saved, "float32", b)["flops"] > 2 * matrices * b
    quality = saved["quality"]
    assert quality["float32"]["free_running_agreement"] == 1.0 and quality["float32"]["largest_logit_difference"] == 0.0


def test_the_verdicts_are_the_ratios_of_the_saved_rows():
    saved = results.load_saved(results.SAVED_MODEL)
    verdicts = results.model_verdicts(saved)

    def ms(fmt, batch=1):
        return results.model_timing(saved, fmt, batch)["ms"]
    assert verdicts["measured"]["floor"] == pytest.approx(ms("matmul floor") / ms("float32"))
    assert verdicts["measured"]["batch8"] == pytest.approx(8 * ms("float32") / ms("float32", 8))
    assert verdicts["passes"]["floor"] == (ms("matmul floor") / ms("float32") >= 0.9)
    assert verdicts["best"] == min(("bfloat16", "int8"), key=ms)


def test_the_saved_results_are_consistent():
    saved = results.load_saved(results.SAVED_MODEL)
    rows = results.model_rows(saved)
    assert sorted(rows) == list(saved["workload"]["lengths"])
    for length, row in rows.items():
        assert row["cache_bytes"] == row["formula_cache_bytes"] == length * PER_TOKEN
        assert row["weight_bytes"] == WEIGHT_BYTES
        assert row["prefill_over_decode"] == pytest.approx(row["prefill_ms"] / row["decode_ms"])


def test_the_readme_shows_the_saved_model_results():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.index("<!-- decode:end -->") < readme.index("<!-- model:start -->")
    section = readme.split("<!-- model:start -->\n", 1)[1].split("\n<!-- model:end -->", 1)[0]
    assert section == model_report.model_markdown(results.load_saved(results.SAVED_MODEL))


def test_lesson_13_quotes_the_saved_results_and_times_nothing_live():
    lesson = nbformat.read(LESSON, as_version=4)
    saved = results.load_saved(results.SAVED_MODEL)
    quoting = [cell for cell in lesson.cells if cell.cell_type == "code" and "results.model_decode_lines" in cell.source]
    assert len(quoting) == 1
    stored = "".join(output.get("text", "") for output in quoting[0].outputs)
    assert stored.strip() == "\n".join(results.model_decode_lines(saved, "en")).strip()
    code = "\n".join(cell.source for cell in lesson.cells if cell.cell_type == "code")
    assert "perf_counter" not in code and "import time" not in code


class FakeLlama:
    """What llama_cpp.Llama shows the bench: eval a list of tokens, scores per position, n_tokens; scores favour 7."""

    def __init__(self, model_path: str, n_ctx: int, n_threads: int, verbose: bool) -> None:
        self.model_path, self.n_ctx, self.n_tokens, self.seen = model_path, n_ctx, 0, []
        self.scores = np.zeros((n_ctx, 50), dtype=np.float32)
        self.scores[:, 7] = 1.0

    def eval(self, tokens: list[int]) -> None:
        self.seen.append(list(tokens))
        self.n_tokens += len(tokens)


def test_llama_cpp_is_timed_on_the_same_file_when_installed(monkeypatch):
    engines = []
    fake = types.ModuleType("llama_cpp")
    fake.Llama = lambda **kwargs: engines.append(FakeLlama(**kwargs)) or engines[-1]
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    step = model_formats.llama_cpp_step(torch.tensor([[5, 6, 9]]), threads=1)
    step()
    step()
    engine = engines[0]
    assert engine.model_path == str(model_formats.find_model_file())
    assert engine.seen == [[5, 6, 9], [9], [7]]  # the prompt once, then one token a step: the last, then its greedy pick
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # not installed: import fails, nothing to time
    assert model_formats.llama_cpp_step(torch.tensor([[5]]), threads=1) is None


def test_q4_lines_read_the_rows_and_say_when_llama_cpp_was_not_measured():
    timings = [{"format": f, "batch": 1, "phase": "decode", "ms": ms} for f, ms in (("float32", 60.0), ("q4", 15.0))]
    saved = {"timings": timings, "kernel": {"cpu_capability": "AVX2", "avx512_bf16": False, "amx_bf16": False}}
    lines = model_report.q4_lines(saved)
    assert lines[0].startswith("✅ q4") and "4.00×" in lines[0] and "without bfloat16" in lines[0]
    assert "not measured" in lines[1] and "没有测量" in model_report.q4_lines(saved, "zh")[1]
    saved["timings"].append({"format": "llama.cpp", "batch": 1, "phase": "decode", "ms": 9.0})
    assert model_report.q4_lines(saved)[1].startswith("❌") and "1.67×" in model_report.q4_lines(saved)[1]


def test_compiled_lines_read_the_compiled_rows_against_the_floor_float32_and_llama_cpp():
    timings = [{"format": f, "batch": 1, "phase": "decode", "ms": ms} for f, ms in (
        ("float32", 60.0), ("q4", 36.0), ("matmul floor", 45.0), ("float32 compiled", 50.0), ("q4 compiled", 20.0),
        ("llama.cpp", 10.0))]
    saved = {"timings": timings, "kernel": {"cpu_capability": "AVX2", "avx512_bf16": False, "amx_bf16": False}}
    en, zh = model_report.q4_lines(saved)[2:], model_report.q4_lines(saved, "zh")[2:]
    # by hand: 45 / 50 = 0.90 (eager 45 / 60 = 0.75); 50 / 20 = 2.50×; 20 / 10 = 2.00×
    assert en[0].startswith("✅ float32 compiled") and "0.90 of the matmul floor" in en[0] and "eager: 0.75" in en[0]
    assert en[1].startswith("❌ q4 compiled") and "2.50× as fast as float32 compiled" in en[1]
    assert en[2].startswith("❌") and "2.00×" in en[2] and len(zh) == 3 and "2.00 倍" in zh[2]
    saved["timings"] = timings[:3]  # no compiler where the bench ran: no compiled lines at all
    assert len(model_report.q4_lines(saved)) == 2


def test_left_lines_read_the_weights_left_rows_against_nn_linear_the_roof_and_q4():
    timings = [{"format": f, "batch": 1, "phase": "decode", "ms": ms, "weight_bytes": 540e6} for f, ms in (
        ("float32", 60.0), ("q4", 36.0), ("matmul floor", 45.0), ("float32 weights-left", 30.0),
        ("matmul floor weights-left", 18.0), ("q4 compiled", 12.0))]
    saved = {"timings": timings, "roofs": {"bandwidth_gb_s": 24.0}}
    en, zh = model_report.left_lines(saved), model_report.left_lines(saved, "zh")
    # by hand: 60 / 30 = 2.00×; 540 MB / 30 ms = 18.0 GB/s; 18 / 30 = 0.60 of its floor; 30 / 12 = 2.50× for q4 compiled
    assert "30.0 ms against nn.Linear's 60.0 (2.00×)" in en[0] and "18.0 GB/s (read roof 24.0)" in en[0]
    assert en[1].startswith("❌") and "0.60 of its own matmul floor" in en[1]
    assert en[2].startswith("❌ q4 compiled") and "2.50×" in en[2] and "2.50 倍" in zh[2] and len(zh) == 3
    assert model_report.left_lines({"timings": timings[:3], "roofs": saved["roofs"]}) == []  # a run before the rows
    saved["timings"].append({"format": "float32 weights-left compiled", "batch": 1, "phase": "decode", "ms": 20.0})
    en, zh = model_report.left_lines(saved), model_report.left_lines(saved, "zh")
    # by hand: 18 / 20 = 0.90 of its floor; q4 compiled against the compiled float32 step: 20 / 12 = 1.67×
    assert en[2].startswith("✅ float32 weights-left compiled: 20.0 ms, 0.90 of its own matmul floor")
    assert "q4 compiled against float32 weights-left compiled: 1.67×" in en[3] and "float32（权重在左，编译后）" in zh[3]
    saved["timings"].append({"format": "transformers float32", "batch": 1, "phase": "decode", "ms": 21.0})
    en, zh = model_report.left_lines(saved), model_report.left_lines(saved, "zh")
    # by hand: 21 / 20 = 1.05× transformers' speed, under the 1.1× target
    assert en[3].startswith("❌ float32 weights-left compiled: 1.05× transformers'") and "1.05 倍" in zh[3]


def test_the_machines_table_reads_both_runs_step_by_step():
    def run(cpu: str, bf16: bool, rows: tuple) -> dict:
        return {"kernel": {"cpu_capability": cpu, "avx512_bf16": bf16, "amx_bf16": False}, "roofs": {}, "environment": {},
                "timings": [{"format": f, "batch": b, "phase": p, "ms": ms} for f, b, p, ms in rows]}
    first = run("AVX2", False, (("float32", 1, "decode", 60.0), ("bfloat16", 8, "decode", 190.0),
                                ("float32", 1, "prefill", 440.0)))
    second = run("AVX512", True, (("float32", 1, "decode", 45.0), ("bfloat16", 8, "decode", 76.0),
                                  ("float32 weights-left", 1, "decode", 30.0)))
    lines = results.model_machines_table(first, second).splitlines()
    assert "AVX2, no bfloat16 instructions (ms)" in lines[0] and "AVX512, with bfloat16 instructions (ms)" in lines[0]
    # by hand: 45 / 60 = 0.75×, 76 / 190 = 0.40×; a step one machine did not time shows a dash and no ratio
    assert [line.split()[-1] for line in lines[1:]] == ["0.75×", "-", "0.40×", "-"]
    assert "float32 weights-left, decode step" in lines[2] and "30.0" in lines[2]
    assert "bfloat16，一步解码，批大小 8" in results.model_machines_table(first, second, "zh")
    assert "quartiles" not in lines[0]  # neither run saved them
    second["timings"][0]["quartiles_ms"] = [44.0, 46.5]
    lines = results.model_machines_table(first, second).splitlines()
    assert "(median, quartiles in brackets)" in lines[0] and "45.0 (44.0–46.5)" in lines[1] and lines[1].endswith("0.75×")
    assert "60.0 (" not in lines[1]  # the first run's row has no quartiles: its median alone
    with pytest.raises(ValueError, match="SAVED_MODEL_BF16"):
        results.model_machines_table(first, {"rows": []})
    with pytest.raises(TypeError, match="SAVED_MODEL_BF16"):
        results.model_machines_table(first, [second])
    with pytest.raises(ValueError, match="language"):
        results.model_machines_table(first, second, "fr")
    with pytest.raises(TypeError, match="load_saved"):
        results.machine_name("AVX2")
    assert results.machine_name({}) == "?, no bfloat16 instructions"  # a run saved before the bench named its kernels


def test_a_cpu_whose_flags_cannot_be_read_has_unknown_bfloat16_instructions(monkeypatch, tmp_path):
    """Without /proc/cpuinfo (macOS, Windows), or with an Arm one that lists "Features" instead of x86 "flags", the live
    line says 'unknown' rather than 'no bfloat16 instructions'."""
    monkeypatch.setattr(q4_weights, "CPUINFO", str(tmp_path / "missing"))
    path = q4_weights.kernel_path()
    assert path["avx512_bf16"] is None and path["amx_bf16"] is None
    assert results.machine_name({"kernel": path}).endswith(", bfloat16 instructions unknown")
    assert results.machine_name({"kernel": path}, "zh").endswith("，bfloat16 指令未知")
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n", encoding="utf-8")  # Linux on Arm
    monkeypatch.setattr(q4_weights, "CPUINFO", str(tmp_path / "cpuinfo"))
    assert results.machine_name({"kernel": q4_weights.kernel_path()}).endswith(", bfloat16 instructions unknown")
    (tmp_path / "cpuinfo").write_text("flags\t\t: fpu avx2 avx512_bf16\n", encoding="utf-8")
    monkeypatch.setattr(q4_weights, "CPUINFO", str(tmp_path / "cpuinfo"))
    assert results.machine_name({"kernel": q4_weights.kernel_path()}).endswith(", with bfloat16 instructions")


def test_the_second_machine_run_refuses_a_cpu_without_bfloat16_instructions(monkeypatch, tmp_path):
    monkeypatch.setattr(model_formats, "kernel_path", lambda: {"avx512_bf16": False, "amx_bf16": False})
    with pytest.raises(SystemExit, match="no bfloat16 instructions"):
        model_report.run_model_decode(model_decode.MODEL_QUICK, 1, tmp_path, quick=True, bf16_cpu=True)


def no_transformers():
    raise ImportError("transformers is left out of this test")


def test_the_q4_row_is_timed_with_the_others_and_counts_the_files_bytes(smollm2, monkeypatch):
    model, tokenizer = smollm2
    torch.set_num_threads(1)
    monkeypatch.setattr(model_formats, "load_reference", no_transformers)  # the bench's path without transformers
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    workload = model_decode.ModelWorkload(lengths=(8,), calls=1, formats=("float32", "q4"), batches=(1, 2),
                                          format_length=8, prefill_calls=1, new_tokens=2)
    with torch.inference_mode():
        found = model_formats.measure_formats(model, tokenizer, workload)
    rows = {(r["format"], r["batch"], r["phase"]): r for r in found["timings"]}
    assert {("q4", 1, "decode"), ("q4", 2, "decode"), ("q4", 1, "prefill")} <= set(rows)
    assert not any(r["format"] == "llama.cpp" for r in found["timings"]) and "not installed" in found["llama_cpp"]
    c = model.config
    q4_1 = c.num_layers * 20 * (c.d_model * (c.num_heads + 2 * c.num_kv_heads) * c.head_dim + c.d_model * c.d_model
                      + 3 * c.d_model * c.d_ff) // 32  # 20 bytes per 32 weights of every block matrix
    table, norms = 2 * c.vocab_size * c.d_model, 4 * (2 * c.num_layers + 1) * c.d_model  # bfloat16 table, float32 norms
    assert rows["q4", 1, "decode"]["weight_bytes"] == q4_1 + table + norms
    assert rows["matmul floor q4", 2, "decode"]["weight_bytes"] == q4_1 + table  # its products read no norms
    assert rows["matmul floor q4", 2, "decode"]["cache_bytes"] == 0
    assert found["file_bytes"] == q4_1 + 34 * c.vocab_size * c.d_model // 32 + norms  # Q8_0 table: 34 bytes per 32
    assert rows["q4", 1, "decode"]["cache_bytes"] == rows["float32", 1, "decode"]["cache_bytes"]  # q4's cache is float32
    assert set(found["kernel"]) >= {"cpu_capability", "avx512_bf16", "amx_bf16"}
    assert found["quality"]["q4"]["largest_logit_difference"] > 0
    assert ("float32 weights-left", 1, "decode") not in rows  # only where the workload names it (the bench's default does)
    first, third = rows["q4", 1, "decode"]["quartiles_ms"]  # one round here: its quartiles are its time
    assert first == third == rows["q4", 1, "decode"]["ms"] and "quartiles_ms" not in rows["q4", 1, "prefill"]
    assert found["threads"]["threads"] == [1] and set(found["threads"]) == {"matmul floor", "matmul floor weights-left",
                                                                            "bandwidth_gb_s", "threads"}


def test_a_ratio_near_its_target_is_shown_with_the_places_it_takes_not_to_round_across_it():
    assert model_report.against(0.8996, 0.9) == "0.8996"  # 0.90 and 0.900 would read as meeting 0.9
    assert model_report.against(0.894, 0.9) == "0.89" and model_report.against(0.9, 0.9) == "0.90"
    assert model_report.against(1.2345, 0.9) == "1.23"


def test_q4_floor_lines_split_each_q4_step_into_its_products_and_the_rest():
    timings = [{"format": f, "batch": 1, "phase": "decode", "ms": ms} for f, ms in (
        ("float32", 60.0), ("q4", 17.0), ("q4 compiled", 12.0), ("matmul floor q4", 7.0))]
    en, zh = model_report.q4_floor_lines({"timings": timings})
    # by hand: 17 - 7 = 10 > 7 (❌); 12 - 7 = 5 ≤ 7 (✅)
    assert en[0].startswith("❌ q4: 17.0 ms, of which its products alone take 7.0 and the rest 10.0")
    assert en[1].startswith("✅ q4 compiled: 12.0 ms") and "the rest 5.0" in en[1] and "其余 5.0 毫秒" in zh[1]
    assert model_report.q4_floor_lines({"timings": timings[:3]}) == ([], [])  # a run before the row


def test_the_q4_floor_times_each_4_bit_layer_and_the_output_layer_once(smollm2, monkeypatch):
    from attention_utils.models.q4_weights import Q4Linear, to_q4

    q4 = to_q4(smollm2[0])
    calls = []
    monkeypatch.setattr(Q4Linear, "forward", lambda self, x: calls.append((self.in_features, tuple(x.shape))))
    model_formats.q4_floor_step(q4, 2)()
    assert len(calls) == 4 * q4.config.num_layers  # QKV, output, gate-and-up and down per block
    assert all(shape == (2, width) for width, shape in calls)


def test_compile_line_prints_the_saved_times_and_their_printed_difference():
    """results.compile_line: one format's eager and compiled batch-1 steps from the saved file, the saving as the
    difference of the two printed times (so a reader redoes it), and the compile seconds and token check, both languages."""
    saved = results.load_saved(results.SAVED_MODEL)
    step = {r["format"]: r["ms"] for r in saved["timings"] if (r["phase"], r["batch"]) == ("decode", 1)}
    for fmt in ("float32", "q4"):
        eager, compiled = f"{step[fmt]:.1f}", f"{step[f'{fmt} compiled']:.1f}"
        less = f"{float(eager) - float(compiled):.1f}"
        seconds = f"{saved['compiled'][fmt]['compile_seconds']:.0f}"
        en, zh = results.compile_line(saved, fmt), results.compile_line(saved, fmt, "zh")
        assert f"eager {eager:>5} ms, compiled {compiled:>5} ms: {less:>4} ms less per step (compiling took {seconds} s" in en
        assert f"{fmt} 不编译 {eager} 毫秒，编译后 {compiled} 毫秒：每步少 {less} 毫秒（编译用了 {seconds} 秒" in zh  # no column padding in Chinese
        same, of = saved["compiled"][fmt]["same_greedy_tokens"].split(" of ")
        assert f"{of} 个里 {same} 个相同" in zh
    with pytest.raises(ValueError):
        results.compile_line(saved, "float32", "fr")


def test_step_factors_splits_either_loop_and_names_a_wrong_one():
    """Section 3's split from the formats' loop or from lesson 13's loop, by hand from the file; a misspelt loop is refused."""
    saved = json.loads((ROOT / "figures" / "bench_model.json").read_text(encoding="utf-8"))
    step = next(r for r in saved["timings"] if (r["format"], r["batch"], r["phase"]) == ("float32", 1, "decode"))
    row = next(r for r in saved["rows"] if (r["weights"], r["batch"], r["length"]) == ("float32", 1, step["length"]))
    bytes_ms = (step["weight_bytes"] + step["cache_bytes"]) / saved["roofs"]["bandwidth_gb_s"] / 1e6
    assert results.step_factors(saved, loop="lesson 13") == pytest.approx(
        (bytes_ms, bytes_ms / (row["prefill_ms"] / row["length"]), row["decode_ms"] / bytes_ms))
    with pytest.raises(ValueError, match="loop must be"):
        results.step_factors(saved, loop="lesson13")


def test_the_saved_quality_split_measures_what_the_quality_rows_measure():
    """figures/bench_quality_split.json (bench --quality-split): int8 weights with float32 arithmetic against its own float32
    run, over the same prompts, new tokens and held-out text as the first machine's quality rows."""
    split, first = results.load_saved(results.SAVED_QUALITY_SPLIT), results.load_saved(results.SAVED_MODEL)
    assert set(split["quality"]) == {"float32", "int8 float32"} and {"cpu", "cpu_capability", "torch"} <= set(split["environment"])
    for key in ("prompts", "new_tokens", "text_tokens"):
        assert split["quality"]["int8 float32"][key] == first["quality"]["int8"][key], key
    assert split["quality"]["float32"]["largest_logit_difference"] == 0.0  # the reference against itself


def test_the_kernel_rows_time_two_rows_profile_bfloat16_and_attention_at_each_length(smollm2):
    """The rows a rerun adds for lesson 14: each kernel at one row and at two in one loop, a profile of bfloat16's steps,
    and attention's own time a step at each of lesson 13's lengths (every operator's beside it)."""
    model, _ = smollm2
    torch.set_num_threads(1)
    workload = model_decode.ModelWorkload(lengths=(8, 24), calls=1, formats=("float32",), batches=(1,), format_length=8)
    matrices = [p for p in model.parameters() if p.dim() == 2]
    prompt = model_decode.prompt_ids(8, 1, model.config.vocab_size)
    with torch.inference_mode():
        found = model_formats.kernels(model, matrices, prompt, workload, to_format(model, "bfloat16"))
    two = found["int8_kernel"]["two_rows"]
    assert set(two) == {"int8_kernel_ms", "bfloat16_linear_ms"} and min(two.values()) > 0
    assert 0 < found["profile_bfloat16"]["matmul_share"] < 1 and found["profile_bfloat16"]["threads"] == 1
    rows = found["attention_by_length"]["by_length"]
    assert set(rows) == {"8", "24"}  # JSON keys: the lengths as text
    for row in rows.values():
        assert 0 < row["attention_ms"] < row["all_operators_ms"]


def test_a_step_at_a_length_reads_the_same_cache_at_every_call(smollm2):
    """step_at_length forgets the token each call adds, so a profile at T = 8 is a profile at T = 8 however often it runs:
    its cache then holds the prompt's keys exactly as a fresh prefill leaves them."""
    model, _ = smollm2
    with torch.inference_mode():
        step, cache = model_formats.step_at_length(model, 8)
        for _ in range(3):
            step()
        fresh = KVCache(model.config.num_layers)
        model(model_formats.fixed_prompt(8), cache=fresh)
    assert cache.position == 8
    torch.testing.assert_close(cache[0].keys, fresh[0].keys, rtol=0, atol=0)


def test_the_saved_attention_growth_is_a_profile_at_each_of_lesson_13s_lengths():
    """figures/bench_attention_growth.json (bench --attention-growth): one thread, lesson 13's lengths taking turns, each
    length's SDPA time under every operator's, with the quartiles around each median, and the same thread's roofs."""
    saved = results.load_saved(results.SAVED_ATTENTION_GROWTH)["attention_by_length"]
    assert saved["threads"] == 1 and saved["turns"] > 3 and set(saved["by_length"]) == {"32", "128", "512"}
    assert {"bandwidth_gb_s", "matmul_gflop_s"} <= set(saved["roofs"])
    for row in saved["by_length"].values():
        assert 0 < row["attention_ms"] < row["all_operators_ms"]
        for key in ("attention_ms", "all_operators_ms"):
            low, high = row[f"{key}_quartiles"]
            assert low <= row[key] <= high, key
    alone = saved["one_query"]  # the step's SDPA calls alone, three ways, at the same lengths
    profile = results.load_saved(results.SAVED_MODEL)["profile"]  # the model's own step: SDPA's calls in its profile
    sdpa_calls = next(op["calls"] for op in profile["operators"] if "scaled_dot_product" in op["name"]) / profile["repeats"]
    assert alone["threads"] == 1 and alone["calls_a_step"] == sdpa_calls == 30 and alone["turns"] == saved["turns"]
    assert set(alone["ways"]) == {"sdpa", "sdpa, one layer's cache", "products"}
    for way in alone["ways"].values():
        assert set(way) == {"32", "128", "512"} and all(r["ms_quartiles"][0] <= r["ms"] <= r["ms_quartiles"][1] for r in way.values())


def test_one_querys_attention_written_as_products_is_sdpas():
    """The control of bench --attention-growth computes what SDPA computes: one query, 9 heads sharing 3 key-value heads."""
    query, keys, values = torch.randn(1, 9, 1, 64), torch.randn(1, 3, 40, 64), torch.randn(1, 3, 40, 64)
    expected = torch.nn.functional.scaled_dot_product_attention(query, keys, values, enable_gqa=True)
    assert torch.allclose(model_kernels.attention_as_products(query, keys, values), expected, atol=1e-5)


def test_on_one_thread_gives_the_threads_back_even_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), model_kernels.on_one_thread():
        assert torch.get_num_threads() == 1
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before
