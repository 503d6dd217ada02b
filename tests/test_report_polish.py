"""Shared figure conventions of the report's figures (palette, log ticks, y = 1 line, legends, rings
around series hidden under others)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from estimator.reports.plots import compact, polish  # noqa: E402
from estimator.reports.style import PALETTE  # noqa: E402


def test_palette_has_twelve_distinct_colours():
    assert len(PALETTE) == len(set(PALETTE)) == 12


def test_speedup_chart_gets_a_unit_line_and_log_axes_lose_minor_labels():
    f, ax = plt.subplots()
    try:
        for i in range(6):
            ax.plot([1, 10, 100], [0.5 + i * 0.2, 1.2, 1.5], label=f"fabric {i}")
        ax.set_xscale("log")
        ax.set_ylabel("speedup over the leaf-spine")
        ax.legend()
        polish(ax)
        assert isinstance(ax.xaxis.get_minor_formatter(), NullFormatter)
        assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())
        assert ax.get_legend().get_bbox_to_anchor() is not None
        assert ax.get_legend()._loc == 2  # upper left of the anchor, i.e. outside the axes
    finally:
        plt.close(f)


def test_iteration_time_axis_gets_no_unit_line():
    f, ax = plt.subplots()
    try:
        ax.plot([8, 1024], [0.5, 18.0], label="a")
        ax.set_ylabel("time per iteration (ms)")  # "iteration" contains "ratio"
        polish(ax)
        assert not any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())
    finally:
        plt.close(f)


def test_long_log_axes_are_thinned_and_read_as_binary_sizes():
    assert [compact(v) for v in (64, 1024, 4096, 2**20, 3 * 2**30, 1.5e6)] == ["64", "1024", "4Ki", "1Mi", "3Gi", "1.5M"]
    f, ax = plt.subplots()
    try:
        xs = [2.0**k for k in range(9, 31)]
        ax.plot(xs, range(len(xs)), marker="o", label="a")
        ax.set_xscale("log", base=2)
        polish(ax)
        ticks = [t for t in ax.get_xticks() if xs[0] <= t <= xs[-1]]
        assert 3 <= len(ticks) <= 9
    finally:
        plt.close(f)


def test_series_hidden_under_later_ones_get_wider_lines_and_rings():
    f, ax = plt.subplots()
    try:
        for i in range(3):
            ax.plot([1, 2, 3], [1.0, 1.0, 1.0], marker="o", label=f"s{i}")  # all on top of each other
        ax.plot([1, 2, 3], [5.0, 6.0, 7.0], marker="o", label="apart")
        ax.legend()
        polish(ax)
        lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
        widths = [lines[f"s{i}"].get_linewidth() for i in range(3)]
        sizes = [lines[f"s{i}"].get_markersize() for i in range(3)]
        assert widths[0] > widths[1] > widths[2] and sizes[0] > sizes[1] > sizes[2]  # rings, one per series on top
        assert lines["s0"].get_markerfacecolor() == "none" and lines["s2"].get_markerfacecolor() != "none"
        assert lines["apart"].get_linewidth() == widths[2]  # a series nobody covers keeps its style
    finally:
        plt.close(f)


def test_bandwidth_axes_keep_plain_numbers_and_byte_axes_binary_prefixes():
    assert compact(2048, binary=False) == "2048" and compact(2048) == "2Ki"
    for label, expect in (("per-CU bandwidth (Gb/s)", "4096"), ("buffer per GPU (bytes)", "4Ki")):
        f, ax = plt.subplots()
        try:
            ax.plot([128, 4096], [1, 2], marker="o", label="a")
            ax.set_xscale("log", base=2)
            ax.set_xlabel(label)
            polish(ax)
            f.canvas.draw()
            assert expect in [t.get_text() for t in ax.get_xticklabels()]
        finally:
            plt.close(f)


def test_short_log_speedup_axis_gets_at_least_three_labels_and_no_powers():
    f, ax = plt.subplots()
    try:
        ax.plot([64, 256, 1024], [0.72, 0.95, 1.005], label="a")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylabel("speedup (x)")
        polish(ax)
        f.canvas.draw()
        lo, hi = ax.get_ylim()
        shown = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True) if lo <= v <= hi]
        assert len(shown) >= 3 and all("10^" not in s and "times" not in s for s in shown), shown
    finally:
        plt.close(f)


def test_wide_log_axis_reads_plain_decades_and_jct_ratio_gets_the_unit_line():
    f, ax = plt.subplots()
    try:
        ax.bar(["a", "b", "c"], [0.05, 3.0, 150.0])
        ax.set_yscale("log")
        ax.set_ylabel("baseline JCT / SiPAC JCT")
        polish(ax)
        f.canvas.draw()
        lo, hi = ax.get_ylim()
        shown = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True) if lo <= v <= hi]
        assert "0.1" in shown and "100" in shown, shown
        assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())
    finally:
        plt.close(f)


def test_large_linear_axis_uses_si_suffixes_not_an_offset():
    f, ax = plt.subplots()
    try:
        ax.bar(["BTree", "Ring"], [1.4e6, 2.5e5])
        ax.set_ylabel("samples / s")
        polish(ax)
        f.canvas.draw()
        shown = [t.get_text() for t in ax.get_yticklabels()]
        assert "1M" in shown and ax.yaxis.get_offset_text().get_text() == "", shown
    finally:
        plt.close(f)


def test_log_log_scatter_labels_both_axes_alike():
    """The training scatter's x axis read "100k" while its y axis read "1e+05"."""
    f, ax = plt.subplots()
    try:
        ax.scatter([2e3, 3e4, 4e5], [2.2e3, 2.9e4, 4.3e5])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured throughput (samples/s)")
        ax.set_ylabel("predicted throughput (samples/s)")
        polish(ax)
        f.canvas.draw()
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = axis.get_view_interval()
            shown = [t.get_text() for t, v in zip(axis.get_ticklabels(), axis.get_ticklocs(), strict=True)
                     if lo <= v <= hi]
            assert "100k" in shown and not any("e+" in s for s in shown), shown
    finally:
        plt.close(f)
