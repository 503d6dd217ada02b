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

from estimator.commands.sweep import evaluate_batch
from estimator.estimate import _resolve, estimate, workload_path
from estimator.store.duckdb_store import write_estimates
from estimator.sweep import grid
from estimator.sweep.runner import run_batches


def make_points(n: int) -> list[dict]:
    bws = [50e9 + 5e9 * i for i in range(50)]
    alphas = [0.5e-6 + 0.1e-6 * i for i in range(10)]
    caps = [2**20 * (5 + 5 * i) for i in range(max(1, n // 500))]
    pts = grid.expand(
        {
            "model": ["resnet50"],
            "fabric": ["ideal"],
            "fabric.nodes": [1024],
            "fabric.bandwidth_Bps": bws,
            "fabric.alpha_s": alphas,
            "parallelism.bucket_cap_bytes": caps,
        }
    )
    return pts[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=5000)
    ap.add_argument("--cpus", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    configs = grid.compose_points(make_points(args.points))
    path = str(_resolve(workload_path(configs[0])).resolve())
    estimate(configs[0], path)  # warm the workload/profile caches, as a sweep worker would

    t0 = time.perf_counter()
    for c in configs:
        estimate(c, path)
    single = time.perf_counter() - t0
    print(f"single process: {len(configs)} estimates in {single:.2f} s = {len(configs) / single:,.0f} estimates/s")

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "bench.duckdb"
        t0 = time.perf_counter()
        n = 0
        items = [(c, path) for c in configs]
        for batch in run_batches(evaluate_batch, items, {"address": "local", "num_cpus": args.cpus}, batch_size=250):
            n += write_estimates(store, batch)
        ray_s = time.perf_counter() - t0
    print(
        f"ray sweep ({args.cpus} CPUs, incl. Ray start-up and DuckDB writes): {n} estimates in {ray_s:.2f} s "
        f"= {n / ray_s:,.0f} estimates/s"
    )


if __name__ == "__main__":
    main()
