"""DuckDB table ``validation``: one row per measurement of the last ``estimator validate`` run.

Columns: id, kind (nccl | training), system, gpus, model, collective, bytes, precision,
batch_per_gpu, metric (busbw | samples_per_s), unit (GB/s | samples/s), measured, predicted,
error_pct (signed, 100 (predicted - measured) / measured), role (calibration | same-source | independent),
algorithm (what the model chose), source, hardware, software, measured_what, overrides, file,
line, command (the CLI line that reproduces the prediction), version (the project's), created_at,
run_class (an llm row's class of run, :func:`estimator.validation.envelope.run_class`; null otherwise),
validation_class (the same class in words, as ``estimator estimate`` prints it).

Each run replaces the whole table in one transaction (drop, create, insert): a reader sees the
previous run's rows or the new ones, never a mix, and a failed run leaves the previous rows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from estimator import __version__
from estimator.store.duckdb_store import connect
from estimator.validation.envelope import describe
from estimator.validation.predict import Result, command_line, row_class

TABLE = "validation"
SCHEMA = (
    ("id", "VARCHAR"), ("kind", "VARCHAR"), ("system", "VARCHAR"), ("gpus", "BIGINT"), ("model", "VARCHAR"),
    ("collective", "VARCHAR"), ("bytes", "DOUBLE"), ("precision", "VARCHAR"), ("batch_per_gpu", "BIGINT"),
    ("metric", "VARCHAR"), ("unit", "VARCHAR"), ("measured", "DOUBLE"), ("predicted", "DOUBLE"),
    ("error_pct", "DOUBLE"), ("role", "VARCHAR"), ("algorithm", "VARCHAR"), ("source", "VARCHAR"),
    ("hardware", "VARCHAR"), ("software", "VARCHAR"), ("measured_what", "VARCHAR"), ("overrides", "VARCHAR"),
    ("file", "VARCHAR"), ("line", "BIGINT"), ("command", "VARCHAR"), ("version", "VARCHAR"),
    ("created_at", "VARCHAR"), ("run_class", "VARCHAR"), ("validation_class", "VARCHAR"),
)


def record(result: Result, created_at: str) -> dict[str, Any]:
    r = result.row
    return {
        "id": r.id, "kind": r.kind, "system": r.system or None, "gpus": r.gpus, "model": r.model,
        "collective": r.collective, "bytes": r.bytes, "precision": r.precision, "batch_per_gpu": r.batch_per_gpu,
        "metric": r.metric, "unit": r.unit, "measured": r.measured, "predicted": result.predicted,
        "error_pct": result.error_pct, "role": r.role, "algorithm": result.algorithm, "source": r.source,
        "hardware": r.hardware, "software": r.software, "measured_what": r.measured_what,
        "overrides": " ".join(r.overrides), "file": r.file, "line": r.line, "command": command_line(r),
        "version": __version__, "created_at": created_at, "run_class": (cls := row_class(r)),
        "validation_class": describe(cls) if cls else None,
    }


def replace_validation(store: str | Path, results: list[Result]) -> int:
    """Replace the ``validation`` table with ``results`` atomically; returns the row count."""
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    records = [record(r, now) for r in results]
    columns = ", ".join(f'"{name}" {sql_type}' for name, sql_type in SCHEMA)
    marks = ", ".join("?" for _ in SCHEMA)
    with connect(store) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(f"DROP TABLE IF EXISTS {TABLE}")
            con.execute(f"CREATE TABLE {TABLE} ({columns})")
            if records:
                con.executemany(f"INSERT INTO {TABLE} VALUES ({marks})",
                                [[rec[name] for name, _ in SCHEMA] for rec in records])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return len(records)
