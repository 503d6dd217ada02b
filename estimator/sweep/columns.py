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

import hashlib
import json
import operator
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


def _encode(value: Any) -> str:
    """A subtree as ``json.dumps(tree, sort_keys=True, default=str)`` encodes it (``config_json``)."""
    return json.dumps(value, sort_keys=True, default=str)


def _encode_compact(value: Any) -> str:
    """A subtree as :func:`estimator.config.config_hash` encodes it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


class _Base:
    """What the points of one composed config share in a batch: its columns that no setting
    changes (converted to their declared types once), each unchanged subtree's two JSON encodings,
    and its device and policy objects when no setting changes them."""

    def __init__(self, base: dict[str, Any], keys: Sequence[str], changed: set[str], settings: Sequence[str],
                 scalar_values: bool, types: dict[str, str]) -> None:
        from estimator.estimate import bucket_policy, device_profile
        from estimator.fabrics.registry import shared_fabric

        self.text = {k: _encode(base.get(k)) for k in keys if k not in changed}
        self.compact = {k: _encode_compact(base.get(k)) for k in keys if k not in changed}
        flat = {c.replace(".", "_"): v for c, v in flatten({k: base.get(k) for k in keys}).items()}
        # a setting of a scalar over a scalar changes only its own column: the subtree's other
        # columns stay the composed config's; otherwise a changed subtree is flattened per point
        self.leaf_only = scalar_values and all(_is_leaf(base, k) for k in settings)
        kept = {c: v for c, v in flat.items()
                if not any(c == k or c.startswith(k + "_") for k in changed)} if not self.leaf_only else \
            {c: v for c, v in flat.items() if c not in {k.replace(".", "_") for k in settings}}
        self.const = {c: (_text(v) if types.get(c) == "VARCHAR" else v) for c, v in kept.items()}
        self.fabric = shared_fabric(base.get("fabric") or {}) if "fabric" not in changed else None
        self.device = device_profile(base.get("device")) if "device" not in changed else None
        self.policy = bucket_policy(base.get("parallelism")) if "parallelism" not in changed else None


def _build(top: str, text: str) -> Any:
    """The fabric, device or bucket policy of an encoded subtree (None for other keys)."""
    from estimator.estimate import device_from_json, policy_from_json
    from estimator.fabrics.registry import shared_fabric_json

    make = {"fabric": shared_fabric_json, "device": device_from_json, "parallelism": policy_from_json}.get(top)
    return make(text) if make else None


def _is_leaf(base: dict[str, Any], dotted: str) -> bool:
    node: Any = base
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return not isinstance(node, dict | list | tuple)


def estimate_batch(grid: Grid, indices: Sequence[int], paths: dict[tuple, str],
                   schema: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Estimate the points ``indices`` of ``grid``; return ``{table: pyarrow.Table}`` with the
    declared ``schema`` (``estimates`` without ``created_at``, which the driver sets).

    The rows are :meth:`estimator.estimate.Estimate.row` plus ``config_json`` for each point, built
    column by column: the columns and JSON encodings of what no setting changes come from the
    composed config once per batch; per point only the changed subtrees are encoded (once for
    ``config_json``, the fabric and the policy, once compactly for ``config_hash``)."""
    import pyarrow as pa

    from estimator.estimate import (
        ESTIMATE_KEYS,
        estimate_with,
        workload_state,
    )
    from estimator.fabrics.registry import shared_fabric_json
    from estimator.store.duckdb_store import arrow_schema

    est_types = {k: t for k, t in schema["estimates"].items() if k != "created_at"}
    coll_types = schema["collectives"]
    coll_keys = [c for c in coll_types if c != "config_hash"]
    pick = operator.itemgetter(*coll_keys) if len(coll_keys) > 1 else (lambda r: (r[coll_keys[0]],))
    keys = sorted(ESTIMATE_KEYS)
    changed = {k.split(".")[0] for k in grid.settings_keys} & set(keys)
    varying = [k for k in grid.settings_keys if k.split(".")[0] in changed]
    scalar_values = not any(isinstance(v, dict | list | tuple) for axis in grid.axes for e in axis
                            for k, v in e.items() if k in varying)
    n = len(indices)
    cols: dict[str, list[Any]] = {c: [None] * n for c in est_types}
    points = [grid.point(i) for i in indices]
    bases: dict[tuple[str, ...], _Base] = {}
    run_start = 0
    for j in range(n + 1):  # the unchanged columns, one slice per run of points of one composed config
        if j == n or (j and points[j][0] != points[run_start][0]):
            key = points[run_start][0]
            if key not in bases:
                bases[key] = _Base(grid.bases[key], keys, changed, varying, scalar_values, est_types)
            for c, v in bases[key].const.items():
                if c not in cols:
                    raise EstimatorError(f"sweep: column(s) {[c]} are not in the declared schema")
                cols[c][run_start:j] = [v] * (j - run_start)
            run_start = j
    states: dict[str, tuple[str, float]] = {}
    encoded: dict[tuple, tuple[str, str, Any]] = {}
    hashes: list[str] = []
    coll_rows: list[tuple[Any, ...]] = []
    texts = cols["config_json"]
    version = cols["version"]
    for j, (key, dotted) in enumerate(points):
        b = bases[key]
        cfg = with_settings(grid.bases[key], dotted)
        sub = {k: cfg.get(k) for k in ESTIMATE_KEYS}
        text, compact = dict(b.text), dict(b.compact)
        built = {"fabric": b.fabric, "device": b.device, "parallelism": b.policy}
        for k in changed:
            # a subtree's encodings (and its fabric/device/policy) once per distinct setting of it
            # in the batch; scalar settings only (1 == 1.0 == True as keys: the type is part of it)
            memo_key = (key, k, tuple((name, type(v), v) for name, v in dotted if name.split(".")[0] == k)) \
                if scalar_values else None
            hit = encoded.get(memo_key) if memo_key else None
            if hit is None:
                t = _encode(sub[k])
                hit = (t, _encode_compact(sub[k]), _build(k, t if sub[k] else "{}"))
                if memo_key:
                    encoded[memo_key] = hit
            text[k], compact[k], obj = hit
            if k in built:
                built[k] = obj
        h = hashlib.sha256(("{" + ",".join(f'"{k}":{compact[k]}' for k in keys) + "}").encode()).hexdigest()[:16]
        texts[j] = "{" + ", ".join(f'"{k}": {text[k]}' for k in keys) + "}"
        version[j] = __version__
        hashes.append(h)
        fabric, device, policy = built["fabric"], built["device"], built["parallelism"]
        if fabric is None:  # changed by a setting that is not a scalar (no memo)
            fabric = shared_fabric_json(text["fabric"] if sub["fabric"] else "{}")
        path = paths[workload_key(cfg)]
        state = states.get(path) or states.setdefault(path, workload_state(path))
        metrics, colls = estimate_with(sub, fabric, device, policy, path, state)
        own = ((k.replace(".", "_"), v) for k, v in dotted if k.split(".")[0] in changed) if b.leaf_only else \
            ((c.replace(".", "_"), v) for k in changed for c, v in flatten({k: sub[k]}).items())
        for c, v in (*own, *metrics.items()):  # metrics last: a metric named like a column wins (as in a row dict)
            t = est_types.get(c)
            if t is None:
                raise EstimatorError(f"sweep: column(s) {[c]} are not in the declared schema")
            cols[c][j] = _text(v) if t == "VARCHAR" else v
        try:
            coll_rows.extend((h, *pick(r)) for r in colls)
        except KeyError:  # a row without some column (None there, as in a row dict)
            coll_rows.extend((h, *[r.get(c) for c in coll_keys]) for r in colls)
    cols["config_hash"] = hashes
    coll_cols = dict(zip(coll_types, map(list, zip(*coll_rows, strict=True)), strict=True)) if coll_rows else \
        {c: [] for c in coll_types}
    return {"estimates": pa.Table.from_pydict(cols, schema=arrow_schema(est_types)),
            "collectives": pa.Table.from_pydict(coll_cols, schema=arrow_schema(coll_types))}


def workload_key(cfg: dict[str, Any]) -> tuple:
    """What decides a point's workload file (see :func:`estimator.estimate.workload_path`)."""
    return cfg.get("workload"), (cfg.get("model") or {}).get("name"), cfg.get("traces_dir")


def write_batches(store: str, batches: list[dict[str, Any]], replace: bool) -> int:
    """Concatenate worker batches and store them in one transaction; returns the estimates written."""
    import pyarrow as pa

    from estimator.store.duckdb_store import BULK_WRITE, write_tables

    est = pa.concat_tables([b["estimates"] for b in batches])
    colls = pa.concat_tables([b["collectives"] for b in batches])
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    est = est.add_column(0, "created_at", pa.array([now] * len(est), type=pa.string()))
    write_tables(store, {"estimates": ("config_hash", est), "collectives": ("config_hash", colls)}, replace,
                 BULK_WRITE)
    return len(est)
