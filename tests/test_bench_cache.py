"""Lesson 15's cache bench: bytes counted by hand for the contiguous and paged caches, the quantized ones smaller,
every step timed, and the README section and figures written from the rows."""

from __future__ import annotations

import pytest

from attention_utils.course.bench import model_caches

PER_TOKEN = 2 * 30 * 3 * 64 * 4  # SmolLM2: keys and values, 30 layers, 3 key/value heads of 64, float32


def test_bytes_by_hand_and_every_kind_timed(smollm2):
    rows = model_caches.cache_rows(smollm2[0], model_caches.CacheWorkload(lengths=(40,), calls=2))
    found = {row["kind"]: row for row in rows}
    assert set(found) == set(model_caches.KINDS) and all(row["ms"] > 0 for row in rows)
    assert found["contiguous"]["bytes"] == 40 * PER_TOKEN
    assert found["paged"]["bytes"] == 3 * 16 * PER_TOKEN  # 40 tokens fill 3 pages of 16; the last one holds 8
    assert found["int4"]["bytes"] < found["int8"]["bytes"] < found["contiguous"]["bytes"]
    assert found["int8"]["bytes_per_token"] == pytest.approx(found["int8"]["bytes"] / 40)


def test_report_and_figures_come_from_the_rows(tmp_path):
    rows = [{"kind": kind, "length": length, "ms": 10.0 + index, "bytes": 1000 * (index + 1) * length,
             "bytes_per_token": 1000.0 * (index + 1)}
            for length in (128, 512) for index, kind in enumerate(model_caches.KINDS)]
    results = {"environment": {"date": "2026-11-26", "cpu": "test CPU", "threads": 2, "torch": "2.13.0"},
               "workload": {"lengths": [128, 512], "calls": 7}, "rows": rows}
    markdown = model_caches.cache_markdown(results)
    assert markdown.count("| int4 / int4 | ") == 2 and "| paged float32 (16 tokens a page) / 分页的 float32" in markdown
    assert "| contiguous float32 / 连续存放的 float32 | 512 | 1,000 | 10.0 |" in markdown
    for language in ("en", "zh"):
        assert model_caches.plot_caches(results, tmp_path, language).stat().st_size > 10_000


def test_the_cache_part_is_on_the_command_line_and_in_the_readme(capsys):
    from attention_utils.course.bench.__main__ import main
    from attention_utils.results import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "<!-- cache:start -->" in readme and "`--cache`" in readme
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--cache" in capsys.readouterr().out
