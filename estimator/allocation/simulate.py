"""Replay a request stream against a policy and measure what the rack delivers.

Assumptions: no queueing — a request that cannot be placed on arrival is rejected (and does not
come back); departures at the same instant as an arrival happen first. Metrics:

* ``placed`` / ``rejected``; a rejection is *fragmented* when the rack had at least as many free
  GPUs as requested but no allowed shape fitted, *too_large* when no shape of the architecture can
  ever hold it, otherwise *full*.
* ``overallocated``: placed requests given more GPUs than asked (the shape was rounded up);
  ``stranded_gpu_s``: GPU-seconds allocated but not asked for.
* ``utilisation``: time-averaged share of the rack's GPUs doing requested work, over the interval
  from the first arrival to the last departure of a placed request (or last arrival).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from estimator.allocation.policies import Policy
from estimator.allocation.requests import Request


@dataclass
class AllocationReport:
    policy: str
    capacity: int
    requests: int = 0
    placed: int = 0
    rejected: int = 0
    rejected_fragmented: int = 0
    rejected_too_large: int = 0
    rejected_full: int = 0
    overallocated: int = 0
    requested_gpu_s: float = 0.0
    allocated_gpu_s: float = 0.0
    stranded_gpu_s: float = 0.0
    span_s: float = 0.0
    utilisation: float = 0.0
    allocated_share: float = 0.0
    rejected_ids: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def simulate(policy: Policy, requests: Iterable[Request]) -> AllocationReport:
    reqs = sorted(requests, key=lambda r: (r.arrival_s, r.id))
    rep = AllocationReport(policy=policy.name, capacity=policy.capacity, requests=len(reqs))
    running: list[tuple[float, int, tuple[int, ...]]] = []
    start = reqs[0].arrival_s if reqs else 0.0
    end = start
    for req in reqs:
        while running and running[0][0] <= req.arrival_s:
            policy.release(heapq.heappop(running)[2])
        end = max(end, req.arrival_s)
        free = policy.free_count()
        gpus = policy.place(req.size)
        if gpus is None:
            rep.rejected += 1
            rep.rejected_ids.append(req.id)
            if policy.allocation_size(req.size) is None:
                rep.rejected_too_large += 1
            elif free >= req.size:
                rep.rejected_fragmented += 1
            else:
                rep.rejected_full += 1
            continue
        rep.placed += 1
        heapq.heappush(running, (req.departure_s, req.id, gpus))
        end = max(end, req.departure_s)
        rep.requested_gpu_s += req.size * req.duration_s
        rep.allocated_gpu_s += len(gpus) * req.duration_s
        if len(gpus) > req.size:
            rep.overallocated += 1
    while running:
        policy.release(heapq.heappop(running)[2])
    rep.stranded_gpu_s = rep.allocated_gpu_s - rep.requested_gpu_s
    rep.span_s = end - start
    if rep.span_s > 0:
        rep.utilisation = rep.requested_gpu_s / (rep.capacity * rep.span_s)
        rep.allocated_share = rep.allocated_gpu_s / (rep.capacity * rep.span_s)
    return rep
