"""Lesson 14's roofline figure and explorer, driven headless on the saved bench: every control redraws, in both languages."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from explorer_harness import drive, language  # noqa: F401 (a fixture)

from attention_utils import results
from attention_utils.explorers import lesson14

SAVED = results.load_saved(results.SAVED_MODEL)


def test_every_control_redraws(language):
    redrawn = drive(lesson14.show_roofline, SAVED, results.load_saved(results.SAVED_MODEL_BF16))
    assert len(redrawn) == 3 and all(redrawn.values()), redrawn  # format, batch and machine
    plt.close("all")


def test_without_a_second_machine_the_menu_holds_one(language):
    redrawn = drive(lesson14.show_roofline, SAVED)
    assert len(redrawn) == 3 and list(redrawn.values()) == [True, True, False], redrawn  # the machine menu cannot move
    plt.close("all")


def test_a_second_run_of_another_bench_is_refused():
    with pytest.raises(ValueError, match="SAVED_MODEL_BF16"):
        lesson14.show_roofline(SAVED, results.load_saved(results.SAVED_SPECULATIVE))


def test_the_roof_is_the_lower_of_bandwidth_and_throughput():
    roofs = {"bandwidth_gb_s": 10.0, "matmul_gflop_s": 100.0}  # ridge at 10 FLOPs per byte
    assert lesson14._roof_at(0.5, roofs) == 5.0 and lesson14._roof_at(10.0, roofs) == 100.0
    assert lesson14._roof_at(1000.0, roofs) == 100.0


def test_a_point_by_hand():
    row = {"flops": 2_000_000, "weight_bytes": 3_000_000, "cache_bytes": 1_000_000, "ms": 2.0}
    point = results.roofline_point(row)
    assert point["intensity"] == 0.5  # 2 MFLOP over 4 MB
    assert point["gflop_s"] == 1.0  # 2 MFLOP in 2 ms


def test_the_summary_names_the_point(language):
    line = lesson14.point_summary(SAVED, "int8", 1)
    assert line.startswith("int8") and ("批大小 1" in line if language == "zh" else "batch 1" in line)


def test_a_format_sits_under_its_own_flat_roof(language):
    """bfloat16 at batch 16 on the first machine, by hand: its GFLOP/s over min(bandwidth × intensity, bfloat16's roof)."""
    row = next(r for r in SAVED["timings"] if (r["format"], r["batch"], r["phase"]) == ("bfloat16", 16, "decode"))
    intensity = row["flops"] / (row["weight_bytes"] + row["cache_bytes"])
    gflop_s = row["flops"] / row["ms"] / 1e6
    own = gflop_s / min(SAVED["roofs"]["bandwidth_gb_s"] * intensity, SAVED["format_roofs"]["bfloat16"])
    float32 = gflop_s / min(SAVED["roofs"]["bandwidth_gb_s"] * intensity, SAVED["format_roofs"]["float32"])
    read = gflop_s / (SAVED["roofs"]["bandwidth_gb_s"] * intensity)
    line = lesson14.point_summary(SAVED, "bfloat16", 16)
    assert f"{own:.0%}" in line and f"{float32:.0%}" not in line and f"{read:.0%}" in line
    assert "bfloat16's own flat roof" in line or "bfloat16 自身算力屋顶" in line


def test_bytes_against_quality_plots_the_saved_rows():
    """Each format's point is (weights + cache MB at batch 1, its saved perplexity / largest logit difference)."""
    fig = lesson14.draw_bytes_quality(SAVED)
    for ax, key in zip(fig.axes, ("perplexity", "largest_logit_difference")):
        found = sorted(tuple(map(float, offsets[0])) for offsets in (c.get_offsets() for c in ax.collections) if len(offsets))
        expected = sorted(((r["weight_bytes"] + r["cache_bytes"]) / 1e6, SAVED["quality"][r["format"]][key])
                          for r in SAVED["timings"] if (r["batch"], r["phase"]) == (1, "decode") and r["format"] in SAVED["quality"])
        assert len(found) == len(expected) == 4
        assert all(abs(a[0] - b[0]) < 1e-6 and abs(a[1] - b[1]) < 1e-6 for a, b in zip(found, expected))
    plt.close(fig)


def test_the_step_split_by_hand_from_the_saved_file():
    """Section 3's bar: the products' weights at the roof, the floor beyond them and the rest, from the JSON by hand."""
    step = next(r for r in SAVED["timings"] if (r["format"], r["batch"], r["phase"]) == ("float32", 1, "decode"))
    floor = next(r for r in SAVED["timings"] if (r["format"], r["batch"], r["phase"]) == ("matmul floor", 1, "decode"))
    bytes_ms = floor["weight_bytes"] / SAVED["roofs"]["bandwidth_gb_s"] / 1e6  # the products read the weights only
    parts = results.step_split(SAVED)
    assert parts["bytes"] == pytest.approx(bytes_ms) and parts["outside products"] == pytest.approx(step["ms"] - floor["ms"])
    assert parts["bytes"] + parts["slow products"] + parts["outside products"] == pytest.approx(step["ms"])
    assert [f"{parts[p]:.1f}" for p in ("bytes", "slow products", "outside products")] == ["22.5", "23.7", "16.7"]  # the lesson's bar


def test_the_split_bars_label_each_part_in_both_languages(language):
    fig = lesson14.draw_step_split(SAVED, results.load_saved(results.SAVED_MODEL_BF16))
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert len(labels) == 6 and all(("ms" if language == "en" else "毫秒") in t for t in labels), labels
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks[0].startswith("first machine" if language == "en" else "第一台机器"), ticks
    plt.close(fig)


def test_a_gpu_drawn_on_the_same_axes_has_its_datasheet_roofs():
    fig = lesson14.draw_roofline(SAVED, rows=("float32",), gpu=(3.35, 989))
    line = next(l for l in fig.axes[0].lines if l.get_linestyle() == ":" and len(l.get_xdata()) == 3)
    xs, ys = line.get_xdata(), line.get_ydata()
    assert xs[1] == pytest.approx(989 / 3.35)  # its ridge: 295 FLOPs per byte
    assert list(ys) == pytest.approx([0.05 * 3350, 989e3, 989e3])  # GB/s × FLOPs/byte, then flat at the ridge and beyond
    plt.close("all")
    for bad in ((3.35,), (0, 989), (3.35, float("nan")), [3.35, 989], (True, 989)):
        with pytest.raises(ValueError, match="TB/s, TFLOP/s"):
            lesson14.draw_roofline(SAVED, gpu=bad)
    plt.close("all")
