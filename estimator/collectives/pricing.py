"""Price an explicit schedule on a topology.

Model (a fluid, step-synchronous one):

* Steps run one after another; a step ends when its slowest transfer and its reductions end.
* A transfer is routed (:meth:`Topology.route`); every link's *load* in a step is the bytes all
  the step's transfers put on it (ECMP spreads a transfer fractionally). A transfer takes
  ``alpha_s + route latency + max over its links of load / bandwidth``: transfers sharing a link
  share its bandwidth, and each is as slow as its most loaded link.
* Reduction: after the data of a step has arrived, each rank reduces the ``reduce_bytes`` of all
  transfers it received at ``memory_bandwidth_Bps`` (0 = free); the step waits for the busiest.
* ``step_overhead_s`` is added to every step, ``reconfig_s`` to steps marked ``reconfigure``
  (circuit fabrics: see :func:`mark_reconfigurations`), a step's own ``extra_s`` to it, and
  ``fixed_s`` once per collective.

Every step time is ``max_t(c0_t + c1_t * M) + r * M + extra`` in the buffer size M, so a schedule
is *compiled* once per (algorithm, n) into per-step coefficient arrays and then priced for any M in
microseconds (:class:`CompiledSchedule`). Identical steps (same object) are compiled once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from estimator.collectives.schedule import Schedule, Step, Transfer
from estimator.errors import EstimatorError
from estimator.topology.graph import Topology


@dataclass(frozen=True)
class PricingParams:
    alpha_s: float = 0.0
    memory_bandwidth_Bps: float = 0.0
    reconfig_s: float = 0.0
    step_overhead_s: float = 0.0
    fixed_s: float = 0.0

    @property
    def gamma(self) -> float:
        return 1.0 / self.memory_bandwidth_Bps if self.memory_bandwidth_Bps > 0 else 0.0


NO_EXTRAS = PricingParams()


@dataclass(frozen=True)
class CompiledSchedule:
    """Per distinct step: candidate (c0, c1) pairs (padded), reduction slope, extra, multiplicity."""

    c0: np.ndarray
    c1: np.ndarray
    r: np.ndarray
    extra: np.ndarray
    weight: np.ndarray
    steps: int
    fixed_s: float
    reconfig_steps: int
    reconfig_s: float

    def time(self, nbytes: float) -> float:
        if self.steps == 0:
            return 0.0
        per = (self.c0 + self.c1 * nbytes).max(axis=1) + self.r * nbytes + self.extra
        return float(per @ self.weight) + self.fixed_s

    def times(self, sizes: Sequence[float]) -> np.ndarray:
        return np.array([self.time(float(s)) for s in sizes])


def _step_coefficients(
    step: Step, topo: Topology, ranks: Sequence[int], scale: float, params: PricingParams
) -> tuple[np.ndarray, np.ndarray, float]:
    """(c0, c1) Pareto front over the step's transfers and the reduction slope, per byte of M."""
    moving = [t for t in step.transfers if t.src != t.dst]
    if not moving:
        return np.zeros(1), np.zeros(1), 0.0
    dsts = [t.dst for t in moving]
    reds = [t.reduce_bytes for t in moving]
    red = np.bincount(np.asarray(dsts), weights=np.asarray(reds, dtype=float)).max() * params.gamma / scale
    bulk = topo.routing != "dimension_order" and len(moving) > 4 * len(set(dsts))
    c0, c1 = (_bulk_step if bulk else _routed_step)(moving, topo, ranks, params)
    return (*pareto(c0, c1 / scale), float(red))


def _routed_step(moving: list[Transfer], topo: Topology, ranks: Sequence[int], params: PricingParams
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per-transfer (c0, c1 in seconds) from cached per-pair routes."""
    routes = [topo.route(ranks[t.src], ranks[t.dst]) for t in moving]
    sizes = [t.nbytes for t in moving]
    lens = np.fromiter((len(r.links) for r in routes), dtype=np.int64, count=len(routes))
    links = np.concatenate([r.links for r in routes])
    owner = np.repeat(np.arange(len(routes)), lens)
    size = np.asarray(sizes, dtype=float)
    load = np.bincount(links, weights=np.concatenate([r.fractions for r in routes]) * size[owner],
                       minlength=topo.num_links)
    link_time = load / topo.bandwidth
    c1 = np.zeros(len(routes))
    has = lens > 0
    if links.size:
        starts = np.concatenate(([0], np.cumsum(lens)[:-1]))[has]
        c1[has] = np.maximum.reduceat(link_time[links], starts)
    c0 = params.alpha_s + np.fromiter((r.latency_s for r in routes), dtype=float, count=len(routes))
    return c0, c1


def _bulk_step(moving: list[Transfer], topo: Topology, ranks: Sequence[int], params: PricingParams
               ) -> tuple[np.ndarray, np.ndarray]:
    """The same numbers as :func:`_routed_step`, computed per destination over its routing DAG
    (flows injected at every source at once, split evenly per hop): for many-to-many steps."""
    src_node = np.array([topo.node_of(ranks[t.src]) for t in moving], dtype=np.int64)
    dst_ep = np.array([ranks[t.dst] for t in moving], dtype=np.int64)
    size = np.array([t.nbytes for t in moving], dtype=float)
    lsrc, ldst = topo.link_arrays()
    nodes = len(topo.kinds)
    load = np.zeros(topo.num_links)
    groups = [(int(b), np.nonzero(dst_ep == b)[0]) for b in np.unique(dst_ep)]
    dags = {}
    for b, idx in groups:
        layers, degree = dags[b] = topo.dag_to(b)
        flow = np.bincount(src_node[idx], weights=size[idx], minlength=nodes)
        for layer in reversed(layers):
            share = flow[lsrc[layer]] / degree[lsrc[layer]]
            load[layer] += share
            flow += np.bincount(ldst[layer], weights=share, minlength=nodes)
    link_time = load / topo.bandwidth
    lat = topo.latency
    c0 = np.empty(len(moving))
    c1 = np.empty(len(moving))
    for b, idx in groups:
        layers, _ = dags[b]
        best = np.zeros(nodes)
        worst = np.zeros(nodes)
        for layer in layers:
            np.maximum.at(best, lsrc[layer], np.maximum(link_time[layer], best[ldst[layer]]))
            np.maximum.at(worst, lsrc[layer], lat[layer] + worst[ldst[layer]])
        c1[idx] = best[src_node[idx]]
        c0[idx] = params.alpha_s + worst[src_node[idx]]
    return c0, c1


def pareto(c0: np.ndarray, c1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep the (c0, c1) pairs not dominated by another (the upper envelope over M >= 0)."""
    order = np.lexsort((-c1, -c0))
    c0, c1 = c0[order], c1[order]
    best = np.maximum.accumulate(c1)
    keep = np.ones(len(c1), dtype=bool)
    keep[1:] = c1[1:] > best[:-1]
    return c0[keep], c1[keep]


def compile_schedule(
    schedule: Schedule, topo: Topology, params: PricingParams = NO_EXTRAS, ranks: Sequence[int] | None = None
) -> CompiledSchedule:
    """Compile ``schedule`` (ranks mapped to endpoint indices by ``ranks``, default identity)."""
    ranks = list(range(schedule.nodes)) if ranks is None else list(ranks)
    if schedule.nodes > topo.num_endpoints or len(ranks) < schedule.nodes:
        raise EstimatorError(
            f"topology {topo.name!r} has {topo.num_endpoints} endpoints; the schedule needs {schedule.nodes}"
        )
    scale = schedule.nbytes if schedule.nbytes > 0 else 1.0
    seen: dict[int, int] = {}
    rows: list[tuple[np.ndarray, np.ndarray, float, float]] = []
    weight: list[int] = []
    reconf = 0
    for step in schedule.steps:
        extra = params.step_overhead_s + (params.reconfig_s if step.reconfigure else 0.0) + step.extra_s
        reconf += int(step.reconfigure)
        key = id(step)
        if key in seen:
            weight[seen[key]] += 1
            continue
        c0, c1, red = _step_coefficients(step, topo, ranks, scale, params)
        seen[key] = len(rows)
        rows.append((c0, c1, red, extra))
        weight.append(1)
    width = max((len(r[0]) for r in rows), default=1)
    c0m = np.full((len(rows), width), -np.inf)
    c1m = np.zeros((len(rows), width))
    for i, (c0, c1, _, _) in enumerate(rows):
        c0m[i, : len(c0)] = c0
        c1m[i, : len(c1)] = c1
    return CompiledSchedule(
        c0m, c1m, np.array([r[2] for r in rows]), np.array([r[3] for r in rows]), np.asarray(weight, dtype=float),
        schedule.num_steps, params.fixed_s, reconf, params.reconfig_s,
    )


def rescale(unit: CompiledSchedule, params: PricingParams, latency_s: float, bandwidth_Bps: float) -> CompiledSchedule:
    """A schedule compiled on a topology with unit link latency / bandwidth and ``γ = 1``, ``α = 0``
    (no overheads) as if compiled on the same shape with ``latency_s`` / ``bandwidth_Bps`` and
    ``params`` (see :mod:`estimator.fabrics.unit_compiled`). Per-step reconfigurations cannot be
    rescaled (the unit compile merged them into ``extra``): ``params.reconfig_s`` must be 0."""
    if params.reconfig_s:
        raise EstimatorError("rescale: a schedule priced with reconfigurations must be compiled directly")
    c0 = np.where(np.isneginf(unit.c0), -np.inf, params.alpha_s + latency_s * np.where(np.isneginf(unit.c0), 0.0, unit.c0))
    extra = unit.extra + params.step_overhead_s
    return replace(unit, c0=c0, c1=unit.c1 / bandwidth_Bps, r=unit.r * params.gamma, extra=extra,
                   fixed_s=params.fixed_s, reconfig_s=params.reconfig_s)


def price_schedule(
    schedule: Schedule, topo: Topology, params: PricingParams = NO_EXTRAS, ranks: Sequence[int] | None = None
) -> float:
    """Seconds to run ``schedule`` on ``topo`` (see the module docstring for the model)."""
    return compile_schedule(schedule, topo, params, ranks).time(schedule.nbytes)


def merge_concurrent(schedules: Sequence[tuple[Schedule, Sequence[int]]]) -> Schedule:
    """Run several schedules at once: step i of the result holds step i of each (ranks mapped to
    endpoint indices). Price the result to see the contention between them."""
    if not schedules:
        raise EstimatorError("merge_concurrent needs at least one schedule")
    length = max(s.num_steps for s, _ in schedules)
    steps = []
    for i in range(length):
        transfers: list[Transfer] = []
        reconf, extra = False, 0.0
        for sched, ranks in schedules:
            if i < sched.num_steps:
                st = sched.steps[i]
                reconf |= st.reconfigure
                extra = max(extra, st.extra_s)
                transfers += [replace(t, src=ranks[t.src], dst=ranks[t.dst]) for t in st.transfers]
        steps.append(Step(tuple(transfers), reconf, extra))
    n = max(max(r[: s.nodes], default=0) for s, r in schedules) + 1
    return Schedule("concurrent", "+".join(s.algorithm for s, _ in schedules), n, 1.0, tuple(steps))


def mark_reconfigurations(schedule: Schedule, first: bool = True) -> Schedule:
    """Mark every step whose set of (src, dst) circuits differs from the previous step's (and the
    first step if ``first``), for fabrics that set up circuits per step."""
    out, prev = [], None
    for i, st in enumerate(schedule.steps):
        pairs = frozenset((t.src, t.dst) for t in st.transfers if t.src != t.dst)
        change = pairs != prev if i else first
        out.append(st if st.reconfigure == change else Step(st.transfers, change, st.extra_s))
        prev = pairs
    return replace(schedule, steps=tuple(out))
