"""A sweep batch's columns equal the per-estimate rows (``Estimate.row()`` + ``config_json``) for
grids the recorded-rows test does not cover: settings of whole subtrees (a dict value), of a
key that is None in the composed config, of nested device keys, several composed configs in one
batch, and an axis that changes nothing the estimate reads."""

from __future__ import annotations

import json

import pytest

from estimator.commands.sweep import plan
from estimator.estimate import estimate
from estimator.sweep import columns

BASE = ["model=resnet50"]
GRIDS = {
    "leaf settings, two fabrics": {"fabric": ["ideal", "nvlink_leafspine"], "fabric.nodes": [8, 64],
                                   "batch_size": [None, 16], "fabric.alpha_s": [1e-6, 2.5e-6],
                                   "device.compute_efficiency.fp16.conv": [0.3, 0.4]},
    "a subtree set to a dict": {"fabric": ["ideal"], "fabric.nodes": [16],
                                "device.compute_efficiency.fp16": [{"conv": 0.3, "matmul": 0.7},
                                                                   {"matmul": 0.75, "conv": 0.35}],
                                "parallelism.bucket_cap_bytes": [2**20, 2**24]},
    "zip and a key outside the estimate": {"fabric": ["ideal"], "fabric.nodes": [8, 32],
                                           "parallelism.bucketing": ["ddp", "horovod"],
                                           "precision": ["amp", "fp32"], "bytes": [1.0, 2.0]},
}


def expected(cfg: dict, path: str, schema: dict) -> tuple[dict, list[dict]]:
    est = estimate(cfg, path)
    row = {"config_json": json.dumps(est.config, sort_keys=True, default=str), **est.row()}
    types = {k: t for k, t in schema["estimates"].items() if k != "created_at"}
    assert set(row) <= set(types)
    out = {c: row.get(c) for c in types}
    out = {c: (columns._text(v) if types[c] == "VARCHAR" else v) for c, v in out.items()}
    colls = [{c: ({"config_hash": est.config_hash, **r}).get(c) for c in schema["collectives"]} for r in est.collectives]
    return out, colls


@pytest.mark.parametrize("name", list(GRIDS))
def test_batch_columns_equal_per_estimate_rows(name):
    grid = GRIDS[name]
    sweep = {"grid": grid}
    if name.startswith("zip"):
        sweep["zip"] = [["parallelism.bucketing", "precision"]]
    p = plan(sweep, BASE, used={})
    schema = columns.estimate_schema(p.grid)
    order = list(range(p.grid.size))[::-1]  # not in grid order, several composed configs per batch
    tables = columns.estimate_batch(p.grid, order, p.paths, schema)
    rows, colls = tables["estimates"].to_pylist(), tables["collectives"].to_pylist()
    assert len(rows) == p.grid.size
    want_colls = []
    for row, i in zip(rows, order, strict=True):
        cfg = p.grid.config(i)
        want, c = expected(cfg, p.paths[columns.workload_key(cfg)], schema)
        assert row == want
        want_colls.extend(c)
    assert colls == want_colls
    assert len({r["config_hash"] for r in rows}) == p.grid.size // (2 if name.startswith("zip") else 1)
