"""The DuckDB results store (default ``results/estimates.duckdb``; embedded, no server).

Tables:

* ``estimates`` — one row per estimate: ``config_hash`` (identity), ``version``, ``created_at``,
  ``config_json`` (the resolved estimate config), one column per flattened config key with ``_``
  for nesting (``fabric_name``, ``fabric_nodes``, ``model_name``, ``device_name``...) and the
  metrics (``iter_time_s``, ``compute_time_s``, ``exposed_comm_time_s``, ``samples_per_s``...).
* ``collectives`` — the collectives of an estimate, ``config_hash`` and ``idx`` (its child table).
* any other table a component writes through :func:`write_rows` with its own key column.

Every write is keyed and atomic, and runs under the store's lock (DuckDB lets one process open the
file for writing; the others wait, :func:`connect`): one transaction replaces the rows of the keys
it brings (``DELETE`` + ``INSERT``; for a child table every row of the parent's key) or, for a
sweep's new points (``replace=False``), inserts only the keys the parent table does not hold *at
commit time* (an anti-join inside the transaction). So concurrent writers — several sweeps over
overlapping grids, ``estimate write=true`` beside them — store every key exactly once. Columns are
added as new config keys appear; integer columns widen to DOUBLE when a non-integer arrives. A
write that fails leaves no new (empty) store file behind.

Computed rows are never lost: when the store cannot be written — another process holds its lock
for longer than ``LOCK_RETRY_S`` (``$ESTIMATOR_LOCK_WAIT_S``), the disk is full, the folder is
read-only, the file is damaged — the rows are *spilled* as Parquet beside it
(:mod:`estimator.store.spill`) and merged by the next write that succeeds;
:func:`existing_keys` counts spilled rows as present, so a resumed sweep does not recompute them.
A lock timeout is a note; any other write error is raised (:class:`StoreWriteFailed`) after the
rows are saved, naming the error (a failed ``COMMIT``'s, not a follow-up ``ROLLBACK``'s).

:func:`query` runs one read-only statement in a sandbox (:mod:`estimator.store.sandbox`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from estimator.errors import EstimatorError
from estimator.store import sandbox, spill
from estimator.store.column_types import join, sql_type
from estimator.store.spill import spill_dir  # noqa: F401  (re-exported: where a store's spills go)

LOCK_RETRY_S = 120.0  # another process (e.g. a parallel Snakemake job) may hold the file


class StoreError(EstimatorError):
    """The store cannot be opened or written (one line naming it and DuckDB's reason)."""


class StoreLocked(StoreError):
    """Another process held the store's write lock for longer than the wait."""


class StoreWriteFailed(StoreError):
    """A write failed; its rows were spilled (``rows``) and are merged by the next write."""

    def __init__(self, message: str, rows: int = 0):
        super().__init__(message)
        self.rows = rows


def _lock_wait_s() -> float:
    try:
        return float(os.environ.get("ESTIMATOR_LOCK_WAIT_S", LOCK_RETRY_S))
    except ValueError:
        return LOCK_RETRY_S


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:160]


#: DuckDB's database file header: a block checksum, then these magic bytes (DuckDB
#: src/storage/single_file_block_manager.cpp: ``MainHeader::MAGIC_BYTES`` = "DUCK", read by
#: ``CheckMagicBytes`` at ``MAGIC_BYTE_OFFSET`` = ``Storage::BLOCK_HEADER_SIZE``, the 8-byte checksum;
#: the files DuckDB 2.0.0 writes here carry "DUCK" at byte 8)
_MAGIC, _MAGIC_AT = b"DUCK", 8


def not_a_store(path: str | Path) -> str | None:
    """Why ``path`` cannot be a results store, or None (absent, empty, or a DuckDB file). DuckDB 2
    opens an existing CSV / Parquet / JSON file as an in-memory database over it, so rows written
    there were reported stored and lost (``store=jobs.csv``); a folder is no store either."""
    path = Path(path)
    if not path.exists():
        return None
    if not path.is_file():
        return f"{path}: not a results store (a folder or device, not a DuckDB file)"
    try:
        with path.open("rb") as fh:
            head = fh.read(_MAGIC_AT + len(_MAGIC))
    except OSError as exc:
        return f"{path}: cannot open results store ({exc.strerror or exc})"
    if head and head[_MAGIC_AT:] != _MAGIC:
        return f"{path}: not a results store (not a DuckDB file; name the store e.g. results/estimates.duckdb)"
    return None


@contextmanager
def connect(path: str | Path, read_only: bool = False, config: dict[str, Any] | None = None):
    """Open the store, waiting while another process holds its lock (``config``: DuckDB settings
    of this connection, e.g. :data:`BULK_WRITE`)."""
    path = Path(path)
    if read_only and not path.exists():
        raise StoreError(f"{path}: no results store yet (run an estimate with write=true or a sweep)")
    problem = not_a_store(path)
    if problem:
        raise StoreError(problem)
    deadline = time.monotonic() + _lock_wait_s()
    while True:
        try:
            if not read_only:
                path.parent.mkdir(parents=True, exist_ok=True)
            con = duckdb.connect(str(path), read_only=read_only, config=config or {})
            break
        except duckdb.IOException as exc:
            locked = "lock" in str(exc).lower()
            if not locked or time.monotonic() > deadline:
                kind = StoreLocked if locked else StoreError
                raise kind(f"{path}: cannot open results store ({_reason(exc)})") from None
            time.sleep(0.5)
        except duckdb.Error as exc:
            raise StoreError(f"{path}: not a usable DuckDB file ({_reason(exc)})") from None
        except OSError as exc:
            raise StoreError(f"{path}: cannot open results store ({exc.strerror or exc})") from None
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


def _as_arrow(path: Path, tables: dict[str, tuple[Any, Any]]) -> dict[str, tuple[list[str], Any]]:
    """``{table: (key columns, pyarrow.Table)}``: row lists converted (types inferred from the
    values), Arrow tables kept with their declared schema; empty tables dropped."""
    import pyarrow as pa

    out = {}
    for table, (key, rows) in tables.items():
        keys = [key] if isinstance(key, str) else list(key)
        if isinstance(rows, list | tuple):
            if not rows:
                continue
            try:
                rows = _arrow_table(rows, _column_types(rows))
            except (OverflowError, ValueError, TypeError, pa.ArrowException) as exc:
                raise EstimatorError(f"{path}: cannot store the rows of {table} ({type(exc).__name__}: "
                                     f"{str(exc)[:120]})") from None
        if rows.num_rows:
            out[table] = (keys, rows)
    return out


def _declared_types(schema: Any) -> dict[str, str]:
    """SQL column types of an Arrow schema (the four the store uses)."""
    sql = {"int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN", "string": "VARCHAR"}
    return {f.name: sql.get(str(f.type), "VARCHAR") for f in schema}


def arrow_schema(types: dict[str, str]):
    """The Arrow schema of declared SQL column types (``{"iter_time_s": "DOUBLE", ...}``)."""
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, _ARROW[t])()) for name, t in types.items()])


def _write_tables(con: duckdb.DuckDBPyConnection, tables: dict[str, tuple[list[str], Any]], replace: bool) -> int:
    """One transaction (see :func:`_upsert`); a failed ``COMMIT``'s error is the one raised (the
    ``ROLLBACK`` after it may fail too: nothing is active any more)."""
    con.execute("BEGIN TRANSACTION")
    try:
        written = _upsert(con, tables, replace)
        con.execute("COMMIT")
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        raise
    return written


def _upsert(con: duckdb.DuckDBPyConnection, tables: dict[str, tuple[list[str], Any]], replace: bool) -> int:
    """Write ``{table: (key columns, pyarrow.Table)}``; return the first (parent) table's rows written.

    ``replace=True``: every row of a key the call brings is deleted, then the rows are inserted (a
    child table keyed by its parent's key alone loses every old row of that parent). ``replace=False``:
    only keys the first table does not hold yet are inserted, in every table whose first key
    column is the first table's (the others: rows whose whole key is new)."""
    items = list(tables.items())
    if not items:
        return 0
    names = {}
    for i, (table, (_key, data)) in enumerate(items):
        _ensure_columns(con, table, _declared_types(data.schema))
        names[table] = f"_incoming_{i}"
        con.register(names[table], data)
    try:
        parent, (pkeys, pdata) = items[0]
        if replace:
            for table, (keys, _data) in items:
                inc = names[table]
                if len(keys) == 1:
                    k = _quote(keys[0])
                    con.execute(f"DELETE FROM {_quote(table)} WHERE {k} IN (SELECT DISTINCT {k} FROM {inc})")
                else:
                    match = " AND ".join(f"{_quote(table)}.{_quote(k)} = {inc}.{_quote(k)}" for k in keys)
                    con.execute(f"DELETE FROM {_quote(table)} USING {inc} WHERE {match}")
                con.execute(f"INSERT INTO {_quote(table)} BY NAME SELECT * FROM {inc}")
            return pdata.num_rows
        pk = _quote(pkeys[0])
        con.execute(f"CREATE OR REPLACE TEMP TABLE _new_keys AS SELECT DISTINCT i.{pk} FROM {names[parent]} i "
                    f"ANTI JOIN {_quote(parent)} t ON i.{pk} = t.{pk}")
        written = 0
        for table, (keys, _data) in reversed(items):  # children first: the parent is unchanged until the last insert
            inc = names[table]
            if keys[0] == pkeys[0]:
                where = f"WHERE {pk} IN (SELECT {pk} FROM _new_keys)"
            else:
                match = " AND ".join(f"t.{_quote(k)} = i.{_quote(k)}" for k in keys)
                where = f"i WHERE NOT EXISTS (SELECT 1 FROM {_quote(table)} t WHERE {match})"
            count = con.execute(f"INSERT INTO {_quote(table)} BY NAME SELECT * FROM {inc} {where}").fetchone()
            written = int(count[0]) if count else 0
        con.execute("DROP TABLE _new_keys")
        return written
    finally:
        for name in names.values():
            con.unregister(name)


def write_rows(
    path: str | Path,
    tables: dict[str, tuple[str | Sequence[str], Sequence[dict[str, Any]]]],
) -> int:
    """Write several tables in one transaction: ``{table: (key_columns, rows)}`` (rows are dicts;
    column types are inferred from the values).

    Rows whose key already exists are replaced. Returns the number of rows of the first table
    written (or spilled, when another process holds the lock: see the module docstring). Rows
    spilled earlier are merged first."""
    return write_tables(path, tables)


# DuckDB settings of a sweep's writes: one thread (the sweep's workers use the other cores) and a
# memory cap, so a checkpoint (which re-compresses the table's last, partly filled row group) does
# not grow the driver by hundreds of MiB; DuckDB evicts to its temporary directory beyond it.
BULK_WRITE = {"threads": 1, "memory_limit": "256MB"}

#: DuckDB errors that say "these rows do not fit the store" (a spill that fails with one is
#: quarantined); any other error during a merge is the store's (the write spills)
_DATA_ERRORS = (duckdb.ConversionException, duckdb.BinderException, duckdb.CatalogException,
                duckdb.ConstraintException, duckdb.InvalidInputException, duckdb.TypeMismatchException,
                duckdb.OutOfRangeException, duckdb.ParserException, duckdb.NotImplementedException)


def write_tables(path: str | Path, tables: dict[str, tuple[str | Sequence[str], Any]], replace: bool = True,
                 config: dict[str, Any] | None = None) -> int:
    """Write ``{table: (key_columns, rows or pyarrow.Table)}`` in one transaction (an Arrow
    table's declared schema is used as is); rows spilled earlier are merged first. ``replace=False``
    inserts only keys the first table does not hold (a sweep's new points; see :func:`_upsert`);
    ``config``: DuckDB settings of the connection (:data:`BULK_WRITE`). Returns the rows of the
    first table written, or spilled on a lock timeout; raises :class:`StoreWriteFailed` after
    spilling them on any other write error."""
    path = Path(path)
    data = _as_arrow(path, tables)
    existed = path.exists()
    try:
        with connect(path, config=config) as con:
            merged = _merge_spills(con, path)
            written = _write_tables(con, data, replace)
    except StoreLocked as exc:
        if not data:
            raise
        n = spill.write_spill(path, data)
        print(f"note: {exc}; {n} computed row(s) saved to {spill.spill_dir(path)}/ and merged on the next write",
              file=sys.stderr)
        return n
    except (StoreError, duckdb.Error, OSError) as exc:
        if not existed:
            _remove_if_empty(path)
        reason = str(exc) if isinstance(exc, StoreError) else f"{path}: cannot write the rows ({_reason(exc)})"
        if not data:  # only merging spills: they stay where they are
            raise StoreError(reason) from None
        try:
            n = spill.write_spill(path, data)
        except EstimatorError as again:
            raise StoreError(f"{reason}; {again}") from None
        raise StoreWriteFailed(f"{reason}; {n} computed row(s) saved to {spill.spill_dir(path)}/ and merged on "
                               "the next write", n) from None
    except BaseException:
        if not existed:
            _remove_if_empty(path)
        raise
    if merged:
        print(f"note: merged {merged} spilled row(s) from {spill.spill_dir(path)} into {path}", file=sys.stderr)
    return written


def _remove_if_empty(path: Path) -> None:
    """Delete a store file this write created when it holds no table (or cannot be opened): a
    failed first write leaves nothing behind, and never a store another process filled since."""
    try:
        con = duckdb.connect(str(path), read_only=True)
        try:
            if con.execute("SELECT count(*) FROM information_schema.tables").fetchone()[0]:
                return
        finally:
            con.close()
    except duckdb.Error:
        pass
    for p in (path, Path(f"{path}.wal")):
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass


def _merge_spills(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Upsert every complete spill folder into the store (one transaction each), then delete it;
    damaged folders (or rows that no longer fit the store) are quarantined."""
    merged = 0
    for folder in spill.pending(path):
        try:
            tables = spill.read_spill(folder)
        except spill.DamagedSpill as exc:
            spill.quarantine(path, folder, str(exc))
            continue
        try:
            merged += _write_tables(con, tables, replace=True)
        except _DATA_ERRORS as exc:
            spill.quarantine(path, folder, f"cannot be merged: {_reason(exc)}")
            continue
        spill.remove(path, folder)
    return merged


def merge_spills(path: str | Path) -> int:
    """Merge the pending spills of ``path`` now (a sweep does it before it starts, so rows spilled
    by a run whose points are now all done still reach the store). Returns the rows merged; 0
    when there are none or the store is busy (they stay for the next write)."""
    path = Path(path)
    if not spill.pending(path):
        return 0
    try:
        return write_tables(path, {})
    except StoreError as exc:
        print(f"note: spilled rows not merged yet: {exc}", file=sys.stderr)
        return 0


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
    write_rows(path, {"estimates": ("config_hash", rows), "collectives": ("config_hash", colls)})
    return len(rows)


def existing_keys(path: str | Path, table: str = "estimates", key: str = "config_hash") -> set[str]:
    """Keys already in ``table`` (empty when the store or table does not exist yet), including
    rows spilled but not merged yet."""
    path = Path(path)
    found = spill.spilled_keys(path, table, key)
    if not path.exists():
        return found
    with connect(path, read_only=True) as con:
        if not _columns(con, table):
            return found
        return found | {r[0] for r in con.execute(f"SELECT {_quote(key)} FROM {_quote(table)}").fetchall()}


def query(path: str | Path, sql: str, params: list[Any] | None = None):
    """Run one read-only statement against the store in the sandbox of
    :mod:`estimator.store.sandbox` and return a Polars DataFrame."""
    with connect(path, read_only=True, config=sandbox.CONFIG) as con:
        sandbox.check_statement(con, sql)
        try:
            return con.sql(sql, params=params or None).pl()
        except duckdb.Error as exc:
            raise sandbox.explain_error(exc, path) from None
