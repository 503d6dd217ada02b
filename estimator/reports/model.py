"""What a report is made of: sections of figures, tables and claims, each backed by SQL.

A section module lives in :mod:`estimator.reports.sections` and defines ``SECTION``. Every figure
and table carries the SQL it is drawn from (run against the DuckDB store), so a user can re-plot
or re-query without re-running a sweep; the HTML page prints the query under each figure.

A :class:`Claim` compares a paper's number with the project's, computed from the store by a
function — never typed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl


@dataclass(frozen=True)
class Figure:
    name: str  # file stem under reports/figures/
    title: str
    sql: str
    plot: Callable[[pl.DataFrame, Any], None]  # (data, matplotlib Axes) -> None
    caption: str = ""


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    sql: str
    caption: str = ""


@dataclass(frozen=True)
class Claim:
    """One claim row: the paper's statement and number vs the project's computed number."""

    paper_claim: str
    paper_value: str
    project_value: str
    holds: bool | None  # None = not applicable / not decidable
    detail: str = ""


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    intro: str = ""
    figures: tuple[Figure, ...] = ()
    tables: tuple[Table, ...] = ()
    claims: Callable[[Callable[[str], pl.DataFrame]], list[Claim]] | None = None
    order: int = 100
    needs_tables: tuple[str, ...] = field(default=("estimates",))
