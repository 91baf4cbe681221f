"""Lesson 12's explorer: every control redraws, and what it draws is what the package's cache keeps."""

from __future__ import annotations

import matplotlib.pyplot as plt
from explorer_harness import drive

from attention_utils.explorers import lesson12


def test_every_control_of_the_generation_explorer_changes_the_figure():
    assert all(drive(lesson12.show_generation, prompt_length=5, new_tokens=8).values())
    plt.close("all")


def test_the_rows_say_what_each_way_of_generating_computes():
    prefill = lesson12.step_rows(0, prompt_length=4, window=None, sinks=0)
    assert (prefill == lesson12.COMPUTED).all()  # the prefill computes the prompt's keys and values in every way
    rows = lesson12.step_rows(5, prompt_length=4, window=3, sinks=1)  # 9 positions in play, the newest is 8
    assert (rows[0] == lesson12.COMPUTED).all()  # no cache: everything again
    assert rows[1].tolist() == [lesson12.READ] * 8 + [lesson12.COMPUTED]
    # window 3 and one sink, written out by hand: the sink 0 and the last three (6, 7, 8) stay
    assert rows[2].tolist() == [lesson12.READ] + [lesson12.DROPPED] * 5 + [lesson12.READ] * 2 + [lesson12.COMPUTED]


def test_the_title_counts_the_bytes_the_cache_holds():
    figure = lesson12.draw_generation(5, prompt_length=4, new_tokens=8, window=3, sinks=1, bytes_per_token=100)
    assert "4 of 9 tokens" in figure.axes[0].get_title() and "400 bytes" in figure.axes[0].get_title()
    slots = [t.get_text() for t in figure.axes[1].texts]
    assert sorted(map(int, slots)) == [0, 6, 7, 8]  # the ring buffer holds the sink and the window
    plt.close(figure)


def test_the_cache_growth_figure_draws_the_measured_line():
    figure = lesson12.draw_cache_growth([9, 10, 11], [4608, 5120, 5632])
    (line,) = figure.axes[0].get_lines()
    assert list(line.get_xdata()) == [9, 10, 11] and list(line.get_ydata()) == [4608, 5120, 5632]
