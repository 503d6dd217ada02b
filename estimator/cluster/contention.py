"""How much each running job's communication is slowed by the others: a stretch ``f >= 1``.

Model (a fluid one, the topology layer's: :mod:`estimator.collectives.pricing`). Job ``k``
communicating alone uses resource ``r`` at utilisation ``u_k[r]`` (its bottleneck at 1; see
:mod:`.views`). Jobs communicating at the same time share a resource in proportion to what they
send, and a job is as slow as its most loaded resource: with the set ``A`` of jobs communicating
together, job ``j``'s communication runs ``S_j(A) = max(1, max_r sum_{k in A} u_k[r])`` times
slower. For jobs whose steps take equally long this is the merged-schedule price the topology
layer gives concurrent transfers (tested). Only resources whose summed ``u`` exceeds 1 can slow
anyone ("contended"); a job communicates a share ``d_k`` of each iteration (its duty cycle, from
its timeline at its current stretch). Three phase models:

* ``aligned`` — every job's communication overlaps every other's (the worst case):
  ``f_j = S_j(all jobs on j's resources)``.
* ``independent`` — jobs communicate at independent random phases: job ``k`` is communicating at a
  random instant with probability ``d_k``. Over resource ``r``, ``j``'s traffic progresses at rate
  ``1 / S_r(A)`` with ``S_r(A) = max(1, u_j[r] + sum_{k in A} u_k[r])``, so ``r`` slows it by
  ``1 / E[1 / S_r(A)]`` over the on/off states of the other jobs on ``r``: the distribution of
  their summed load, built job by job on a grid of :data:`GRID` of the link when at most
  :data:`EXACT_JOBS` other jobs use it; beyond, its normal approximation (the same mean and
  variance, integrated by Gauss-Hermite quadrature; tested against the exact one).
  ``f_j`` is the largest over its resources. The expectation is taken per resource, not of the maximum over resources:
  a ring all-reduce gates each GPU's next step only on its predecessor, so a burst on one link is
  absorbed while the others run ahead and links congested at different times do not add up (the
  packet level, :mod:`estimator.packetsim.multijob`, shows it: :mod:`.packet_check`).
* ``interleaved`` — a network-aware scheduler time-shifts jobs so their communication alternates
  (CASSINI, NSDI'24; Muri, SIGCOMM'22): a resource slows its jobs only when their communication
  cannot fit in time, ``f_j = max(1, max_r sum_k d_k u_k[r])`` (the capacity bound: that much
  traffic needs at least that much time, and perfect time-shifting achieves it).

Duty cycles depend on the stretches (a slowed job communicates a larger share of a longer
iteration), so ``independent`` and ``interleaved`` are solved as a fixed point: a job whose duty
cycle moves re-prices the jobs on its contended resources, until no duty cycle moves by more than
:data:`TOLERANCE`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from estimator.cluster.views import JobLoad
from estimator.errors import EstimatorError

MODES = ("aligned", "independent", "interleaved")
EPS = 1e-9  # a resource is contended when its summed utilisation exceeds 1 + EPS
TOLERANCE = 1e-3  # fixed point: stop when no duty cycle moves more than this (stretches are priced to 1e-3)
MAX_UPDATES = 200  # per job of a fixed point (a guard: duty cycles are piecewise constant, it settles first)
GRID = 1.0 / 1024  # summed loads on a link are tracked to this share of it (independent phases)
EXACT_JOBS = 8  # ... exactly up to this many other jobs on the link; a normal approximation beyond
_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(20)  # its quadrature (20 points)
HERMITE = (np.sqrt(2.0) * _NODES, _WEIGHTS / np.sqrt(np.pi))  # for a standard normal variable


@dataclass
class Member:
    load: JobLoad
    duty: Callable[[float], float]  # duty cycle at stretch f
    f: float = 1.0
    d: float = 0.0


def _ordered(keys: Iterable[Hashable]) -> list[Hashable]:
    try:
        return sorted(keys)  # type: ignore[type-var]
    except TypeError:
        return sorted(keys, key=repr)


class Contention:
    """The running jobs on one view's resources; :meth:`add` / :meth:`remove` return the jobs
    whose stretch may have changed, :meth:`solve` recomputes them. Per resource it keeps the sum
    of its jobs' utilisations (all, and weighted by duty cycle) so nothing is summed twice."""

    def __init__(self, resources: int, mode: str = "independent"):
        if mode not in MODES:
            raise EstimatorError(f"cluster.phases must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.sum_u = np.zeros(resources)  # sum of u over the jobs on each resource
        self.sum_du = np.zeros(resources)  # sum of d u: the mean offered load (interleaved, normal approx.)
        self.var_du = np.zeros(resources)  # sum of d (1 - d) u^2: its variance (normal approx.)
        self.count = np.zeros(resources, dtype=np.int64)  # jobs on each resource
        self.version = np.zeros(resources, dtype=np.int64)  # bumped when a resource's jobs or duties change
        self.on: dict[int, dict[Hashable, float]] = {}
        self.members: dict[Hashable, Member] = {}
        self._slow: dict[tuple[Hashable, int], tuple[int, float]] = {}  # (job, resource) -> (version, slowdown)

    # ---- membership -----------------------------------------------------------------------------
    def add(self, key: Hashable, load: JobLoad, duty: Callable[[float], float]) -> set[Hashable]:
        m = self.members[key] = Member(load, duty, 1.0, duty(1.0))
        for r, u in zip(load.ids.tolist(), load.u.tolist(), strict=True):
            self.on.setdefault(r, {})[key] = u
        self.sum_u[load.ids] += load.u
        self.count[load.ids] += 1
        self._weigh(m, +1.0)
        return {key} | self._sharing(load)

    def remove(self, key: Hashable) -> set[Hashable]:
        m = self.members[key]
        touched = self._sharing(m.load)
        self._weigh(m, -1.0)
        del self.members[key]
        for r in m.load.ids.tolist():
            self._slow.pop((key, r), None)
            jobs = self.on[r]
            del jobs[key]
            if not jobs:  # no float residue on an idle resource
                del self.on[r]
                self.sum_u[r] = self.sum_du[r] = self.var_du[r] = 0.0
        self.sum_u[m.load.ids] -= np.where(self.sum_u[m.load.ids] != 0.0, m.load.u, 0.0)
        self.count[m.load.ids] -= 1
        touched.discard(key)
        return touched

    def _weigh(self, m: Member, sign: float) -> None:
        """Add (or take away) ``m``'s duty-weighted load on its resources."""
        ids, u = m.load.ids, m.load.u
        self.sum_du[ids] += sign * m.d * u
        self.var_du[ids] += sign * m.d * (1.0 - m.d) * u * u
        self.version[ids] += 1

    def _contended(self, load: JobLoad) -> np.ndarray:
        return load.ids[self.sum_u[load.ids] > 1.0 + EPS] if len(load.ids) else load.ids

    def _sharing(self, load: JobLoad) -> set[Hashable]:
        """Jobs on ``load``'s contended resources."""
        out: set[Hashable] = set()
        for r in self._contended(load).tolist():
            out.update(self.on[r])
        return out

    # ---- stretches ------------------------------------------------------------------------------
    def stretch(self, key: Hashable) -> float:
        return self.members[key].f

    def duty(self, key: Hashable) -> float:
        return self.members[key].d

    def solve(self, keys: Iterable[Hashable]) -> set[Hashable]:
        """Recompute the stretch (and duty cycle) of ``keys`` and of every job the fixed point
        reaches from them; returns the jobs whose stretch changed."""
        work = deque(_ordered(k for k in keys if k in self.members))
        queued = set(work)
        before: dict[Hashable, float] = {}
        updates = 0
        while work:
            k = work.popleft()
            queued.discard(k)
            m = self.members[k]
            before.setdefault(k, m.f)
            m.f = self._stretch(k, m)
            d = m.duty(m.f)
            updates += 1
            if abs(d - m.d) > TOLERANCE:
                self._weigh(m, -1.0)
                m.d = d
                self._weigh(m, +1.0)
                if self.mode != "aligned" and updates < MAX_UPDATES * (len(before) + 1):
                    for other in _ordered(self._sharing(m.load) - queued - {k}):
                        work.append(other)
                        queued.add(other)
            else:
                m.d = d
        return {k for k, f in before.items() if self.members[k].f != f}

    def _stretch(self, key: Hashable, m: Member) -> float:
        load = m.load
        if not len(load.ids):
            return 1.0
        hot = self.sum_u[load.ids] > 1.0 + EPS
        if not hot.any():
            return 1.0
        ids = load.ids[hot]
        if self.mode == "aligned":
            return max(1.0, float(self.sum_u[ids].max()))
        if self.mode == "interleaved":
            return max(1.0, float(self.sum_du[ids].max()))
        mine = load.u[hot]
        crowded = self.count[ids] - 1 > EXACT_JOBS
        worst = self._crowded(ids[crowded], mine[crowded], m.d) if crowded.any() else 1.0
        for r, u in zip(ids[~crowded].tolist(), mine[~crowded].tolist(), strict=True):
            hit = self._slow.get((key, r))
            if hit is None or hit[0] != self.version[r]:
                hit = self._slow[(key, r)] = (int(self.version[r]), self._independent(key, r, u))
            worst = max(worst, hit[1])
        return worst

    def _crowded(self, ids: np.ndarray, mine: np.ndarray, d: float) -> float:
        """The largest average slowdown over crowded resources ``ids`` (the others' summed load as a
        normal variable: this job taken out of the per-resource sums)."""
        mean = self.sum_du[ids] - d * mine
        sd = np.sqrt(np.maximum(0.0, self.var_du[ids] - d * (1.0 - d) * mine * mine))
        x, w = HERMITE
        slow = np.maximum(1.0, (mine + mean)[:, None] + sd[:, None] * x)  # u <= 1: a negative draw is just 1
        return max(1.0, float(1.0 / ((1.0 / slow) @ w).min()))

    def _independent(self, key: Hashable, r: int, mine: float) -> float:
        """How much resource ``r`` (at most EXACT_JOBS other jobs) slows job ``key`` (using it at
        ``mine``) on average: the others' summed load distribution, built job by job."""
        jobs = self.on[r]
        others = [(u, self.members[j].d) for j, u in jobs.items() if j != key]
        dist = np.zeros(int(round(sum(u for u, _ in others) / GRID)) + len(others) + 1)
        dist[0], top = 1.0, 0
        for u, dk in others:  # add one job: off with probability 1 - d, on (shift by its load) with d
            k = int(round(u / GRID))
            if dk <= 0.0 or k == 0:
                continue
            was = dist[:top + 1].copy()
            dist[:top + 1] *= 1.0 - dk
            dist[k:k + top + 1] += dk * was
            top += k
        load = np.arange(top + 1) * GRID
        return 1.0 / float(dist[:top + 1] @ (1.0 / np.maximum(1.0, mine + load)))
