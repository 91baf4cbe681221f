"""Lesson 17's serving bench: the targets read from the results, the README section and figures written from them,
and the part on the command line (the measurement itself runs the scheduler, tested in test_scheduler.py)."""

from __future__ import annotations

import pytest

from attention_utils.course.bench import serving, serving_report


def results(speed: float = 2.5, int8_running: int = 9) -> dict:
    """Results shaped as measure_serving writes them, with round numbers chosen by hand."""
    policy = lambda rate, p95: {"tokens_per_s": rate, "ttft_p50": 1.0, "ttft_p95": p95, "tpot_p50": 0.2, "steps": 10,
                                "running_per_step": [1, 2, 2, 1]}
    budget = [{"budget_pages": pages, "kind": kind, "pages": pages * (3 if kind == "int8" else 1),
               "most_running": running, "tokens_per_s": 5.0, "preemptions": 0}
              for pages in (16, 32) for kind, running in (("float32", 3), ("int8", int8_running))]
    return {"environment": {"date": "2026-11-28", "cpu": "test CPU", "threads": 2, "torch": "2.13.0"},
            "workload": {"requests": 12, "prompt_lengths": [16, 96], "new_tokens": [8, 32], "last_arrival": 12,
                         "max_batch": 8},
            "policies": {"one": policy(4.0, 9.0), "static": policy(5.0, 8.0), "continuous": policy(4.0 * speed, 3.0)},
            "budget": budget, "page_bytes": {"float32": 737_280, "int8": 207_360},
            "prefix": {"cold": {"prefill_tokens": 600}, "cached": {"prefill_tokens": 120}, "shared_full_page_tokens": 480}}


@pytest.mark.parametrize("speed, int8_running, met", [(2.5, 9, [True] * 4), (1.5, 9, [False, True, True, True]),
                                                      (2.5, 7, [True, True, False, True])])
def test_targets_by_hand(speed, int8_running, met):
    assert [passed for _, passed in serving.serving_targets(results(speed, int8_running))] == met


def test_report_and_figures_come_from_the_results(tmp_path):
    found = results()
    found["checks"] = [{"target": target, "passed": passed} for target, passed in serving.serving_targets(found)]
    markdown = serving_report.serving_markdown(found)
    assert "| continuous batching / 连续批处理 | 10.0 | 1.00 | 3.00 | 200 | 10 |" in markdown
    assert "| 11.2 | float32 | 16 | 3 | 5.0 | 0 |" in markdown  # 16 pages x 737,280 bytes = 11.25 MiB
    assert markdown.count("✅") == 4
    for language in ("en", "zh"):
        assert serving_report.plot_serving(found, tmp_path, language).stat().st_size > 10_000


def test_the_serving_part_is_on_the_command_line_and_in_the_readme(capsys):
    from attention_utils.course.bench.__main__ import main
    from attention_utils.results import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "<!-- serving:start -->" in readme and "bench --serving`" in readme
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--serving" in capsys.readouterr().out
