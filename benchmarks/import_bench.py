"""Import/export timings for the trace importers (numbers go in reports, not in tests).

    python benchmarks/import_bench.py [--repeat N]

Times, per TopoOpt fixture in ../shared/fixtures/topoopt (largest first): FlatBuffers import to a
validated Workload, canonical save, Chakra export (all ranks) and Chakra re-import; then a
synthetic Kineto trace and Horovod timeline of fixed size. Best of N runs (default 5), seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from estimator.workloads import io
from estimator.workloads.importers import import_file
from estimator.workloads.importers.chakra import export_chakra

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "topoopt"


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def kineto_doc(ops: int) -> dict:
    ev = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "ts": 10.0 * i, "dur": 8.0, "pid": 1, "tid": 1,
           "args": {"Input Dims": [[32, 128], [128, 128]]}} for i in range(ops)]
    return {"schemaVersion": 1, "traceEvents": ev}


def horovod_events(tensors: int, iterations: int, ranks: int) -> list[dict]:
    ev = [{"name": "process_name", "ph": "M", "pid": p + 1, "args": {"name": f"grad{p}"}} for p in range(tensors)]
    t = 0
    for _ in range(iterations):
        for p in range(tensors):
            t += 100
            ev.append({"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": t, "pid": p + 1})
            ev += [{"ph": "X", "name": str(r), "ts": t + r, "pid": p + 1, "dur": 0} for r in range(ranks)]
            ev += [{"ph": "E", "ts": t + ranks, "pid": p + 1}, {"ph": "B", "name": "ALLREDUCE", "ts": t + ranks + 1,
                                                                 "pid": p + 1},
                   {"ph": "E", "ts": t + ranks + 50, "pid": p + 1, "args": {"dtype": "float32", "shape": "[1024, 1024]"}}]
            t += ranks + 50
    return ev


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fixtures = sorted(FIXTURES.glob("*.fbuf"), key=lambda p: -p.stat().st_size) if FIXTURES.exists() else []
        for path in fixtures:
            t_import, (w, _) = best(lambda p=path: import_file(p), args.repeat)
            t_save, _ = best(lambda w=w: io.save(w, tmp / f"{w.name}.workload.json"), args.repeat)
            t_export, result = best(lambda w=w: export_chakra(w, tmp / "et" / w.name, w.name), args.repeat)
            t_back, _ = best(lambda r=result, w=w: import_file(r["files"][0], name=w.name), args.repeat)
            rows.append({"input": path.name, "bytes": path.stat().st_size, "nodes": len(w.nodes),
                         "import_s": t_import, "save_s": t_save, "chakra_export_s": t_export,
                         "chakra_import_s": t_back, "ranks": w.devices})
        kin = tmp / "kineto.json"
        kin.write_text(json.dumps(kineto_doc(20_000)))
        t, (w, _) = best(lambda: import_file(kin), args.repeat)
        rows.append({"input": "synthetic kineto, 20k cpu ops", "bytes": kin.stat().st_size, "nodes": len(w.nodes),
                     "import_s": t})
        hvd = tmp / "hvd.json"
        hvd.write_text(json.dumps(horovod_events(160, 5, 8)))
        t, (w, _) = best(lambda: import_file(hvd), args.repeat)
        rows.append({"input": "synthetic horovod, 160 tensors x 5 iters x 8 ranks", "bytes": hvd.stat().st_size,
                     "nodes": len(w.nodes), "import_s": t})
    for row in rows:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
