"""Benchmarks and paper-number collection for the optical fabrics (not a test: prints numbers).

    python benchmarks/optical_bench.py            # timings + paper tables (~2 min: 512-CU all-to-all)
    python benchmarks/optical_bench.py --quick    # timings only
    python benchmarks/optical_bench.py --paper    # the papers' results next to the project's (markdown)

1. ``collective_cost`` calls per second on each optical fabric (memoised closed forms: what the
   timeline pays per gradient bucket), first call (model build / schedule compile) separately.
2. Data-parallel iterations per second (``simulate_data_parallel``) on each optical fabric.
3. SiPAC vs equal-bandwidth superpod / torus2d / bcube at 512 CUs, 1 MB flows, all three patterns
   (the all-to-all baselines are priced from explicit all-pairs schedules: tens of seconds).
"""

from __future__ import annotations

import sys
import time

from estimator.fabrics.registry import make_fabric
from estimator.timeline.dataparallel import BucketPolicy, simulate_data_parallel
from estimator.timeline.job_topology import trace_profile

FABRICS = {
    "lumorph": {"nodes": 256},
    "sipac": {},
    "terarack": {},
    "opsquare": {},
    "ocs": {},
    "ocs_auto": {"name": "ocs", "topology": "auto"},
}


def timed(fn, repeat: int) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def bench_costs() -> None:
    print("## collective_cost (all_reduce, 1 MiB .. 64 MiB sizes cycling)")
    sizes = [2**20 * (1 + i % 64) for i in range(1000)]
    for label, params in FABRICS.items():
        fab = make_fabric({"name": label, **params} if "name" not in params else params)
        t0 = time.perf_counter()
        fab.collective_cost("all_reduce", 2**20, "auto")
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for s in sizes:
            fab.collective_cost("all_reduce", s, "auto")
        per = (time.perf_counter() - t0) / len(sizes)
        print(f"{label:<10} first call {first * 1e3:8.2f} ms   then {1 / per:10.0f} calls/s (algorithm=auto)")


def bench_iterations() -> None:
    print("## data-parallel iterations (ResNet-50-sized trace: 102 MB of gradients in 1 MB tensors, DDP 25 MB buckets)")
    prof = trace_profile(25_557_032 * 4, 0.1)
    pol = BucketPolicy()
    for label, params in FABRICS.items():
        fab = make_fabric({"name": label, **params} if "name" not in params else params)
        simulate_data_parallel(prof, fab, pol, 32, "auto")  # warm the memo
        per = timed(lambda fab=fab: simulate_data_parallel(prof, fab, pol, 32, "auto"), 200)
        print(f"{label:<10} {1 / per:8.0f} iterations/s")


def sipac_512() -> None:
    print("## SiPAC(8,2) vs equal-bandwidth baselines, 512 CUs, 1 MB flows (paper: 3.6-5.3x superpod, "
          "1.4-5.9x torus2d, 1.4-3.4x bcube)")
    mb = 2**20
    pats = {"incast": ("gather", 512 * mb), "broadcast": ("broadcast", mb), "all_to_all": ("all_to_all", 512 * mb)}
    eq = {
        "superpod": {"nvlink_bandwidth_Bps": 231e9, "nic_bandwidth_Bps": 25e9},
        "torus2d": {"link_bandwidth_Bps": 64e9},
        "bcube": {"node_bandwidth_Bps": 256e9},
    }
    sipac = make_fabric({"name": "sipac"})
    for name, params in eq.items():
        fab = make_fabric({"name": name, "nodes": 512, **params})
        cells = []
        for pat, (coll, m) in pats.items():
            t0 = time.perf_counter()
            theirs = fab.collective_cost(coll, m, "auto")
            ratio = theirs.time_s / sipac.collective_cost(coll, m, "auto").time_s
            cells.append(f"{pat} {ratio:6.2f}x ({theirs.algorithm}, {time.perf_counter() - t0:.1f} s)")
        print(f"{name:<9} " + "   ".join(cells))


if __name__ == "__main__":
    if "--paper" in sys.argv:
        from estimator.fabrics.optical.paper_checks import report

        print(report())
        sys.exit(0)
    bench_costs()
    bench_iterations()
    if "--quick" not in sys.argv:
        sipac_512()
