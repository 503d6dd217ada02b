"""Draw one :class:`~estimator.reports.model.Figure` into an SVG the page embeds, with what makes it
interactive: every series' elements tagged so a click on its legend entry hides or shows it, and
every plotted point's position and values for the tooltip a pointer gets near it (:data:`SCRIPT`,
a few lines of JavaScript in the page; no library, no network: it works from ``file://``).

One draw per figure: the figure uses constrained layout, which is computed while the SVG is
written (no ``tight_layout`` pass, no ``bbox_inches="tight"`` re-draw); the SVG is the only image
written (``figures/<name>.svg``, the same drawing the page shows inline). After the draw,
:mod:`estimator.reports.figure_checks` reads the laid-out figure for problems a reader would see.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedFormatter  # noqa: E402

from estimator.reports.model import Figure  # noqa: E402
from estimator.reports.plots import FIGSIZE, compact, polish  # noqa: E402
from estimator.reports.style import PALETTE, free_style  # noqa: E402

#: display units per inch while drawing: SVG user units are points, so positions need no scaling
DPI = 72


@dataclass
class Drawn:
    """A drawn figure: the matplotlib figure (laid out), its SVG text and its series' points."""

    figure: Any
    svg: str
    series: list[dict] = field(default_factory=list)  # {"label", "points": [[x, y, text], ...]}


def series_artists(fig) -> dict[str, list]:
    """Every labelled series of the figure (a label not starting with "_"), across its panels, with
    the artists that draw it: lines, scatter collections, filled bands and spans, bar containers (their bars)."""
    out: dict[str, list] = {}
    for ax in fig.axes:
        for artist in (*ax.get_lines(), *ax.collections, *ax.containers, *ax.patches):
            label = str(artist.get_label())
            if label and not label.startswith("_"):
                out.setdefault(label, []).append(artist)
    return out


def style_key(artist) -> tuple:
    """What tells a series apart at a glance: colour, marker and line style (bars: colour, hatch)."""
    if isinstance(artist, BarContainer):
        bar = artist.patches[0] if artist.patches else None
        return ("bar", to_hex(bar.get_facecolor()) if bar else "", bar.get_hatch() if bar else None)
    if isinstance(artist, Line2D):
        marker = artist.get_marker()
        marker = "" if marker in (None, "None", " ", "") else str(marker)
        style = artist.get_linestyle()
        return ("line", to_hex(artist.get_color()), marker, "" if style in ("None", " ", "") else style)
    if isinstance(artist, Patch):
        return ("patch", to_hex(artist.get_facecolor()), artist.get_hatch())
    faces = artist.get_facecolor()
    colour = to_hex(faces[0]) if len(faces) else ""
    paths = artist.get_paths() if hasattr(artist, "get_paths") else []
    shape = tuple(map(tuple, paths[0].vertices.round(3))) if len(paths) == 1 else len(paths)
    return (type(artist).__name__, colour, shape)


def _ensure_distinct(fig, series: dict[str, list]) -> None:
    """Restyle a series that looks like an earlier one (a plot function that chose no styles: the
    default colour cycle repeats after 12 series) with the first free colour and marker, in the plot
    and in the legend."""
    handles = {t.get_text(): h for leg in legends(fig) for h, t in zip(leg.legend_handles, leg.get_texts(),
                                                                          strict=False)}
    seen: dict[tuple, str] = {}
    used = {(to_hex(a.get_color()), str(a.get_marker())) for arts in series.values() for a in arts
            if isinstance(a, Line2D)}
    for label, artists in series.items():
        key = style_key(artists[0])
        if key in seen and all(isinstance(a, Line2D) for a in artists):
            free = free_style(used)
            used.add((free.color, free.marker))
            for a in (*artists, *([handles[label]] if isinstance(handles.get(label), Line2D) else [])):
                a.set_color(free.color)
                if a.get_marker() not in (None, "None", "", " "):
                    a.set_marker(free.marker)
                else:
                    a.set_linestyle("--")
            key = style_key(artists[0])
        seen.setdefault(key, label)


def legends(fig) -> list:
    """Every legend of the figure: the axes' and the figure's own."""
    return [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)


def legend_texts(fig) -> list:
    """The text of every legend entry (axes legends and figure legends)."""
    return [t for leg in legends(fig) for t in leg.get_texts()]


@contextmanager
def drawn(spec: Figure, df: pl.DataFrame) -> Iterator[Drawn]:
    """``spec`` drawn from ``df`` (closed afterwards): plotted, polished, series told apart, tagged, and
    written as SVG once (the one layout pass)."""
    f = plt.figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    try:
        with plt.rc_context({"axes.prop_cycle": matplotlib.cycler(color=PALETTE)}):
            ax = f.add_subplot()
            spec.plot(df, ax)
        for a in f.axes:
            polish(a)
        f.suptitle(spec.title, fontsize=10)
        series = series_artists(f)
        _ensure_distinct(f, series)
        _tag(f, spec.name, series)
        buf = io.StringIO()
        f.savefig(buf, format="svg", metadata={"Date": None})
        yield Drawn(f, buf.getvalue(), _points(f, series))
    finally:
        plt.close(f)


def _tag(fig, name: str, series: dict[str, list]) -> None:
    """SVG ids for the page's script: ``<name>--s<k>--<n>`` on every element of series k, and
    ``<name>--l<k>--<n>`` on its legend entry (marker and text)."""
    index = {label: k for k, label in enumerate(series)}
    n = 0
    for k, artists in enumerate(series.values()):
        for artist in artists:
            for part in (artist.patches if isinstance(artist, BarContainer) else [artist]):
                part.set_gid(f"{name}--s{k}--{n}")
                n += 1
    for leg in legends(fig):
        for handle, text in zip(leg.legend_handles, leg.get_texts(), strict=False):
            k = index.get(text.get_text())
            if k is None:
                continue
            for part in (handle, text):
                if part is not None:
                    part.set_gid(f"{name}--l{k}--{n}")
                    n += 1


def _points(fig, series: dict[str, list]) -> list[dict]:
    """Per series, every visible point in SVG coordinates with its tooltip text."""
    height = fig.get_size_inches()[1] * DPI
    out = []
    for label, artists in series.items():
        pts = []
        for artist in artists:
            ax = artist_axes(artist)
            box = ax.bbox
            for x, y, (dx, dy) in data_points(artist):
                if not (box.x0 - 1 <= dx <= box.x1 + 1 and box.y0 - 1 <= dy <= box.y1 + 1):
                    continue
                text = f"{label}\n{_axis_text(ax, ax.xaxis, x)}\n{_axis_text(ax, ax.yaxis, y)}"
                pts.append([round(dx, 1), round(height - dy, 1), text])
        out.append({"label": label, "points": pts})
    return out


def artist_axes(artist):
    """The axes an artist (or a bar container's bars) is drawn in."""
    return artist.patches[0].axes if isinstance(artist, BarContainer) else artist.axes


def data_points(artist) -> list[tuple[float, float, tuple[float, float]]]:
    """(x, y, display position) of each point an artist plots (bars: the middle of the bar's end)."""
    if isinstance(artist, BarContainer):
        xy = [((r.get_x() + r.get_width() / 2, r.get_y() + r.get_height()) if not artist.orientation == "horizontal"
               else (r.get_x() + r.get_width(), r.get_y() + r.get_height() / 2)) for r in artist.patches]
        transform = artist.patches[0].axes.transData if artist.patches else None
    elif hasattr(artist, "get_xydata"):
        xy = [tuple(p) for p in artist.get_xydata()]
        transform = artist.get_transform()
    elif isinstance(artist, PathCollection) and len(artist.get_offsets()):  # a scatter (not a filled band)
        xy = [tuple(p) for p in artist.get_offsets()]
        transform = artist.get_offset_transform()
    else:
        return []
    out = []
    for x, y in xy:
        if x is None or y is None or not (math.isfinite(float(x)) and math.isfinite(float(y))):
            continue
        dx, dy = transform.transform((float(x), float(y)))
        out.append((float(x), float(y), (float(dx), float(dy))))
    return out


def _axis_text(ax, axis, v: float) -> str:
    """``name: value`` for a tooltip: a categorical axis gives the nearest category's name, a byte
    axis binary sizes, anything else 4 significant digits."""
    name = axis.get_label_text()
    fmt = axis.get_major_formatter()
    if isinstance(fmt, FixedFormatter) and len(fmt.seq):
        locs = list(axis.get_majorticklocs())
        if locs:
            i = min(range(len(locs)), key=lambda j: abs(locs[j] - v))
            if i < len(fmt.seq):
                return f"{name}: {fmt.seq[i]}" if name else str(fmt.seq[i])
    name = name or ("x" if axis is ax.xaxis else "y")
    lower = name.lower()
    if ("byte" in lower or "buffer" in lower) and v > 0:
        return f"{name}: {compact(v)}" if float(v / 2 ** round(math.log2(v))).is_integer() else f"{name}: {v:,.0f}"
    return f"{name}: {v:.4g}"


def inline_svg(svg: str) -> str:
    """``svg`` for an HTML page: no XML prolog, doctype, metadata or namespace declarations (the HTML
    parser supplies them; the page then names no remote address), scaled down to the page's width."""
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    return svg.replace("<svg ", "<svg class='plot' ", 1)


def hover_json(name: str, series: list[dict]) -> str:
    """The tooltip data the page's script reads (``</`` escaped so it cannot end the script element)."""
    return json.dumps({"id": name, "series": series}, separators=(",", ":")).replace("</", "<\\/")


#: the page's styles for interactive figures
CSS = """
figure.plot{position:relative} svg.plot{max-width:100%;height:auto}
svg.plot .off{visibility:hidden} svg.plot .dim{opacity:.3} svg.plot [id*='--l']{cursor:pointer}
.tip{position:absolute;pointer-events:none;background:#fffff4;border:1px solid #999;padding:2px 6px;font-size:80%;
white-space:pre;box-shadow:1px 1px 3px #0003;z-index:2}
.hint{color:#666;font-size:85%}
"""

#: the page's script: tooltips near a point, click a legend entry to hide/show its series,
#: double-click to show it alone (again: show all)
SCRIPT = """
document.querySelectorAll('figure.plot').forEach(box => {
  const svg = box.querySelector('svg'), tip = box.querySelector('.tip');
  const data = JSON.parse(box.querySelector('script[type="application/json"]').textContent), off = new Set();
  const parts = (kind, k) => svg.querySelectorAll(`[id^="${data.id}--${kind}${k}--"]`);
  const show = (k, on) => {
    parts('s', k).forEach(e => e.classList.toggle('off', !on));
    parts('l', k).forEach(e => e.classList.toggle('dim', !on));
    on ? off.delete(k) : off.add(k);
  };
  svg.querySelectorAll(`[id^="${data.id}--l"]`).forEach(el => {
    const k = +el.id.split('--')[1].slice(1);
    el.addEventListener('click', () => show(k, off.has(k)));
    el.addEventListener('dblclick', () => {
      const alone = data.series.every((_, j) => j === k || off.has(j));
      data.series.forEach((_, j) => show(j, alone || j === k));
    });
  });
  svg.addEventListener('mousemove', ev => {
    const m = svg.getScreenCTM();
    if (!m) return;
    const p = new DOMPoint(ev.clientX, ev.clientY).matrixTransform(m.inverse());
    let best = null, dist = 12 / m.a;
    data.series.forEach((s, k) => { if (!off.has(k)) s.points.forEach(q => {
      const d = Math.hypot(q[0] - p.x, q[1] - p.y);
      if (d < dist) { dist = d; best = q; }
    }); });
    if (!best) { tip.hidden = true; return; }
    const r = box.getBoundingClientRect();
    tip.textContent = best[2];
    tip.hidden = false;
    tip.style.left = (ev.clientX - r.left + 14) + 'px';
    tip.style.top = (ev.clientY - r.top + 14) + 'px';
  });
  svg.addEventListener('mouseleave', () => { tip.hidden = true; });
});
"""
