"""Sweeps store the same rows as before lazy grids and columnar batches (issue #13).

``tests/data/sweep_rows.json`` holds the rows (``created_at`` excluded) and column types that
main@f7938f7 stored for GRID below, computed from a ResNet50 trace; the test runs when the
repository's trace has the content digest (FLOPs, bytes, shapes: ``capture.content_digest``, timings
excluded) of a capture the rows are known to hold for.
Independently of that file, a sweep's rows are compared with the rows the per-estimate path
(``estimate()`` + ``write_estimates``, which infers types from the values) stores for the same
points, in process and through Ray.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from estimator.commands.sweep import plan, run_sweep
from estimator.estimate import COLLECTIVE_TYPES, METRIC_TYPES, estimate, workload_path
from estimator.store.duckdb_store import write_estimates
from estimator.sweep import grid as grid_mod
from estimator.workloads import io
from estimator.workloads.capture import content_digest

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "data" / "sweep_rows.json"
GRID = {"fabric": ["ideal", "nvlink_leafspine", "lumorph"], "fabric.nodes": [8, 64],
        "parallelism.bucketing": ["ddp", "horovod"], "precision": ["amp", "fp32"]}
BASE = ["model=resnet50", "device=a100"]


def stored(store: Path) -> dict:
    con = duckdb.connect(str(store), read_only=True)
    out = {}
    for table, order in (("estimates", "config_hash"), ("collectives", "config_hash, idx")):
        cur = con.execute(f"SELECT * EXCLUDE (created_at) FROM {table} ORDER BY {order}" if table == "estimates"
                          else f"SELECT * FROM {table} ORDER BY {order}")
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
        types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?",
                                 [table]).fetchall())
        out[table] = {"types": {c: types[c] for c in cols}, "rows": rows}
    con.close()
    return out


def sweep_rows(tmp_path: Path, name: str, in_process: bool) -> dict:
    store = tmp_path / f"{name}.duckdb"
    ray_cfg = {"address": "local", "num_cpus": 2, "in_process_below": 10**9 if in_process else 0, "batch_size": 5}
    res = run_sweep(name, {"kind": "estimate", "grid": GRID}, BASE, str(store), ray_cfg)
    assert res["written"] == 24 and res["ray"] is (not in_process)
    return stored(store)


@pytest.fixture(scope="module")
def per_estimate_rows(tmp_path_factory) -> dict:
    """The rows of the per-estimate path (whole Estimate objects, types inferred by value)."""
    store = tmp_path_factory.mktemp("ref") / "ref.duckdb"
    configs = grid_mod.compose_points(grid_mod.expand(GRID), BASE)
    plan({"grid": GRID}, BASE)  # captures the trace when missing
    path = str(workload_path(configs[0]).resolve())
    write_estimates(store, [estimate(c, path) for c in configs])
    return stored(store)


def test_in_process_sweep_matches_per_estimate_rows(tmp_path, per_estimate_rows):
    assert sweep_rows(tmp_path, "local", in_process=True) == per_estimate_rows


def test_ray_sweep_matches_per_estimate_rows(tmp_path, per_estimate_rows):
    assert sweep_rows(tmp_path, "ray", in_process=False) == per_estimate_rows


def test_rows_match_the_recorded_rows_from_before(per_estimate_rows):
    recorded = json.loads(FIXTURE.read_text())
    trace = REPO / "traces" / "resnet50.workload.json"
    if content_digest(io.load(trace)) not in recorded["_workload_content_digests"]:
        pytest.skip("traces/resnet50.workload.json has other FLOPs/bytes than the captures the rows were recorded for")
    now = since_recording(json.loads(json.dumps(per_estimate_rows, default=str)))
    assert now["estimates"] == recorded["estimates"]
    colls = now["collectives"]
    assert colls["types"] == recorded["collectives"]["types"]
    assert len(colls["rows"]) == recorded["collectives"]["count"]
    digest = hashlib.sha256(json.dumps(colls["rows"], sort_keys=True).encode()).hexdigest()
    assert digest == recorded["collectives"]["sha256"]


# Config keys added after the recording (they change config_json / config_hash and add a column,
# not any result): device.memory_bytes (device capacity for large-model layouts, issue #14);
# model.input and parallelism.input (the JPEG input pipeline: no host without a system preset, so
# no cap here) and fabric.nccl_version / gpu_nic_path / nvls_latency_v219_s (defaults keep NCCL
# 2.18's latency and LL128 across nodes), issue #23; parallelism.jitter_cv_by_input (the straggler cv
# by model.input: ResNet-50's imagenet_jpeg keeps the recorded 0.025), h44; device.memory_visible_ratio /
# memory_reserved_bytes / allocator_fragmentation (the usable capacity of large-model layouts), h83.
ADDED_SINCE_RECORDING = {"device": ["memory_bytes", "memory_visible_ratio", "memory_reserved_bytes",
                                    "allocator_fragmentation"], "model": ["input"], "parallelism": ["input", "jitter_cv_by_input"],
                         "fabric": ["nccl_version", "gpu_nic_path", "nvls_latency_v219_s"]}
# Nested config entries added since (path -> its flattened columns): A100's explicit bf16 efficiencies
# (issue #23: bf16 no longer borrows fp16's silently; the values are fp16's, this grid runs amp and fp32).
ADDED_PATHS = {("device", "compute_efficiency", "bf16"): ["device_compute_efficiency_bf16_conv",
                                                          "device_compute_efficiency_bf16_matmul",
                                                          *(f"device_compute_efficiency_bf16_attention_{k}"
                                                            for k in ("triton", "flash2", "flash1"))],
               # the Triton / FlashAttention-1 / -2 kernels' A100 rates (ninth stop); ResNet-50 has no attention op
               **{("device", "compute_efficiency", "fp16", f"attention_{k}"): [
                   f"device_compute_efficiency_fp16_attention_{k}"] for k in ("triton", "flash2", "flash1")}}
# Config values changed after the recording that change no result of this grid (ResNet-50, whose
# GEMM is one small fc layer): the BERT-calibrated GEMM efficiencies re-fitted on branch `kernels`
# when the capture started pricing GPU kernel bytes. Path in the config -> (recorded, current).
CHANGED_SINCE_RECORDING = {
    ("device", "compute_efficiency", "fp16", "matmul"): (0.771, 0.676),
    ("device", "compute_efficiency", "tf32", "matmul"): (0.893, 0.768),
    ("fabric", "spine_ports"): (32, 0),  # nvlink_leafspine rows: spines sized from nodes by default
    ("parallelism", "sync_jitter_cv"): (0.025, None),  # null = jitter_cv_by_input's (ResNet-50: the same 0.025)
}
# Column types those changes moved (a column of nulls is stored as VARCHAR): column -> (recorded, current).
TYPES_CHANGED_SINCE_RECORDING = {"parallelism_sync_jitter_cv": ("DOUBLE", "VARCHAR")}


def since_recording(rows: dict) -> dict:
    """``rows`` as the recording's config would have stored them: keys added since dropped from
    config_json and the columns, config_hash mapped to the recorded one (matched by config_json)."""
    recorded = json.loads(FIXTURE.read_text())["estimates"]["rows"]
    old_hash = {r["config_json"]: r["config_hash"] for r in recorded}
    dropped = {f"{group}_{key}" for group, keys in ADDED_SINCE_RECORDING.items() for key in keys}
    dropped |= {col for cols in ADDED_PATHS.values() for col in cols}
    remap = {}
    est = rows["estimates"]
    for r in est["rows"]:
        cfg = json.loads(r["config_json"])
        for group, keys in ADDED_SINCE_RECORDING.items():
            for key in keys:
                value = cfg.get(group, {}).pop(key, None)
                if isinstance(value, dict):  # a nested key is stored as one column per sub-key
                    dropped |= {f"{group}_{key}_{sub}" for sub in value}
        for path in ADDED_PATHS:
            parent = cfg
            for key in path[:-1]:
                parent = parent.get(key, {})
            parent.pop(path[-1], None)
        for path, (then, now) in CHANGED_SINCE_RECORDING.items():
            parent = cfg
            for key in path[:-1]:
                parent = parent[key]
            if path[-1] not in parent:  # a key only some fabrics have
                continue
            assert parent[path[-1]] == now and r["_".join(path)] == now, path  # the change is what it says
            parent[path[-1]] = r["_".join(path)] = then
        r["config_json"] = json.dumps(cfg)
        remap[r["config_hash"]] = old_hash.get(r["config_json"], r["config_hash"])
        r["config_hash"] = remap[r["config_hash"]]
        for col in [c for c in r if c in dropped]:
            r.pop(col)
    est["types"] = {c: t for c, t in est["types"].items() if c not in dropped}
    for col, (then, now) in TYPES_CHANGED_SINCE_RECORDING.items():
        assert est["types"][col] == now, col  # the change is what it says
        est["types"][col] = then
    est["rows"].sort(key=lambda r: r["config_hash"])
    colls = rows["collectives"]["rows"]
    for r in colls:
        r["config_hash"] = remap.get(r["config_hash"], r["config_hash"])
    colls.sort(key=lambda r: (r["config_hash"], r["idx"]))
    return rows


def test_lazy_grid_configs_equal_composed_points():
    g = {"fabric": ["ideal", "nvlink_leafspine"], "fabric.nodes": [8, 16, 32], "device": ["a100", "h100"],
         "parallelism.bucket_cap_bytes": [1048576, 2097152]}
    base = ["fabric.alpha_s=1e-6", "precision=fp32"]
    composed = grid_mod.compose_points(grid_mod.expand(g), base)
    lazy = grid_mod.Grid(g, None, base)
    assert len(lazy) == len(composed) == 24
    assert [json.dumps(c, sort_keys=True) for c in lazy.configs(range(len(lazy)))] == \
        [json.dumps(c, sort_keys=True) for c in composed]
    assert len(lazy.bases) == 4  # composed once per distinct set of group choices
    # a point's config shares what it does not change with the composed config
    first = lazy.config(0)
    assert first["device"] is lazy.bases[lazy.point(0)[0]]["device"]
    assert first["fabric"] is not lazy.bases[lazy.point(0)[0]]["fabric"]


def test_scoped_configs_cover_every_distinct_fabric():
    g = grid_mod.Grid({"fabric.nodes": [8, 16], "fabric.alpha_s": [1e-6, 2e-6], "parallelism.bucket_cap_bytes": [1, 2, 3]})
    fabrics = {json.dumps(c["fabric"], sort_keys=True) for c in g.scoped_configs(("fabric",))}
    assert len(fabrics) == 4 and len(list(g.scoped_configs(("parallelism",)))) == 3


def test_a_bad_value_deep_in_a_grid_is_caught_without_visiting_points():
    from estimator.errors import EstimatorError

    with pytest.raises(EstimatorError, match="alpha_s"):
        plan({"grid": {"fabric.nodes": list(range(8, 2000, 8)), "fabric.alpha_s": [1e-6] * 50 + [-1.0]}}, BASE,
             capture=False)


def test_declared_metric_types_cover_every_metric():
    cfg = grid_mod.compose_points([{}], ["model=resnet50", "fabric=ideal", "fabric.nodes=8"])[0]
    plan({"grid": {"fabric.nodes": [8]}}, BASE)
    est = estimate(cfg)
    assert set(est.metrics) <= set(METRIC_TYPES)
    assert {k for c in est.collectives for k in c} | {"config_hash"} == set(COLLECTIVE_TYPES)


def test_sweep_grid_override_replaces_the_grid(tmp_path):
    store = tmp_path / "g.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "sweep", "sweep.grid={fabric:[ideal],fabric.nodes:[8,16,24]}",
                          f"store={store}", "output=json"], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["points"] == 3
    con = duckdb.connect(str(store), read_only=True)
    assert con.execute("SELECT fabric_name, fabric_nodes FROM estimates ORDER BY fabric_nodes").fetchall() == \
        [("ideal", 8), ("ideal", 16), ("ideal", 24)]
    con.close()
    one_axis = subprocess.run([sys.executable, "-m", "estimator.cli", "sweep", "sweep.grid.fabric=[ideal]",
                               f"store={tmp_path / 'h.duckdb'}", "output=json"], capture_output=True, text=True,
                              cwd=REPO, env=env, timeout=300)
    assert one_axis.returncode == 0, one_axis.stderr
    assert json.loads(one_axis.stdout)["points"] == 6  # conf/sweep/resnet50_scaling: 6 sizes, now one fabric


def test_estimate_command_imports_no_store_or_ray(tmp_path):
    """`estimator estimate` (no write=true) loads neither DuckDB, Ray, Polars nor torch, and with a
    cached composition not even Hydra."""
    code = ("import sys\nfrom estimator import cli\n"
            "cli.run(['estimate', 'model=resnet50', 'fabric=ideal', 'fabric.nodes=8', 'output=json'])\n"
            "print(sorted(m for m in ('duckdb', 'ray', 'polars', 'torch', 'hydra') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ESTIMATOR_CACHE": str(tmp_path / "cache")}
    plan({"grid": {"fabric.nodes": [8]}}, BASE)  # the trace exists (captured when missing)
    loaded = []
    for _ in range(2):  # the first run composes with Hydra and caches it
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        loaded.append(json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"')))
    assert loaded == [["hydra"], []]
    assert list((tmp_path / "cache" / "compose").glob("*.json"))
