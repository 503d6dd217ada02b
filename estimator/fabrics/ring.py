"""``ring``: N nodes on a (bidirectional) ring of point-to-point links.

Assumes one link per direction between neighbours (``link_bandwidth_Bps`` each, ``link_latency_s``),
shortest-path routing, nodes that forward. Closed forms: ring (each step uses each node's own
outgoing link: the switch formula with α + latency) and bidirectional ring (half the data each
way: twice the bandwidth for n >= 3). Other algorithms with a step pattern are priced by analytic
routing (:mod:`estimator.topology.analytic`: routes are arcs, no graph search), the rest from their
schedules; ``auto`` bounds candidates by their hop counts (:meth:`route_bounds`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule
from estimator.fabrics.electrical import LinkConfig, LinkFabric, offers_with
from estimator.fabrics.library import check_chunking
from estimator.fabrics.unit_compiled import UnitCompiled
from estimator.topology.builders import ring
from estimator.topology.graph import Topology
from estimator.topology.ring import ring_compiled, ring_digits_only, ring_hops

RS_AR_AG = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass
class RingConfig(LinkConfig):
    name: str = "ring"
    nodes: int = 32
    bidirectional: bool = True
    chunks: int = 1            # run each collective as this many chunks, one after another
    chunk_bytes: float = 0.0   # or chunks of this many bytes (0 = use chunks)

    def validate(self) -> None:
        super().validate()
        check_chunking(self)


class RingFabric(UnitCompiled, LinkFabric):
    name = "ring"
    Config = RingConfig
    OFFERS = offers_with({c: ("ring", "bidir_ring") for c in RS_AR_AG})

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        return ring(c.nodes, c.link_bandwidth_Bps, c.link_latency_s, c.bidirectional, "ring")

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        if collective not in RS_AR_AG or n != self.nodes:
            return None
        c = self.config
        if algorithm == "ring":
            return self.switch_like(collective, "ring", n, nbytes, c.link_latency_s, c.link_bandwidth_Bps)
        if algorithm == "bidir_ring" and c.bidirectional:
            both = 2 * c.link_bandwidth_Bps if n >= 3 else c.link_bandwidth_Bps
            return self.switch_like(collective, "bidir_ring", n, nbytes, c.link_latency_s, both)
        return None

    def port_bandwidth(self) -> float:
        c = self.config
        return (2 if c.bidirectional else 1) * c.link_bandwidth_Bps

    def min_route_latency(self) -> float:
        return self.config.link_latency_s

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        c = self.config
        pats = patterns(algorithm, collective, n, self.algo_params(n)) if c.nodes >= 3 else None
        if pats is None:
            return None
        return ring_compiled(pats, c.nodes, c.bidirectional, c.link_bandwidth_Bps, c.link_latency_s,
                             self.pricing(algorithm), n)

    def priced_without_arrays(self, pats: list, n: int) -> bool:
        return n == self.config.nodes and ring_digits_only(pats, self.config.nodes)

    def route_bounds(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        c = self.config
        if c.nodes < 3:
            return None
        hops = ring_hops(src, dst, c.nodes, c.bidirectional)
        return hops * c.link_latency_s * (1 - 1e-12), np.full(len(src), c.link_bandwidth_Bps), hops

    def link_capacity(self) -> float | None:
        c = self.config
        return (2 if c.bidirectional else 1) * c.nodes * c.link_bandwidth_Bps if c.nodes >= 3 else None

    def shift_invariant(self, period: int, n: int) -> bool:
        return n == self.config.nodes  # a rotation of the whole ring
