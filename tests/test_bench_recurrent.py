"""Lesson 16's bench part: its state layers decode what the package computes, it measures, and lesson 16 and the README quote the saved file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from attention_utils import results
from attention_utils.explorers import lesson16 as explorers16
from attention_utils.course.bench import recurrent, recurrent_report
from attention_utils.recurrent import delta_rule_recurrent, linear_attention_recurrent

ROOT = Path(__file__).resolve().parents[1]
TINY = recurrent.RecurrentWorkload(d_model=16, num_heads=2, lengths=(4, 8), calls=2)


def test_a_decode_step_continues_the_prefilled_state():
    """Prefill 5 tokens, step once: the output equals the package's recurrent form run over all 6 tokens."""
    torch.manual_seed(0)
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    for delta in (False, True):
        layer = recurrent.StateLayer(16, 2, delta=delta).double().eval()
        with torch.no_grad():
            state = layer.prefill(x[:, :5])
            out, _ = layer.step(x[:, 5:], state)
            q, k, v, beta = layer.split(x)
            whole = delta_rule_recurrent(q, k, v, beta) if delta else linear_attention_recurrent(q, k, v)
            expected = layer.out_proj(whole[:, -1].reshape(1, 1, -1))
        torch.testing.assert_close(out, expected)


def test_one_length_is_measured_with_exact_bytes():
    row = recurrent.measure_length(TINY, 8, threads=1)
    assert row["softmax_bytes"] == 2 * 8 * 16 * 4  # a key and a value per token, float32, worked out by hand
    assert row["linear_bytes"] == row["delta_bytes"] == 2 * 8 * 8 * 4  # 2 heads of 8 x 8
    assert all(row[f"{key}_ms"] > 0 for key in recurrent.LAYERS)


def test_the_report_writes_json_figures_and_checks(tmp_path):
    found = recurrent.measure_all_recurrent(TINY, threads=1)
    saved = {"environment": {"date": "today", "cpu": "cpu", "threads": 1, "torch": torch.__version__},
             "workload": dataclasses.asdict(TINY), **found}
    assert all(passed for _, passed in recurrent_report.recurrent_check(saved))
    text = recurrent_report.recurrent_markdown(saved)
    assert "| 8 |" in text and "由 `make bench`" in text
    for language in ("en", "zh"):
        assert recurrent_report.plot_recurrent(saved, tmp_path, language).is_file()
    crossing = explorers16.crossovers(saved)
    assert crossing["memory"] == 2 * 8 * 8 * 4 / (2 * 16 * 4)  # state bytes / cache bytes per token


def test_the_saved_results_match_their_workload_and_the_readme():
    saved = json.loads(results.SAVED_RECURRENT.read_text(encoding="utf-8"))
    assert [row["length"] for row in saved["rows"]] == list(recurrent.RECURRENT_FULL.lengths)
    assert saved["workload"]["d_model"] == recurrent.RECURRENT_FULL.d_model
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert explorers16.crossovers(saved)["en"] in readme
