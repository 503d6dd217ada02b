"""``custom`` topology files: first all-reduce (default algorithm and ``auto``) per shape and size.

    python benchmarks/custom_bench.py [--sizes 1024,16384,65536] [--runs 3] [--timeout 60]

Each case runs in a fresh subprocess (the child of :mod:`scale_bench`): it builds the ``custom``
fabric on a generated ``builder:`` file of the shape (:func:`scale_bench.custom_builder`: 50 GB/s
links, 1 us per link) and prices one 64 MiB all-reduce. Printed: build and first-call times (min of
``--runs``), peak RSS of the child (~31 MB is the interpreter + numpy), the algorithm chosen. Then
``--explicit`` (default on): an explicit-links file of the same graph (``links:``, so the schedule
path), once with its numbers and once more with every latency and bandwidth doubled, in one
process, to show what a second config of the same structure costs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import CUSTOM_SHAPES, best_of, params_for, row  # noqa: E402

EXPLICIT = r"""
import json, resource, sys, time
from estimator.fabrics.registry import make_fabric, fabric_class
from estimator.topology.loader import load_topology
builder, n, out = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
fabric_class("custom")
topo = load_topology(builder)
rows = []
for scale in (1.0, 2.0):  # the same graph with every latency and bandwidth doubled
    links = [{"a": topo.labels[a], "b": topo.labels[b], "bandwidth_Bps": bw * scale, "latency_s": lat * scale,
              "duplex": False}
             for a, b, bw, lat in zip(topo._src, topo._dst, topo._bw, topo._lat)]
    doc = {"name": "explicit", "routing": topo.routing, "endpoints": [topo.labels[e] for e in topo.endpoints],
           "switches": [lb for lb, k in zip(topo.labels, topo.kinds) if k == "switch"], "links": links}
    path = f"{out}_{scale}.json"
    with open(path, "w") as fh:
        json.dump(doc, fh)
    t0 = time.perf_counter()
    fabric = make_fabric({"name": "custom", "nodes": n, "topology": path})
    t1 = time.perf_counter()
    fabric.collective_cost("all_reduce", 64 * 2**20)
    rows.append({"build_s": t1 - t0, "s": time.perf_counter() - t1})
print(json.dumps({"rows": rows, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,16384,65536")
    ap.add_argument("--shapes", default=",".join(CUSTOM_SHAPES))
    ap.add_argument("--algorithms", default="default,auto")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--explicit", default="1024", help="sizes of the explicit-links cases ('' = skip)")
    args = ap.parse_args()
    print(f"{'shape':<16}{'algorithm':<10}{'N':>7}  {'build_ms':>9}{'first_call_ms':>14}{'peak_rss_MB':>12}  chosen")
    for shape in args.shapes.split(","):
        for algorithm in filter(None, args.algorithms.split(",")):
            for n in (int(s) for s in args.sizes.split(",")):
                params = params_for(f"custom_{shape}", n)
                print(row(shape, algorithm, params["nodes"], best_of(params, algorithm, args.runs, args.timeout),
                          args.timeout, 16), flush=True)
    if not args.explicit:
        return
    print(f"\nexplicit links (schedule path): {'shape':<16}{'N':>7}  first config build/call ms, "
          "same graph x2 numbers build/call ms, peak RSS MB")
    tmp = Path(tempfile.mkdtemp(prefix="custom_bench_"))
    for shape in args.shapes.split(","):
        for n in (int(s) for s in args.explicit.split(",")):
            params = params_for(f"custom_{shape}", n)
            try:
                out = subprocess.run([sys.executable, "-c", EXPLICIT, json.dumps(params["topology"]), str(params["nodes"]),
                                      str(tmp / f"{shape}_{n}")], capture_output=True, text=True,
                                     timeout=args.timeout * 4, check=True)
            except subprocess.TimeoutExpired:
                print(f"{'':<32}{shape:<16}{params['nodes']:>7}  > {args.timeout * 4:.0f} s")
                continue
            except subprocess.CalledProcessError as exc:
                print(f"{'':<32}{shape:<16}{params['nodes']:>7}  error: {exc.stderr.strip().splitlines()[-1]}")
                continue
            res = json.loads(out.stdout.strip().splitlines()[-1])
            a, b = res["rows"]
            print(f"{'':<32}{shape:<16}{params['nodes']:>7}  {a['build_s'] * 1e3:.0f} / {a['s'] * 1e3:.0f}"
                  f"   {b['build_s'] * 1e3:.0f} / {b['s'] * 1e3:.0f}   {res['rss_mb']:.0f}", flush=True)


if __name__ == "__main__":
    main()
