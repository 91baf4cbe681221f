"""`make bench BENCH_ARGS="--speculative --quick"` on SmolLM2: every run, with nn.Linear and with weights-left products,
gives plain greedy decoding's tokens, and the quick run writes only its own folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attention_utils import results
from attention_utils.course.bench.speculative import DRAFTS, SPECULATIVE_QUICK

ROOT = Path(__file__).resolve().parents[1]


def test_a_quick_run_checks_both_products_and_writes_only_its_own_folder(tmp_path):
    saved = results.SAVED_SPECULATIVE
    stamp = saved.stat().st_mtime_ns
    done = subprocess.run([sys.executable, "-m", "attention_utils.course.bench", "--speculative", "--quick", "--threads", "1",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "speculative.json").read_text(encoding="utf-8"))
    expected = [(name, k) for name in DRAFTS if name != "q4 compiled" for k in SPECULATIVE_QUICK.ks]  # compiled: full run only
    for part in ("summary", "summary_weights_left"):
        assert [(row["draft"], row["k"]) for row in found[part]] == expected
        assert all(row["same"] for row in found[part]), part  # every speculative run gave plain greedy decoding's tokens
    assert found["weights_left"]["plain_tokens_equal_nn_linear"]
    assert set(found["weights_left"]["verification_ms"]) == {str(k) for k in range(SPECULATIVE_QUICK.most + 1)}
    assert saved.stat().st_mtime_ns == stamp  # --quick leaves figures/ alone


def test_the_second_machine_is_read_into_the_readme_and_refused_on_a_cpu_without_bfloat16(monkeypatch, tmp_path):
    from attention_utils.course.bench import speculative

    second = results.load_saved(results.SAVED_SPECULATIVE_BF16)
    rows = speculative.second_machine_rows()
    step, left = second["draft_step_ms"]["model"], second["weights_left"]["draft_step_ms"]["model"]
    assert f"One decode step {step:.1f} ms with `nn.Linear`, {left:.1f} ms weights-left" in rows[1]
    took = round(second["compile_seconds"])  # the full run compiles the q4 draft
    assert f"took {took} s, before any timing" in rows[1] and f"用了 {took} 秒" in rows[3]
    assert rows.count(speculative.TABLE_HEAD[0]) == 2  # one table per way of writing the products
    assert len(rows) == 5 + 2 * (len(speculative.TABLE_HEAD) + len(second["summary"])) + 1
    monkeypatch.setattr(speculative, "SAVED_SPECULATIVE_BF16", tmp_path / "missing.json")
    assert speculative.second_machine_rows() == []  # not saved: no section
    from attention_utils.course.bench import model_formats

    monkeypatch.setattr(model_formats, "kernel_path", lambda: {"avx512_bf16": False, "amx_bf16": False})
    with pytest.raises(SystemExit, match="no bfloat16 instructions"):
        speculative.run_speculative(SPECULATIVE_QUICK, 1, tmp_path, quick=True, bf16_cpu=True)


def test_a_decode_step_timed_twice_apart_is_named_as_a_busy_machine():
    from attention_utils.course.bench.speculative import disturbed

    calm = {"verification_ms": {"0": 30.0}, "draft_step_ms": {"model": 31.5}}  # 1.05x: within 15%
    busy = {"verification_ms": {"0": 30.0}, "draft_step_ms": {"model": 42.0}}  # 1.40x
    assert disturbed({**calm, "weights_left": calm}) == []
    lines = disturbed({**calm, "weights_left": busy})
    assert len(lines) == 1 and "weights-left" in lines[0] and "(1.40x)" in lines[0] and "run again" in lines[0]
    assert disturbed({"error": "the model could not be loaded"}) == []


def test_the_readme_section_is_what_the_saved_runs_write():
    from attention_utils.course.bench import speculative

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- speculative:start -->\n", 1)[1].split("\n<!-- speculative:end -->", 1)[0]
    assert section == speculative.speculative_markdown(results.load_saved(results.SAVED_SPECULATIVE))  # both machines


def test_a_compiled_draft_left_out_is_said_with_its_reason():
    from attention_utils.course.bench.speculative import compiled_note

    reason = "torch.compile cannot build CPU kernels here (no C++ compiler, or ATEN_CPU_CAPABILITY=default)"
    assert compiled_note({"compiled_draft_left_out": reason}, "en") == f" The compiled q4 draft was left out: {reason}."
    assert compiled_note({"compiled_draft_left_out": reason}, "zh").startswith("编译后的 q4 草稿没有测：")
    assert compiled_note({"compile_seconds": 108.6}, "en") == " Compiling the q4 draft's step took 109 s, before any timing."
    assert compiled_note({}, "en") == ""  # a quick run compiles nothing
