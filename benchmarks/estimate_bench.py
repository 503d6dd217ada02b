"""Estimates per second for ResNet50 data parallel on 1024 GPUs: one process vs a Ray sweep.

    python benchmarks/estimate_bench.py [--points 5000] [--cpus 2]

Both paths evaluate the same grid of distinct points (ideal switch at 1024 GPUs, varying
bandwidth, α and DDP bucket cap) so no result is served from a cache; the Ray path includes
task dispatch and writing every row to a scratch DuckDB store, as `estimator sweep` does.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from estimator.commands.sweep import run_sweep
from estimator.estimate import estimate, workload_path
from estimator.sweep import grid


def make_grid(n: int) -> dict:
    return {
        "model": ["resnet50"],
        "fabric": ["ideal"],
        "fabric.nodes": [1024],
        "fabric.bandwidth_Bps": [50e9 + 5e9 * i for i in range(50)],
        "fabric.alpha_s": [0.5e-6 + 0.1e-6 * i for i in range(10)],
        "parallelism.bucket_cap_bytes": [2**20 * (5 + 5 * i) for i in range(max(1, n // 500))],
    }


def make_points(n: int) -> list[dict]:
    return grid.expand(make_grid(n))[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=5000)
    ap.add_argument("--cpus", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    configs = grid.compose_points(make_points(args.points))
    path = str(workload_path(configs[0]).resolve())
    estimate(configs[0], path)  # warm the workload/profile caches, as a sweep worker would

    t0 = time.perf_counter()
    for c in configs:
        estimate(c, path)
    single = time.perf_counter() - t0
    print(f"single process: {len(configs)} estimates in {single:.2f} s = {len(configs) / single:,.0f} estimates/s")

    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "bench.duckdb")
        ray_cfg = {"address": "local", "num_cpus": args.cpus, "batch_size": 250}
        t0 = time.perf_counter()
        res = run_sweep("bench", {"kind": "estimate", "grid": make_grid(args.points)}, [], store, ray_cfg)
        ray_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = run_sweep("bench", {"kind": "estimate", "grid": make_grid(args.points)}, [], store, ray_cfg)
        resume_s = time.perf_counter() - t0
    n = res["written"]
    print(
        f"ray sweep ({args.cpus} CPUs; the whole `estimator sweep` path: compose + validate + Ray start-up + "
        f"DuckDB writes): {n} estimates in {ray_s:.2f} s = {n / ray_s:,.0f} estimates/s"
    )
    print(f"re-run of the same sweep (all {again['skipped']} points skipped from the store): {resume_s:.2f} s")


if __name__ == "__main__":
    main()
