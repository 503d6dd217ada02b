"""Shared figure conventions of the report builder (palette, log ticks, y = 1 line, legends)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from estimator.reports.build import PALETTE, _polish  # noqa: E402


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
        _polish(ax)
        assert isinstance(ax.xaxis.get_minor_formatter(), NullFormatter)
        assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())
        assert ax.get_legend().get_bbox_to_anchor() is not None
        assert ax.get_legend()._loc == 2  # upper left of the anchor, i.e. outside the axes
    finally:
        plt.close(f)
