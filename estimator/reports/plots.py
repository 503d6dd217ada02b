"""How the report draws: plot functions for :class:`~estimator.reports.model.Figure` and the axis
conventions every figure gets (:func:`polish`).

A plot function takes the figure's rows and a matplotlib ``Axes`` in a figure with constrained
layout. It may split that space into panels (:func:`panel_axes`: small multiples sharing an axis)
and takes every series' colour and marker from :func:`estimator.reports.style.styles`, so a fabric
looks the same in every figure and no two series of one figure look alike.

* :func:`line_plot` — one line per series, optionally one panel per value of a column (``facet``);
* :func:`dot_plot` — a ranked dot plot: one row per category (fabric), sorted by value, one marker
  per series, the value of one series printed in a column beside the rows; for values that would
  sit on top of each other on a shared axis (six fabrics at speedup 1.00-1.04);
* :func:`bar_plot` — grouped bars.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from estimator.reports.style import styles

#: the default figure size (inches); panels and ranked rows grow it
FIGSIZE = (7.0, 4.2)
#: one panel of a small-multiples figure (inches)
PANEL = (3.9, 3.0)
#: legend entries above which a single panel's legend goes below it in columns, not beside it
LEGEND_BESIDE_MAX = 9


# --- plot functions -------------------------------------------------------------------------------

def series_labels(df: pl.DataFrame, series: Sequence[str]) -> list[str]:
    """The label of every row: its ``series`` columns joined by " / "."""
    cols = [df[c].cast(pl.Utf8).fill_null("") for c in series]
    return [" / ".join(parts) for parts in zip(*cols, strict=True)] if cols else [""] * df.height


def line_plot(x: str, y: str, series: Sequence[str], *, xlabel: str, ylabel: str, logx: bool = True,
              logy: bool = True, yscale: float = 1.0, marker: str | None = "o", facet: str | None = None,
              facet_title: Callable[[Any], str] = str, ncols: int | None = None, ylim0: bool = False,
              label: Callable[[str], str] = str) -> Callable[[pl.DataFrame, Any], None]:
    """One line per ``series`` combination (its style from :func:`~estimator.reports.style.styles`,
    its legend entry ``label(values joined by " / ")``); with ``facet``, one panel per value of that
    column (titled ``facet_title(value)``), the panels sharing both axes and one legend. ``marker``
    None or "" draws lines without markers."""

    def plot(df: pl.DataFrame, ax) -> None:
        df = df.with_columns(pl.Series("_series", [label(s) for s in series_labels(df, series)]))
        labels = list(dict.fromkeys(df["_series"].to_list()))
        style = styles(labels)
        panels = list(dict.fromkeys(df[facet].to_list())) if facet else [None]
        axes = panel_axes(ax, len(panels), ncols=ncols)
        for a, value in zip(axes, panels, strict=True):
            part = df if value is None else df.filter(pl.col(facet) == value)
            for name in labels:
                rows = part.filter(pl.col("_series") == name).sort(x)
                if rows.is_empty():
                    continue
                kw = style[name].line()
                if not marker:
                    kw["marker"] = ""
                a.plot(rows[x].to_list(), [float(v) * yscale if v is not None else None for v in rows[y].to_list()],
                       ms=4, label=name, **kw)  # float(): a DuckDB sum or literal may be a Decimal
            if logx:
                a.set_xscale("log", base=2)
            if logy:
                a.set_yscale("log")
            a.grid(alpha=0.3)
            if value is not None:
                a.set_title(facet_title(value), fontsize=9)
        if ylim0:
            top = max(a.get_ylim()[1] for a in axes)
            for a in axes:
                a.set_ylim(0, top)
        label_axes(axes, xlabel, ylabel)
        legend(axes)

    return plot


def dot_plot(category: str, value: str, series: str, *, xlabel: str, logx: bool = True, ref: float | None = None,
             rank_by: Any = None, value_column: Any = None, value_fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
             value_title: str = "") -> Callable[[pl.DataFrame, Any], None]:
    """A ranked dot plot: one row per ``category``, the rows sorted by the value of series
    ``rank_by`` (default: the last series; largest on top), one marker per series, slightly apart
    so equal values stay visible; a dashed line at ``ref``; the value of series ``value_column``
    printed beside every row (``value_fmt``; column header ``value_title``)."""

    def plot(df: pl.DataFrame, ax) -> None:
        groups = list(dict.fromkeys(df[series].to_list()))
        key = groups[-1] if rank_by is None else rank_by
        ranked = {r[category]: r[value] for r in df.filter(pl.col(series) == key).iter_rows(named=True)}
        cats = sorted(dict.fromkeys(df[category].to_list()),
                      key=lambda c: (ranked.get(c) is not None, ranked.get(c) or 0.0, str(c)))
        row = {c: i for i, c in enumerate(cats)}
        ax.figure.set_size_inches(FIGSIZE[0], max(2.4, 0.3 * len(cats) + 1.5))
        style = styles(str(g) for g in groups)
        lo, hi = df[value].min(), df[value].max()
        for i, c in enumerate(cats):  # a faint band per row and a line from its smallest to largest value
            vals = df.filter(pl.col(category) == c)[value].drop_nulls()
            if i % 2:
                ax.axhspan(i - 0.5, i + 0.5, color="0.95", zorder=0, label="_row")
            if vals.len():
                ax.plot([vals.min(), vals.max()], [i, i], color="0.75", lw=1, zorder=1, label="_range")
        offsets = [0.0] if len(groups) == 1 else [0.25 - 0.5 * k / (len(groups) - 1) for k in range(len(groups))]
        for g, off in zip(groups, offsets, strict=True):
            part = df.filter(pl.col(series) == g)
            s = style[str(g)]
            ax.plot(part[value].to_list(), [row[c] + off for c in part[category].to_list()], linestyle="none",
                    marker=s.marker, color=s.color, ms=6, label=str(g), zorder=3)
        ax.set_yticks(range(len(cats)), [str(c) for c in cats])
        ax.set_ylim(-0.6, len(cats) - 0.4)
        if logx:
            ax.set_xscale("log")
            ax.set_xlim(lo / 1.25, hi * 1.25)
        if ref is not None:
            ax.axvline(ref, color="#444", lw=0.8, ls="--", zorder=2, label="_ref")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3, axis="x")
        ax.tick_params(axis="y", length=0)
        if value_column is not None:
            from matplotlib.transforms import blended_transform_factory

            at = blended_transform_factory(ax.transAxes, ax.transData)
            vals = {r[category]: r[value] for r in df.filter(pl.col(series) == value_column).iter_rows(named=True)}
            for c in cats:
                if vals.get(c) is not None:
                    ax.text(1.02, row[c], value_fmt(vals[c]), transform=at, va="center", ha="left", fontsize=8)
            ax.text(1.02, len(cats) - 0.4, value_title, transform=at, va="bottom", ha="left", fontsize=8,
                    style="italic")
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(groups), fontsize=8, frameon=False,
                  borderaxespad=0.2, handletextpad=0.3, columnspacing=1.2)

    return plot


def bar_plot(x: str, y: str, series: str, *, xlabel: str, ylabel: str, logy: bool = False,
             yscale: float = 1.0) -> Callable[[pl.DataFrame, Any], None]:
    """Grouped bars: categories ``x`` on the axis, one bar per ``series`` value (its colour from
    :func:`~estimator.reports.style.styles`)."""

    def plot(df: pl.DataFrame, ax) -> None:
        cats = list(dict.fromkeys(df[x].to_list()))
        groups = list(dict.fromkeys(df[series].to_list()))
        style = styles(str(g) for g in groups)
        width = 0.8 / max(1, len(groups))
        for i, g in enumerate(groups):
            part = df.filter(pl.col(series) == g)
            vals = dict(zip(part[x].to_list(), part[y].to_list(), strict=True))
            xs = [j + i * width for j, c in enumerate(cats) if c in vals]
            ax.bar(xs, [vals[c] * yscale for c in cats if c in vals], width, label=str(g), color=style[str(g)].color)
        names = [str(c) for c in cats]
        tilt = len(cats) > 4 and max(map(len, names)) > 8  # long names side by side would collide
        ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(cats))], names, fontsize=8,
                      **({"rotation": 30, "ha": "right", "rotation_mode": "anchor"} if tilt else {}))
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, ncol=2)

    return plot


# --- panels and legends ---------------------------------------------------------------------------

def panel_axes(ax, n: int, *, ncols: int | None = None, sharex: bool = True, sharey: bool = True) -> list:
    """``n`` panels in place of ``ax`` (small multiples sharing their axes), the figure resized to fit
    them and a legend on the right; ``[ax]`` itself when ``n`` is 1."""
    if n <= 1:
        return [ax]
    fig = ax.figure
    ncols = ncols or (2 if n == 4 else min(n, 3))
    nrows = math.ceil(n / ncols)
    fig.set_size_inches(PANEL[0] * ncols + 1.8, PANEL[1] * nrows + 0.5)
    ax.remove()
    grid = fig.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=False)
    axes = [a for row in grid for a in row]
    for extra in axes[n:]:
        extra.remove()
    return axes[:n]


def label_axes(axes: list, xlabel: str, ylabel: str) -> None:
    """Axis labels once per figure: the y label on the left column, the x label on the bottom row."""
    if len(axes) == 1:
        axes[0].set_xlabel(xlabel)
        axes[0].set_ylabel(ylabel)
        return
    for a in axes:
        spec = a.get_subplotspec()
        if spec.is_first_col():
            a.set_ylabel(ylabel)
        if spec.is_last_row() or a is axes[-1] or _nothing_below(a, axes):
            a.set_xlabel(xlabel)
            a.xaxis.set_tick_params(labelbottom=True)


def _nothing_below(a, axes: list) -> bool:
    spec = a.get_subplotspec()
    col = spec.colspan.start
    return not any(b.get_subplotspec().rowspan.start > spec.rowspan.start and b.get_subplotspec().colspan.start == col
                   for b in axes)


def legend(axes: list, **kw) -> None:
    """One legend for the figure's series: the axes' own legend on one panel (:func:`polish` places
    it), one figure legend on the right of several panels (every series once)."""
    if len(axes) == 1:
        axes[0].legend(fontsize=7, **kw)
        return
    handles: dict[str, Any] = {}
    for a in axes:
        for h, label in zip(*a.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    if not handles:
        return
    fig = axes[0].figure
    if len(handles) <= LEGEND_BESIDE_MAX and max(map(len, handles)) <= 24:
        fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=7, frameon=False)
        return
    ncol = 3 if len(handles) > 4 else len(handles)  # long names or many: below the panels, in columns
    w, h = fig.get_size_inches()
    fig.set_size_inches(w - 1.2, h + 0.18 * math.ceil(len(handles) / ncol))
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=ncol, fontsize=7,
               frameon=False)


# --- the conventions every figure gets ------------------------------------------------------------

def compact(v: float, binary: bool = True) -> str:
    """A log-axis tick label: numbers up to 1024 as they are (GPU counts), larger powers of two
    with binary prefixes (1Ki, 32Mi, 1Gi) when ``binary`` (byte axes), anything else in 3
    significant digits (1e+06 -> 1M; 2048 Gb/s stays 2048, not "2Ki")."""
    if v <= 0:
        return f"{v:g}"
    if v <= 1024 or (not binary and v < 1e5):
        return f"{v:g}"
    for prefix, unit in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if binary and v >= unit and float(v / unit).is_integer():
            return f"{v / unit:g}{prefix}"
    for prefix, unit in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= unit:
            return f"{v / unit:.3g}{prefix}"
    return f"{v:g}"


def _thin_log_ticks(axis, lo: float, hi: float, base: float, binary: bool = True, most: int = 9) -> None:
    """At most ``most`` labelled major ticks on a log axis (a 2^9..2^30 byte axis had 22 overlapping labels)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter

    if lo <= 0 or hi <= lo:
        return
    k0, k1 = math.ceil(math.log(lo, base) - 1e-9), math.floor(math.log(hi, base) + 1e-9)
    step = max(1, math.ceil((k1 - k0 + 1) / most))
    axis.set_major_locator(FixedLocator([base**k for k in range(k0, k1 + 1, step)]))
    axis.set_major_formatter(FuncFormatter(lambda v, _: compact(v, binary)))


def _si(v: float) -> str:
    """A linear-axis tick label for large values: 250k, 1.5M, 2G (0 stays 0)."""
    for prefix, unit in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= unit:
            return f"{v / unit:.3g}{prefix}"
    return f"{v:g}"


def _plain(v: float) -> str:
    """A tick label without mathtext powers: 0.001 .. 99999 as plain numbers, larger ones with an SI
    prefix as on the x axes (100k, 1M: a scatter's two axes read alike), smaller ones as 1e-04."""
    if abs(v) >= 1e5:
        return _si(v)
    return f"{v:g}" if 1e-3 <= abs(v) else f"{v:.0e}"


def _log10_ticks(axis, lo: float, hi: float) -> None:
    """Labels on a base-10 log axis: plain decades (0.1, 1, 10, not 10⁻¹); 1-2-5 steps under ~2.5
    decades; and on a short range (a speedup axis from 0.7 to 1.02, where no 1-2-5 tick but 1 falls)
    every 0.1-, 1- or 10-step, so at least three labels show."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator

    if not (0 < lo < hi):
        return
    if hi / lo >= 300:
        axis.set_major_locator(LogLocator(base=10))
    elif sum(lo <= m * 10.0**k <= hi for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5)) >= 3:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    else:
        k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ticks = [m * 10.0**k for k in range(k0, k1 + 1) for m in range(1, 10) if lo <= m * 10.0**k <= hi]
        if len(ticks) < 3:  # within one step of the 1..9 grid: round steps (1.0, 1.2, 1.4, ...)
            ticks = [t for t in MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= t <= hi]
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
            axis.set_major_locator(FixedLocator(ticks))
            return
        axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: _plain(v)))


#: two points closer than this (a fraction of the axes) sit on top of each other
COINCIDE = 0.012


def _distinguish_lines(ax) -> None:
    """Make series that sit on top of later ones visible: a series every point of which is covered by a
    series drawn after it (two policies at speedup 1.0, equal MFU on two fabrics) is drawn wider, with
    larger hollow markers — a ring around the later one's marker — one step per series covering it."""
    lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_") and len(ln.get_xdata())]
    ax.get_xlim(), ax.get_ylim()  # settle pending autoscaling (shared panels) before reading transData
    to_axes = ax.transData + ax.transAxes.inverted()
    pts = []
    for line in lines:
        xy = [(x, y) for x, y in line.get_xydata() if math.isfinite(x) and math.isfinite(y)]
        pts.append(to_axes.transform(xy) if xy else [])
    for i, line in enumerate(lines):
        depth = sum(1 for j in range(i + 1, len(lines)) if len(pts[i]) and len(pts[j]) and all(
            any(abs(a[0] - b[0]) < COINCIDE and abs(a[1] - b[1]) < COINCIDE for b in pts[j]) for a in pts[i]))
        if not depth:
            continue
        line.set_linewidth(line.get_linewidth() + 1.5 * depth)
        if line.get_marker() not in (None, "None", "", " "):
            line.set_markersize(line.get_markersize() + 3 * depth)
            line.set_markerfacecolor("none")
            line.set_markeredgewidth(1.4)


def _max_labels(ax) -> int:
    """How many x tick labels of about 0.5 inch fit across this panel (at most 9)."""
    width = ax.get_position().width * ax.figure.get_size_inches()[0]
    return max(3, min(9, int(width / 0.55)))


def polish(ax) -> None:
    """Shared figure conventions: thinned, readable tick labels on log axes (no "6×10⁻¹" minor
    clutter, 1Mi not 1048576), a dashed y = 1 reference line on speedup/ratio charts, widths and
    hollow markers so overlapping series stay visible, and legends outside the data area."""
    from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator, ScalarFormatter

    _distinguish_lines(ax)
    for axis, scale, (lo, hi) in ((ax.xaxis, ax.get_xscale(), ax.get_xlim()), (ax.yaxis, ax.get_yscale(), ax.get_ylim())):
        if scale == "log":
            axis.set_minor_formatter(NullFormatter())
            base = getattr(axis.get_transform(), "base", 10)
            if base == 2:  # minor ticks between powers of two mark nothing a reader uses (and cost a draw each)
                axis.set_minor_locator(NullLocator())
            name = (axis.get_label_text() or "").lower()
            binary = "byte" in name or "(b)" in name or "buffer" in name  # Ki/Mi/Gi only for sizes
            if base == 2 or (axis is ax.xaxis and hi / lo >= 30):
                _thin_log_ticks(axis, lo, hi, base, binary, _max_labels(ax) if axis is ax.xaxis else 9)
            else:
                _log10_ticks(axis, lo, hi)
            axis.set_view_interval(lo, hi, ignore=True)  # fixed tick lists must not widen the axis
        elif scale == "linear" and type(axis.get_major_formatter()) is ScalarFormatter and max(abs(lo), abs(hi)) >= 1e5:
            axis.set_major_formatter(FuncFormatter(lambda v, _: _si(v)))  # 1.5M, not "1.5" under a "1e6" offset
    label = next((a.get_ylabel() for a in ax.get_shared_y_axes().get_siblings(ax) if a.get_ylabel()), "").lower()
    lo, hi = ax.get_ylim()
    ratio = (re.search(r"\b(speedup|relative|ratio)\b", label) or "(x)" in label
             or re.search(r" / [^0-9]*$", label))  # "time / optimum", not "throughput / 3.6 Tb/s"
    if ratio and lo < 1 < hi:  # not "iteration"
        ax.axhline(1.0, color="#444", lw=0.8, ls="--", zorder=0, label="_y=1")
    legend = ax.get_legend()
    if legend is None or getattr(legend, "_bbox_to_anchor", None) is not None:
        return  # none, or the section placed it itself
    entries = len(legend.get_texts())
    if entries > LEGEND_BESIDE_MAX:  # a long legend beside the plot would halve it: below, in columns
        ncol = 2 if entries <= 16 else 3
        w, h = ax.figure.get_size_inches()
        ax.figure.set_size_inches(max(w, 7.5), h + 0.17 * math.ceil(entries / ncol))
        handles, labels = ax.get_legend_handles_labels()
        legend.remove()
        ax.figure.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=7, frameon=False)
    elif entries > 3:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    else:
        ax.legend(loc="best", fontsize=7, framealpha=0.85)
