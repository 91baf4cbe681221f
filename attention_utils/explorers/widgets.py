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

from ..checks import bilingual


def explore(draw: Callable[..., Figure], /, **controls: widgets.ValueWidget) -> None:
    """Show the controls, then draw(**values) below them; redraw in place whenever a value changes."""
    if not callable(draw):
        raise TypeError(
            bilingual(
                f"draw must be a function that returns a figure, got {type(draw).__name__}.",
                f"draw 必须是一个返回图形的函数，实际是 {type(draw).__name__}。",
            )
        )
    for name, control in controls.items():
        if not isinstance(control, widgets.ValueWidget):
            raise TypeError(
                bilingual(
                    f"control {name} must be an ipywidgets control with a value (IntSlider, Dropdown, ...), "
                    f"got {type(control).__name__}.",
                    f"控件 {name} 必须是带 value 的 ipywidgets 控件（IntSlider、Dropdown 等），实际是 {type(control).__name__}。",
                )
            )

    def current_figure() -> Figure:
        figure = draw(**{name: control.value for name, control in controls.items()})
        if not isinstance(figure, Figure):
            raise TypeError(
                bilingual(
                    f"draw must return a matplotlib Figure (end it with `return fig`), got {type(figure).__name__}.",
                    f"draw 必须返回 matplotlib 的 Figure（最后写 `return fig`），实际是 {type(figure).__name__}。",
                )
            )
        return figure

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
