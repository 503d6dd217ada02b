"""The ``claims`` table: one row per claim the seed papers make with a number or a direction.

Written into the store every time the report is built (:func:`write_claims`, called by
:func:`estimator.reports.build.build_report`), from every section's claims function, so it can be
queried like any result (``SELECT * FROM claims WHERE verdict <> 'holds'`` in DuckDB):

``paper`` (the report section's title), ``section`` (the paper's section / figure / table),
``statement``, ``paper_value``, ``project_value``, ``unit``, ``verdict`` (``holds`` /
``paper-inconsistent`` / ``simplified`` / ``fails`` / ``no-data``), ``reason`` (why: the
arithmetic, the tolerance, or what the model omits) and ``sql`` (the query the project value
comes from). The section below renders the verdict counts per paper at the top of the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from estimator.reports.model import VERDICTS, Claim, Section, Table

COLUMNS = ("paper", "section", "statement", "paper_value", "project_value", "unit", "verdict", "reason", "sql")


def claim_rows(paper: str, claims: list[Claim]) -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, (paper, c.where, c.paper_claim, c.paper_value, c.project_value, c.unit, c.verdict,
                               c.detail, c.sql), strict=True)) for c in claims]


def collect(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every section's claims over the store behind ``con`` (sections whose tables are missing, or
    whose SQL cannot bind yet, contribute nothing)."""
    from estimator.reports.build import sections  # the section registry (imports this module)

    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    out: list[dict[str, Any]] = []
    for sec in sections():
        if sec.claims is None or any(t not in tables for t in sec.needs_tables):
            continue
        try:
            out += claim_rows(sec.title, sec.claims(lambda sql: con.sql(sql).pl()))
        except duckdb.Error:
            continue
    return out


def write_claims(store: str | Path) -> int:
    """Replace the store's ``claims`` table with the claims computed from it; returns the row count."""
    from estimator.store.duckdb_store import connect

    if not Path(store).exists():
        return 0
    with connect(store) as con:
        found = collect(con)
        con.execute("BEGIN")
        con.execute("CREATE OR REPLACE TABLE claims (" + ", ".join(f"{c} VARCHAR" for c in COLUMNS) + ")")
        if found:
            con.executemany(f"INSERT INTO claims VALUES ({', '.join('?' for _ in COLUMNS)})",
                            [[r[c] for c in COLUMNS] for r in found])
        con.execute("COMMIT")
    return len(found)


_COUNTS = ", ".join(f"count(*) FILTER (WHERE verdict = '{v}') AS \"{v}\"" for v in (*VERDICTS, "no-data"))
SUMMARY_SQL = f"SELECT paper, {_COUNTS}, count(*) AS claims FROM claims GROUP BY paper ORDER BY paper"
NOT_HOLDING_SQL = """
SELECT split_part(paper, ':', 1) AS paper, section, statement, paper_value, project_value, verdict,
       reason AS "reason (rule and tolerance)" FROM claims
WHERE verdict NOT IN ('holds', 'no-data') ORDER BY paper, verdict, section
"""

SECTION = Section(
    key="claims",
    title="Claims: verdicts per paper",
    intro=(
        "Every claim the five seed papers make with a number or a direction, computed from this store by the SQL "
        "shown with it (table <code>claims</code>). Verdicts: <b>holds</b> (within the stated tolerance); "
        "<b>paper-inconsistent</b> (the paper's own numbers or formula disagree — the reason shows the "
        "arithmetic); <b>simplified</b> (the model omits something the paper had — the reason says what); "
        "<b>fails</b>. Each rule compares one pattern, size and baseline."
    ),
    tables=(
        Table("claims_summary", "Verdicts per paper", SUMMARY_SQL),
        Table("claims_not_holding", "Claims that do not hold, and why", NOT_HOLDING_SQL),
    ),
    order=0,
    needs_tables=("claims",),
)
