"""Import TopoOpt / FlexNet task graphs (FlatBuffers ``.fbuf``, schema ``taskgraph.fbs``).

Mapping (see ``../shared/fixtures/topoopt/README.md`` for the field meanings):

* Compute device records (``DEVICE_COMP_GPU``/``CPU``) become workload devices ``0..n-1`` in
  (node id, device property, file) order; comm device records only count in ``meta``.
* FORWARD / BACKWARD / UPDATE tasks become compute nodes (phase forward / backward / optimizer)
  with ``duration_s = runtime_ms / 1000`` measured by TopoOpt's simulator (``capture_device =
  "topoopt"``); BARRIER tasks become zero-time compute nodes.
* ALLREDUCE tasks become ``all_reduce`` collectives of ``xfersize`` bytes whose group is every
  compute device on the node indices its ``nexttasks`` lists (for ALLREDUCE that list names
  participants, not successors). Its ``runtime`` (the intra-node part only) is kept as
  ``attrs["intra_node_s"]``; the fabric prices the rest.
* COMM / NOMINAL_COMM tasks become ``p2p`` transfers of ``xfersize`` bytes. Their device record
  names a network channel whose numbering is the simulator's own, so the endpoints are taken from
  the graph: ``src`` is the device of the nearest compute ancestor, ``dst`` that of the nearest
  compute descendant (through chains of transfers). A transfer without either is an error.
* Every other task's ``nexttasks`` are successors: each becomes a dependency edge.
* Each all-reduce also yields a :class:`Gradient` of ``xfersize`` bytes, ready after its latest
  predecessor on the group's first device (gradient order = that readiness order).
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from typing import Any

from estimator.workloads.graph import Gradient, Workload
from estimator.workloads.importers._common import BadInput, GraphBuilder
from estimator.workloads.importers.flatbuf import FlatBufferError
from estimator.workloads.importers.topoopt_schema import (
    COMPUTE_DEVICE_TYPES,
    TASK_TYPES,
    TaskGraph,
    read_taskgraph,
)

FORMAT = "topoopt"
_PHASE = {0: "forward", 1: "backward", 3: "optimizer", 4: ""}
_COMM = (2, 5)
_ALLREDUCE = 6
MS = 1e-3


def sniff(head: bytes, path: Path) -> bool:
    """TopoOpt files carry no file identifier: accept ``.fbuf`` names or a plausible root table."""
    if path.suffix == ".fbuf":
        return True
    if len(head) < 12 or head[:1] in (b"{", b"["):
        return False
    root = int.from_bytes(head[:4], "little")
    return 4 <= root < len(head) - 4 and root % 4 == 0 and head[root - 4 : root] != b"\0\0\0\0"


#: breadth-first search steps per task allowed for finding transfer endpoints (real graphs chain a
#: transfer to a compute task within a few steps)
SEARCH_STEPS_PER_TASK = 64


def load(data: bytes, name: str, options: dict[str, Any]) -> Workload:
    try:
        graph = read_taskgraph(data)
    except FlatBufferError as exc:
        raise BadInput(f"not a valid TopoOpt task graph FlatBuffer ({exc})") from None
    return convert(graph, name)


def _devices(graph: TaskGraph) -> dict[int, int]:
    compute = [(d.nodeid, d.deviceproperty, i, d.deviceid) for i, d in enumerate(graph.devices)
               if d.type in COMPUTE_DEVICE_TYPES]
    if not compute:
        raise BadInput("task graph has no compute (GPU/CPU) device records")
    index: dict[int, int] = {}
    for k, (*_, deviceid) in enumerate(sorted(compute)):
        if deviceid in index:
            raise BadInput(f"device id {deviceid} appears twice")
        index[deviceid] = k
    return index


def _check_task(i: int, t: Any) -> str:
    where = f"task #{i} (taskid {t.taskid:#x})"
    if t.type not in TASK_TYPES:
        raise BadInput(f"{where}: unknown task type {t.type}")
    if not (math.isfinite(t.runtime_ms) and t.runtime_ms >= 0):
        raise BadInput(f"{where}: runtime must be a non-negative number of ms, got {t.runtime_ms!r}")
    return where


def _endpoints(i: int, preds: list[list[int]], succs: list[list[int]], device_of: list[int | None],
               is_comm: list[bool], budget: list[int]) -> tuple[int, int]:
    """Device of the nearest compute ancestor and of the nearest compute descendant of task i
    (a breadth-first search through transfer tasks; ``budget[0]``: search steps left for the
    whole graph, so chains of transfers cannot make the import quadratic)."""
    found = []
    for edges in (preds, succs):
        seen, queue, hit = {i}, deque([i]), None
        while queue and hit is None:
            budget[0] -= 1
            if budget[0] < 0:
                raise BadInput(f"network transfer task #{i}: finding the endpoints of chained transfers takes more "
                               f"than {SEARCH_STEPS_PER_TASK} steps per task (a chain this long is not a real graph)")
            for j in edges[queue.popleft()]:
                if j in seen:
                    continue
                seen.add(j)
                if device_of[j] is not None and not is_comm[j]:
                    hit = device_of[j]
                    break
                if is_comm[j]:
                    queue.append(j)
        found.append(hit)
    if found[0] is None or found[1] is None:
        side = "predecessor" if found[0] is None else "successor"
        raise BadInput(f"network transfer task #{i} has no computing {side}, so its endpoints are unknown")
    return found[0], found[1]


def convert(graph: TaskGraph, name: str) -> Workload:
    devices = _devices(graph)
    by_node: dict[int, list[int]] = {}
    for d in graph.devices:
        if d.deviceid in devices:
            by_node.setdefault(d.nodeid, []).append(devices[d.deviceid])
    position: dict[int, int] = {}
    for i, t in enumerate(graph.tasks):
        where = _check_task(i, t)
        if t.taskid in position:
            raise BadInput(f"{where}: duplicate taskid (also task #{position[t.taskid]})")
        position[t.taskid] = i
    n = len(graph.tasks)
    if n == 0:
        raise BadInput("task graph has no tasks")
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for i, t in enumerate(graph.tasks):
        if t.type == _ALLREDUCE:
            continue
        for nxt in t.nexttasks:
            j = position.get(nxt)
            if j is None:
                raise BadInput(f"task #{i} (taskid {t.taskid:#x}): successor {nxt:#x} does not exist")
            succs[i].append(j)
            preds[j].append(i)
    is_comm = [t.type in _COMM for t in graph.tasks]
    device_of: list[int | None] = [devices.get(t.deviceid) for t in graph.tasks]
    for i, t in enumerate(graph.tasks):
        if t.type in (0, 1, 3) and device_of[i] is None:
            raise BadInput(f"task #{i} (taskid {t.taskid:#x}): {TASK_TYPES[t.type]} task on device "
                           f"{t.deviceid}, which is not a compute device record")
    builder = GraphBuilder()
    budget = [SEARCH_STEPS_PER_TASK * n]
    grads: list[tuple[str, int, int, int]] = []  # (name, bytes, ready task index, all-reduce node)
    counts = {TASK_TYPES[k].lower(): 0 for k in TASK_TYPES}
    for i, t in enumerate(graph.tasks):
        kind = TASK_TYPES[t.type].lower()
        counts[kind] += 1
        label = f"{kind}_{counts[kind] - 1}"
        common = {"deps": preds[i], "attrs": {"taskid": t.taskid}}
        if t.type == _ALLREDUCE:
            group = sorted({d for node in t.nexttasks for d in by_node.get(node, ())})
            missing = [node for node in t.nexttasks if node not in by_node]
            if missing or not group:
                raise BadInput(f"task #{i} (taskid {t.taskid:#x}): all-reduce over node(s) "
                               f"{missing[:5] or list(t.nexttasks)} that have no compute device")
            common["attrs"]["intra_node_s"] = t.runtime_ms * MS
            nid = builder.add(label, kind="collective", collective="all_reduce", comm_bytes=float(t.xfersize),
                              group=tuple(group), device=group[0], **common)
            on_first = [p for p in preds[i] if device_of[p] == group[0]] or preds[i]
            if on_first:
                grads.append((label, t.xfersize, max(on_first), nid))
        elif t.type in _COMM:
            src, dst = _endpoints(i, preds, succs, device_of, is_comm, budget)
            common["attrs"]["sim_time_s"] = t.runtime_ms * MS
            builder.add(label, kind="p2p", comm_bytes=float(t.xfersize), src=src, dst=dst, device=src,
                        **common)
        else:
            builder.add(label, kind="compute", op=kind, op_class=kind, phase=_PHASE[t.type],
                        device=device_of[i] or 0, duration_s=t.runtime_ms * MS,
                        scales_with_batch=t.type in (0, 1), **common)
    per_ms = 1000.0  # bytes/ms -> bytes/s
    meta = {
        "topoopt": {
            "ngpupernode": graph.ngpupernode, "nnode": graph.nnode, "nswitch": graph.nswitch,
            "intergpubw_Bps": graph.intergpubw * per_ms, "drambw_Bps": graph.drambw * per_ms,
            "netbw_Bps": graph.netbw * per_ms, "device_records": len(graph.devices),
            "ops": [op_name for _, _, op_name in graph.ops], "links": graph.n_conn,
            "routes": graph.n_routes, "rings": graph.n_rings,
            "task_counts": {k: v for k, v in counts.items() if v},
        }
    }
    # Node ids equal task positions, so a ready task index is its node id.
    gradients = tuple(Gradient(g_name, nbytes, ready, order)
                      for order, (g_name, nbytes, ready, _) in enumerate(sorted(grads, key=lambda g: (g[2], g[3]))))
    return builder.build(name=name, source=f"topoopt:{name}", devices=len(devices),
                         capture_device="topoopt", gradients=gradients, meta=meta)
