"""All groups of one parallel dimension communicating at once, priced on the fabric's own topology.

When every DP group all-reduces together (or every TP group, every EP group), their transfers may
share links. For a fabric built on the shared collective library with a real topology (``ideal``,
``fattree``, ``torus2d``, ``bcube``, ``superpod``, ``ring``, ``custom``: a
:class:`~estimator.fabrics.library.LibraryFabric` that keeps the library's own pricing), the price
of one group is taken from a merged schedule:

* the group's algorithm is the one the fabric picks for a group of that size alone;
* its explicit schedule is replicated for every group of the dimension — group ``g`` of ``size``
  ranks ``stride`` apart sits on fabric endpoints ``base + offset + j x stride`` (ranks numbered
  as in :mod:`~estimator.parallel.placement`) — step by step: step ``i`` of every group runs in
  the same merged step;
* the merged schedule is compiled on the fabric's topology by the topology layer
  (:func:`~estimator.collectives.pricing.compile_schedule`), which routes every transfer and
  shares each link's bandwidth among the transfers crossing it in a step — the contention
  pricing. The merged time is the time of each (identical, simultaneous) group.

Fabrics that price collectives their own way (optical affine models: ``lumorph``, ``terarack``,
``opsquare``; per-job topologies: ``ocs``, ``sipac``) and node-aware fabrics (priced in
:mod:`~estimator.parallel.placement` with shared uplinks) are not handled here (``None``). A
merged schedule needing more than ``MAX_ROUTES`` routes is not compiled either (``None``: the
group is priced alone) so an estimate stays fast.
"""

from __future__ import annotations

from functools import lru_cache

from estimator.collectives.pricing import CompiledSchedule, compile_schedule
from estimator.collectives.schedule import Schedule, Step, Transfer
from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric
from estimator.fabrics.library import LibraryFabric

# Routes (distinct source -> destination endpoint pairs) in one merged schedule; beyond it the group is
# priced alone. Routing is the cost (a 4,096-endpoint fat tree routes ~400 pairs/s on one core), so
# this keeps an estimate within seconds; larger jobs fall back to ``alone`` (named in the collectives'
# ``pricing`` column).
MAX_ROUTES = 2048


def members(nodes: int, size: int, stride: int) -> list[list[int]]:
    """Every group of ``size`` ranks ``stride`` apart among ``nodes`` ranks (tiles of size x stride)."""
    block = size * stride
    if nodes % block:
        raise EstimatorError(f"{nodes} ranks do not tile into groups of {size} ranks {stride} apart")
    return [[base + off + j * stride for j in range(size)] for base in range(0, nodes, block) for off in range(stride)]


def handles(fabric: Fabric) -> bool:
    """Whether ``fabric`` is priced by its topology through the shared library (see the module doc)."""
    return isinstance(fabric, LibraryFabric) and type(fabric).collective_cost is LibraryFabric.collective_cost


def signature(step: Step) -> tuple:
    """What prices a step: its transfers (who, to whom, how much, how much reduced) and extras."""
    return (step.reconfigure, step.extra_s, tuple((t.src, t.dst, t.nbytes, t.reduce_bytes) for t in step.transfers))


def merged(schedule: Schedule, groups: list[list[int]]) -> tuple[Schedule, list[int]]:
    """(one schedule running ``schedule`` on every group at once, merged rank -> fabric endpoint)."""
    n = schedule.nodes
    steps = {}
    out = []
    for step in schedule.steps:
        key = signature(step)  # steps with the same traffic (a ring's 2(n-1)) share one merged step: compiled once
        hit = steps.get(key)
        if hit is None:
            transfers = tuple(Transfer(g * n + t.src, g * n + t.dst, t.nbytes, t.reduce_bytes)
                              for g in range(len(groups)) for t in step.transfers)
            hit = steps[key] = Step(transfers, step.reconfigure, step.extra_s)
        out.append(hit)
    ranks = [ep for group in groups for ep in group]
    return Schedule(schedule.collective, schedule.algorithm, n * len(groups), schedule.nbytes, tuple(out)), ranks


@lru_cache(maxsize=512)
def _compiled(fabric: LibraryFabric, collective: str, name: str, size: int, stride: int) -> CompiledSchedule | None:
    groups = members(fabric.nodes, size, stride)
    one = fabric.schedule(collective, name, size, 1.0)
    if len({(t.src, t.dst) for st in one.steps for t in st.transfers}) * len(groups) > MAX_ROUTES:
        return None
    sched, ranks = merged(one, groups)
    return compile_schedule(sched, fabric.topology(name), fabric.pricing(name), ranks)


def concurrent_cost(fabric: Fabric, collective: str, nbytes: float, size: int, stride: int,
                    algorithm: str = "default") -> tuple[float, str] | None:
    """(seconds, algorithm) of one group while all its sibling groups run the same collective, or
    None when this fabric is not priced this way (see the module doc)."""
    if not handles(fabric) or size <= 1 or nbytes <= 0 or fabric.nodes % (size * stride):
        return None
    alone = fabric.collective_cost(collective, nbytes, algorithm, group_size=size)
    comp = _compiled(fabric, alone.collective, alone.algorithm, size, stride)
    if comp is None:
        return None
    k = fabric.chunking(nbytes)
    return k * comp.time(nbytes / k), alone.algorithm


@lru_cache(maxsize=256)
def _compiled_p2p(fabric: LibraryFabric, stride: int, stages: int) -> CompiledSchedule | None:
    groups = members(fabric.nodes, stages, stride)
    if len(groups) * (stages - 1) > MAX_ROUTES:
        return None
    sends = tuple(Transfer(a, b, 1.0) for g in groups for a, b in zip(g, g[1:], strict=False))
    sched = Schedule("p2p", "direct", fabric.nodes, 1.0, (Step(sends),))
    return compile_schedule(sched, fabric.topology("direct"), fabric.pricing("direct"))


def concurrent_p2p(fabric: Fabric, nbytes: float, stride: int, stages: int) -> float | None:
    """Seconds for every pipeline boundary (stage j -> j + 1 of every pipeline, ``stride`` ranks
    apart) to send ``nbytes`` at once on the topology, or None (see :func:`concurrent_cost`)."""
    if not handles(fabric) or stages <= 1 or nbytes <= 0 or fabric.nodes % (stages * stride):
        return None
    comp = _compiled_p2p(fabric, stride, stages)
    return None if comp is None else comp.time(nbytes)
