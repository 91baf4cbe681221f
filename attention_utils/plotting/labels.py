"""Labels beside points on a 2D plot, placed so that no label covers another, a point or the legend."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

from ..arguments import bilingual, check_real
from .arguments import check_labels, listed

# Where a point's label may go, in points from the point, tried in order: right and above, right and below,
# left and above, left and below, then one line further out on each side.
LABEL_OFFSETS = ((4, 3), (4, -3), (-4, 3), (-4, -3), (4, 13), (4, -13), (-4, 13), (-4, -13))


def label_points(ax: Axes, points: Sequence[tuple[float, float]], labels: Sequence[str],
                 fontsize: float = 8) -> list[Annotation]:
    """Write each label beside its point (x, y in data coordinates) so that no label covers another.

    Each label takes the first place of LABEL_OFFSETS where its box stays inside the axes and covers no
    other label, no point and not the legend (draw the legend first); one that fits nowhere takes the
    first place. The figure is laid out once first, so the boxes are measured at the axes' final size.
    """
    if not isinstance(ax, Axes):
        raise TypeError(bilingual(f"ax must be a matplotlib Axes, got {type(ax).__name__}.",
                                  f"ax 必须是 matplotlib 的 Axes，实际是 {type(ax).__name__}。"))
    if not listed(points) or not all(listed(p) and len(p) == 2 and all(isinstance(v, numbers.Real) for v in p)
                                      for p in points):
        raise TypeError(bilingual("points must be a list of (x, y) pairs of real numbers, one per label.",
                                  "points 必须是由实数对 (x, y) 组成的列表，每个标签一对。"))
    if not all(math.isfinite(v) for p in points for v in p):
        raise ValueError(bilingual("points must be finite: a point at NaN or inf has no place on the axes; leave it out.",
                                   "points 必须是有限的数：NaN 或 inf 的点在坐标轴上没有位置；请把它去掉。"))
    labels = check_labels(labels, len(points), "labels", "point", "点")
    fontsize = check_real(fontsize, "fontsize", "8", positive=True)
    if fontsize > 1000:
        raise ValueError(bilingual(f"fontsize must be at most 1000 points, got {fontsize:g}; for example fontsize=8.",
                                   f"fontsize 不能超过 1000 磅，实际是 {fontsize:g}；例如 fontsize=8。"))
    if labels is None:
        raise TypeError(bilingual("labels must be a list with one label per point, got None.",
                                  "labels 必须是列表，每个点一个标签，实际是 None。"))
    fig = ax.figure
    fig.draw_without_rendering()  # a constrained layout settles the axes' size and the log-scale limits first
    renderer = fig.canvas.get_renderer()
    room = 4 * fig.dpi / 72  # half a 6-point marker, and a little space around it
    dots = [ax.transData.transform(point) for point in points]
    taken = [Bbox.from_extents(x - room, y - room, x + room, y + room) for x, y in dots]
    taken += [ax.get_legend().get_window_extent(renderer)] if ax.get_legend() is not None else []
    frame, notes = ax.get_window_extent(renderer), []
    for index, (point, label) in enumerate(zip(points, labels)):
        others = taken[:index] + taken[index + 1:]  # its own point does not count
        for dx, dy in LABEL_OFFSETS:
            note = ax.annotate(label, point, textcoords="offset points", xytext=(dx, dy), fontsize=fontsize,
                               ha="left" if dx > 0 else "right", va="bottom" if dy > 0 else "top")
            box = note.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in others):
                break
            note.remove()
        else:  # no place is free: the first one, as before
            note = ax.annotate(label, point, textcoords="offset points", xytext=LABEL_OFFSETS[0], fontsize=fontsize,
                               ha="left", va="bottom")
            box = note.get_window_extent(renderer)
        taken.append(box)
        notes.append(note)
    return notes
