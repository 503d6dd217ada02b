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


VERDICTS = ("holds", "paper-inconsistent", "simplified", "fails")
NO_DATA_VERDICT = "no-data"


@dataclass(frozen=True)
class Claim:
    """One claim row: the paper's statement and number vs the project's computed number.

    ``verdict`` is one of :data:`VERDICTS` — ``holds``; ``paper-inconsistent`` (the paper's own
    numbers or formula disagree: ``detail`` shows the arithmetic); ``simplified`` (the model omits
    something the paper had: ``detail`` says what); ``fails`` — or ``no-data`` when the sweep has
    not run. Left empty it is derived from ``holds`` (True: holds, False: fails). Every verdict
    but ``no-data`` needs a reason (``detail``). ``holds`` is True exactly when the verdict is
    ``holds``.
    """

    paper_claim: str
    paper_value: str
    project_value: str
    holds: bool | None  # None = no data
    detail: str = ""  # the reason for the verdict
    verdict: str = ""
    unit: str = ""
    sql: str = ""  # the query the project value comes from
    where: str = ""  # the paper's section / figure / table

    def __post_init__(self) -> None:
        verdict = self.verdict or (NO_DATA_VERDICT if self.holds is None else "holds" if self.holds else "fails")
        if verdict not in (*VERDICTS, NO_DATA_VERDICT):
            raise ValueError(f"claim {self.paper_claim!r}: unknown verdict {verdict!r}")
        if verdict != NO_DATA_VERDICT and not self.detail.strip():
            raise ValueError(f"claim {self.paper_claim!r}: verdict {verdict!r} without a reason")
        object.__setattr__(self, "verdict", verdict)
        object.__setattr__(self, "holds", None if verdict == NO_DATA_VERDICT else verdict == "holds")


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
