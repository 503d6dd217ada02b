"""Time and memory to read large inputs, per format: seconds and peak MB per 100 MB of input.

    python benchmarks/input_bench.py [--mb 8 32] [--formats workload kineto topology ...]

Builds valid files of about the given sizes (a chain of compute nodes; a Kineto GPU trace of
repeated GEMM + NCCL blocks; a topology of many links; Horovod / FlexFlow / Chakra / TopoOpt files
of many ops), reads each in a fresh process through the same entry point the CLI uses
(``estimator.workloads.io.load``, ``import_file``, ``load_topology``) and prints wall seconds
and peak resident MB (``ru_maxrss`` of the child), and both per 100 MB of input. Two sizes show
whether time and memory grow linearly (the per-100-MB figures stay flat). The limits in
``conf/config.yaml`` (``limits.input_mb``, ``limits.topology_mb``) are set from these figures:
docs/reliability.md lists them. State the machine load (``uptime``) with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _workload(target: int) -> bytes:
    head = ('{"format": "estimator.workload", "format_version": 1, "name": "big", "devices": 8, '
            '"batch_size": 32, "nodes": [')
    parts, size, i = [], len(head), 0
    while size < target:
        deps = f"[{i - 1}]" if i else "[]"
        node = (f'{{"id": {i}, "name": "aten::conv2d_{i}", "kind": "compute", "phase": "forward", '
                f'"duration_s": 1.25e-05, "flops": 123456789.0, "mem_bytes": 4194304.0, "deps": {deps}}}')
        parts.append(node)
        size += len(node) + 2
        i += 1
    return (head + ", ".join(parts) + "]}").encode()


def _kineto(target: int, enclosing: bool = False) -> bytes:
    """A GPU trace of GEMM + all-reduce blocks; ``enclosing``: one CPU op spans the whole trace
    (as a ``DistributedDataParallel.forward`` op encloses a step's ops)."""
    events, size, k = [], 0, 0
    while size < target:
        t, c = k * 1000, 3 * k
        block_events = [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t + 100, "dur": 20, "pid": 10, "tid": 10,
             "args": {"External id": c, "Input Dims": [[64, 128], [128, 256]]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 105, "dur": 5, "pid": 10,
             "tid": 10, "args": {"correlation": c + 1}},
            {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_64x64_nn", "ts": t + 120, "dur": 50, "pid": 0,
             "tid": 7, "args": {"device": 0, "stream": 7, "correlation": c + 1}},
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": t + 320, "dur": 15, "pid": 10,
             "tid": 10, "args": {"Collective name": "allreduce", "In msg nelems": 1048576, "dtype": "Float",
                                 "Group size": 4}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 325, "dur": 5, "pid": 10,
             "tid": 10, "args": {"correlation": c + 2}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": t + 330,
             "dur": 400, "pid": 0, "tid": 20, "args": {"device": 0, "stream": 20, "correlation": c + 2}},
        ]
        text = ", ".join(json.dumps(e) for e in block_events)
        events.append(text)
        size += len(text) + 2
        k += 1
    if enclosing:
        events.insert(0, json.dumps({"ph": "X", "cat": "cpu_op", "name": "DistributedDataParallel.forward", "ts": 0,
                                     "dur": k * 1000 + 1000, "pid": 10, "tid": 10, "args": {}}))
    head = ('{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 4}, '
            '"deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}], "traceEvents": [')
    return (head + ", ".join(events) + "]}").encode()


def _topology(target: int) -> bytes:
    lines, size, i = [], 0, 0
    while size < target:
        line = f"  - [gpu{i}, s{i // 64}]\n"
        lines.append(line)
        size += len(line)
        i += 1
    switches = ", ".join(f"s{j}" for j in range(i // 64 + 1))
    return (f"name: big\ndefaults: {{bandwidth_Bps: 1.0e9, latency_s: 1.0e-6}}\nendpoints: {i}\nswitches: [{switches}]\n"
            "links:\n" + "".join(lines)).encode()


def _horovod(target: int) -> bytes:
    sys.path.insert(0, str(REPO / "tests"))
    from test_import_horovod import timeline

    one = len(json.dumps(timeline(iterations=1)))
    events = timeline(iterations=max(1, target // one))
    return ("[\n" + ",\n".join(json.dumps(e) for e in events) + "]").encode()


GENERATORS = {"workload": (_workload, ".workload.json"), "kineto": (_kineto, ".json"),
              "kineto_nested": (lambda n: _kineto(n, enclosing=True), ".json"),
              "topology": (_topology, ".yaml"), "horovod": (_horovod, ".json")}

_CHILD = """
import resource, sys, time
from estimator import limits
limits.configure({"input_mb": 4096, "topology_mb": 4096} if hasattr(limits.Limits, "topology_mb") else {"input_mb": 4096})
fmt, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
try:
    if fmt == "workload":
        from estimator.workloads import io
        io.load(path)
    elif fmt == "topology":
        from estimator.topology.loader import load_topology
        load_topology(path)
    else:
        from estimator.workloads.importers import import_file
        import_file(path, fmt.split("_")[0])
    outcome = "ok"
except Exception as exc:
    outcome = type(exc).__name__ + ": " + str(exc)[:100]
print(f"{time.perf_counter() - t0:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {outcome}")
"""


def measure(fmt: str, mb: float, folder: Path) -> tuple[float, float, float, str]:
    """(input MB, seconds, peak MB, outcome) of reading a ~``mb`` MB file of ``fmt``."""
    make, suffix = GENERATORS[fmt]
    path = folder / f"big{suffix}"
    path.write_bytes(make(int(mb * 1e6)))
    size = path.stat().st_size / 1e6
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _CHILD, fmt, str(path)], env=env,
                         capture_output=True, text=True, timeout=3600)
    path.unlink()
    if out.returncode != 0:
        return size, float("nan"), float("nan"), out.stderr.strip().splitlines()[-1][:100]
    seconds, peak, outcome = out.stdout.split(" ", 2)
    return size, float(seconds), float(peak), outcome.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, nargs="+", default=[8.0, 32.0])
    ap.add_argument("--formats", nargs="+", default=list(GENERATORS))
    args = ap.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1 / 5 min), {os.cpu_count()} CPUs")
    print(f"{'format':<10} {'input_MB':>9} {'seconds':>8} {'peak_MB':>8} {'s/100MB':>8} {'MB/100MB':>9}  outcome")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats:
            for mb in args.mb:
                t0 = time.perf_counter()
                size, seconds, peak, outcome = measure(fmt, mb, Path(tmp))
                print(f"{fmt:<10} {size:>9.1f} {seconds:>8.2f} {peak:>8.0f} {100 * seconds / size:>8.1f} "
                      f"{100 * peak / size:>9.0f}  {outcome}   ({time.perf_counter() - t0:.0f} s with generation)",
                      flush=True)


if __name__ == "__main__":
    main()
