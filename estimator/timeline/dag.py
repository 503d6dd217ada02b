"""General task-graph timeline for multi-device workloads (imported hybrid-parallel graphs).

Model:

* every device has one compute stream and one communication stream;
* a node starts when all its dependencies have finished and the streams it needs are free
  (list scheduling in order of readiness; ties broken by node order in the file);
* compute nodes take the compute model's time on their device;
* a collective occupies the communication stream of every member of its group and takes
  ``Fabric.collective_cost(kind, comm_bytes, group_size=len(group))``;
* a point-to-point transfer occupies the communication streams of ``src`` and ``dst`` and takes
  ``Fabric.p2p_time``.

Concurrent collectives on disjoint groups do not slow each other down here (their contention is
the fabric's schedule-level concern); this is the usual assumption of task-graph simulators
such as FlexFlow's and TopoOpt's.
"""

from __future__ import annotations

import heapq
import weakref
from dataclasses import dataclass, field
from typing import Any

from estimator.compute.device import DeviceProfile, node_times
from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric
from estimator.workloads.graph import Workload


@dataclass
class DagResult:
    iter_time_s: float
    compute_time_s: float  # busiest device's compute
    comm_time_s: float  # sum of communication node durations
    exposed_comm_time_s: float
    samples_per_s: float
    devices: int
    per_device_compute_s: list[float]
    collectives: list[dict[str, Any]] = field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("collectives", "per_device_compute_s")}


_CACHE: dict[int, tuple[Any, dict[Any, Any]]] = {}


def _cached(workload: Workload) -> dict[Any, Any]:
    """Per-workload memo (workloads are immutable; held by a weak reference, keyed by identity)."""
    hit = _CACHE.get(id(workload))
    if hit is not None and hit[0]() is workload:
        return hit[1]
    if len(_CACHE) > 32:
        _CACHE.clear()
    memo: dict[Any, Any] = {}
    _CACHE[id(workload)] = (weakref.ref(workload), memo)
    return memo


def _structure(workload: Workload) -> tuple[list[Any], list[list[int]], list[int]]:
    """Nodes in file order, each node's users and number of dependencies, by position (computed
    once per workload; the graph is checked for cycles then)."""
    memo = _cached(workload)
    if "structure" not in memo:
        workload.topological_order()  # raises on cycles
        nodes = list(workload.nodes)
        index = {n.id: i for i, n in enumerate(nodes)}
        users: list[list[int]] = [[] for _ in nodes]
        for pos, n in enumerate(nodes):
            for d in n.deps:
                users[index[d]].append(pos)
        memo["structure"] = (nodes, users, [len(n.deps) for n in nodes])
    return memo["structure"]


def _times(workload: Workload, device: DeviceProfile, precision: str) -> Any:
    memo = _cached(workload)
    key = ("times", device, precision)
    if key not in memo:
        memo[key] = [float(t) for t in node_times(workload, device, precision)]
    return memo[key]


def check_fits(workload: Workload, fabric_name: str, nodes: int) -> None:
    """A multi-device workload runs one device per fabric node: the fabric must have enough."""
    if workload.devices > nodes:
        raise EstimatorError(
            f"workload {workload.name!r} uses {workload.devices} devices but fabric {fabric_name!r} "
            f"has {nodes} nodes (set fabric.nodes={workload.devices} or more)"
        )


def simulate_dag(
    workload: Workload, fabric: Fabric, device: DeviceProfile, algorithm: str = "default", precision: str = "amp"
) -> DagResult:
    check_fits(workload, fabric.name, fabric.nodes)
    nodes, users, indegree = _structure(workload)
    times = _times(workload, device, precision)
    waiting = list(indegree)
    dep_done = [0.0] * len(nodes)
    compute_free = [0.0] * workload.devices
    comm_free = [0.0] * workload.devices
    busy = [0.0] * workload.devices
    all_devices = tuple(range(workload.devices))
    heap = [(0.0, pos) for pos in range(len(nodes)) if waiting[pos] == 0]
    heapq.heapify(heap)
    finish_max, comm_total = 0.0, 0.0
    rows: list[dict[str, Any]] = []
    cost_cache: dict[tuple[str, float, int], Any] = {}
    while heap:
        ready, pos = heapq.heappop(heap)
        node = nodes[pos]
        if node.kind == "compute":
            start = max(ready, compute_free[node.device])
            end = start + times[pos]
            compute_free[node.device] = end
            busy[node.device] += end - start
        else:
            if node.kind == "collective":
                members = node.group or all_devices
                key = (node.collective, node.comm_bytes, len(members))
                if key not in cost_cache:
                    cost_cache[key] = (
                        fabric.collective_cost(node.collective, node.comm_bytes, algorithm, len(members))
                        if len(members) > 1
                        else None
                    )
                cost = cost_cache[key]
                dt = cost.time_s if cost else 0.0
                algo = cost.algorithm if cost else "none"
            else:
                members = (node.src, node.dst)
                dt = fabric.p2p_time(node.src, node.dst, node.comm_bytes) if node.src != node.dst else 0.0
                algo = "p2p"
            start = max([ready] + [comm_free[d] for d in members])
            end = start + dt
            for d in members:
                comm_free[d] = end
            comm_total += dt
            rows.append(
                {
                    "idx": len(rows),
                    "collective": node.collective or "p2p",
                    "algorithm": algo,
                    "bytes": node.comm_bytes,
                    "tensors": 1,
                    "ready_s": ready,
                    "start_s": start,
                    "end_s": end,
                    "time_s": dt,
                    "steps": 0,
                }
            )
        if end > finish_max:
            finish_max = end
        for u in users[pos]:
            if end > dep_done[u]:
                dep_done[u] = end
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (dep_done[u], u))
    compute = max(busy) if busy else 0.0
    return DagResult(
        iter_time_s=finish_max,
        compute_time_s=compute,
        comm_time_s=comm_total,
        exposed_comm_time_s=max(0.0, finish_max - compute),
        samples_per_s=workload.batch_size / finish_max if finish_max > 0 else 0.0,
        devices=workload.devices,
        per_device_compute_s=busy,
        collectives=rows,
    )
