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
  ``1 / E[1 / S_r(A)]`` over the on/off combinations of the other jobs on ``r`` (all ``2^m``
  enumerated up to ``exact_below`` jobs, else ``samples`` seeded draws); ``f_j`` is the largest
  over its resources. The expectation is taken per resource, not of the maximum over resources:
  a ring all-reduce gates each GPU's next step only on its predecessor, so a burst on one link is
  absorbed while the others run ahead and links congested at different times do not add up (the
  packet level, :mod:`estimator.packetsim.multijob`, shows it: :mod:`.packet_check`).
* ``interleaved`` — a network-aware scheduler time-shifts jobs so their communication alternates
  (CASSINI, NSDI'24; Muri, SIGCOMM'22): a resource slows its jobs only when their communication
  cannot fit in time, ``f_j = max(1, max_r sum_k d_k u_k[r])`` (the capacity bound: that much
  traffic needs at least that much time, and perfect time-shifting achieves it).

Duty cycles depend on the stretches (a slowed job communicates a larger share of a longer
iteration), so ``independent`` and ``interleaved`` are solved as a fixed point over each group of
jobs joined by contended resources.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np

from estimator.cluster.views import JobLoad
from estimator.errors import EstimatorError

MODES = ("aligned", "independent", "interleaved")
EPS = 1e-9  # a resource is contended when its summed utilisation exceeds 1 + EPS
TOLERANCE = 1e-6  # fixed point: stop when no stretch moves more than this
MAX_ROUNDS = 50


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


@cache
def subsets(m: int) -> np.ndarray:
    """Every on/off combination of ``m`` jobs, one per row."""
    return ((np.arange(2**m)[:, None] >> np.arange(m)) & 1).astype(bool)


class Contention:
    """The running jobs on one view's resources; :meth:`add` / :meth:`remove` return the jobs
    whose stretch may have changed, :meth:`solve` recomputes them."""

    def __init__(self, resources: int, mode: str = "independent", exact_below: int = 10, samples: int = 1024,
                 seed: int = 0):
        if mode not in MODES:
            raise EstimatorError(f"cluster.phases must be one of {', '.join(MODES)}, got {mode!r}")
        if isinstance(exact_below, bool) or not isinstance(exact_below, int) or not 0 <= exact_below <= 16:
            raise EstimatorError(f"cluster.exact_below must be an integer 0..16, got {exact_below!r}")
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise EstimatorError(f"cluster.samples must be a positive integer, got {samples!r}")
        self.mode, self.exact_below, self.samples, self.seed = mode, exact_below, samples, seed
        self.sum_u = np.zeros(resources)
        self.on: dict[int, dict[Hashable, float]] = {}
        self.members: dict[Hashable, Member] = {}

    # ---- membership -----------------------------------------------------------------------------
    def add(self, key: Hashable, load: JobLoad, duty: Callable[[float], float]) -> set[Hashable]:
        self.members[key] = Member(load, duty, 1.0, duty(1.0))
        for r, u in zip(load.ids.tolist(), load.u.tolist(), strict=True):
            self.sum_u[r] += u
            self.on.setdefault(r, {})[key] = u
        return {key} | self._sharing(load)

    def remove(self, key: Hashable) -> set[Hashable]:
        member = self.members.pop(key)
        touched = self._sharing(member.load)
        for r, u in zip(member.load.ids.tolist(), member.load.u.tolist(), strict=True):
            jobs = self.on[r]
            del jobs[key]
            if jobs:
                self.sum_u[r] -= u
            else:
                del self.on[r]
                self.sum_u[r] = 0.0  # no float residue on an idle resource
        touched.discard(key)
        return touched

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
        """Recompute the stretch (and duty cycle) of ``keys`` and of every job a fixed point couples
        them to; returns the jobs whose stretch changed."""
        keys = [k for k in keys if k in self.members]
        group = keys if self.mode == "aligned" else self._group(keys)
        order = _ordered(group)  # a deterministic sweep order
        before = {k: self.members[k].f for k in order}
        for _ in range(MAX_ROUNDS if self.mode != "aligned" else 1):
            moved = 0.0
            for k in order:
                m = self.members[k]
                f = self._stretch(k, m)
                moved = max(moved, abs(f - m.f))
                m.f, m.d = f, m.duty(f)
            if moved < TOLERANCE:
                break
        return {k for k in order if self.members[k].f != before[k]}

    def _group(self, keys: list[Hashable]) -> set[Hashable]:
        """``keys`` and every job joined to them through contended resources."""
        seen, todo = set(keys), list(keys)
        while todo:
            for other in self._sharing(self.members[todo.pop()].load):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    def _stretch(self, key: Hashable, m: Member) -> float:
        load = m.load
        if not len(load.ids):
            return 1.0
        hot = self.sum_u[load.ids] > 1.0 + EPS
        if not hot.any():
            return 1.0
        ids, own = load.ids[hot], load.u[hot]
        if self.mode == "aligned":
            return max(1.0, float(self.sum_u[ids].max()))
        if self.mode == "interleaved":
            rho = [sum(self.members[j].d * u for j, u in self.on[r].items()) for r in ids.tolist()]
            return max(1.0, max(rho))
        return self._independent(key, ids, own)

    def _independent(self, key: Hashable, ids: np.ndarray, own: np.ndarray) -> float:
        worst = 1.0
        for r, mine in zip(ids.tolist(), own.tolist(), strict=True):
            others = _ordered(set(self.on[r]) - {key})
            share = np.array([self.on[r][j] for j in others])
            d = np.array([self.members[j].d for j in others])
            if len(others) <= self.exact_below:
                on = subsets(len(others))
                weight = np.where(on, d, 1.0 - d).prod(axis=1)
            else:  # the same draws every time for this job and link: a smooth fixed point, reproducible
                rng = np.random.default_rng([self.seed, zlib.crc32(repr((key, r)).encode())])
                on = rng.random((self.samples, len(others))) < d
                weight = np.full(self.samples, 1.0 / self.samples)
            slow = np.maximum(1.0, mine + on @ share)
            worst = max(worst, 1.0 / float(weight @ (1.0 / slow)))
        return worst
