"""The claim rows: every report section's claims, computed by SQL over the stored estimates.

``estimator claims`` (:mod:`estimator.commands.claims`) writes them into the store as the ``claims``
table; ``estimator report`` renders that table and, when a store has none yet, computes the same
rows in memory without writing anything. Columns (:data:`COLUMNS`):

``paper`` (the report section's title), ``section`` (the paper's section / figure / table),
``statement``, ``quote`` (the paper's sentence), ``paper_value``, ``project_value``, ``unit``,
``verdict`` (``holds`` / ``paper-inconsistent`` / ``simplified`` / ``fails`` / ``no-data``),
``rule`` and ``tolerance`` (the named rule of :mod:`estimator.reports.rules` that decided it),
``reason``, ``derivation`` (the computed arithmetic behind ``simplified`` / ``paper-inconsistent``),
``reading`` and ``default_reading`` (the project choice a row is judged under, when the experiment
offers several; summaries count the default reading only) and ``sql`` (the query behind the project
value). ``SELECT * FROM claims WHERE verdict <> 'holds' AND default_reading`` lists what does not hold.
"""

from __future__ import annotations

from typing import Any

import duckdb

from estimator.reports.model import Claim
from estimator.reports.registry import sections

COLUMNS = ("paper", "section", "statement", "quote", "paper_value", "project_value", "unit", "verdict", "rule",
           "tolerance", "reason", "derivation", "reading", "default_reading", "sql")
TYPES = {c: ("BOOLEAN" if c == "default_reading" else "VARCHAR") for c in COLUMNS}


def claim_rows(paper: str, claims: list[Claim]) -> list[dict[str, Any]]:
    return [{"paper": paper, "section": c.where, "statement": c.paper_claim, "quote": c.quote,
             "paper_value": c.paper_value, "project_value": c.project_value, "unit": c.unit, "verdict": c.verdict,
             "rule": c.rule, "tolerance": c.tolerance, "reason": c.detail, "derivation": c.derivation,
             "reading": c.reading, "default_reading": c.default_reading, "sql": c.sql} for c in claims]


def tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def collect(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every section's claims over the store behind ``con`` (sections whose tables are missing, or
    whose SQL cannot bind yet, contribute nothing)."""
    have = tables(con)
    out: list[dict[str, Any]] = []
    for sec in sections():
        if sec.claims is None or any(t not in have for t in sec.needs_tables):
            continue
        try:
            out += claim_rows(sec.title, sec.claims(lambda sql: con.sql(sql).pl()))
        except duckdb.Error:
            continue
    return out


def stored(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]] | None:
    """The store's ``claims`` table as rows, or None when it is missing or predates a column."""
    if "claims" not in tables(con):
        return None
    have = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                      "WHERE table_name = 'claims'").fetchall()}
    if not set(COLUMNS) <= have:
        return None
    return con.sql(f"SELECT {', '.join(COLUMNS)} FROM claims").pl().to_dicts()


def as_relation(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]], name: str = "claims") -> None:
    """Make ``rows`` queryable as ``name`` on this connection only (a temporary view: nothing is
    written, so it works on a read-only store)."""
    import pyarrow as pa

    table = pa.table({c: pa.array([r[c] for r in rows], type=pa.bool_() if TYPES[c] == "BOOLEAN" else pa.string())
                      for c in COLUMNS})
    con.register(name, table)
