"""Interactive explorers that redraw one figure in place, with a static copy for stored outputs.

The default figure is shown as an ordinary cell output (so GitHub, papermill and nbval see a
picture), and moving a control replaces that same output through its display id.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display
from matplotlib.figure import Figure


def explore(draw: Callable[..., Figure], /, **controls: widgets.ValueWidget) -> None:
    """Show the controls, then draw(**values) below them; redraw in place whenever a value changes."""

    def current_figure() -> Figure:
        return draw(**{name: control.value for name, control in controls.items()})

    panel = widgets.HBox(list(controls.values()))
    display(panel)
    figure = current_figure()
    handle = display(figure, display_id=True)
    plt.close(figure)

    def redraw(_change: dict) -> None:
        new_figure = current_figure()
        handle.update(new_figure)
        plt.close(new_figure)

    for control in controls.values():
        control.observe(redraw, names="value")
