"""The queue: which waiting jobs start when GPUs free up.

* ``fifo`` — in arrival order; the first job that cannot be placed blocks every later one.
* ``sjf`` — shortest first by run time alone (non-preemptive), blocking the same way (as the
  Helios artifact's SJF policy, Hu et al. SC'21).
* ``backfill`` — EASY backfilling (Lifka 1995; Mu'alem & Feitelson 2001) on FIFO: the blocked head
  job is promised the earliest time enough GPUs free up (from the running jobs' predicted ends,
  at their current speed); a later job may start now if it fits the free GPUs and either ends
  before that time or uses only GPUs the head will not need. At most ``depth`` waiting jobs are
  looked at per pass (Slurm's ``bf_max_job_test``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from estimator.errors import EstimatorError

SCHEDULERS = ("fifo", "sjf", "backfill")


@dataclass(order=True)
class Waiting:
    key: tuple  # queue order
    job_id: int = field(compare=False)
    alloc: int = field(compare=False)  # GPUs it occupies
    estimate_s: float = field(compare=False)  # run time alone (the scheduler's estimate)


class Queue:
    def __init__(self, policy: str, depth: int = 500):
        if policy not in SCHEDULERS:
            from estimator.config_checks import did_you_mean

            raise EstimatorError(f"cluster.scheduler must be one of {', '.join(SCHEDULERS)}, got {policy!r}"
                                 f"{did_you_mean(policy, SCHEDULERS)}")
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise EstimatorError(f"cluster.backfill_depth must be a positive integer, got {depth!r}")
        self.policy, self.depth = policy, depth
        self.items: list[Waiting] = []

    def __len__(self) -> int:
        return len(self.items)

    def push(self, job_id: int, submit_s: float, alloc: int, estimate_s: float) -> None:
        key = (estimate_s, job_id) if self.policy == "sjf" else (submit_s, job_id)
        bisect.insort(self.items, Waiting(key, job_id, alloc, estimate_s))

    def schedule(self, now: float, free: int, start: Callable[[Waiting], bool],
                 ends: Callable[[], Iterable[tuple[float, int]]]) -> None:
        """Start what the policy allows: ``start(w)`` places a job (False: it does not fit now);
        ``ends()`` gives (predicted end, GPUs) of the running jobs (backfilling only)."""
        while self.items and self.items[0].alloc <= free and start(self.items[0]):
            free -= self.items.pop(0).alloc
        if self.policy != "backfill" or not self.items or free <= 0:
            return
        head = self.items[0]
        shadow, extra = self._reservation(now, free, head.alloc, ends)
        started = []
        for i, w in enumerate(self.items[1:self.depth + 1], start=1):
            if w.alloc > free:
                continue
            in_time = now + w.estimate_s <= shadow
            if (in_time or w.alloc <= extra) and start(w):
                started.append(i)
                free -= w.alloc
                if not in_time:
                    extra -= w.alloc
                if free <= 0:
                    break
        for i in reversed(started):
            self.items.pop(i)

    @staticmethod
    def _reservation(now: float, free: int, need: int, ends: Callable[[], Iterable[tuple[float, int]]]
                     ) -> tuple[float, int]:
        """(when the head job can start, GPUs free then beyond its need)."""
        running = sorted(ends())
        if not running:
            return now, free - need
        times = np.array([t for t, _ in running])
        freed = free + np.cumsum([g for _, g in running])
        at = int(np.searchsorted(freed, need))
        if at >= len(running):  # cannot happen when the job fits the cluster; be safe
            return np.inf, 0
        return float(times[at]), int(freed[at] - need)
