"""Drive an explorer headless, as a learner would: draw its default figure, then move each control once.

    from explorer_harness import drive
    redrawn = drive(explorers.lesson05.show_mask)          # {control label: the figure changed}
    assert all(redrawn.values())

`attention_utils.explorers.widgets.explore` shows the controls and a figure through IPython's `display`;
here `display` is replaced by a recorder, so no notebook or browser is needed.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from unittest import mock

import ipywidgets
import matplotlib
import pytest

matplotlib.use("Agg")

from attention_utils.explorers import widgets as explorer_frame  # noqa: E402
from attention_utils.plotting.fonts import set_language  # noqa: E402


def png(figure) -> bytes:
    """The figure as PNG bytes, small: enough to tell two drawings apart."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=30)
    return buffer.getvalue()


def controls_in(shown: list) -> list[ipywidgets.ValueWidget]:
    """Every value widget among what was displayed, boxes opened, in display order."""
    found, queue = [], list(shown)
    while queue:
        item = queue.pop(0)
        if isinstance(item, ipywidgets.Box):
            queue[:0] = list(item.children)
        elif isinstance(item, ipywidgets.ValueWidget) and not isinstance(item, (ipywidgets.Label, ipywidgets.HTML)):
            found.append(item)
    return found


def move(control: ipywidgets.ValueWidget, moves: dict[str, object]) -> None:
    """Set a control to another value: the next option, the other end of a slider, the other state of a switch."""
    label = control.description
    if label in moves:
        control.value = moves[label]
    elif hasattr(control, "options") and hasattr(control, "index"):
        control.index = (control.index + 1) % len(control.options)
    elif isinstance(control, (ipywidgets.Checkbox, ipywidgets.ToggleButton)):
        control.value = not control.value
    elif hasattr(control, "max"):
        control.value = control.max if control.value != control.max else control.min
    else:
        raise AssertionError(f"no move known for control {label!r} ({type(control).__name__}); pass moves={{{label!r}: ...}}")


def drive(show: Callable[..., None], *args, moves: dict[str, object] | None = None, **kwargs) -> dict[str, bool]:
    """Call show(*args, **kwargs); move every control once; return {control label: the figure was redrawn and changed}."""
    shown: list = []
    figures: list[bytes] = []

    class Handle:
        def update(self, figure) -> None:
            figures.append(png(figure))

    def recorder(item, *more, display_id=False, **options):
        if display_id:
            figures.append(png(item))
            return Handle()
        shown.append(item)
        return None

    with mock.patch.object(explorer_frame, "display", recorder):
        show(*args, **kwargs)
        assert figures, "the explorer drew no default figure"
        redrawn = {}
        for control in controls_in(shown):
            before = len(figures)
            last = figures[-1]
            move(control, moves or {})
            redrawn[control.description or type(control).__name__] = len(figures) > before and figures[-1] != last
    return redrawn


@pytest.fixture(params=["en", "zh"])
def language(request):
    """Each explorer test once with English and once with Chinese labels (import it beside `drive`)."""
    set_language(request.param)
    yield request.param
    set_language("en")
