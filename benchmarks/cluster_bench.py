"""Benchmark the cluster simulation: a 10,000-job trace on a 4,096-GPU cluster.

    python benchmarks/cluster_bench.py            # every case below, 10,000 jobs
    python benchmarks/cluster_bench.py --jobs 2000 --quick

Target (issue 25): 10,000 jobs on 4,096 GPUs in <= 60 s on 2 cores. The simulation runs on one
core; this prints CPU seconds (``time.process_time``: what the run costs, whatever else the machine
runs) and wall seconds, the load average, and how much the memoised pricing saves: iteration
prices looked up vs distinct timelines simulated (a job's price is memoised by model, size,
placement factor and stretch, i.e. placement shape and sharing set). Timings on a shared machine
are noisy: compare the cases' ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from estimator.cluster import simulate_cluster  # noqa: E402
from estimator.config import compose, to_container  # noqa: E402

LEAF_SPINE = ["fabric=custom", "fabric.topology=topologies/leafspine_4to1.yaml"]
CASES = {
    "fat tree, packed, independent": ["fabric=fattree"],
    "4:1 leaf-spine, packed, independent": LEAF_SPINE,
    "4:1 leaf-spine, random, aligned": [*LEAF_SPINE, "cluster.placement=random", "cluster.phases=aligned"],
    "4:1 leaf-spine, random, independent": [*LEAF_SPINE, "cluster.placement=random"],
    "4:1 leaf-spine, random, interleaved": [*LEAF_SPINE, "cluster.placement=random", "cluster.phases=interleaved"],
    "4:1 leaf-spine, random, backfill": [*LEAF_SPINE, "cluster.placement=random", "cluster.scheduler=backfill"],
    "OCS, circuits per job": ["fabric=ocs", "fabric.topology=ring"],
}
QUICK = ("fat tree, packed, independent", "4:1 leaf-spine, random, independent", "OCS, circuits per job")


def run(overrides: list[str], jobs: int, gpus: int) -> dict:
    cfg = to_container(compose([*overrides, f"fabric.nodes={gpus}", f"cluster.jobs={jobs}", "cluster.load=0.95"]))
    cpu, wall = time.process_time(), time.perf_counter()
    r = simulate_cluster(cfg, progress=False).run
    return {**r, "cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--gpus", type=int, default=4096)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.jobs} jobs on {args.gpus} GPUs, "
          "offered load 0.95")
    print(f"{'case':<40} {'cpu_s':>7} {'wall_s':>7} {'slowed':>6} {'sd_mean':>7} {'lookups':>9} {'timelines':>9}")
    for name, overrides in CASES.items():
        if args.quick and name not in QUICK:
            continue
        r = run(overrides, args.jobs, args.gpus)
        print(f"{name:<40} {r['cpu_s']:>7.1f} {r['wall_s']:>7.1f} {r['jobs_slowed']:>6} {r['slowdown_mean']:>7.3f} "
              f"{r['price_lookups']:>9} {r['timelines']:>9}", flush=True)


if __name__ == "__main__":
    main()
