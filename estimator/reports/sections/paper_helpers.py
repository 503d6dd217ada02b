"""Helpers shared by the paper sections: claim rows from SQL, number formats (the plot functions
live in :mod:`estimator.reports.plots`; ``line_plot`` and ``bar_plot`` are importable from here too).

A claim's project number always comes from a query over the store (``q(sql)``); these helpers only
format it and apply a named rule of :mod:`estimator.reports.rules`, so each rule and its tolerance
are visible in the section module. When a query returns no rows (the sweep has not run), the claim
says so and its verdict is ``no-data``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import polars as pl

from estimator.reports.model import Claim
from estimator.reports.plots import bar_plot, line_plot  # noqa: F401  (sections import them from here)
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
