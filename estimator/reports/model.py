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
    plot: Callable[[pl.DataFrame, Any], None]  # (data, matplotlib Axes) -> None (estimator.reports.plots)
    caption: str = ""
    formats: dict[str, str] = field(default_factory=dict)  # column -> kind for its data table (reports.tables)


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    sql: str
    caption: str = ""
    formats: dict[str, str] = field(default_factory=dict)  # column -> how it reads (estimator.reports.tables.KINDS)


VERDICTS = ("holds", "paper-inconsistent", "simplified", "fails")
NO_DATA_VERDICT = "no-data"
#: verdicts that need a computed derivation (estimator.reports.rules)
DERIVED = ("paper-inconsistent", "simplified")


@dataclass(frozen=True)
class Claim:
    """One claim row: the paper's statement and number vs the project's computed number.

    ``verdict`` is one of :data:`VERDICTS`, decided by the named rule ``rule`` of
    :mod:`estimator.reports.rules` (``tolerance``: what it accepts) — ``holds``;
    ``paper-inconsistent`` (the paper's own numbers disagree: ``derivation`` shows the arithmetic);
    ``simplified`` (the model omits a named mechanism and adding its cost by hand closes the gap:
    ``derivation`` computes it); ``fails`` — or ``no-data`` when the sweep has not run. Left empty
    it is derived from ``holds`` (True: holds, False: fails). Every verdict but ``no-data`` needs a
    reason (``detail``) and a rule; the two derived verdicts need a derivation. ``quote`` is the
    paper's sentence the row checks; ``reading`` names the project choice the row is judged under
    when the experiment offers several (``default_reading``: the one the summary counts).
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
    rule: str = ""
    tolerance: str = ""
    derivation: str = ""
    quote: str = ""
    reading: str = ""
    default_reading: bool = True

    def __post_init__(self) -> None:
        verdict = self.verdict or (NO_DATA_VERDICT if self.holds is None else "holds" if self.holds else "fails")
        if verdict not in (*VERDICTS, NO_DATA_VERDICT):
            raise ValueError(f"claim {self.paper_claim!r}: unknown verdict {verdict!r}")
        if verdict != NO_DATA_VERDICT and not self.detail.strip():
            raise ValueError(f"claim {self.paper_claim!r}: verdict {verdict!r} without a reason")
        if verdict != NO_DATA_VERDICT and not self.rule:
            raise ValueError(f"claim {self.paper_claim!r}: verdict {verdict!r} without a named rule")
        if verdict in DERIVED and not self.derivation.strip():
            raise ValueError(f"claim {self.paper_claim!r}: verdict {verdict!r} without a derivation")
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
