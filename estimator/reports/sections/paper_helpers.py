"""Helpers shared by the paper sections: claim rows from SQL, number formats, line plots.

A claim's project number always comes from a query over the store (``q(sql)``); these helpers only
format it and apply a named rule of :mod:`estimator.reports.rules`, so each rule and its tolerance
are visible in the section module. When a query returns no rows (the sweep has not run), the claim
says so and its verdict is ``no-data``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib
import matplotlib.ticker
import polars as pl

from estimator.reports.model import Claim
from estimator.reports.rules import Rule

Query = Callable[[str], pl.DataFrame]
NO_DATA = "no data (run the experiment)"


def table_with(table: str, columns: dict[str, str]) -> str:
    """``table`` as a subquery that surely has ``columns`` (name -> SQL type; NULL where absent).

    A fabric's parameter columns (``fabric_per_cu_bandwidth_bps``...) exist only once that fabric
    has rows, so a section's SQL reads ``FROM {table_with(...)} AS t`` and still binds when only
    some experiments have run.
    """
    stub = ", ".join(f"NULL::{t} AS {c}" for c, t in columns.items())
    return f"(SELECT * FROM {table} UNION ALL BY NAME (SELECT {stub} LIMIT 0))"


def scalar(q: Query, sql: str) -> float | None:
    """The first column of the first row of ``sql`` as a float (None when empty or NULL)."""
    df = q(sql)
    if df.is_empty():
        return None
    v = df.row(0)[0]
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def rows(q: Query, sql: str) -> list[dict[str, Any]]:
    return q(sql).to_dicts()


def pct(x: float | None) -> str:
    return NO_DATA if x is None else f"{100 * x:.1f}%"


def times(x: float | None) -> str:
    return NO_DATA if x is None else f"{x:.2f}x"


def num(x: float | None, unit: str = "", digits: int = 3) -> str:
    return NO_DATA if x is None else f"{x:.{digits}g}{unit}"


def judged(statement: str, paper_value: str, project: Any, shown: str, rule: Rule | None, *, where: str = "",
           unit: str = "", sql: str = "", quote: str = "", reading: str = "", default_reading: bool = True) -> Claim:
    """A claim row whose verdict, reason and derivation are ``rule.judge(project)`` (a named rule of
    :mod:`estimator.reports.rules`; ``no-data`` without a project number or a rule)."""
    common = {"unit": unit, "sql": sql.strip(), "where": where, "quote": quote, "reading": reading,
              "default_reading": default_reading}
    if project is None or rule is None:
        return Claim(statement, paper_value, NO_DATA, None, **common)
    v = rule.judge(project)
    return Claim(statement, paper_value, shown, v.verdict == "holds", v.reason, v.verdict, rule=rule.name,
                 tolerance=rule.tolerance, derivation=v.derivation, **common)


def readings(experiment: str) -> dict[str, dict[str, Any]]:
    """The experiment's ``readings:`` block (conf/experiment/<name>.yaml): for each project choice that
    decides verdicts, its ``default`` and every option with the argument for it."""
    import yaml

    from estimator.config import conf_dir

    exp = yaml.safe_load((conf_dir() / "experiment" / f"{experiment}.yaml").read_text())
    return exp.get("readings") or {}


def line_plot(x: str, y: str, series: Sequence[str], *, xlabel: str, ylabel: str, logx: bool = True,
              logy: bool = True, yscale: float = 1.0, marker: str = "o") -> Callable[[pl.DataFrame, Any], None]:
    """A plot function for :class:`~estimator.reports.model.Figure`: one line per ``series`` combination."""

    def plot(df: pl.DataFrame, ax) -> None:
        colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]  # the report's palette
        for i, (key, part) in enumerate(df.group_by(list(series), maintain_order=True)):
            label = " / ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
            part = part.sort(x)
            # one palette colour per series, then the same colours dashed
            ax.plot(part[x].to_list(), [v * yscale for v in part[y].to_list()], marker=marker, ms=3, label=label,
                    color=colours[i % len(colours)], linestyle="-" if i < len(colours) else "--")
        if logx:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))  # 64, not 2^6
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)

    return plot


def bar_plot(x: str, y: str, series: str, *, xlabel: str, ylabel: str, logy: bool = False,
             yscale: float = 1.0) -> Callable[[pl.DataFrame, Any], None]:
    """Grouped bars: categories ``x`` on the axis, one bar per ``series`` value."""

    def plot(df: pl.DataFrame, ax) -> None:
        cats = list(dict.fromkeys(df[x].to_list()))
        groups = list(dict.fromkeys(df[series].to_list()))
        width = 0.8 / max(1, len(groups))
        for i, g in enumerate(groups):
            part = df.filter(pl.col(series) == g)
            vals = dict(zip(part[x].to_list(), part[y].to_list(), strict=True))
            xs = [j + i * width for j, c in enumerate(cats) if c in vals]
            ax.bar(xs, [vals[c] * yscale for c in cats if c in vals], width, label=str(g))
        ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(cats))], [str(c) for c in cats],
                      fontsize=8, rotation=30, ha="right", rotation_mode="anchor")  # long fabric names never overlap
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, ncol=2)

    return plot
