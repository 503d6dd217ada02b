"""How long pricing one collective takes: closed forms vs explicit schedules.

    python benchmarks/collectives_bench.py

Prints, per (fabric, algorithm, N): the first (cold) call, and the mean of fresh-size calls
(memo misses; each call uses a new nbytes so nothing is cached but the compiled schedule /
topology). Explicit rows build the schedule, route it and compile it on the cold call.
"""

from __future__ import annotations

import time

from estimator.fabrics.registry import make_fabric


def bench(params: dict, algorithm: str, n: int, explicit: bool, repeats: int = 2000) -> tuple[float, float]:
    fabric = make_fabric({**params, "nodes": n})
    t0 = time.perf_counter()
    fabric.collective_cost("all_reduce", 1e6, algorithm, explicit=explicit)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(repeats):
        fabric.collective_cost("all_reduce", 1e6 + i, algorithm, explicit=explicit)
    warm = (time.perf_counter() - t0) / repeats
    return cold, warm


def main() -> None:
    ideal = {"name": "ideal"}
    leaf = {"name": "nvlink_leafspine", "spine_ports": 8192}
    rows = []
    for n in (1024, 16384, 65536):
        for algo in ("ring", "double_binary_tree", "halving_doubling", "radix4"):
            rows.append(("ideal", algo, n, "closed", *bench(ideal, algo, n, False)))
        rows.append(("nvlink_leafspine", "hierarchical", n, "closed", *bench(leaf, "hierarchical", n, False)))
    for algo in ("ring", "double_binary_tree", "halving_doubling", "radix4"):
        rows.append(("ideal", algo, 1024, "explicit", *bench(ideal, algo, 1024, True, 200)))
    rows.append(("nvlink_leafspine", "hierarchical", 1024, "explicit", *bench(leaf, "hierarchical", 1024, True, 200)))
    rows.append(("nvlink_leafspine", "double_binary_tree", 1024, "explicit",
                 *bench(leaf, "double_binary_tree", 1024, True, 200)))
    f = make_fabric({"name": "ideal", "nodes": 65536})
    f.collective_cost("all_reduce", 1e6, "ring")
    t0 = time.perf_counter()
    for _ in range(20000):
        f.collective_cost("all_reduce", 1e6, "ring")
    hit = (time.perf_counter() - t0) / 20000
    print(f"memoised repeat call (ideal ring N=65536): {hit * 1e6:.2f} us ({1 / hit:.0f} calls/s)")
    print(f"{'fabric':<18}{'algorithm':<20}{'N':>7} {'mode':<9}{'cold_ms':>10}{'per_call_us':>13}{'calls/s':>11}")
    for fab, algo, n, mode, cold, warm in rows:
        print(f"{fab:<18}{algo:<20}{n:>7} {mode:<9}{cold * 1e3:>10.3f}{warm * 1e6:>13.2f}{1 / warm:>11.0f}")


if __name__ == "__main__":
    main()
