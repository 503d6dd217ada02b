"""What a reader must be able to see in a drawn figure, checked on the laid-out matplotlib figure
(:func:`problems`; the report builder runs it on every figure and prints what it finds):

* every series looks different: no two series share colour, marker and line style (bars: colour
  and hatch), and a series drawn in several panels looks the same in each;
* every series is named once: the legend entries (all legends of the figure) are exactly the
  series, none twice;
* no text collides with other text: tick labels, axis labels, titles, labels placed beside the
  data, legends (two rotated labels are not compared: their boxes overlap where the text does not);
* a legend covers no plotted point and lies inside the figure.

Each check reads positions after layout (the figure has been drawn), in display units.
"""

from __future__ import annotations

from itertools import combinations

from matplotlib.text import Text
from matplotlib.transforms import Bbox

from estimator.reports.render import (
    artist_axes,
    data_points,
    legend_texts,
    legends,
    series_artists,
    style_key,
)

#: two boxes collide when they share more than this many display units each way
OVERLAP = 0.5


def problems(fig) -> list[str]:
    """Everything :mod:`this module <estimator.reports.figure_checks>` finds wrong with ``fig``, one
    sentence each (empty: nothing)."""
    renderer = fig.canvas.get_renderer()
    series = series_artists(fig)
    return [*_styles(series), *_legend_entries(fig, series), *_text_collisions(fig, renderer),
            *_legends_placed(fig, series, renderer)]


def _styles(series: dict[str, list]) -> list[str]:
    out = []
    seen: dict[tuple, str] = {}
    for label, artists in series.items():
        keys = {style_key(a) for a in artists}
        if len(keys) > 1:
            out.append(f"series {label!r} is drawn differently in different panels")
        for key in keys:
            if key in seen and seen[key] != label:
                out.append(f"series {label!r} and {seen[key]!r} look the same ({', '.join(map(str, key[1:]))})")
            seen.setdefault(key, label)
    return out


def _legend_entries(fig, series: dict[str, list]) -> list[str]:
    entries = [t.get_text() for t in legend_texts(fig)]
    out = []
    twice = sorted({e for e in entries if entries.count(e) > 1})
    if twice:
        out.append(f"legend names {', '.join(map(repr, twice))} more than once")
    if entries or len(series) > 1:
        missing = [s for s in series if s not in entries]
        extra = [e for e in dict.fromkeys(entries) if e not in series]
        if missing:
            out.append(f"{len(missing)} series not in a legend: {', '.join(map(repr, missing))}")
        if extra:
            out.append(f"legend entries without a series: {', '.join(map(repr, extra))}")
    return out


def _texts(fig) -> list[Text]:
    """Every text the reader sees: tick labels inside the view, axis labels, titles, texts placed
    on or beside the axes, the figure's title and texts."""
    out: list[Text] = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for ticks, locs in ((axis.get_major_ticks(), axis.get_majorticklocs()),
                                (axis.get_minor_ticks(), axis.get_minorticklocs())):
                for tick, loc in zip(ticks, locs, strict=False):
                    if lo - 1e-9 * abs(lo) <= loc <= hi + 1e-9 * abs(hi):
                        out.extend(t for t in (tick.label1, tick.label2) if t.get_visible())
            out.append(axis.label)
        out.extend((ax.title, ax._left_title, ax._right_title, *ax.texts))
    out.extend(fig.texts)  # the figure's title among them
    return list({id(t): t for t in out if t.get_visible() and t.get_text().strip()}.values())


def _shrunk(box: Bbox) -> Bbox:
    return Bbox.from_extents(box.x0 + OVERLAP, box.y0 + OVERLAP, box.x1 - OVERLAP, box.y1 - OVERLAP)


def _text_collisions(fig, renderer) -> list[str]:
    texts = [(t, _shrunk(t.get_window_extent(renderer))) for t in _texts(fig)]
    out = []
    for (a, box_a), (b, box_b) in combinations(texts, 2):
        if a.get_rotation() % 180 and b.get_rotation() % 180:
            continue
        if box_a.overlaps(box_b):
            out.append(f"text {a.get_text()!r} collides with {b.get_text()!r}")
    for leg in legends(fig):
        box = _shrunk(leg.get_window_extent(renderer))
        out.extend(f"the legend covers the text {t.get_text()!r}" for t, b in texts if box.overlaps(b))
    return out


def _legends_placed(fig, series: dict[str, list], renderer) -> list[str]:
    out = []
    whole = fig.bbox
    for leg in legends(fig):
        box = leg.get_window_extent(renderer)
        if box.x0 < whole.x0 - 1 or box.y0 < whole.y0 - 1 or box.x1 > whole.x1 + 1 or box.y1 > whole.y1 + 1:
            out.append("a legend reaches outside the figure")
        covered = sum(1 for artists in series.values() for a in artists for _, _, (x, y) in data_points(a)
                      if box.contains(x, y) and artist_axes(a).bbox.contains(x, y))
        if covered:
            out.append(f"a legend covers {covered} plotted point(s)")
    return out
