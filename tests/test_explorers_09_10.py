"""Lessons 9 and 10's explorers, driven headless: every control redraws the figure, in both languages."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from explorer_harness import drive

import attention_utils as au
from attention_utils import tasks, training
from attention_utils.plotting.fonts import set_language
from attention_utils.explorers import lesson09, lesson10
from attention_utils.tiny_model import TinyAttentionModel


def tiled_loop(queries, keys, values, block_q, block_k, causal=False, steps=None):
    """A short tiled loop with lesson 9's snapshot protocol (the lesson's own loop is its subject, not imported)."""
    length = queries.shape[0]
    running_max = torch.full((length, 1), -math.inf)
    running_sum, unnormalized = torch.zeros(length, 1), torch.zeros(length, values.shape[-1])
    for q_start in range(0, length, block_q):
        rows = slice(q_start, min(q_start + block_q, length))
        for k_start in range(0, keys.shape[0], block_k):
            cols = slice(k_start, min(k_start + block_k, keys.shape[0]))
            skipped = causal and cols.start >= rows.stop
            if not skipped:
                tile = queries[rows] @ keys[cols].T / math.sqrt(queries.shape[-1])
                if causal:
                    tile = tile.masked_fill(torch.arange(cols.start, cols.stop) > torch.arange(rows.start, rows.stop)[:, None],
                                            -math.inf)
                new_max = torch.maximum(running_max[rows], tile.amax(1, keepdim=True))
                rescale, weights = torch.exp(running_max[rows] - new_max), torch.exp(tile - new_max)
                running_sum[rows] = running_sum[rows] * rescale + weights.sum(1, keepdim=True)
                unnormalized[rows] = unnormalized[rows] * rescale + weights @ values[cols]
                running_max[rows] = new_max
            if steps is not None:
                steps.append(dict(rows=rows, cols=cols, skipped=skipped, max=running_max.clone(), sum=running_sum.clone(),
                                  unnormalized=unnormalized.clone()))
    return unnormalized / running_sum


@pytest.fixture(params=["en", "zh"])
def lang(request):
    set_language(request.param)
    yield request.param
    set_language("en")


def test_the_reference_loop_is_attention():
    x = au.example_inputs()
    for causal in (False, True):
        expected = torch.nn.functional.scaled_dot_product_attention(x[None], x[None], x[None], is_causal=causal)[0]
        assert torch.allclose(tiled_loop(x, x, x, 2, 2, causal), expected, atol=1e-6)


def test_kernel_explorer(lang):
    redrawn = drive(lesson09.show_kernel, tiled_loop, au.example_inputs(), list(au.TOKENS))
    assert list(redrawn) == (["第几步", "块大小", "ToggleButtons"] if lang == "zh" else ["step", "block size", "ToggleButtons"])
    assert all(redrawn.values()), redrawn


def test_kernel_explorer_labels_differ_from_each_other(lang):
    """The step slider and the block-size control must not share a word (the Chinese review's 分块 / 分块大小)."""
    redrawn = drive(lesson09.show_kernel, tiled_loop, au.example_inputs(), list(au.TOKENS))
    step, block = list(redrawn)[:2]
    assert step not in block and block not in step


def test_kernel_figure_marks_the_skipped_tile():
    fig = lesson09.draw_kernel(tiled_loop, au.example_inputs(), list(au.TOKENS), step=3, block=2, causal=True)
    assert fig.axes[0].get_title() == "tile 3 of 9 (skipped)"  # tile (queries 0-1, keys 4-5) lies above the diagonal
    plt.close(fig)


def test_kernel_figure_says_nothing_is_computed_at_step_0(lang):
    """Step 0 is the start: no tile has been computed yet (the Chinese review: not "tile 0 of 9")."""
    fig = lesson09.draw_kernel(tiled_loop, au.example_inputs(), list(au.TOKENS), step=0, block=2, causal=True)
    title = fig.axes[0].get_title()
    assert title == ("开始：还没有计算任何分数块（共 9 个）" if lang == "zh" else "start: no tile computed yet (of 9)")
    plt.close(fig)


def test_memory_figure_reads_the_saved_results():
    from attention_utils import results

    kernel = results.load_saved(results.SAVED_KERNEL)
    fig = lesson09.draw_memory(kernel, {"explicit": "explicit", "tiled": "tiled", "sdpa": "SDPA"})
    assert len(fig.axes[0].get_lines()) == 3
    plt.close(fig)


@pytest.fixture(scope="module")
def trained():
    """Both of lesson 10's models, trained briefly (the explorer needs snapshots, not good models)."""
    torch.manual_seed(0)
    reverse = TinyAttentionModel(16, 8, positions="learned", causal=False)
    reverse_run = training.train(reverse, tasks.ReverseTask(8, 16), steps=40, seed=0, snapshots=4, progress=False)
    repeat = TinyAttentionModel(16, 16, num_heads=1, num_layers=2)
    repeat_run = training.train(repeat, tasks.RepeatTask(), steps=40, seed=0, snapshots=4, progress=False)
    return (reverse_run, reverse), (repeat_run, repeat)


def test_snapshot_explorer(lang, trained):
    reverse, repeat = trained
    before = {name: value.clone() for name, value in reverse[1].state_dict().items()}
    redrawn = drive(lesson10.show_snapshots, reverse, repeat, moves={"letters": "hgfe", "字母": "hgfe"})
    assert list(redrawn) == (["快照", "注意力图", "字母"] if lang == "zh" else ["snapshot", "map", "letters"])
    assert all(redrawn.values()), redrawn
    after = reverse[1].state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before), "the explorer changed the trained model"


def test_snapshot_figure_names_snapshot_and_step(trained):
    reverse, repeat = trained
    fig = lesson10.draw_snapshot({"reverse": reverse, "repeat": repeat}, 2, ("reverse", 0, 1), "abcdefgh")
    assert fig.axes[0].get_title().startswith("snapshot 2 (step 20): abcdefgh →")  # 40 steps, 4 snapshots: every 10
    plt.close(fig)
    fig = lesson10.draw_snapshot({"reverse": reverse, "repeat": repeat}, 2, ("reverse", 0, 1), "abcdefghij")
    assert "8" in fig.axes[0].texts[0].get_text()  # too many letters for the reverse model: its message, no traceback
    plt.close(fig)


def test_static_figures(lang):
    fig = lesson10.draw_sinusoidal(64, 32, used=8)
    assert fig.axes[0].get_images()[0].get_array().shape == (64, 32)
    plt.close(fig)
    fig = lesson10.draw_losses({"a": [3.0, 2.0, 1.0]}, 1.5, "guess")
    assert len(fig.axes[0].get_lines()) == 2
    plt.close(fig)
    fig = lesson10.draw_reverse_maps(torch.rand(2, 8, 8), torch.rand(2, 8, 8), "abcdefgh")
    assert len([ax for ax in fig.axes if ax.get_images()]) == 4
    plt.close(fig)
    fig = lesson10.draw_repeat_maps(torch.rand(2, 16, 16), "abcdefgabcdefgab")
    assert len([ax for ax in fig.axes if ax.get_images()]) == 2
    plt.close(fig)
