"""OCS: a MEMS optical circuit switch wires every server's ports into a topology.

Model (seed 001; defaults in conf/fabric/ocs.yaml). ``nodes`` servers with ``ports`` optical ports
of ``port_bps`` each; the OCS realises one topology at a time:

Every circuit (topology edge) is one port (Table I: 100 Gbps per link), whatever the topology's
degree — our reading of the paper, where Ring, Torus and Binary Tree differ in shape, not link speed:

* ``ring``: a bidirectional ring (2 of the ports used);
* ``torus2d``: rows x cols torus (the most square factorisation), one port per neighbour;
* ``btree``: the library's in-order binary tree (NCCL's shape), one port per tree edge;
* ``one_switch`` (the paper's ideal reference): all ports bonded into one non-blocking switch;
* ``fattree`` (the paper's L3 fat tree reference): a 3-level k-ary fat tree, ports bonded into
  one host link, ECMP.

Every link has ``link_delay_s`` (Table I: 5 us); every message pays the ``inner_node_delay_s``
(Table I: 87 us) as its per-message latency alpha; a received reduction runs at ``memory_bps``
(Table I: 127.8 Gbps). Collectives are the shared library's schedules priced on that topology
(routing, link sharing), cached per (collective, algorithm, group size).

Seven all-reduce algorithms (seed 001 Sec. III): BTree = ``binary_tree``, Ring = ``ring``,
PSLike = ``ps``, Torus = ``torus2d``, DBTree = ``double_binary_tree``, RD = ``recursive_doubling``
(power-of-two groups), and our seventh, ``halving_doubling`` (Rabenseifner), the paper names only six.

Reconfiguration: changing the topology costs ``reconfig_s`` (MEMS switching, 25 ms, Polatis
datasheet). ``topology=auto`` prices a collective on every OCS-wired shape (ring, torus2d, btree) and keeps the fastest
(no reconfiguration charged: that is a job-level decision, see :mod:`estimator.timeline.job_topology`, which
counts one reconfiguration at job start).

Circuits per parallel group (hybrid parallelism, :mod:`estimator.parallel`): the MEMS switch
connects any port to any port, so each group (a TP, EP, DP group, or two adjacent pipeline stages)
gets its own circuits among its own servers, wherever they are: :meth:`OcsFabric.group_cost`
prices a group of ``size`` on an OCS of ``size`` servers wired as ``topology`` (its own ring /
torus / tree; ``auto``: the fastest wired shape per collective), :meth:`OcsFabric.group_p2p_time`
a pipeline send on one direct circuit. Sibling groups use disjoint servers and ports, so they do
not share. A group's circuits take :meth:`OcsFabric.group_ports` of each server's ``ports`` (the
distinct neighbours its shape gives a server; ``auto``: the most any wired shape needs); the
parallel layer (:mod:`estimator.parallel.circuits`) keeps as many groups' circuits wired as the
ports hold and pays ``reconfig_s`` (:meth:`reconfiguration_s`) each time a step has to rewire.
The electrical references (``one_switch``, ``fattree``) have no circuits: a group is priced as
``size`` consecutive servers there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import AlgoParams, torus_dims
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.collectives.trees import inorder_parents
from estimator.errors import EstimatorError, non_negative, positive
from estimator.fabrics.base import CollectiveCost, FabricConfig
from estimator.fabrics.library import LibraryFabric
from estimator.fabrics.optical.compile_cache import SharedCompiled
from estimator.topology import builders
from estimator.topology.btree import inorder_hops, tree_compiled
from estimator.topology.fat_tree import fat_tree_compiled
from estimator.topology.graph import Topology
from estimator.topology.ring import ring_compiled, ring_digits_only, ring_hops
from estimator.topology.torus import torus_compiled, torus_digits_only, torus_hops, torus_links

TOPOLOGIES = ("ring", "torus2d", "btree", "one_switch", "fattree")
WIRED = ("ring", "torus2d", "btree")  # what the MEMS OCS wires; the other two are references
# btree wiring: groups of at least this many ranks are routed analytically (estimator.topology.btree,
# equal to the graph to ~1e-12); smaller ones keep compiling on the graph (cheap there, and their
# recorded prices stay bit-identical)
BTREE_ROUTED = 128
ALL_REDUCE_7 = ("ring", "binary_tree", "ps", "torus2d", "double_binary_tree", "recursive_doubling", "halving_doubling")
PAPER_NAMES = {
    "binary_tree": "BTree", "ring": "Ring", "ps": "PSLike", "torus2d": "Torus",
    "double_binary_tree": "DBTree", "recursive_doubling": "RD", "halving_doubling": "HD",
}


@dataclass
class OcsConfig(FabricConfig):
    name: str = "ocs"
    nodes: int = 32
    topology: str = "torus2d"
    ports: int = 4
    port_bps: float = 100.0e9
    link_delay_s: float = 5.0e-6
    inner_node_delay_s: float = 87.0e-6
    memory_bps: float = 127.8e9
    reconfig_s: float = 25.0e-3
    fattree_radix: int = 8

    def validate(self) -> None:
        super().validate()
        if self.topology not in (*TOPOLOGIES, "auto"):
            raise EstimatorError(f"fabric.topology must be one of {', '.join(TOPOLOGIES)}, auto; got {self.topology!r}")
        if self.ports < 1:
            raise EstimatorError(f"fabric.ports must be >= 1, got {self.ports}")
        if self.topology == "torus2d" and self.ports < 4:
            raise EstimatorError(f"fabric.topology=torus2d needs 4 ports per server, got {self.ports}")
        if self.topology in ("ring", "btree") and self.ports < (2 if self.topology == "ring" else 3):
            raise EstimatorError(f"fabric.topology={self.topology} needs more than {self.ports} port(s) per server")
        positive(self.port_bps, "fabric.port_bps")
        positive(self.memory_bps, "fabric.memory_bps")
        for key in ("link_delay_s", "inner_node_delay_s", "reconfig_s"):
            non_negative(getattr(self, key), f"fabric.{key}")
        if self.fattree_radix < 2 or self.fattree_radix % 2:
            raise EstimatorError(f"fabric.fattree_radix must be an even integer >= 2, got {self.fattree_radix}")
        if self.topology == "fattree" and self.nodes > self.fattree_radix**3 // 4:
            raise EstimatorError(
                f"fabric.fattree_radix={self.fattree_radix} holds {self.fattree_radix**3 // 4} servers, fewer than {self.nodes}"
            )


def binary_tree_topology(n: int, bandwidth_Bps: float, latency_s: float) -> Topology:
    """The in-order binary tree the library's tree algorithms use (:mod:`estimator.collectives.trees`),
    wired as circuits: the OCS gives the BTree algorithm exactly its tree."""
    topo = Topology("btree", "shortest")
    eps = [topo.add_endpoint(f"node{i}") for i in range(n)]
    for child, parent in enumerate(inorder_parents(n)):
        if parent >= 0:
            topo.connect(eps[parent], eps[child], bandwidth_Bps, latency_s)
    return topo


class OcsFabric(SharedCompiled, LibraryFabric):
    name = "ocs"
    Config = OcsConfig
    OFFERS = {
        "all_reduce": ALL_REDUCE_7,
        "reduce_scatter": ("ring", "halving_doubling"),
        "all_gather": ("ring", "recursive_doubling", "halving_doubling"),
        "broadcast": ("binomial_tree", "binary_tree"),
        "all_to_all": ("direct", "pairwise"),
        "p2p": ("direct",),
    }

    def __init__(self, config: OcsConfig):
        super().__init__(config)
        self._variants: dict[str, OcsFabric] = {}

    @property
    def cfg(self) -> OcsConfig:
        return self.config  # type: ignore[return-value]

    # ---- what the timeline / job planner needs -----------------------------------------------
    def candidate_topologies(self, references: bool = False) -> tuple[str, ...]:
        """Topologies ``topology=auto`` chooses from: the shapes the OCS wires (ring, torus2d,
        btree); with ``references`` also the electrical one_switch / fattree references (the fat
        tree only if it has enough switch ports)."""
        fits = self.cfg.nodes <= self.cfg.fattree_radix**3 // 4
        shapes = TOPOLOGIES if references else WIRED
        return tuple(t for t in shapes if t != "fattree" or fits)

    def reconfiguration_s(self, current: str | None, target: str) -> float:
        """Seconds to rewire from ``current`` (None: unknown / not wired yet) to ``target``."""
        return 0.0 if current == target else self.cfg.reconfig_s

    def with_topology(self, topology: str) -> OcsFabric:
        """This fabric wired as ``topology`` (cached)."""
        if topology == self.cfg.topology:
            return self
        hit = self._variants.get(topology)
        if hit is None:
            params = {**self.cfg.to_dict(), "topology": topology}
            hit = self._variants[topology] = OcsFabric(OcsConfig(**params))
        return hit

    @property
    def wires_per_job(self) -> bool:
        """``topology=auto``: the job-level planner (:mod:`estimator.timeline.job_topology`) wires
        the OCS once per job as the shape with the fastest job, one reconfiguration counted."""
        return self.cfg.topology == "auto"

    # ---- LibraryFabric hooks ---------------------------------------------------------------
    def build_topology(self, algorithm: str) -> Topology:
        c, n = self.cfg, self.cfg.nodes
        port = c.port_bps / 8
        if c.topology == "ring":
            return builders.ring(n, port, c.link_delay_s)
        if c.topology == "torus2d":
            rows, cols = torus_dims(n, AlgoParams())
            return builders.torus2d(rows, cols, port, c.link_delay_s)
        if c.topology == "btree":
            return binary_tree_topology(n, port, c.link_delay_s)
        if c.topology == "one_switch":
            return builders.star(n, port * c.ports, c.link_delay_s, "one_switch")
        if c.topology == "fattree":
            return builders.fat_tree(c.fattree_radix, n, port * c.ports, c.link_delay_s)
        raise EstimatorError("fabric.topology=auto has no single topology")  # pragma: no cover

    def pricing(self, algorithm: str) -> PricingParams:
        c = self.cfg
        return PricingParams(alpha_s=c.inner_node_delay_s, memory_bandwidth_Bps=c.memory_bps / 8)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        """Shapes where a schedule's price is the switch formula's with α + the longest route's
        latency at one circuit's bandwidth (each tested equal to the schedule): on the whole ring /
        torus, the ``ring`` algorithm (one transfer per circuit, at most 1 / 2 circuits per route)
        and on the torus the ``torus2d`` algorithm (rings per dimension, one circuit each); on the
        fat tree the rings (see :mod:`estimator.fabrics.fattree`); on ``one_switch`` (a star)
        every algorithm with a switch formula."""
        c = self.cfg
        algo = lookup(algorithm)
        if c.topology == "auto" or n <= 1 or collective not in algo.closed_forms:
            return None
        port, hops = c.port_bps / 8, None
        if c.topology == "one_switch":
            port, hops = port * c.ports, 1
        elif c.topology == "fattree" and algorithm in ("ring", "bidir_ring"):
            port, hops = port * c.ports, builders.fat_tree_traversals(c.fattree_radix // 2, n)
        elif n == c.nodes and c.topology == "ring" and algorithm == "ring":
            hops = 1
        elif n == c.nodes and c.topology == "torus2d" and algorithm in ("ring", "torus2d"):
            hops = 2 if algorithm == "ring" and min(torus_dims(n, AlgoParams())) > 1 else 1
        if hops is None:
            return None
        p = self.pricing(algorithm)
        return algo.switch_cost(collective, n, nbytes, p.alpha_s + hops * c.link_delay_s, port, p.gamma,
                                self.algo_params(n))

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        """Ring, torus and fat-tree wirings: analytic routing (:mod:`estimator.topology.analytic`)."""
        c = self.cfg
        btree = c.topology == "btree" and n >= BTREE_ROUTED
        if c.topology not in ("ring", "torus2d", "fattree") and not btree or (c.topology == "ring" and c.nodes < 3):
            return None
        pats = patterns(algorithm, collective, n, self.algo_params(n))
        if pats is None:
            return None
        port, p = c.port_bps / 8, self.pricing(algorithm)
        if btree:
            return tree_compiled(pats, c.nodes, port, c.link_delay_s, p, n)
        if c.topology == "fattree":
            return fat_tree_compiled(pats, c.fattree_radix // 2, port * c.ports, c.link_delay_s, p)
        if c.topology == "ring":
            return ring_compiled(pats, c.nodes, True, port, c.link_delay_s, p, n)
        rows, cols = torus_dims(c.nodes, AlgoParams())
        return torus_compiled(pats, rows, cols, port, c.link_delay_s, p, n)

    def priced_without_arrays(self, pats: list, n: int) -> bool:
        """Digit steps on the whole ring / torus wiring (``auto`` prices them first)."""
        c = self.cfg
        if n != c.nodes or c.topology not in ("ring", "torus2d"):
            return False
        return ring_digits_only(pats, n) if c.topology == "ring" else torus_digits_only(pats, *torus_dims(n, AlgoParams()))

    def route_bounds(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """Hop counts of the ring / torus / fat-tree / binary-tree wiring; one circuit (bonded host link) per transfer."""
        c = self.cfg
        port = np.full(len(src), c.port_bps / 8)
        if c.topology == "ring" and c.nodes >= 3:
            hops = ring_hops(src, dst, c.nodes, True)
        elif c.topology == "torus2d":
            hops = torus_hops(src, dst, *torus_dims(c.nodes, AlgoParams()))
        elif c.topology == "fattree":
            hops, port = builders.fat_tree_pair_traversals(c.fattree_radix // 2, src, dst), port * c.ports
            return hops * c.link_delay_s * (1 - 1e-12), port, None
        elif c.topology == "btree" and c.nodes >= BTREE_ROUTED:
            hops = inorder_hops(src, dst, c.nodes)
        else:
            return None
        return hops * c.link_delay_s * (1 - 1e-12), port, hops

    def shift_invariant(self, period: int, n: int) -> bool:
        c = self.cfg
        if c.topology == "ring":
            return n == c.nodes
        if c.topology == "torus2d":
            return n == c.nodes and period % torus_dims(c.nodes, AlgoParams())[1] == 0
        half = c.fattree_radix // 2
        return c.topology == "fattree" and period % (half * half) == 0

    def link_capacity(self) -> float | None:
        c = self.cfg
        if c.topology == "ring" and c.nodes >= 3:
            return 2 * c.nodes * c.port_bps / 8
        if c.topology == "torus2d":
            return torus_links(*torus_dims(c.nodes, AlgoParams())) * c.port_bps / 8
        if c.topology == "btree":
            return 2 * (c.nodes - 1) * c.port_bps / 8  # one circuit per tree edge, both ways
        return None

    def port_bandwidth(self) -> float:
        return self.cfg.ports * self.cfg.port_bps / 8  # no server uses more than its ports

    def min_route_latency(self) -> float:
        return self.cfg.link_delay_s  # every route crosses a circuit

    def collective_cost(
        self, collective: str, nbytes: float, algorithm: str = "default", group_size: int | None = None,
        explicit: bool = False,
    ) -> CollectiveCost:
        if self.cfg.topology != "auto":
            return super().collective_cost(collective, nbytes, algorithm, group_size, explicit)
        best, errors = None, []
        for topo in self.candidate_topologies():
            try:
                cost = self.with_topology(topo).collective_cost(collective, nbytes, algorithm, group_size, explicit)
            except EstimatorError as exc:
                errors.append(f"{topo}: {exc}")
                continue
            if best is None or cost.time_s < best[1].time_s:
                best = (topo, cost)
        if best is None:
            raise EstimatorError(f"fabric 'ocs': no topology can run {collective} ({'; '.join(errors)})")
        topo, cost = best
        return CollectiveCost(cost.collective, f"{cost.algorithm}@{topo}", cost.nodes, cost.nbytes, cost.time_s,
                              cost.steps, cost.reconfig_s)

    def topology(self, algorithm: str = ""):
        if self.cfg.topology == "auto":
            return self.with_topology("torus2d").topology(algorithm)
        return super().topology(algorithm)

    # ---- circuits per parallel group (module docstring) ------------------------------------------
    def circuit_ports(self) -> int:
        """Optical ports per server: what all wired groups' circuits share."""
        return self.cfg.ports

    def _group_ocs(self, size: int) -> OcsFabric:
        if size == self.cfg.nodes:
            return self
        hit = self._variants.get(f"group{size}")
        if hit is None:
            hit = self._variants[f"group{size}"] = OcsFabric(OcsConfig(**{**self.cfg.to_dict(), "nodes": size}))
        return hit

    def group_cost(self, collective: str, nbytes: float, size: int, stride: int, algorithm: str = "default") -> CollectiveCost:
        """A group of ``size`` servers on its own circuits (any ``stride``: circuits join any ports)."""
        if self.cfg.topology not in (*WIRED, "auto"):
            return self.collective_cost(collective, nbytes, algorithm, group_size=size)
        return self._group_ocs(size).collective_cost(collective, nbytes, algorithm)

    def group_p2p_time(self, nbytes: float, stride: int) -> float:
        """A pipeline send between adjacent stages on its own direct circuit."""
        if self.cfg.topology not in (*WIRED, "auto"):
            return self.p2p_time(0, min(stride, self.nodes - 1), nbytes)
        c = self.cfg
        return c.inner_node_delay_s + c.link_delay_s + nbytes / (c.port_bps / 8)

    def group_ports(self, size: int, shape: str | None = None) -> int:
        """Ports per server the circuits of a group of ``size`` take (0 on the electrical references;
        ``shape="chain"``: a pipeline's stage-to-stage circuits, one to each neighbouring stage)."""
        shape = shape or self.cfg.topology
        if size <= 1 or shape in ("one_switch", "fattree"):
            return 0
        if shape == "chain":
            return min(2, size - 1)
        if shape == "auto":
            return max(self.group_ports(size, t) for t in WIRED)
        if shape == "ring":
            return min(2, size - 1)
        if shape == "torus2d":
            return sum(min(2, k - 1) for k in torus_dims(size, AlgoParams()))
        parents = inorder_parents(size)
        degree = [int(p >= 0) for p in parents]
        for p in parents:
            if p >= 0:
                degree[p] += 1
        return max(degree)
