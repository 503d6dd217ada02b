"""The DuckDB results store (default ``results/estimates.duckdb``; embedded, no server).

Tables:

* ``estimates`` — one row per estimate: ``config_hash`` (identity), ``version``, ``created_at``,
  ``config_json`` (the resolved estimate config), one column per flattened config key with ``_``
  for nesting (``fabric_name``, ``fabric_nodes``, ``model_name``, ``device_name``...) and the
  metrics (``iter_time_s``, ``compute_time_s``, ``exposed_comm_time_s``, ``samples_per_s``...).
* ``collectives`` — one row per collective of an estimate, keyed by (``config_hash``, ``idx``).
* any other table a component writes through :func:`write_rows` with its own key column.

Writes are idempotent by key (a re-run replaces the rows of the same key) and atomic (one
transaction: either every row of a call lands or none). Columns are added as new config keys
appear; integer columns widen to DOUBLE when a non-integer arrives.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from estimator.errors import EstimatorError

LOCK_RETRY_S = 120.0  # another process (e.g. a parallel Snakemake job) may hold the file


def _sql_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT"
    if isinstance(value, float):
        return "DOUBLE"
    if value is None:
        return None
    return "VARCHAR"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def connect(path: str | Path, read_only: bool = False):
    """Open the store, waiting while another process holds its lock."""
    path = Path(path)
    if read_only and not path.exists():
        raise EstimatorError(f"{path}: no results store yet (run an estimate with write=true or a sweep)")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + LOCK_RETRY_S
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise EstimatorError(f"{path}: cannot open results store ({str(exc).splitlines()[0]})") from None
            time.sleep(0.5)
        except duckdb.Error as exc:
            raise EstimatorError(f"{path}: not a usable DuckDB file ({str(exc).splitlines()[0]})") from None
    try:
        yield con
    finally:
        con.close()


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    rows = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?", [table]
    ).fetchall()
    return {name: dtype for name, dtype in rows}


_ARROW = {"BIGINT": "int64", "DOUBLE": "float64", "BOOLEAN": "bool_", "VARCHAR": "string"}


def _column_types(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    wanted: dict[str, str | None] = {}
    for row in rows:
        for key, value in row.items():
            t = _sql_type(value)
            prev = wanted.get(key)
            if prev is None or (prev == "BIGINT" and t == "DOUBLE"):
                wanted[key] = t or prev
            elif t not in (None, prev) and not (prev == "DOUBLE" and t == "BIGINT"):
                wanted[key] = "VARCHAR"
    return {k: t or "VARCHAR" for k, t in wanted.items()}


def _ensure_columns(con: duckdb.DuckDBPyConnection, table: str, types: dict[str, str]) -> None:
    existing = _columns(con, table)
    if not existing:
        cols = ", ".join(f"{_quote(k)} {t}" for k, t in types.items())
        con.execute(f"CREATE TABLE {_quote(table)} ({cols})")
        return
    for key, t in types.items():
        if key not in existing:
            con.execute(f"ALTER TABLE {_quote(table)} ADD COLUMN {_quote(key)} {t}")
        elif existing[key] == "BIGINT" and t == "DOUBLE":
            con.execute(f"ALTER TABLE {_quote(table)} ALTER {_quote(key)} TYPE DOUBLE")
        elif existing[key] != t and t == "VARCHAR":
            con.execute(f"ALTER TABLE {_quote(table)} ALTER {_quote(key)} TYPE VARCHAR")


def _arrow_table(rows: Sequence[dict[str, Any]], types: dict[str, str]):
    import pyarrow as pa

    arrays, names = [], []
    for col, t in types.items():
        values = [r.get(col) for r in rows]
        if t == "VARCHAR":
            values = [None if v is None else (v if isinstance(v, str) else json.dumps(v, default=str)) for v in values]
        elif t == "DOUBLE":
            values = [None if v is None else float(v) for v in values]
        arrays.append(pa.array(values, type=getattr(pa, _ARROW[t])()))
        names.append(col)
    return pa.Table.from_arrays(arrays, names=names)


def write_rows(
    path: str | Path,
    tables: dict[str, tuple[str | Sequence[str], Sequence[dict[str, Any]]]],
) -> int:
    """Write several tables in one transaction: ``{table: (key_columns, rows)}``.

    Rows whose key already exists are replaced. Returns the number of rows written.
    """
    total = 0
    with connect(path) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            for table, (key, rows) in tables.items():
                if not rows:
                    continue
                keys = [key] if isinstance(key, str) else list(key)
                types = _column_types(rows)
                _ensure_columns(con, table, types)
                con.register("incoming", _arrow_table(rows, types))
                match = " AND ".join(f"{_quote(table)}.{_quote(k)} = incoming.{_quote(k)}" for k in keys)
                con.execute(f"DELETE FROM {_quote(table)} USING incoming WHERE {match}")
                con.execute(f"INSERT INTO {_quote(table)} BY NAME SELECT * FROM incoming")
                con.unregister("incoming")
                total += len(rows)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return total


def write_estimates(path: str | Path, estimates: Iterable[Any]) -> int:
    """Store :class:`estimator.estimate.Estimate` objects (rows + per-collective rows); returns
    the number of estimates written."""
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    rows, colls = [], []
    for est in estimates:
        row = {"created_at": now, "config_json": json.dumps(est.config, sort_keys=True, default=str)}
        row.update(est.row())
        rows.append(row)
        colls.extend({"config_hash": est.config_hash, **c} for c in est.collectives)
    write_rows(path, {"estimates": ("config_hash", rows), "collectives": (("config_hash", "idx"), colls)})
    return len(rows)


def existing_keys(path: str | Path, table: str = "estimates", key: str = "config_hash") -> set[str]:
    """Keys already in ``table`` (empty when the store or table does not exist yet)."""
    path = Path(path)
    if not path.exists():
        return set()
    with connect(path) as con:
        if not _columns(con, table):
            return set()
        return {r[0] for r in con.execute(f"SELECT {_quote(key)} FROM {_quote(table)}").fetchall()}


def query(path: str | Path, sql: str, params: list[Any] | None = None):
    """Run SQL against the store and return a Polars DataFrame."""
    with connect(path, read_only=True) as con:
        try:
            return con.sql(sql, params=params or None).pl()
        except duckdb.Error as exc:
            raise EstimatorError(f"{path}: query failed ({str(exc).splitlines()[0]})") from None
