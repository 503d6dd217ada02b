"""Query the results store with SQL: ``estimator sql "SELECT ..."`` or ``estimator sql FILE.sql``.

    estimator sql "SELECT fabric_name, nodes, iter_time_s FROM estimates LIMIT 5"
    estimator sql reports/figures/lumorph_allreduce_256.sql sql_out=/tmp/x.csv    # or .parquet
    estimator sql "SELECT ..." output=json [store=results/other.duckdb] [sql_rows=100]

The store is opened read-only in a sandbox (DuckDB, the same engine that wrote it; the DuckDB CLI
on PyPI may not read its file format): one read statement (``SELECT``, ``DESCRIBE``, ``SHOW``,
``SUMMARIZE``, ``EXPLAIN``), no file or network access (``read_csv('...')``, ``COPY``, ``ATTACH``,
``INSTALL``/``LOAD`` are refused), no ``SET`` (see :mod:`estimator.store.sandbox` and
docs/reliability.md). The result is a Polars DataFrame: printed as a table (``sql_rows`` rows,
default 50), written to ``sql_out`` (``.csv`` or ``.parquet``, atomically: a temporary file in the
same folder renamed when complete), or printed as JSON rows with ``output=json``.
``estimator tables`` lists every table and column with its unit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from estimator.config_checks import check_output_file
from estimator.errors import EstimatorError
from estimator.files import atomic_path, decode_text, read_input
from estimator.store.duckdb_store import query
from estimator.store.spill import pending

HELP = "run SQL (a query or a .sql file) on the results store; print, or write CSV/Parquet"
POSITIONAL = ("query",)
OUT_SUFFIXES = (".csv", ".parquet")


def sql_text(value: str) -> str:
    """The SQL itself, or the contents of a ``.sql`` file."""
    if value.strip().lower().endswith(".sql") and "\n" not in value:
        path = Path(value.strip())
        return decode_text(read_input(path, "SQL"), path, "SQL file")
    return value


def run(cfg: DictConfig) -> Any:
    text = cfg.get("query")
    if not text:
        raise EstimatorError('estimator sql: missing the query (estimator sql "SELECT ..." or estimator sql FILE.sql)')
    out = cfg.get("sql_out")
    if out:
        check_output_file(str(out), "sql_out", OUT_SUFFIXES)
    df = query(cfg.store, sql_text(str(text)))
    if pending(cfg.store):
        print(f"note: rows spilled to {cfg.store}.spill/ are not in the store yet (the next write merges them)",
              file=sys.stderr)
    if out:
        path = Path(str(out))
        with atomic_path(path) as tmp:
            df.write_csv(tmp) if path.suffix.lower() == ".csv" else df.write_parquet(tmp)
        return {"rows": df.height, "columns": df.width, "output": str(path)}
    if cfg.get("output", "text") == "json":
        return df.to_dicts()
    return {"frame": df, "rows": int(cfg.get("sql_rows") or 50)}


def format_text(result: Any) -> str:
    if "frame" not in result:
        return f"wrote {result['rows']} rows x {result['columns']} columns to {result['output']}"
    import polars as pl

    df = result["frame"]
    with pl.Config(tbl_rows=result["rows"], tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200,
                   tbl_hide_dataframe_shape=True):
        text = str(df)
    more = f"\n({df.height} rows; showing {result['rows']}: sql_rows=N shows more, sql_out=FILE.csv writes all)" \
        if df.height > result["rows"] else f"\n({df.height} rows)"
    return text + more
