"""First-call cost of every algorithm's explicit schedule, per fabric and collective, at ~1,024 / ~16,384 ranks.

    python benchmarks/schedule_bench.py [--sizes 1024,16384] [--timeout 12] [--fabrics ring,bcube]
                                        [--collectives all_reduce,...] [--algorithms ring,direct]

For every fabric (default: every registered one but ``custom``, plus ``ocs_torus`` / ``ocs_btree`` = the OCS
wired as a 2D torus / binary tree, ``leafspine_alpha`` and the ``custom_<shape>`` builder files of
``scale_bench.py``), every collective it offers
and every algorithm it offers for it (``fabric.algorithms(collective)``), a FRESH subprocess builds
the fabric (sizes as in ``scale_bench.params_for``: the nearest valid size, shown; BCube radix 16 at 4,096
and 65,536) and times the first
``collective_cost(collective, 64 MiB, algorithm, explicit=True)``; printed with the child's peak RSS
(``ru_maxrss``, includes the interpreter + numpy). A case over ``--timeout`` prints ``>timeout`` (and
the larger sizes of that case are skipped: they would time out too). A case that raises prints
``err`` with the message (e.g. an all-pairs schedule over ``MAX_EXPLICIT_PAIRS``, or a fabric with
closed forms only); these are listed apart from the misses. Targets (issue #13): <= 1 s at ~1,024,
<= 10 s at ~16,384; the summary lists every miss.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import CUSTOM_SHAPES, params_for  # noqa: E402

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "gather", "all_to_all")
TARGETS = ((2048, 1.0), (1 << 62, 10.0))  # (largest asked size, seconds): <= 1 s at ~1,024, <= 10 s beyond

CHILD = r"""
import json, resource, sys, time
from estimator.errors import EstimatorError
from estimator.fabrics.registry import fabric_class, make_fabric
params, coll, algo = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
fabric_class(params["name"])
fabric = make_fabric(params)
t0 = time.perf_counter()
try:
    cost = fabric.collective_cost(coll, 64 * 2**20, algo, explicit=True)
    out = {"time_s": cost.time_s, "steps": cost.steps}
except EstimatorError as exc:
    out = {"error": str(exc)}
out.update(s=time.perf_counter() - t0, rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(out))
"""

LIST = r"""
import json, sys
from estimator.fabrics.registry import make_fabric
fabric = make_fabric(json.loads(sys.argv[1]))
print(json.dumps({c: list(fabric.algorithms(c)) for c in json.loads(sys.argv[2])}))
"""


def params_at(fabric: str, n: int) -> dict:
    """``scale_bench.params_for``, except BCube (radix 16) rounds up: 1,024 -> 4,096, 16,384 -> 65,536."""
    if fabric == "bcube":
        size = 16
        while size < n:
            size *= 16
        return {"name": "bcube", "radix": 16, "nodes": size}
    return params_for(fabric, n)


def fabrics_default() -> list[str]:
    from estimator.fabrics.registry import available

    return ([f for f in available() if f != "custom"] + ["ocs_torus", "ocs_btree", "leafspine_alpha"]
            + [f"custom_{shape}" for shape in CUSTOM_SHAPES])


def offers(params: dict, collectives: tuple[str, ...]) -> dict[str, list[str]]:
    out = subprocess.run([sys.executable, "-c", LIST, json.dumps(params), json.dumps(collectives)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(params: dict, coll: str, algo: str, timeout: float) -> dict:
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(params), coll, algo],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": True}
    if out.returncode:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"crashed: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def target(n: int) -> float:
    return next(t for top, t in TARGETS if n <= top)


def cell(r: dict | None) -> str:
    if r is None:
        return "skipped"
    if r.get("timeout"):
        return ">timeout"
    if "error" in r:
        return "err"
    return f"{r['s']:.3f}s/{r['rss_mb']:.0f}MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,16384")
    ap.add_argument("--timeout", type=float, default=12.0)
    ap.add_argument("--fabrics", default="")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--algorithms", default="", help="only these algorithm names (default: all offered)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    colls = tuple(c for c in args.collectives.split(",") if c)
    only = {a for a in args.algorithms.split(",") if a}
    fabrics = [f for f in args.fabrics.split(",") if f] or fabrics_default()
    misses, errors = [], []
    head = "".join(f"{'n~' + str(n):>28}" for n in sizes)
    print(f"{'fabric':<14}{'collective':<16}{'algorithm':<22}{head}", flush=True)
    for fab in fabrics:
        per_size = [params_at(fab, n) for n in sizes]
        table = offers(per_size[0], colls)
        for coll in colls:
            for algo in table.get(coll, []):
                if only and algo not in only:
                    continue
                row, dead = [], False
                for n, params in zip(sizes, per_size, strict=True):
                    r = None if dead else run(params, coll, algo, args.timeout)
                    dead = dead or (r is not None and bool(r.get("timeout")))
                    row.append(f"{cell(r)}@{params['nodes']}")
                    where = f"{fab} {coll} {algo} n={params['nodes']}"
                    if r is None or r.get("timeout"):
                        misses.append(f"{where}: > {args.timeout:g} s" + (" (skipped)" if r is None else ""))
                    elif "error" in r:
                        errors.append(f"{where}: {r['error']}")
                    elif r["s"] > target(n):
                        misses.append(f"{where}: {r['s']:.2f} s > {target(n):g} s")
                print(f"{fab:<14}{coll:<16}{algo:<22}" + "".join(f"{c:>28}" for c in row), flush=True)
    print(f"\n{len(misses)} misses (> 1 s at ~1,024, > 10 s at ~16,384):")
    for m in misses:
        print("  " + m)
    print(f"\n{len(errors)} without an explicit schedule at that size (errors):")
    for e in errors:
        print("  " + e)


if __name__ == "__main__":
    main()
