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
appear; integer columns widen to DOUBLE when a non-integer arrives. A write that fails leaves no
new (empty) store file behind.

Computed rows are never lost: when another process holds the store's lock for longer than
``LOCK_RETRY_S`` (``$ESTIMATOR_LOCK_WAIT_S``), the rows are *spilled* as Parquet files into
``<store>.spill/`` (one folder per write, renamed into place when complete) and merged into the
store by the next write that gets the lock; :func:`existing_keys` counts spilled rows as present,
so a resumed sweep does not recompute them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from estimator.errors import EstimatorError
from estimator.store.column_types import join, sql_type

LOCK_RETRY_S = 120.0  # another process (e.g. a parallel Snakemake job) may hold the file


class StoreLocked(EstimatorError):
    """Another process held the store's write lock for longer than the wait."""


def _lock_wait_s() -> float:
    try:
        return float(os.environ.get("ESTIMATOR_LOCK_WAIT_S", LOCK_RETRY_S))
    except ValueError:
        return LOCK_RETRY_S


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def connect(path: str | Path, read_only: bool = False, config: dict[str, Any] | None = None):
    """Open the store, waiting while another process holds its lock (``config``: DuckDB settings
    of this connection, e.g. :data:`BULK_WRITE`)."""
    path = Path(path)
    if read_only and not path.exists():
        raise EstimatorError(f"{path}: no results store yet (run an estimate with write=true or a sweep)")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + _lock_wait_s()
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=config or {})
            break
        except duckdb.IOException as exc:
            locked = "lock" in str(exc).lower()
            if not locked or time.monotonic() > deadline:
                kind = StoreLocked if locked else EstimatorError
                raise kind(f"{path}: cannot open results store ({str(exc).splitlines()[0][:160]})") from None
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
            wanted[key] = join(wanted.get(key), sql_type(value))
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

    Rows whose key already exists are replaced. Returns the number of rows written (or spilled,
    when another process holds the lock: see the module docstring). Rows spilled earlier are
    merged first.
    """
    return write_tables(path, tables)


def _write_tables(con: duckdb.DuckDBPyConnection, tables: dict[str, tuple[Any, Any]], replace: bool = True) -> int:
    """Upsert ``{table: (key, rows)}``; ``rows`` is a list of dicts (column types inferred from the
    values) or a ``pyarrow.Table`` (its declared schema is used as is). ``replace=False`` skips the
    delete of existing keys (the caller knows the keys are new)."""
    total = 0
    con.execute("BEGIN TRANSACTION")
    try:
        for table, (key, rows) in tables.items():
            if not len(rows):
                continue
            keys = [key] if isinstance(key, str) else list(key)
            if isinstance(rows, list | tuple):
                types = _column_types(rows)
                incoming = _arrow_table(rows, types)
            else:
                incoming, types = rows, _declared_types(rows.schema)
            _ensure_columns(con, table, types)
            con.register("incoming", incoming)
            if replace:
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


def _declared_types(schema: Any) -> dict[str, str]:
    """SQL column types of an Arrow schema (the four the store uses)."""
    sql = {"int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN", "string": "VARCHAR"}
    return {f.name: sql.get(str(f.type), "VARCHAR") for f in schema}


def arrow_schema(types: dict[str, str]):
    """The Arrow schema of declared SQL column types (``{"iter_time_s": "DOUBLE", ...}``)."""
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, _ARROW[t])()) for name, t in types.items()])


# DuckDB settings of a sweep's writes: one thread (the sweep's workers use the other cores) and a
# memory cap, so a checkpoint (which re-compresses the table's last, partly filled row group) does
# not grow the driver by hundreds of MiB; DuckDB evicts to its temporary directory beyond it.
BULK_WRITE = {"threads": 1, "memory_limit": "256MB"}


def write_tables(path: str | Path, tables: dict[str, tuple[str | Sequence[str], Any]], replace: bool = True,
                 config: dict[str, Any] | None = None) -> int:
    """Write ``{table: (key_columns, pyarrow.Table)}`` in one transaction with the tables' declared
    schemas (no per-value type inference); otherwise like :func:`write_rows`. ``replace=False``
    appends without looking for existing keys (for rows known to be new); ``config``: DuckDB
    settings of the connection (:data:`BULK_WRITE`)."""
    path = Path(path)
    created = not path.exists()
    try:
        with connect(path, config=config) as con:
            merged = _merge_spills(con, path)
            total = _write_tables(con, tables, replace)
        if merged:
            print(f"note: merged {merged} spilled row(s) from {spill_dir(path)} into {path}", file=sys.stderr)
        return total
    except StoreLocked as exc:
        n = _spill(path, tables)
        print(f"note: {exc}; {n} computed row(s) saved to {spill_dir(path)}/ and merged on the next write",
              file=sys.stderr)
        return n
    except BaseException as exc:
        if created:  # leave no empty store file behind
            for p in (path, Path(f"{path}.wal")):
                p.unlink(missing_ok=True)
        if isinstance(exc, OverflowError | ValueError | TypeError):
            raise EstimatorError(f"{path}: cannot store the rows ({type(exc).__name__}: {str(exc)[:120]})") from None
        raise


def spill_dir(path: str | Path) -> Path:
    return Path(f"{path}.spill")


def _spill(path: Path, tables: dict[str, tuple[Any, Sequence[dict[str, Any]]]]) -> int:
    """Write the rows as Parquet into a new folder under ``<store>.spill/`` (atomically renamed)."""
    import pyarrow.parquet as pq

    root = spill_dir(path)
    root.mkdir(parents=True, exist_ok=True)
    name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}-{time.monotonic_ns()}"
    tmp = root / f".{name}"
    tmp.mkdir()
    keys, n = {}, 0
    for table, (key, rows) in tables.items():
        if len(rows):
            data = _arrow_table(rows, _column_types(rows)) if isinstance(rows, list | tuple) else rows
            pq.write_table(data, tmp / f"{table}.parquet")
            keys[table] = [key] if isinstance(key, str) else list(key)
            n += len(rows)
    (tmp / "keys.json").write_text(json.dumps(keys))
    os.replace(tmp, root / name)
    return n


def _spilled(path: Path) -> list[Path]:
    root = spill_dir(path)
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []


def _merge_spills(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Upsert every complete spill folder into the store (one transaction each), then delete it."""
    import pyarrow.parquet as pq

    merged = 0
    for folder in _spilled(path):
        keys = json.loads((folder / "keys.json").read_text())
        tables = {t: (k, pq.read_table(folder / f"{t}.parquet")) for t, k in keys.items()}
        merged += _write_tables(con, tables)
        shutil.rmtree(folder)
    root = spill_dir(path)
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()
    return merged


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
    found: set[str] = set()
    for folder in _spilled(path):  # rows computed earlier but not merged yet count as present
        f = folder / f"{table}.parquet"
        if f.is_file():
            import pyarrow.parquet as pq

            found.update(pq.read_table(f, columns=[key]).column(key).to_pylist())
    if not path.exists():
        return found
    with connect(path) as con:
        if not _columns(con, table):
            return found
        return found | {r[0] for r in con.execute(f"SELECT {_quote(key)} FROM {_quote(table)}").fetchall()}


def query(path: str | Path, sql: str, params: list[Any] | None = None):
    """Run SQL against the store and return a Polars DataFrame."""
    with connect(path, read_only=True) as con:
        try:
            return con.sql(sql, params=params or None).pl()
        except duckdb.Error as exc:
            raise EstimatorError(f"{path}: query failed ({str(exc).splitlines()[0]})") from None
