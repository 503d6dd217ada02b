"""Run ASTRA-sim's analytical backend on what `estimator export` writes and compare with the estimator.

    ASTRASIM_BIN=/path/to/AstraSim_Analytical_Congestion_Unaware \\
    [ASTRASIM_AWARE_BIN=/path/to/AstraSim_Analytical_Congestion_Aware] \\
    ASTRASIM_COMMIT=<astra-sim sha> ASTRASIM_NETWORK_COMMIT=<astra-network-analytical sha> \\
        python benchmarks/astrasim_compare.py [--out validation/astrasim/collectives.csv] [--quick]

For every (backend, setup, collective, NPUs, chunks, size): write a one-collective workload (e.g. an
all-reduce of ``size`` bytes per rank over all NPUs, nccl-tests sizes), export it with ``estimator export WORKLOAD <overrides>`` (Chakra ET
per rank + network.yml/system.json/remote_memory.json), run the ASTRA-sim binary on it, take the
slowest rank's ``finished, N cycles`` (1 cycle = 1 ns), and price the same overrides with
``estimator collective collective=<it> algorithm=ring``. Writes the CSV read by
:mod:`estimator.workloads.astrasim_compare` and prints max / mean |error| per setup and chunking.
Without ASTRASIM_BIN it only reprices the stored rows (what the test suite checks).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from estimator import cli
from estimator.workloads import io as wio
from estimator.workloads.astrasim_compare import (
    COLUMNS,
    CSV_PATH,
    load,
    ours_us,
    relative_error,
    store_and_forward_us,
    tolerance,
)
from estimator.workloads.graph import Node, Workload

# setup -> estimator overrides; fabric defaults are the papers' (conf/fabric/{ideal,ring}.yaml)
SETUPS = {
    "switch": ["fabric=ideal"],
    "ring": ["fabric=ring"],
    # seed 001 Table I: 127.8 Gb/s memory (reduction) bandwidth -> ASTRA-sim local-mem-bw
    "ring+reduce": ["fabric=ring", "fabric.memory_bandwidth_Bps=15.975e9"],
    # one NVLink node of the OPSquare reference (seed 004) with its alpha-beta model: a Switch
    "nvlink_node": ["fabric=nvlink_leafspine", "fabric.latency_model=alpha"],
}
NODE_GPUS = {"nvlink_node": (8,)}  # one node: gpus_per_node = 8
NPUS = (8, 16, 64)
SIZES = (2**20, 2**24, 2**28, 2**30)  # 1 MiB .. 1 GiB per rank
CHUNKS = (1, 4, 16)
# the congestion-aware backend (ASTRASIM_AWARE_BIN), a smaller grid: it agrees on a Ring and differs on a
# Switch by a second serialization per message (see estimator.workloads.astrasim_compare)
AWARE = {"setups": ("switch", "ring"), "npus": (8, 64), "chunks": (1, 4)}
# all-gather and reduce-scatter (congestion-unaware): checks the export's per-collective comm_size
OTHER = {"collectives": ("all_gather", "reduce_scatter"), "setups": ("switch", "ring"), "npus": (8, 64),
         "chunks": (1, 4)}
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


def workload(npus: int, nbytes: int, collective: str = "all_reduce") -> Workload:
    node = Node(0, collective, kind="collective", collective=collective, comm_bytes=float(nbytes))
    return Workload(name="collective", nodes=(node,), source="benchmarks/astrasim_compare.py", devices=npus).validate()


def export(overrides: list[str], wl_path: Path, out: Path) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli.run(["export", str(wl_path), *overrides, f"export.out={out}", "export.prefix=collective",
                        "output=json"])
    if code != 0:
        raise SystemExit(f"estimator export failed for {overrides}")
    return json.loads(buf.getvalue())


def run_astrasim(binary: str, out: Path) -> tuple[float, str]:
    args = [binary, f"--workload-configuration={out}/collective", f"--system-configuration={out}/system.json",
            f"--remote-memory-configuration={out}/remote_memory.json",
            f"--network-configuration={out}/network.yml"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=3600, cwd=out)  # it writes log/ there
    done = [int(c) for _, c in FINISHED.findall(proc.stdout + proc.stderr)]
    if proc.returncode != 0 or not done:
        raise SystemExit(f"ASTRA-sim failed ({proc.returncode}): {' '.join(args)}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    how = " ".join([Path(binary).name, *(a.replace(str(out), "<export>") for a in args[1:])])
    return max(done) / 1e3, how  # ns -> us


def grid(quick: bool, aware: bool) -> list[tuple[str, str, str, int, int, int]]:
    """(backend, setup, collective, npus, chunks, bytes) points."""
    sizes = SIZES[:2] if quick else SIZES
    points = [("congestion_unaware", s, "all_reduce", n, k, m) for s in SETUPS
              for n in NODE_GPUS.get(s, NPUS[:1] if quick else NPUS) for k in CHUNKS for m in sizes]
    points += [("congestion_unaware", s, c, n, k, m) for c in OTHER["collectives"] for s in OTHER["setups"]
               for n in (OTHER["npus"][:1] if quick else OTHER["npus"]) for k in OTHER["chunks"] for m in sizes]
    if aware:
        points += [("congestion_aware", s, "all_reduce", n, k, m) for s in AWARE["setups"]
                   for n in (AWARE["npus"][:1] if quick else AWARE["npus"]) for k in AWARE["chunks"] for m in sizes]
    return points


def simulate(binaries: dict[str, str], quick: bool) -> list[dict]:
    commit = os.environ.get("ASTRASIM_COMMIT", "unrecorded")
    net_commit = os.environ.get("ASTRASIM_NETWORK_COMMIT", "unrecorded")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend, setup, coll, npus, chunks, nbytes in grid(quick, "congestion_aware" in binaries):
                        binary = binaries[backend]
                        overrides = [*SETUPS[setup], f"fabric.nodes={npus}", f"fabric.chunks={chunks}"]
                        wl = wio.save(workload(npus, nbytes, coll), Path(tmp) / "collective.workload.json")
                        out = Path(tmp) / f"{backend}-{setup}-{coll}-{npus}-{chunks}-{nbytes}"
                        export(overrides, wl, out)
                        topology = re.search(r"topology: \[ (\w+) \]", (out / "network.yml").read_text()).group(1)
                        theirs, how = run_astrasim(binary, out)
                        ours = ours_us(overrides, nbytes, coll)
                        rows.append({"backend": backend, "setup": setup, "collective": coll, "topology": topology, "npus": npus, "chunks": chunks,
                                     "bytes": nbytes, "overrides": shlex.join(overrides),
                                     "astrasim_us": f"{theirs:.3f}", "ours_us": f"{ours:.3f}",
                                     "error": f"{relative_error(ours, theirs):.5f}", "astrasim_commit": commit,
                                     "network_backend_commit": net_commit, "how": how})
                        print(f"{backend:18} {setup:12} {coll:14} n={npus:<3} k={chunks:<3} {nbytes:>11} B  astra-sim {theirs:12.3f} us  "
                              f"ours {ours:12.3f} us  {100 * relative_error(ours, theirs):+.3f} %", flush=True)
    return rows


def summary(rows: list[dict]) -> None:
    """max / mean |error| of the live estimate per (backend, setup, chunking); ``+s&f``: with the
    congestion-aware Switch's second serialization added (:func:`store_and_forward_us`)."""
    groups: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        ours = ours_us(shlex.split(r["overrides"]), r["bytes"], r["collective"])
        extra = store_and_forward_us(r)
        groups[(r["backend"], f"{r['setup']} {r['collective']}", "1 chunk" if r["chunks"] == 1 else "multi-chunk")].append(
            (abs(relative_error(ours, r["astrasim_us"])), abs(relative_error(ours + extra, r["astrasim_us"]))))
    print(f"{'backend':18} {'setup':27} {'chunking':12} {'rows':>4} {'max |err| %':>12} {'mean |err| %':>13} "
          f"{'max +s&f %':>11}  tolerance %")
    for (backend, setup, chunking), errs in groups.items():
        raw = [e for e, _ in errs]
        fixed = max(e for _, e in errs)
        tol = tolerance(1 if chunking == "1 chunk" else 2)
        print(f"{backend:18} {setup:27} {chunking:12} {len(raw):>4} {100 * max(raw):>12.4f} "
              f"{100 * sum(raw) / len(raw):>13.4f} {100 * fixed:>11.4f}  {100 * tol:.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=CSV_PATH)
    ap.add_argument("--quick", action="store_true", help="8 NPUs and two sizes only")
    args = ap.parse_args()
    binary = os.environ.get("ASTRASIM_BIN")
    if not binary:
        print("ASTRASIM_BIN not set: repricing the stored rows only", file=sys.stderr)
        summary(load(args.out))
        return
    binaries = {"congestion_unaware": binary}
    if os.environ.get("ASTRASIM_AWARE_BIN"):
        binaries["congestion_aware"] = os.environ["ASTRASIM_AWARE_BIN"]
    rows = simulate(binaries, args.quick)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    summary(load(args.out))


if __name__ == "__main__":
    main()
