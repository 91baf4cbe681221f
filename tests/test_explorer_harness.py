"""The explorer harness itself: it sees a redraw, and it sees a control that does nothing."""

from __future__ import annotations

import ipywidgets
import matplotlib.pyplot as plt
from explorer_harness import drive

from attention_utils.explorers.widgets import explore


def show_line(ignore_last: bool = False) -> None:
    def draw(slope: int, colour: str, unused: int):
        figure, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [0, slope], color=colour)
        return figure

    explore(
        draw,
        slope=ipywidgets.IntSlider(value=1, min=1, max=3, description="slope"),
        colour=ipywidgets.Dropdown(options=["red", "blue"], description="colour"),
        unused=ipywidgets.IntSlider(value=0, min=0, max=2, description="unused"),
    )


def test_the_harness_sees_every_redraw_and_a_control_that_changes_nothing():
    redrawn = drive(show_line)
    assert redrawn == {"slope": True, "colour": True, "unused": False}
