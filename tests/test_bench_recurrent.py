"""Lesson 16's bench part: its state layers decode what the package computes, it measures, and lesson 16 and the README quote the saved file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from attention_utils import results
from attention_utils.explorers import lesson16 as explorers16
from attention_utils.course.bench import recall_grid, recurrent, recurrent_report
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


def tiny_recall_workload() -> recall_grid.RecallWorkload:
    """Two parts, one small model each, two training steps: enough to check the file, not to learn."""
    return recall_grid.RecallWorkload(
        tasks={"capacity": dict(num_keys=8, most_pairs=4), "boundary": dict(num_keys=8, most_pairs=2, boundary=True)},
        pairs={"capacity": (1, 4), "boundary": (2,)},
        runs=(recall_grid.RecallRun("capacity", "window", ("softmax",), 4, 3),
              recall_grid.RecallRun("boundary", "gated_delta", ("gated_delta",), 4)),
        seeds=(0, 1), steps=2)


def test_the_recall_grid_saves_a_row_per_seed_and_keeps_other_parts(tmp_path):
    found = recall_grid.run_recall(tiny_recall_workload(), tmp_path, quick=True)
    saved = json.loads((tmp_path / "recall.json").read_text(encoding="utf-8"))
    assert saved["rows"] == found["rows"] and len(saved["rows"]) == 2 * 2 + 2 * 1  # seeds x pairs, per run
    window = [row for row in saved["rows"] if row["model"] == "window"]
    assert {(row["seed"], row["pairs"]) for row in window} == {(0, 1), (0, 4), (1, 1), (1, 4)}
    assert {row["kept_floats"] for row in window if row["pairs"] == 4} == {3 * (4 + 32)}  # 3 tokens: a key, a value of 32
    boundary = [row for row in saved["rows"] if row["part"] == "boundary"]
    assert [row["kept_floats"] for row in boundary] == [4 * 32, 4 * 32]  # a state of d_k 4 x d_model 32
    again = recall_grid.run_recall(tiny_recall_workload(), tmp_path, quick=True, only=("boundary",))
    assert [row for row in again["rows"] if row["part"] == "capacity"] == window  # kept, not trained again


def test_the_saved_recall_grid_has_every_seed_for_every_run():
    saved = results.load_saved(results.SAVED_RECALL)
    work = saved["workload"]
    assert work["seeds"] == list(recall_grid.RECALL_FULL.seeds) and len(work["seeds"]) >= 2
    for run in work["runs"]:
        rows = [row for row in saved["rows"] if row["part"] == run["part"] and row["model"] == run["name"]
                and row["key_size"] == run["key_size"]]
        assert sorted((row["seed"], row["pairs"]) for row in rows) == sorted(
            (seed, n) for seed in work["seeds"] for n in work["pairs"][run["part"]]), run


def test_the_matched_window_keeps_no_more_than_the_small_state():
    """6 tokens of a key (8) and a value (32) numbers: 240, against a delta-rule state of 8 x 32 = 256 (by hand)."""
    assert recall_grid.MATCHED_WINDOW == 6
    assert 6 * (8 + 32) <= 8 * 32 < 7 * (8 + 32)
