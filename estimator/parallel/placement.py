"""Where each parallel group sits on the fabric, and what its collectives cost there.

Ranks are numbered by the layout's ``order`` (innermost first; default ``tp-cp-dp-pp`` as
Megatron-core: a TP group is ``tp`` consecutive ranks, a CP group strides by ``tp``, a DP group by
``tp x cp``, a PP group by ``tp x cp x dp``). Fabric endpoint ``i`` is rank ``i`` (GPUs numbered node by node).

Pricing a group of ``size`` ranks with ``stride`` between neighbours (:func:`group_cost`):

* A fabric may define ``group_cost(collective, nbytes, size, stride, algorithm)`` itself (a
  plugin hook, returning a :class:`~estimator.fabrics.base.CollectiveCost`; pricing ``hook``) and
  ``group_p2p_time(nbytes, stride)`` for a pipeline send; they are used when present. ``ocs``
  (each group on its own circuits), ``sipac`` (the WSS levels the group spans) and ``opsquare``
  (the group's pods and members per pod: intra-pod path, inter-pod path or both) define them;
  a fabric with circuits (``group_ports``) also has its circuit plan priced per step
  (:mod:`~estimator.parallel.circuits`).
* Node-aware fabrics (a config with ``gpus_per_node``, ``uplinks`` and ``uplink_bandwidth_Bps``:
  ``nvlink_leafspine`` and the DGX ``system`` presets): a group that fits in one node is priced
  on that node alone (NVLink only). A group spanning nodes has ``r = max(1, gpus_per_node //
  stride)`` ranks in each node, and ``gpus_per_node / r`` groups of the same kind (all DP groups,
  all PP boundaries) communicate at once through the same node: they share the node's uplinks,
  so the group is priced on the same fabric class with ``r`` GPUs per node and its share
  ``uplinks x uplink_bandwidth x r / gpus_per_node`` of the node's uplinks (rail-aligned: rank
  ``j`` of every node uses NIC ``j``, as in a rail-optimised DGX SuperPOD). The fabric's own
  collective model (NCCL algorithms, protocols) then prices the group.
* Fabrics priced by their topology through the shared collective library (``ideal``, ``fattree``,
  ``torus2d``, ``bcube``, ``superpod``, ``ring``, ``custom``): all groups of the dimension at once,
  at their real endpoints, on the topology, sharing links (:mod:`~estimator.parallel.concurrent`).
* TeraRack (one WDM ring): groups ``stride`` > 1 apart interleave, so ``stride`` groups occupy
  the same ring segments at once; each is priced on the ring with ``wavelengths // stride`` of
  its wavelengths (at least 1). Contiguous groups (stride 1) use disjoint segments and keep all
  wavelengths. (Our model: the paper prices one collective on the whole ring.)
* Any other fabric (``lumorph``): the fabric's price of a contiguous group of ``size`` endpoints
  (``collective_cost(..., group_size=size)``). Lumorph builds circuits per group in every round
  (its price includes the 3.7 us reconfiguration of each round that changes circuits), so groups
  in disjoint tiles do not share.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from estimator.fabrics.base import Fabric
from estimator.parallel.concurrent import concurrent_cost, concurrent_p2p, handles

NODE_AWARE_FIELDS = ("gpus_per_node", "uplinks", "uplink_bandwidth_Bps")
# WDM rings whose wavelengths all groups on the same ring segments share (see the module doc).
WAVELENGTH_RINGS = ("terarack",)


@lru_cache(maxsize=256)
def _with_wavelengths(cls: type, config_items: tuple, wavelengths: int) -> Fabric:
    return cls(cls.Config(**{**dict(config_items), "wavelengths": wavelengths}))


def strides(order: str, tp: int, dp: int, pp: int, cp: int = 1) -> dict[str, int]:
    """Rank stride of each parallel dimension for a rank order listed innermost first (an order
    without ``cp`` has it right inside ``dp``)."""
    dims = order.split("-")
    if "cp" not in dims:
        dims.insert(dims.index("dp"), "cp")
    sizes, out, step = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}, {}, 1
    for dim in dims:
        out[dim] = step
        step *= sizes[dim]
    return out


def node_aware(fabric: Fabric) -> bool:
    return all(hasattr(fabric.config, f) for f in NODE_AWARE_FIELDS)


def ranks_per_node(gpus_per_node: int, size: int, stride: int) -> int:
    """Ranks of a group of ``size`` with ``stride`` between neighbours that sit in one node (module docstring): all of
    them when the group fits in a node, else ``max(1, gpus_per_node // stride)``."""
    return size if size * stride <= gpus_per_node else max(1, gpus_per_node // stride)


@lru_cache(maxsize=4096)
def _sub_fabric(cls: type, config_items: tuple, size: int, stride: int) -> Fabric:
    cfg = dict(config_items)
    g, uplinks, bw = cfg["gpus_per_node"], cfg["uplinks"], cfg["uplink_bandwidth_Bps"]
    if size * stride <= g:  # the whole group inside one node
        new = {"nodes": size, "gpus_per_node": size}
    else:
        r = ranks_per_node(g, size, stride)
        share = uplinks * bw * r / g  # this group's share of its node's uplinks
        n_up = max(1, uplinks * r // g)
        new = {"nodes": size, "gpus_per_node": r, "uplinks": n_up, "uplink_bandwidth_Bps": share / n_up}
    if cfg.get("spine_ports"):  # 0 = sized from the node count (where the fabric supports it)
        new["spine_ports"] = max(cfg["spine_ports"], -(-new["nodes"] // new["gpus_per_node"]))
    base = cls.Config(**{k: v for k, v in cfg.items() if k in {f.name for f in dataclasses.fields(cls.Config)}})
    return cls(dataclasses.replace(base, **new))


def group_fabric(fabric: Fabric, size: int, stride: int) -> tuple[Fabric, int]:
    """The fabric that prices one group (and the group size to ask it for)."""
    if node_aware(fabric):
        items = tuple(sorted(dataclasses.asdict(fabric.config).items()))
        return _sub_fabric(type(fabric), items, size, stride), size
    return fabric, size


def group_cost(fabric: Fabric, collective: str, nbytes: float, size: int, stride: int, algorithm: str = "default"
               ) -> tuple[float, str, str]:
    """(seconds, algorithm, how it was priced) of ``collective`` on one group of ``size`` ranks
    ``stride`` apart while its sibling groups run the same collective. How: ``hook`` (the fabric's
    own ``group_cost``), ``node`` (node-aware: inside a node, or a share of its uplinks),
    ``concurrent`` (all groups merged on the topology, :mod:`~estimator.parallel.concurrent`),
    ``wavelength-share`` (TeraRack: interleaved groups split the ring's wavelengths) or ``alone``
    (one contiguous group on an otherwise idle fabric)."""
    if size <= 1 or nbytes <= 0:
        return 0.0, "none", "none"
    hook = getattr(fabric, "group_cost", None)
    if callable(hook):
        cost = hook(collective, nbytes, size, stride, algorithm)
        return cost.time_s, cost.algorithm, "hook"
    if not node_aware(fabric):
        hit = concurrent_cost(fabric, collective, nbytes, size, stride, algorithm)
        if hit is not None:
            return hit[0], hit[1], "concurrent"
    if fabric.name in WAVELENGTH_RINGS and stride > 1:
        share = max(1, fabric.config.wavelengths // stride)
        ring = _with_wavelengths(type(fabric), tuple(sorted(dataclasses.asdict(fabric.config).items())), share)
        cost = ring.collective_cost(collective, nbytes, algorithm, group_size=size)
        return cost.time_s, cost.algorithm, "wavelength-share"
    sub, n = group_fabric(fabric, size, stride)
    cost = sub.collective_cost(collective, nbytes, algorithm, group_size=n)
    return cost.time_s, cost.algorithm, "node" if node_aware(fabric) else "alone"


def p2p_cost(fabric: Fabric, nbytes: float, stride: int, stages: int = 2) -> float:
    """Seconds to send ``nbytes`` to the rank ``stride`` away while every pipeline boundary of
    ``stages``-stage pipelines sends at once (node-aware fabrics: a crossing shares the node's
    uplinks like a strided group; library fabrics: all sends merged on the topology)."""
    if nbytes <= 0:
        return 0.0
    hook = getattr(fabric, "group_p2p_time", None)
    if callable(hook):
        return hook(nbytes, stride)
    if node_aware(fabric):
        sub, _ = group_fabric(fabric, 2, stride)
        return sub.p2p_time(0, 1, nbytes)
    shared = concurrent_p2p(fabric, nbytes, stride, stages)
    if shared is not None:
        return shared
    return fabric.p2p_time(0, min(stride, fabric.nodes - 1), nbytes)


def p2p_pricing(fabric: Fabric) -> str:
    """How :func:`p2p_cost` prices a pipeline send on ``fabric`` (the ``pricing`` column)."""
    if callable(getattr(fabric, "group_p2p_time", None)):
        return "hook"
    return "node" if node_aware(fabric) else ("concurrent" if handles(fabric) else "alone")
