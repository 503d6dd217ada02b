"""Import a Horovod timeline (``HOROVOD_TIMELINE``; the reconfigurable-OCS paper's input).

The file is a Chrome-trace JSON array written by rank 0 (horovod/common/timeline.cc): each tensor
is a "process" (``pid``, named by a ``process_name`` metadata event); per operation it holds a
``NEGOTIATE_<OP>`` begin/end pair with one ``X`` tick per rank (tick name = rank) when that rank
reported the tensor ready, then a top-level ``<OP>`` begin/end pair (``ALLREDUCE``, ``ALLGATHER``,
``BROADCAST``, ...) with nested activity pairs; the top-level end event carries
``args: {dtype, shape}``. ``CYCLE_START`` instant markers may appear. Times are microseconds.

Model of the workload (choices, tested):

* **Iterations**: the k-th operation on each tensor belongs to iteration k (Horovod reduces each
  gradient once per step). ``importer.iteration`` picks one (0-based); default: the last
  iteration in which every tensor was reduced (steady state).
* **Ranks**: ``1 + the largest rank tick``, or ``importer.ranks``.
* **Compute**: the timeline shows no compute, only when each rank's gradients became ready. For
  each rank a chain of backward compute nodes spans the gaps between its consecutive ready times,
  starting at the end of the previous iteration's last operation (iteration 0: the first ready
  time). Ready time = that rank's tick, else the negotiation start, else the operation start.
* **Communication**: one collective node per operation over all ranks, ``comm_bytes = prod(shape)
  x dtype size``, after every rank's ready compute node and after the previous operation
  (Horovod's background thread runs them in order). Measured times are kept in ``attrs``.
* **Gradients**: one per tensor (rank 0's ready node), in ready order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator.workloads.graph import Gradient, Workload
from estimator.workloads.importers._common import (
    BadInput,
    GraphBuilder,
    check_scale,
    dtype_bytes,
    mapping,
    number,
    parse_json,
    product,
    scalar_key,
)

FORMAT = "horovod"
WHAT = "Horovod timeline"
US = 1e-6
OPS = {"ALLREDUCE": "all_reduce", "ADASUM": "all_reduce", "ALLGATHER": "all_gather",
       "BROADCAST": "broadcast", "ALLTOALL": "all_to_all", "REDUCESCATTER": "reduce_scatter"}


def sniff(head: bytes, path: Path) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"[") and (b"NEGOTIATE_" in head or b'"process_name"' in head) or (
        text.startswith(b"{") and b"NEGOTIATE_" in head)


@dataclass
class Operation:
    tensor: str
    op: str
    start: float
    end: float = -1.0
    negotiate: float | None = None
    ticks: dict[int, float] = field(default_factory=dict)
    nbytes: int = 0


@dataclass
class _Track:
    tensor: str = ""
    negotiating: Operation | None = None
    current: Operation | None = None
    depth: int = 0
    ticks: dict[int, float] = field(default_factory=dict)
    neg_start: float | None = None
    pending_neg: float | None = None  # the finished negotiation of the next operation
    pending_ticks: dict[int, float] = field(default_factory=dict)


def load(data: bytes, name: str, options: dict[str, Any]) -> Workload:
    doc = parse_json(data, WHAT)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise BadInput(f"not a {WHAT}: expected a JSON array of events")
    ops, markers = _operations(events)
    if not ops:
        raise BadInput("timeline has no completed collective operations")
    return _workload(ops, markers, name, options)


def _shape_bytes(args: Any, where: str) -> int:
    args = mapping(args, f"{where} args")
    if "shape" not in args or "dtype" not in args:
        raise BadInput(f"{where}: end event has no dtype/shape, so the tensor size is unknown")
    text = str(args["shape"]).strip()
    if not re.fullmatch(r"\[\s*(-?\d+\s*(,\s*-?\d+\s*)*)?\]", text):
        raise BadInput(f"{where}: unreadable shape {text[:40]!r}")
    dims = [int(d) for d in re.findall(r"-?\d+", text)]
    if any(d < 0 for d in dims):
        raise BadInput(f"{where}: negative dimension in shape {text}")
    return product(dims) * dtype_bytes(str(args["dtype"]), where)


def _operations(events: list[Any]) -> tuple[list[Operation], list[float]]:
    tracks: dict[Any, _Track] = {}
    ops: list[Operation] = []
    markers: list[float] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise BadInput(f"event #{i}: expected a JSON object")
        ph = ev.get("ph")
        if ph == "M":
            if ev.get("name") == "process_name":
                args = mapping(ev.get("args", {}), f"event #{i} args")
                if "name" in args:
                    pid = scalar_key(ev.get("pid"), f"event #{i} pid")
                    tracks.setdefault(pid, _Track()).tensor = str(args["name"])
            continue
        ts = number(ev.get("ts"), f"event #{i} ts")
        if ph == "i":
            markers.append(ts)
            continue
        pid = scalar_key(ev.get("pid"), f"event #{i} pid")
        track = tracks.get(pid)
        if track is None or not track.tensor:
            raise BadInput(f"event #{i}: pid {pid!r} has no process_name event naming its tensor")
        where = f"event #{i} (tensor {track.tensor!r})"
        name = str(ev.get("name", ""))
        if ph == "X":
            if track.neg_start is not None and name.isdigit():
                track.ticks[int(name)] = ts
        elif ph == "B":
            if track.current is not None:
                track.depth += 1
            elif name.startswith("NEGOTIATE_"):
                if track.neg_start is not None:
                    raise BadInput(f"{where}: negotiation begins twice without ending")
                track.neg_start, track.ticks = ts, {}
            elif name in OPS or name.isupper():
                track.current = Operation(track.tensor, name, ts, negotiate=track.pending_neg,
                                          ticks=track.pending_ticks)
                track.pending_neg, track.pending_ticks = None, {}
            else:
                raise BadInput(f"{where}: unexpected begin event {name[:40]!r}")
        elif ph == "E":
            if track.current is not None and track.depth > 0:
                track.depth -= 1
            elif track.current is not None:
                op = track.current
                if ts < op.start:
                    raise BadInput(f"{where}: {op.op} ends at {ts} before it starts at {op.start}")
                op.end = ts
                if op.op in OPS:
                    op.nbytes = _shape_bytes(ev.get("args", {}), where)
                    ops.append(op)
                track.current = None
            elif track.neg_start is not None:
                if ts < track.neg_start:
                    raise BadInput(f"{where}: negotiation ends before it starts")
                track.pending_neg, track.pending_ticks = track.neg_start, track.ticks
                track.neg_start, track.ticks = None, {}
            else:
                raise BadInput(f"{where}: end event without a matching begin")
    return ops, markers


def _iterations(ops: list[Operation]) -> list[list[Operation]]:
    per_tensor: dict[str, int] = {}
    iterations: list[list[Operation]] = []
    for op in sorted(ops, key=lambda o: o.start):
        k = per_tensor.get(op.tensor, 0)
        per_tensor[op.tensor] = k + 1
        if k == len(iterations):
            iterations.append([])
        iterations[k].append(op)
    return iterations


def _workload(ops: list[Operation], markers: list[float], name: str, options: dict[str, Any]) -> Workload:
    iterations = _iterations(ops)
    tensors = {op.tensor for op in ops}
    complete = [k for k, it in enumerate(iterations) if {op.tensor for op in it} == tensors]
    if options.get("iteration") is not None:
        k = int(number(options["iteration"], "importer.iteration", integer=True))
        if k >= len(iterations):
            raise BadInput(f"importer.iteration={k} but the timeline has {len(iterations)} iteration(s)")
    else:
        k = complete[-1] if complete else len(iterations) - 1
    chosen = iterations[k]
    max_rank = max((r for op in ops for r in op.ticks), default=0)
    ranks = int(number(options["ranks"], "importer.ranks", minimum=1, integer=True)) \
        if options.get("ranks") is not None else max_rank + 1
    if max_rank >= ranks:
        raise BadInput(f"rank tick {max_rank} but importer.ranks={ranks}")
    check_scale(ranks, ranks * len(chosen) * 2, "ranks x tensors")

    def ready(op: Operation, r: int) -> float:
        return op.ticks.get(r, op.negotiate if op.negotiate is not None else op.start)

    t0 = max(o.end for o in iterations[k - 1]) if k > 0 else min(ready(op, r) for op in chosen
                                                                  for r in range(ranks))
    builder = GraphBuilder()
    ready_node: dict[tuple[str, int], int] = {}
    for r in range(ranks):
        prev_t, prev_id = t0, None
        for op in sorted(chosen, key=lambda o: (ready(o, r), o.start)):
            t = max(ready(op, r), prev_t)
            prev_id = builder.add(f"compute_until_{op.tensor}"[:200], kind="compute", device=r, op="backward",
                                  op_class="backward", phase="backward", duration_s=(t - prev_t) * US,
                                  scales_with_batch=True, deps=[] if prev_id is None else [prev_id])
            ready_node[(op.tensor, r)] = prev_id
            prev_t = t
    prev_comm = None
    group = tuple(range(ranks))
    for op in sorted(chosen, key=lambda o: o.start):
        deps = [ready_node[(op.tensor, r)] for r in group] + ([] if prev_comm is None else [prev_comm])
        attrs = {"measured_s": (op.end - op.start) * US, "horovod_op": op.op}
        if op.negotiate is not None:
            attrs["negotiate_s"] = (op.start - op.negotiate) * US
        prev_comm = builder.add(op.tensor[:200], kind="collective", collective=OPS[op.op],
                                comm_bytes=float(op.nbytes), group=group, deps=deps, attrs=attrs)
    order = sorted(chosen, key=lambda o: ready(o, 0))
    gradients = tuple(Gradient(op.tensor, op.nbytes, ready_node[(op.tensor, 0)], i) for i, op in enumerate(order)
                      if op.op in ("ALLREDUCE", "ADASUM"))
    end = max(op.end for op in chosen)
    meta = {"horovod": {"iterations": len(iterations), "complete_iterations": len(complete), "iteration": k,
                        "tensors": len(tensors), "ranks": ranks, "iteration_time_s": (end - t0) * US,
                        "comm_bytes": float(sum(op.nbytes for op in chosen)),
                        "cycles": sum(1 for m in markers if t0 <= m <= end)}}
    return builder.build(name=name, source=f"horovod:{name}", devices=ranks, capture_device="horovod",
                         gradients=gradients, meta=meta)
