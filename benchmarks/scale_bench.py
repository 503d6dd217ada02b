"""First-call cost of one all-reduce (and of ``algorithm=auto``) per fabric at 1,024 / 16,384 / 65,536 GPUs.

    python benchmarks/scale_bench.py [--sizes 1024,16384,65536] [--timeout 120] [--runs 3]

Every case runs in a fresh subprocess (nothing cached, nothing shared): it builds the fabric and
prices one 64 MiB all-reduce with the default algorithm (``default``), ``auto``, or the default
algorithm's explicit schedule (``schedule``: ``explicit=True``, sizes up to 16,384 only). Printed: the
minimum over ``--runs`` runs of the wall time of the first call, and the child's peak RSS
(``ru_maxrss``, includes the interpreter + numpy, about 40 MB). A case that exceeds ``--timeout``
prints ``>timeout``. Sizes a fabric cannot take are rounded to the nearest valid one (shown).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from estimator.fabrics.registry import make_fabric
params, algorithm = json.loads(sys.argv[1]), sys.argv[2]
fabric = make_fabric(params)
t0 = time.perf_counter()
if algorithm == "schedule":  # the explicit schedule of the default algorithm, priced step by step
    cost = fabric.collective_cost("all_reduce", 64 * 2**20, "default", explicit=True)
else:
    cost = fabric.collective_cost("all_reduce", 64 * 2**20, algorithm)
dt = time.perf_counter() - t0
print(json.dumps({"s": dt, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "algorithm": cost.algorithm, "time_s": cost.time_s}))
"""


def params_for(fabric: str, n: int) -> dict:
    """The fabric's config at (about) ``n`` GPUs."""
    if fabric == "bcube":
        return {"name": "bcube", "radix": 16, "nodes": 16 ** max(1, _log(n, 16))}
    if fabric == "torus2d":
        return {"name": "torus2d", "nodes": n}
    if fabric == "ocs":
        return {"name": "ocs", "nodes": n, "topology": "ring"}
    if fabric == "ocs_torus":
        return {"name": "ocs", "nodes": n, "topology": "torus2d"}
    return {"name": fabric, "nodes": n}


def _log(n: int, base: int) -> int:
    k = 0
    while base ** (k + 1) <= n:
        k += 1
    return k


def run(params: dict, algorithm: str, timeout: float) -> dict | None:
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(params), algorithm], capture_output=True,
                             text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as exc:
        return {"error": exc.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,16384,65536")
    ap.add_argument("--fabrics", default="fattree,superpod,torus2d,bcube,ring,ocs,ocs_torus,lumorph")
    ap.add_argument("--algorithms", default="default,auto,schedule")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"{'fabric':<10}{'algorithm':<10}{'N':>7}  {'first_call_ms':>14}{'peak_rss_MB':>12}  chosen")
    for fabric in args.fabrics.split(","):
        for algorithm in args.algorithms.split(","):
            for n in (int(s) for s in args.sizes.split(",")):
                if algorithm == "schedule" and n > 16384:
                    continue
                params = params_for(fabric, n)
                best = None
                for _ in range(args.runs):
                    res = run(params, algorithm, args.timeout)
                    if res is None or "error" in res:
                        best = res
                        break
                    if best is None or res["s"] < best["s"]:
                        best = res
                size = params["nodes"]
                if best is None:
                    print(f"{fabric:<10}{algorithm:<10}{size:>7}  {'>' + str(int(args.timeout)) + ' s':>14}")
                elif "error" in best:
                    print(f"{fabric:<10}{algorithm:<10}{size:>7}  error: {best['error']}")
                else:
                    print(f"{fabric:<10}{algorithm:<10}{size:>7}  {best['s'] * 1e3:>14.2f}{best['rss_mb']:>12.0f}  "
                          f"{best['algorithm']}", flush=True)


if __name__ == "__main__":
    main()
