"""Estimate sweeps as columnar batches with a declared schema.

A sweep worker returns, per batch of points, two ``pyarrow.Table`` s (``estimates`` and
``collectives``) whose schema the driver declared before anything ran: the config columns'
types come from the values the grid can produce (each composed config's values and each axis
value, see :func:`config_types`), the metrics' and collectives' from
:data:`estimator.estimate.METRIC_TYPES` / :data:`~estimator.estimate.COLLECTIVE_TYPES`. The
rows are the ones :func:`estimator.store.duckdb_store.write_estimates` stores for the same
estimates (same columns, same values); only the ``created_at`` column is added by the driver.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from estimator import __version__
from estimator.config import flatten
from estimator.errors import EstimatorError
from estimator.sweep.grid import Grid, with_settings

_HEAD = {"config_json": "VARCHAR", "config_hash": "VARCHAR", "version": "VARCHAR"}


def _sql_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT"
    if isinstance(value, float):
        return "DOUBLE"
    return None if value is None else "VARCHAR"


def _join(prev: str | None, new: str | None) -> str | None:
    """The type a column needs for values of both types (BIGINT widens to DOUBLE, else VARCHAR)."""
    if prev is None or prev == new:
        return new if prev is None else prev
    if new is None:
        return prev
    if {prev, new} == {"BIGINT", "DOUBLE"}:
        return "DOUBLE"
    return "VARCHAR"


def config_types(grid: Grid, keys: Sequence[str]) -> dict[str, str]:
    """Store column -> SQL type for the flattened config ``keys`` of every point of ``grid``,
    from the composed configs' values (where no axis sets the column) and the axis values."""
    dotted = [k for k in grid.settings_keys if k.split(".")[0] in keys]
    types: dict[str, str | None] = {}

    def add(name: str, value: Any) -> None:
        col = name.replace(".", "_")
        types[col] = _join(types.get(col), _sql_type(value)) if col in types else _sql_type(value)

    for base in grid.bases.values():
        for name, value in flatten({k: base.get(k) for k in keys}).items():
            if not any(name == k or name.startswith(k + ".") for k in dotted):
                add(name, value)
    for axis in grid.axes:
        for entry in axis:
            for k, v in entry.items():
                if k in dotted:
                    for name, value in flatten({k: v}).items():
                        add(name, value)
    return {col: t or "VARCHAR" for col, t in types.items()}


def estimate_schema(grid: Grid) -> dict[str, dict[str, str]]:
    """Declared column types of the ``estimates`` and ``collectives`` rows of a grid's points."""
    from estimator.estimate import COLLECTIVE_TYPES, ESTIMATE_KEYS, METRIC_TYPES

    est = {"created_at": "VARCHAR", **_HEAD, **config_types(grid, ESTIMATE_KEYS)}
    est.update(METRIC_TYPES)
    return {"estimates": est, "collectives": dict(COLLECTIVE_TYPES)}


def _text(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else json.dumps(value, default=str)


def estimate_batch(grid: Grid, indices: Sequence[int], paths: dict[tuple, str],
                   schema: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Estimate the points ``indices`` of ``grid``; return ``{table: pyarrow.Table}`` with the
    declared ``schema`` (``estimates`` without ``created_at``, which the driver sets)."""
    import pyarrow as pa

    from estimator.estimate import estimate
    from estimator.store.duckdb_store import arrow_schema

    est_types = {k: t for k, t in schema["estimates"].items() if k != "created_at"}
    coll_types = schema["collectives"]
    est_cols: dict[str, list[Any]] = {k: [] for k in est_types}
    coll_cols: dict[str, list[Any]] = {k: [] for k in coll_types}
    n_rows = n_coll = 0
    for i in indices:
        key, dotted = grid.point(i)
        cfg = with_settings(grid.bases[key], dotted)
        est = estimate(cfg, paths[workload_key(cfg)])
        row = {"config_json": json.dumps(est.config, sort_keys=True, default=str), "config_hash": est.config_hash,
               "version": __version__}
        row.update({k.replace(".", "_"): v for k, v in flatten(est.config).items()})
        row.update(est.metrics)
        for col, value in row.items():
            values = est_cols.get(col)
            if values is None:
                raise EstimatorError(f"sweep: column {col!r} of point {i} is not in the declared schema")
            values.extend([None] * (n_rows - len(values)))
            values.append(value)
        n_rows += 1
        for c in est.collectives:
            coll_cols["config_hash"].append(est.config_hash)
            for col, value in c.items():
                coll_cols[col].append(value)
            n_coll += 1
    for values in est_cols.values():
        values.extend([None] * (n_rows - len(values)))
    for col, t in est_types.items():
        if t == "VARCHAR":
            est_cols[col] = [_text(v) for v in est_cols[col]]
    return {"estimates": pa.Table.from_pydict(est_cols, schema=arrow_schema(est_types)),
            "collectives": pa.Table.from_pydict(coll_cols, schema=arrow_schema(coll_types))}


def workload_key(cfg: dict[str, Any]) -> tuple:
    """What decides a point's workload file (see :func:`estimator.estimate.workload_path`)."""
    return cfg.get("workload"), (cfg.get("model") or {}).get("name"), cfg.get("traces_dir")


def write_batches(store: str, batches: list[dict[str, Any]], replace: bool) -> int:
    """Concatenate worker batches and store them in one transaction; returns the estimates written."""
    import pyarrow as pa

    from estimator.store.duckdb_store import write_tables

    est = pa.concat_tables([b["estimates"] for b in batches])
    colls = pa.concat_tables([b["collectives"] for b in batches])
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    est = est.add_column(0, "created_at", pa.array([now] * len(est), type=pa.string()))
    write_tables(store, {"estimates": ("config_hash", est), "collectives": (("config_hash", "idx"), colls)}, replace)
    return len(est)
