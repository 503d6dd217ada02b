"""OPSquare: a flat optically packet-switched network, analytical collective costs.

Model (seed 004 Sec. 2; defaults in conf/fabric/opsquare.yaml). N pods x M nodes; a pod's nodes
are split into P groups of F = M/P. A node has P intra-pod transceivers, transceiver g feeding the
M x M broadcast-and-select switch that reaches group g of its pod, and one inter-pod transceiver
into the N x N switch that joins the m-th nodes of all pods; each transceiver carries
``transceiver_bps``. A hop costs transceiver forward latency + label processing + optical preamble
(80 + 10 + 30 ns); an inter-pod destination that is not the sender's m-th peer takes two hops
(inter-pod switch, then intra-pod switch). Assumptions of the analytical level:

* collectives are scheduled, so the switches see no output contention (the packet level in
  ``estimator.packetsim`` models contention and retransmission); no host software overhead
  unless ``host_overhead_s`` is set (seed 004 models none);
* a phase in which a node sends to several peers spreads them over its transceivers, and a
  transceiver serialises what it sends;
* a group of G nodes occupies whole pods (G = multiple of M) or lies inside one pod (G <= M).
  A parallel group of ranks ``stride`` apart (:meth:`OpsquareFabric.group_cost`, called by
  :mod:`estimator.parallel.placement`) is priced where it sits: ``r`` members in each of ``p``
  pods at the same positions (``r = min(G, M / stride)``), so its intra-pod phases run among ``r``
  pod-mates (each transceiver serialises the members of its F-node group) and its inter-pod phases
  among ``p`` same-position nodes on the inter-pod switch: a group inside one pod (``p = 1``) uses
  the intra-pod path only, a group with one rank per pod (``stride`` a multiple of M) the inter-pod
  path only. Concurrent groups use disjoint transceivers (each node's own), so they do not share.

Algorithms (all_reduce; reduce_scatter / all_gather are its halves):

* ``hierarchical`` (default): direct reduce-scatter inside the pod over the P transceivers, direct
  all-reduce of the 1/M shard among the N same-position nodes over the inter-pod transceiver,
  direct all-gather inside the pod. Every phase is one round.
* ``hierarchical_ring``: the same three phases as rings (one transceiver per phase step).
* all_to_all ``direct``: intra-pod traffic over the P transceivers, inter-pod traffic over the
  inter-pod transceiver then relayed by the destination pod's m-th node (two hops).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.collectives.params import AlgoParams
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.errors import EstimatorError
from estimator.fabrics.base import CollectiveCost, FabricConfig
from estimator.fabrics.optical.base import ZERO, Affine, OpticalFabric
from estimator.topology.analytic import compiled_from_loads
from estimator.topology.graph import Topology


@dataclass
class OpsquareConfig(FabricConfig):
    name: str = "opsquare"
    nodes: int = 256
    pods: int = 16
    pod_nodes: int = 16
    groups: int = 4
    transceiver_bps: float = 3.6e12
    transceiver_latency_s: float = 80e-9
    label_processing_s: float = 10e-9
    preamble_s: float = 30e-9
    host_overhead_s: float = 0.0

    def validate(self) -> None:
        super().validate()
        for key in ("pods", "pod_nodes", "groups"):
            if getattr(self, key) < 1:
                raise EstimatorError(f"fabric.{key} must be >= 1, got {getattr(self, key)}")
        if self.nodes != self.pods * self.pod_nodes:
            raise EstimatorError(
                f"fabric.nodes={self.nodes} must equal pods x pod_nodes = {self.pods} x {self.pod_nodes} = "
                f"{self.pods * self.pod_nodes} (OPSquare connects N x M nodes)"
            )
        if self.pod_nodes % self.groups:
            raise EstimatorError(f"fabric.groups={self.groups} must divide pod_nodes={self.pod_nodes} (P groups of M/P)")
        if not self.transceiver_bps > 0:
            raise EstimatorError(f"fabric.transceiver_bps must be positive, got {self.transceiver_bps!r}")
        for key in ("transceiver_latency_s", "label_processing_s", "preamble_s", "host_overhead_s"):
            if not getattr(self, key) >= 0:
                raise EstimatorError(f"fabric.{key} must be >= 0, got {getattr(self, key)!r}")


class OpsquareFabric(OpticalFabric):
    name = "opsquare"
    Config = OpsquareConfig
    COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")

    def __init__(self, config: OpsquareConfig):
        super().__init__(config)
        self._shaped: dict[tuple, Affine] = {}

    @property
    def cfg(self) -> OpsquareConfig:
        return self.config  # type: ignore[return-value]

    def algorithms(self, collective: str) -> tuple[str, ...]:
        if collective == "all_to_all":
            return ("direct",)
        if collective in ("all_reduce", "reduce_scatter", "all_gather"):
            return ("hierarchical", "hierarchical_ring")
        return ()

    def check_size(self, n: int) -> None:
        super().check_size(n)
        m = self.cfg.pod_nodes
        if n > m and n % m:
            raise EstimatorError(
                f"fabric 'opsquare': a group of {n} must fit in one pod (<= {m}) or be whole pods (multiple of {m})"
            )

    # ---- building blocks --------------------------------------------------------------------
    @property
    def hop_s(self) -> float:
        c = self.cfg
        return c.transceiver_latency_s + c.label_processing_s + c.preamble_s

    def _round(self, hops: int, per_byte_s: float) -> Affine:
        return Affine(self.cfg.host_overhead_s + hops * self.hop_s, per_byte_s, 1)

    def _shape(self, n: int) -> tuple[int, int]:
        """(pods used, nodes per pod) of a group of ``n``."""
        m = self.cfg.pod_nodes
        return (1, n) if n <= m else (n // m, m)

    def _intra_direct(self, members: int, frac: float, per_tx: int | None = None) -> Affine:
        """One round: each node sends ``frac``/members of the buffer to each pod-mate, spread over
        the P transceivers (transceiver g serves group g: at most F peers; ``per_tx`` = peers
        behind the busiest transceiver, default that of ``members`` consecutive nodes)."""
        if members <= 1:
            return ZERO
        if per_tx is None:
            per_tx = min(self.cfg.pod_nodes // self.cfg.groups, members - 1)
        return self._round(1, per_tx * frac / members * 8 / self.cfg.transceiver_bps)

    def _inter_direct(self, pods: int, frac: float) -> Affine:
        if pods <= 1:
            return ZERO
        return self._round(1, (pods - 1) * frac / pods * 8 / self.cfg.transceiver_bps)

    def _ring(self, members: int, frac: float) -> Affine:
        """members-1 rounds, each sending frac/members on one transceiver."""
        if members <= 1:
            return ZERO
        one = self._round(1, frac / members * 8 / self.cfg.transceiver_bps)
        return Affine(one.fixed_s * (members - 1), one.per_byte_s * (members - 1), members - 1)

    def model(self, collective: str, algorithm: str, n: int) -> Affine:
        pods, per_pod = self._shape(n)
        return self.shaped_model(collective, algorithm, pods, per_pod, min(self.cfg.pod_nodes // self.cfg.groups, per_pod - 1))

    def shaped_model(self, collective: str, algorithm: str, pods: int, per_pod: int, per_tx: int) -> Affine:
        """A group of ``per_pod`` members in each of ``pods`` pods (same positions), ``per_tx`` of
        a member's pod-mates behind its busiest intra-pod transceiver."""
        n = pods * per_pod
        if collective == "all_to_all":
            c = self.cfg
            inter = (pods - 1) / pods * 8 / c.transceiver_bps if pods > 1 else 0.0
            # a node's intra transceivers carry its own pod traffic plus what it relays for the
            # other pods: per_pod - 1 destinations x pods sources, spread over the P transceivers
            intra = per_tx * pods / n * 8 / c.transceiver_bps
            hops = 2 if pods > 1 and per_pod > 1 else 1  # one rank per pod: the inter-pod switch only
            return Affine(c.host_overhead_s + hops * self.hop_s, max(inter, intra), 1)
        ring = algorithm == "hierarchical_ring"
        intra = self._ring(per_pod, 1.0) if ring else self._intra_direct(per_pod, 1.0, per_tx)
        inter = self._ring(pods, 1.0 / per_pod) if ring else self._inter_direct(pods, 1.0 / per_pod)
        # intra-pod reduce-scatter, inter-pod reduce-scatter + all-gather of the shard, intra all-gather
        if collective == "reduce_scatter":
            return intra + inter
        if collective == "all_gather":
            return inter + intra
        return intra + inter + inter + intra

    def group_shape(self, size: int, stride: int) -> tuple[int, int, int] | None:
        """(pods, members per pod, busiest transceiver's peers) of a group of ``size`` ranks
        ``stride`` apart (rank ``i`` = node ``i``), or None when the group does not sit the same way
        in every pod it touches (then it is priced as ``size`` consecutive nodes)."""
        m, f = self.cfg.pod_nodes, self.cfg.pod_nodes // self.cfg.groups
        if stride >= m:
            return (size, 1, 0) if stride % m == 0 else None
        if m % stride:
            return None
        per_pod = min(size, m // stride)
        if size % per_pod:
            return None
        positions = [j * stride for j in range(per_pod)]  # the members of one pod (offsets cancel: stride | M)
        tx = [sum(1 for q in positions if q // f == g) for g in range(self.cfg.groups)]
        own = positions[0] // f
        per_tx = max(c - (g == own) for g, c in enumerate(tx))  # peers behind the busiest transceiver of member 0
        return size // per_pod, per_pod, per_tx

    def group_cost(self, collective: str, nbytes: float, size: int, stride: int, algorithm: str = "default") -> CollectiveCost:
        """One parallel group priced where it sits (module docstring); called by
        :func:`estimator.parallel.placement.group_cost`."""
        shape = self.group_shape(size, stride)
        if shape is None or collective not in self.COLLECTIVES or size > self.nodes:
            return self.collective_cost(collective, nbytes, algorithm, group_size=size)
        options = self.valid_algorithms(collective, size)
        if algorithm in ("default", "auto"):
            algorithm = options[0] if algorithm == "default" else min(
                options, key=lambda a: (self._shaped_cached(collective, a, shape).time(nbytes), a))
        elif algorithm not in options:
            return self.collective_cost(collective, nbytes, algorithm, group_size=size)  # its one-line error
        m = self._shaped_cached(collective, algorithm, shape)
        return CollectiveCost(collective, algorithm, size, float(nbytes), m.time(nbytes), m.steps, m.reconfig_s)

    def _shaped_cached(self, collective: str, algorithm: str, shape: tuple[int, int, int]) -> Affine:
        key = (collective, algorithm, *shape)
        hit = self._shaped.get(key)
        if hit is None:
            hit = self._shaped[key] = self.shaped_model(collective, algorithm, *shape)
        return hit

    def p2p_time(self, src: int, dst: int, nbytes: float) -> float:
        self.check_endpoints(src, dst)
        if src == dst:
            return 0.0
        m = self.cfg.pod_nodes
        same_pod, same_pos = src // m == dst // m, src % m == dst % m
        hops = 1 if (same_pod or same_pos) else 2
        return self.cfg.host_overhead_s + hops * self.hop_s + nbytes * 8 / self.cfg.transceiver_bps

    # ---- explicit path: the library's schedules on the OPSquare topology --------------------
    def topology(self) -> Topology:
        """Nodes, P intra-pod switches per pod (switch g delivers to group g of the pod) and one
        inter-pod switch per position; each transceiver a link of ``transceiver_bps``; a hop's
        latency on the switch -> node link. Routing by hop count (<= 2 hops)."""
        c = self.cfg
        bw, m, f = c.transceiver_bps / 8, c.pod_nodes, c.pod_nodes // c.groups
        topo = Topology("opsquare", "shortest")
        eps = [topo.add_endpoint(f"node{i}") for i in range(c.nodes)]
        for pod in range(c.pods):
            for g in range(c.groups):
                sw = topo.add_switch(f"intra{pod}_{g}")
                for i in range(m):
                    topo.add_link(eps[pod * m + i], sw, bw, 0.0)
                for i in range(g * f, (g + 1) * f):
                    topo.add_link(sw, eps[pod * m + i], bw, self.hop_s)
        for pos in range(m):
            sw = topo.add_switch(f"inter{pos}")
            for pod in range(c.pods):
                topo.connect(eps[pod * m + pos], sw, bw, 0.0, self.hop_s)
        return topo

    def explicit_cost(self, collective: str, algorithm: str, n: int, nbytes: float) -> float:
        """``hierarchical_ring`` all-reduce = the library's ``hierarchical`` schedule (intra ring,
        inter rings per position, intra ring) priced on :meth:`topology` by :meth:`routed`."""
        if (collective, algorithm) != ("all_reduce", "hierarchical_ring"):
            raise EstimatorError(f"fabric 'opsquare': no explicit schedule for {algorithm} {collective}")
        _, per_pod = self._shape(n)
        pats = patterns("hierarchical", collective, n, AlgoParams(local=per_pod))
        return self.routed(pats).time(nbytes)

    def routed(self, pats: list) -> CompiledSchedule:
        """Step patterns priced on :meth:`topology` without a graph search (the library's pricing
        model, :mod:`estimator.collectives.pricing`; equal to compiling the schedule on the graph,
        tested to 1e-12). A transfer inside a pod has one shortest route, sender -> the intra-pod
        switch of the receiver's group -> receiver; one between the same positions of two pods,
        sender -> that position's inter-pod switch -> receiver: its busiest link is the sender's
        up-link or the receiver's down-link, its latency one hop. Other pairs (two hops) are not
        routed here."""
        c = self.cfg
        m, f = c.pod_nodes, c.pod_nodes // c.groups

        def loads(src, dst, nbytes, period):
            intra = src // m == dst // m
            if not (intra | (src % m == dst % m)).all():
                raise EstimatorError("fabric 'opsquare': routed() prices one-hop transfers only")
            # link ids: intra up (node, group), intra down (node), inter up (node), inter down (node)
            up = np.where(intra, src * c.groups + (dst % m) // f, c.nodes * c.groups + src)
            down = np.where(intra, dst, c.nodes + dst) + c.nodes * (c.groups + 1)
            load = np.bincount(np.concatenate([up, down]), weights=np.concatenate([nbytes, nbytes]))
            return np.maximum(load[up], load[down]), np.ones(len(src), dtype=np.int64)

        params = PricingParams(alpha_s=c.host_overhead_s)
        return compiled_from_loads(pats, loads, c.transceiver_bps / 8, self.hop_s, 1, params)
