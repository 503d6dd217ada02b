"""SQL column types of Python values (no DuckDB import: sweep workers use it too)."""

from __future__ import annotations

from typing import Any


def sql_type(value: Any) -> str | None:
    """The store's column type for ``value`` (None for None: any type fits)."""
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT"
    if isinstance(value, float):
        return "DOUBLE"
    return None if value is None else "VARCHAR"


def join(prev: str | None, new: str | None) -> str | None:
    """The type a column needs for values of both types (BIGINT widens to DOUBLE, else VARCHAR)."""
    if prev is None or prev == new:
        return new if prev is None else prev
    if new is None:
        return prev
    if {prev, new} == {"BIGINT", "DOUBLE"}:
        return "DOUBLE"
    return "VARCHAR"
