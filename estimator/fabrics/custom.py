"""``custom``: a user-defined topology from a YAML file (``fabric.topology=topologies/xyz.yaml``).

Assumes what the file says (see :mod:`estimator.topology.loader`); the ``nodes`` ranks use the
file's first endpoints (``nodes`` may not exceed the file's endpoint count).
A relative path is looked up in the working directory, then in the repository root.

An explicit graph (``links:``) is priced from every algorithm's schedule compiled on the graph.
A standard shape (``builder:``) is the graph the named fabric of that shape builds, so it is priced
by that fabric's own hooks -- closed forms and analytic routing, no graph search -- on a *twin*:
the named fabric configured with the file's sizes, link bandwidths and latencies and this
config's ``alpha_s`` / ``memory_bandwidth_Bps`` (ring -> ``ring``, torus2d -> ``torus2d``,
fat_tree -> ``fattree``, bcube -> ``bcube``, rail_optimized -> ``superpod``, star -> the switch
formula with α + the link latency, as ``ideal`` / the OCS's ``one_switch``; leaf_spine -> analytic
ECMP routing, :func:`~estimator.topology.leaf_spine.leaf_spine_compiled`). The graph is built
only if a schedule without analytic routing needs it. The algorithms keep this fabric's
parameters (:class:`AlgoParams` defaults): where a twin's own differ for an algorithm (a torus
whose rows x cols is not the most square factorisation, under ``torus2d``; BCube's radix, under
``radix``), that algorithm is compiled on the graph instead. Every shape is tested equal (1e-12)
to compiling the schedules on the graph (tests/test_custom_shapes.py). Shapes a twin cannot take
(a rail-optimised file whose GPUs fill no whole servers, ...) use the graph.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import AlgoParams, torus_dims
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule, compile_schedule, rescale
from estimator.errors import EstimatorError, non_negative
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.bcube import BCubeConfig, BCubeFabric
from estimator.fabrics.electrical import GENERIC_OFFERS, LinkConfig, LinkFabric
from estimator.fabrics.fattree import FatTreeConfig, FatTreeFabric
from estimator.fabrics.library import LibraryFabric
from estimator.fabrics.ring import RingConfig, RingFabric
from estimator.fabrics.superpod import SuperPodConfig, SuperPodFabric
from estimator.fabrics.torus2d import Torus2dConfig, Torus2dFabric
from estimator.fabrics.unit_compiled import UNIT, _remember
from estimator.files import resolve_input
from estimator.topology.bcube import bcube_compiled
from estimator.topology.builders import leaf_spine, star
from estimator.topology.graph import Topology
from estimator.topology.leaf_spine import leaf_spine_compiled
from estimator.topology.loader import BUILDERS, TopologySpec, load_spec, load_topology

# algorithm families that read AlgoParams.radix / .local (the rest read neither, or fix them)
RADIX_READERS = ("radix", "dimwise", "spanning_tree")
LOCAL_READERS = ("hierarchical", "hierarchical_tree")
# schedules compiled on a file's graph with α = 0, γ = 1, per (file digest, collective, algorithm,
# n): shared by every custom config of that file (they differ only in alpha_s / memory bandwidth)
_GRAPH_COMPILED: dict[tuple[str, str, str, int], CompiledSchedule] = {}


@dataclass
class CustomConfig(FabricConfig):
    name: str = "custom"
    nodes: int = 8
    topology: str = "topologies/two_leaves.yaml"
    alpha_s: float = 0.0
    memory_bandwidth_Bps: float = 0.0

    def validate(self) -> None:
        super().validate()
        non_negative(self.alpha_s, "fabric.alpha_s")
        non_negative(self.memory_bandwidth_Bps, "fabric.memory_bandwidth_Bps")


class StarShape(LinkFabric):
    """A ``star`` file's twin: every route is endpoint -> switch -> endpoint (one latency), so every
    algorithm with a switch formula is that formula with α + the link latency (as ``ideal``); the
    others are priced by analytic routing as a one-level BCube (the same graph)."""

    name = "star"
    Config = LinkConfig

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        return star(c.nodes, c.link_bandwidth_Bps, c.link_latency_s)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        if collective not in lookup(algorithm).closed_forms:
            return None
        c = self.config
        return self.switch_like(collective, algorithm, n, nbytes, c.link_latency_s, c.link_bandwidth_Bps)

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        pats = patterns(algorithm, collective, n, self.algo_params(n)) if self.nodes >= 2 else None
        if pats is None:
            return None
        c = self.config
        return bcube_compiled(pats, c.nodes, 1, c.link_bandwidth_Bps, c.link_latency_s, self.pricing(algorithm))

    def port_bandwidth(self) -> float:
        return self.config.link_bandwidth_Bps

    def min_route_latency(self) -> float:
        return self.config.link_latency_s


class TorusShape(Torus2dFabric):
    """A ``torus2d`` file's twin: ``torus2d``'s hooks, plus the ``ring`` algorithm on the whole
    torus in closed form (as the OCS's torus wiring, :meth:`OcsFabric.closed_form`): rank r sends
    to r + 1, one hop along its row, or at a row's end the wrap-around link and one hop down the
    column; no link carries two transfers, so a step is the switch formula's with α + the longest
    route's latency (2 links if both dimensions are longer than 1)."""

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        c = self.config
        if algorithm != "ring" or n != self.nodes or n < 2 or collective not in lookup("ring").closed_forms:
            return super().closed_form(collective, algorithm, n, nbytes)
        hops = 2 if min(c.dims()) > 1 else 1
        return self.switch_like(collective, algorithm, n, nbytes, hops * c.link_latency_s, c.link_bandwidth_Bps)


class RailShape(SuperPodFabric):
    """A ``rail_optimized`` file's twin: ``superpod``'s hooks, plus the ``ring`` algorithm over
    whole servers (at least two, of at least two GPUs) in closed form, from the ECMP shares of
    :func:`estimator.topology.rail.rail_compiled`: every step, a GPU inside a server sends its
    M/n over its NVLink to the next (one switch), and the last GPU of each server sends to the
    first of the next server over three switches, half through its NVSwitch and the first GPU's
    rail, a quarter over the spine, a quarter through the next server's last GPU; its busiest
    links (NVLinks and NICs of those four GPUs) carry 3/4 of M/n. So a step is the larger of the
    switch formula's with α + 1 latency at NVLink bandwidth and with α + 3 latencies at 4/3 of the
    slower of NVLink and NIC, every step alike."""

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        c = self.config
        g = c.gpus_per_node
        if (algorithm != "ring" or collective not in lookup("ring").closed_forms or g < 2 or n % g
                or n < 2 * g):
            return super().closed_form(collective, algorithm, n, nbytes)
        lat, nv = c.switch_latency_s, c.nvlink_bandwidth_Bps
        inside = self.switch_like(collective, algorithm, n, nbytes, lat, nv)
        across = self.switch_like(collective, algorithm, n, nbytes, lat + lat + lat,
                                  min(nv, c.nic_bandwidth_Bps) * 4 / 3)
        return max(inside[0], across[0]), inside[1]


@dataclass
class LeafSpineConfig(FabricConfig):
    """A ``leaf_spine`` file's numbers (:func:`estimator.topology.builders.leaf_spine`)."""

    per_leaf: int = 1
    endpoint_bw: float = 1.0
    spines: int = 1
    uplink_bw: float = 1.0
    leaf_latency_s: float = 0.0
    uplink_latency_s: float = 0.0
    spine_latency_s: float = 0.0
    alpha_s: float = 0.0
    memory_bandwidth_Bps: float = 0.0


class LeafSpineShape(LinkFabric):
    """A ``leaf_spine`` file's twin: analytic ECMP routing (:func:`estimator.topology.leaf_spine.leaf_spine_compiled`)."""

    name = "leaf_spine"
    Config = LeafSpineConfig

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        return leaf_spine(c.nodes, c.per_leaf, c.endpoint_bw, c.spines, c.uplink_bw, c.leaf_latency_s,
                          c.uplink_latency_s, c.spine_latency_s)

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        pats = patterns(algorithm, collective, n, self.algo_params(n))
        if pats is None:
            return None
        c = self.config
        return leaf_spine_compiled(pats, n, c.per_leaf, c.spines, c.endpoint_bw, c.uplink_bw,
                                   (c.leaf_latency_s, c.uplink_latency_s, c.spine_latency_s), self.pricing(algorithm))

    def port_bandwidth(self) -> float:
        return self.config.endpoint_bw

    def min_route_latency(self) -> float:
        return self.config.leaf_latency_s  # every route ends on a leaf -> endpoint link


def twin(spec: TopologySpec, alpha_s: float, memory_bandwidth_Bps: float) -> LibraryFabric | None:
    """The named fabric whose topology is ``spec``'s standard shape, or None (an explicit graph, a
    shape no named fabric builds, or sizes it refuses)."""
    if spec.graph is not None:
        return None
    fn = BUILDERS[spec.kind]
    a: dict[str, Any] = {k: p.default for k, p in inspect.signature(fn).parameters.items()}
    a.update(spec.args)
    prices = {"alpha_s": alpha_s, "memory_bandwidth_Bps": memory_bandwidth_Bps}
    try:
        if spec.kind == "ring":
            return RingFabric(RingConfig(nodes=a["n"], bidirectional=bool(a["bidirectional"]),
                                         link_bandwidth_Bps=float(a["bandwidth_Bps"]),
                                         link_latency_s=float(a["latency_s"]), **prices))
        if spec.kind == "torus2d":
            return TorusShape(Torus2dConfig(nodes=a["rows"] * a["cols"], rows=a["rows"], cols=a["cols"],
                                               link_bandwidth_Bps=float(a["bandwidth_Bps"]),
                                               link_latency_s=float(a["latency_s"]), **prices))
        if spec.kind == "fat_tree":
            return FatTreeFabric(FatTreeConfig(nodes=a["n"], k=a["k"], link_bandwidth_Bps=float(a["bandwidth_Bps"]),
                                               link_latency_s=float(a["latency_s"]), **prices))
        if spec.kind == "bcube":
            port, levels = float(a["port_bw"]), a["levels"]
            node = port * levels
            if levels < 1 or node / levels != port:  # BCube's port bandwidth is node / levels: must be exact
                return None
            return BCubeFabric(BCubeConfig(nodes=a["radix"] ** levels, radix=a["radix"], node_bandwidth_Bps=node,
                                           link_latency_s=float(a["latency_s"]), **prices))
        if spec.kind == "rail_optimized":
            return RailShape(SuperPodConfig(nodes=a["n"], gpus_per_node=a["per_node"],
                                                 nvlink_bandwidth_Bps=float(a["nvlink_bw"]),
                                                 nic_bandwidth_Bps=float(a["nic_bw"]),
                                                 switch_latency_s=float(a["latency_s"]), **prices))
        if spec.kind == "leaf_spine":
            if a["n"] > a["per_leaf"] and a["spines"] < 1:
                return None  # leaves without spines: unreachable, as the graph says
            return LeafSpineShape(LeafSpineConfig(
                nodes=a["n"], per_leaf=a["per_leaf"], endpoint_bw=float(a["endpoint_bw"]), spines=a["spines"],
                uplink_bw=float(a["uplink_bw"]), leaf_latency_s=float(a["leaf_latency_s"]),
                uplink_latency_s=float(a["uplink_latency_s"]), spine_latency_s=float(a["spine_latency_s"]), **prices))
        if spec.kind == "star":
            return StarShape(LinkConfig(nodes=a["n"], link_bandwidth_Bps=float(a["bandwidth_Bps"]),
                                        link_latency_s=float(a["latency_s"]), **prices))
    except EstimatorError:
        return None  # e.g. a rail-optimised file that is not whole servers: the graph prices it
    return None


def same_params(mine: AlgoParams, theirs: AlgoParams, algorithm: str, n: int) -> bool:
    """True if ``algorithm`` on ``n`` ranks has the same schedule under both parameter sets."""
    if mine == theirs:
        return True
    try:
        algo = lookup(algorithm)
    except EstimatorError:
        return False
    base = algo.base
    if base in RADIX_READERS and not algo.fixed_radix and mine.radix != theirs.radix:
        return False
    if base in LOCAL_READERS and mine.local != theirs.local:
        return False
    if base == "torus2d":
        try:
            if torus_dims(n, mine) != torus_dims(n, theirs):
                return False
        except EstimatorError:
            return False
    return mine.chunks == theirs.chunks


class CustomTopologyFabric(LinkFabric):
    name = "custom"
    Config = CustomConfig
    OFFERS = GENERIC_OFFERS

    def __init__(self, config: CustomConfig):
        super().__init__(config)
        spec = load_spec(resolve_input(config.topology))
        if config.nodes > spec.endpoints:
            raise EstimatorError(
                f"fabric.nodes={config.nodes} but {config.topology} has {spec.endpoints} endpoints"
            )
        if spec.graph is not None:
            self._topos[""] = spec.graph
        self._spec = spec if spec.graph is None else None  # a standard shape: built only when needed
        self._digest = spec.digest
        self._twin = twin(spec, config.alpha_s, config.memory_bandwidth_Bps)

    def build_topology(self, algorithm: str) -> Topology:
        if self._spec is not None:
            return self._spec.build()
        return load_topology(resolve_input(self.config.topology))

    # ---- a standard shape: the twin's hooks, where its algorithm parameters agree with ours ---------
    def _shaped(self, algorithm: str, n: int) -> LibraryFabric | None:
        t = self._twin
        if t is None or not same_params(self.algo_params(n), t.algo_params(n), algorithm, n):
            return None
        return t

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        t = self._shaped(algorithm, n)
        return None if t is None else t.closed_form(collective, algorithm, n, nbytes)

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        t = self._shaped(algorithm, n)
        return None if t is None else t.analytic_compiled(collective, algorithm, n)

    def compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule:
        """The schedule compiled on the graph, once per file content (:data:`_GRAPH_COMPILED`) and
        priced with this config's α and γ; a shape's twin shares its own across link numbers."""
        t = self._shaped(algorithm, n)
        if t is not None:
            return t.compiled(collective, algorithm, n)
        key = (self._digest, collective, algorithm, n)
        unit = _GRAPH_COMPILED.get(key)
        if unit is None:
            sched = self.schedule(collective, algorithm, n, 1.0)
            unit = compile_schedule(sched, self.topology(algorithm), UNIT, self.ranks(n))
            _remember(_GRAPH_COMPILED, key, unit, 256)
        return rescale(unit, self.pricing(algorithm), 1.0, 1.0)

    def priced_without_arrays(self, pats: list, n: int) -> bool:
        return self._twin is not None and self._twin.priced_without_arrays(pats, n)

    def port_bandwidth(self) -> float:
        if self._twin is not None:
            return self._twin.port_bandwidth()
        return self.topology().max_port_bandwidth()

    def min_route_latency(self) -> float:
        return 0.0 if self._twin is None else self._twin.min_route_latency()

    def route_bounds(self, src: np.ndarray, dst: np.ndarray):
        return None if self._twin is None else self._twin.route_bounds(src, dst)

    def link_capacity(self) -> float | None:
        return None if self._twin is None else self._twin.link_capacity()

    def cut_seconds(self, src: np.ndarray, dst: np.ndarray, size: np.ndarray, period: int = 0) -> float:
        return 0.0 if self._twin is None else self._twin.cut_seconds(src, dst, size, period)

    def shift_invariant(self, period: int, n: int) -> bool:
        return self._twin is not None and self._twin.shift_invariant(period, n)
