"""The NCCL collective model: validation table, what `auto` picks, and speed at 1,024 GPUs.

    python benchmarks/nccl_bench.py [--points 200]

1. every row of validation/nccl_tests.csv: predicted vs measured busbw, error, role; mean |error|
   of calibration and held-out rows apart;
2. the (algorithm, protocol) `algorithm=auto` picks at 1 MiB / 64 MiB / 1 GiB on DGX A100 x8,
   DGX H100 x8 and 4-node DGX A100;
3. in-process time of a ResNet50 data-parallel estimate on system=dgx_h100 at 1,024 GPUs (distinct
   DDP bucket caps so no collective price is served from the memo) and of one NCCL collective price.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import estimator
from estimator.collectives.busbw import bus_factor
from estimator.estimate import estimate, workload_path

ROOT = Path(__file__).resolve().parents[1]


def fabric(system: str, gpus: int, *extra: str):
    return estimator.make_fabric(estimator.resolve_config([f"system={system}", f"fabric.nodes={gpus}", *extra])["fabric"])


def validation_table() -> None:
    rows = list(csv.DictReader((ROOT / "validation" / "nccl_tests.csv").open()))
    errs: dict[str, list[float]] = {"calibration": [], "holdout": []}
    print(f"{'id':30} {'role':11} {'pick':14} {'pred':>7} {'meas':>7} {'err%':>7}")
    for r in rows:
        f = fabric(r["system"], int(r["gpus"]), *r["overrides"].split())
        m = float(r["bytes"])
        c = f.collective_cost(r["collective"], m, "auto")
        pred = m / c.time_s * bus_factor(r["collective"], c.nodes) / 1e9
        meas = float(r["measured_busbw_GBps"])
        err = 100 * (pred - meas) / meas
        errs[r["role"]].append(abs(err))
        print(f"{r['id']:30} {r['role']:11} {c.algorithm + '/' + c.protocol:14} {pred:7.1f} {meas:7.1f} {err:+7.1f}")
    for role, e in errs.items():
        print(f"{role}: {len(e)} rows, mean |error| {sum(e) / len(e):.1f} %, max {max(e):.1f} %")


def auto_picks() -> None:
    for system, gpus in (("dgx_a100", 8), ("dgx_h100", 8), ("dgx_a100", 32)):
        f = fabric(system, gpus)
        picks = []
        for m in (2**20, 2**26, 2**30):
            c = f.collective_cost("all_reduce", m, "auto")
            picks.append(f"{m >> 20} MiB: {c.algorithm}/{c.protocol} "
                         f"{m / c.time_s * bus_factor('all_reduce', gpus) / 1e9:.0f} GB/s")
        print(f"{system} x{gpus}: " + "; ".join(picks))


def speed(points: int) -> None:
    base = ["model=resnet50", "system=dgx_h100", "fabric.nodes=1024"]
    configs = [estimator.resolve_config([*base, f"parallelism.bucket_cap_bytes={2**20 * (5 + i)}"])
               for i in range(points)]
    path = str(workload_path(configs[0]).resolve())
    estimate(configs[0], path)  # warm workload/profile caches, as a sweep worker would
    t0 = time.perf_counter()
    for c in configs[1:]:
        estimate(c, path)
    per = (time.perf_counter() - t0) / max(1, points - 1)
    print(f"estimate resnet50 system=dgx_h100 fabric.nodes=1024: {per * 1e3:.2f} ms per estimate "
          f"({points - 1} distinct points)")
    f = fabric("dgx_h100", 1024)
    sizes = [1e6 + 17 * i for i in range(20000)]
    t0 = time.perf_counter()
    for m in sizes:
        f.collective_cost("all_reduce", m, "auto")
    print(f"one NCCL all-reduce price at 1,024 GPUs (auto over algorithms x protocols): "
          f"{(time.perf_counter() - t0) / len(sizes) * 1e6:.1f} us")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=200)
    args = ap.parse_args()
    validation_table()
    print()
    auto_picks()
    print()
    speed(args.points)


if __name__ == "__main__":
    main()
