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
from estimator.store.column_types import join, sql_type
from estimator.sweep.grid import Grid, with_settings

_HEAD = {"config_json": "VARCHAR", "config_hash": "VARCHAR", "version": "VARCHAR"}


def config_types(grid: Grid, keys: Sequence[str]) -> dict[str, str]:
    """Store column -> SQL type for the flattened config ``keys`` of every point of ``grid``,
    from the composed configs' values (where no axis sets the column) and the axis values."""
    dotted = [k for k in grid.settings_keys if k.split(".")[0] in keys]
    types: dict[str, str | None] = {}

    def add(name: str, value: Any) -> None:
        col = name.replace(".", "_")
        types[col] = join(types.get(col), sql_type(value)) if col in types else sql_type(value)

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

    from estimator.estimate import ESTIMATE_KEYS, estimate
    from estimator.store.duckdb_store import arrow_schema

    est_types = {k: t for k, t in schema["estimates"].items() if k != "created_at"}
    coll_types = schema["collectives"]
    keys = ESTIMATE_KEYS
    base_parts: dict[tuple[str, ...], tuple[dict[str, Any], dict[str, str]]] = {}
    rows: list[dict[str, Any]] = []
    coll_rows: list[dict[str, Any]] = []
    for i in indices:
        key, dotted = grid.point(i)
        base = grid.bases[key]
        if key not in base_parts:  # per composed config: its flat columns and each subtree's JSON
            base_parts[key] = ({k.replace(".", "_"): v for k, v in flatten({k: base.get(k) for k in keys}).items()},
                               {k: json.dumps(base.get(k), sort_keys=True, default=str) for k in keys})
        flat_base, json_base = base_parts[key]
        cfg = with_settings(base, dotted)
        est = estimate(cfg, paths[workload_key(cfg)])
        # the stored row of Estimate.row(), built from the composed config's parts: only the
        # subtrees a point changed are flattened and encoded again
        changed = {k.split(".")[0] for k, _ in dotted}
        text = ", ".join(f'"{k}": ' + (json.dumps(est.config[k], sort_keys=True, default=str) if k in changed
                                       else json_base[k]) for k in sorted(keys))
        row = {"config_json": "{" + text + "}", "config_hash": est.config_hash, "version": __version__}
        row.update(flat_base)
        for k in changed & set(keys):
            prefix = k + "_"
            for col in [c for c in row if c.startswith(prefix) or c == k]:
                if col in flat_base:
                    del row[col]
            row.update({c.replace(".", "_"): v for c, v in flatten({k: est.config[k]}).items()})
        row.update(est.metrics)
        rows.append(row)
        for c in est.collectives:
            coll_rows.append({"config_hash": est.config_hash, **c})
    for row in rows:
        if len(row) > len(est_types) or not row.keys() <= est_types.keys():
            extra = sorted(set(row) - set(est_types))
            raise EstimatorError(f"sweep: column(s) {extra} are not in the declared schema")
    est_cols = {col: [r.get(col) for r in rows] for col in est_types}
    for col, t in est_types.items():
        if t == "VARCHAR":
            est_cols[col] = [_text(v) for v in est_cols[col]]
    coll_cols = {col: [r.get(col) for r in coll_rows] for col in coll_types}
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
