"""The real model's decode benchmark: it times what it says, counts bytes by hand, and the README and lesson 13 quote the saved file."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch

from attention_utils import results
from attention_utils.course.bench import model_decode, model_report

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "13_a_real_language_model.ipynb"
# SmolLM2-135M by hand: 134,515,008 parameters (its published configuration, tied embeddings), 4 bytes each in float32
WEIGHT_BYTES = 134_515_008 * 4
PER_TOKEN = 2 * 30 * 3 * 64 * 4  # keys and values, 30 layers, 3 key/value heads of 64, float32


def test_one_length_is_timed_both_ways_and_counted_by_hand(smollm2):
    model = smollm2[0]
    torch.set_num_threads(1)
    with torch.inference_mode():
        row = model_decode.measure_length(model, model_decode.ModelVariant(), length=8, calls=2)
    assert row["weight_bytes"] == WEIGHT_BYTES
    assert row["cache_bytes"] == row["formula_cache_bytes"] == 8 * PER_TOKEN
    assert row["prefill_ms"] > 0 and row["decode_ms"] > 0
    assert row["prefill_over_decode"] == pytest.approx(row["prefill_ms"] / row["decode_ms"])
    assert (row["weights"], row["batch"]) == ("float32", 1)


def test_only_float32_is_measured_yet():
    with pytest.raises(ValueError, match="lesson 14"):
        model_decode.load_model(model_decode.ModelVariant(weights="int8"))


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
