"""``bcube``: electrical BCube(r, l) (Guo et al., SIGCOMM 2009), the baseline SiPAC compares with.

Assumes r^L servers (L = l+1 levels), each with one port per level (``node_bandwidth_Bps`` / L per
direction, so the per-node total matches SiPAC's normalisation, seed 003 Sec. 4) to an r-port
packet switch of that level; switch latency ``link_latency_s``; servers relay (ECMP over
digit-correction orders). Closed forms on the whole BCube: ``dimwise`` (all L levels busy every
step: the switch formula with bandwidth L x port) and ``radix`` with k = r (one level per step:
bandwidth = one port).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from estimator.collectives.params import AlgoParams, is_power, log_k
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule
from estimator.errors import EstimatorError, non_negative, positive
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.electrical import LinkFabric, offers_with
from estimator.fabrics.unit_compiled import UnitCompiled
from estimator.topology.bcube import bcube_compiled
from estimator.topology.builders import bcube
from estimator.topology.graph import Topology

RS_AR_AG = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass
class BCubeConfig(FabricConfig):
    name: str = "bcube"
    nodes: int = 512
    radix: int = 8
    node_bandwidth_Bps: float = 256.0e9
    link_latency_s: float = 1.0e-6
    alpha_s: float = 0.0
    memory_bandwidth_Bps: float = 0.0

    def validate(self) -> None:
        super().validate()
        if self.radix < 2:
            raise EstimatorError(f"fabric.radix must be >= 2, got {self.radix}")
        if not is_power(self.nodes, self.radix) or self.nodes < self.radix:
            raise EstimatorError(f"fabric.nodes={self.nodes} must be a power (>= 1) of fabric.radix={self.radix}")
        positive(self.node_bandwidth_Bps, "fabric.node_bandwidth_Bps")
        for key in ("link_latency_s", "alpha_s", "memory_bandwidth_Bps"):
            non_negative(getattr(self, key), f"fabric.{key}")

    @property
    def levels(self) -> int:
        return log_k(self.nodes, self.radix)

    @property
    def port_bandwidth_Bps(self) -> float:
        return self.node_bandwidth_Bps / self.levels


class BCubeFabric(UnitCompiled, LinkFabric):
    UNIT_FIELDS = ("link_latency_s", "node_bandwidth_Bps")  # c1 scales with 1 / node bandwidth (port = node / levels)
    name = "bcube"
    Config = BCubeConfig
    OFFERS = offers_with({**{c: ("dimwise", "radix") for c in RS_AR_AG},
                          "broadcast": ("spanning_tree",)})  # BCube's multi-port one-to-all (Guo et al. 2009)

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        return bcube(c.radix, c.levels, c.port_bandwidth_Bps, c.link_latency_s, "bcube")

    def algo_params(self, n: int) -> AlgoParams:
        return AlgoParams(radix=self.config.radix)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        c = self.config
        if collective not in RS_AR_AG or n != self.nodes:
            return None
        if algorithm == "dimwise":
            return self.switch_like(collective, algorithm, n, nbytes, c.link_latency_s, c.levels * c.port_bandwidth_Bps)
        if algorithm in ("radix", f"radix{c.radix}"):
            return self.switch_like(collective, algorithm, n, nbytes, c.link_latency_s, c.port_bandwidth_Bps)
        return None

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        """Steps whose transfers each cross one digit, on the whole BCube: analytic routing
        (:func:`estimator.topology.bcube.bcube_compiled`); others compile on the graph."""
        c = self.config
        pats = patterns(algorithm, collective, n, self.algo_params(n)) if n == c.nodes else None
        if not pats:
            return None
        return bcube_compiled(pats, c.radix, c.levels, c.port_bandwidth_Bps, c.link_latency_s, self.pricing(algorithm))

    PRICED_WITHOUT_ARRAYS = frozenset({"direct"})

    def priced_without_arrays(self, pats: list, n: int) -> bool:
        """All-pairs steps (``direct``) on the whole BCube of >= 2 levels: :func:`bcube_compiled`
        prices them from their shape (every link equally loaded), so ``auto`` tries ``direct`` at any
        size instead of skipping an all-pairs candidate beyond ``AUTO_MAX_PAIRS``."""
        c = self.config
        return (n == c.nodes and c.levels > 1 and bool(pats)
                and all(p.shape is not None and p.shape[:4] == ("digit", n, 1, n) for p in pats))

    def route_bounds(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A route corrects the differing digits one switch each (2 links per digit, one switch
        latency); ECMP can spread a transfer over at most that many first hops."""
        c = self.config
        hops = np.zeros(len(src), dtype=np.int64)
        a, b = src.copy(), dst.copy()
        for _ in range(c.levels):
            hops += a % c.radix != b % c.radix
            a //= c.radix
            b //= c.radix
        return hops * c.link_latency_s * (1 - 1e-12), hops * c.port_bandwidth_Bps, 2 * hops

    def link_capacity(self) -> float:
        c = self.config
        return 2 * c.nodes * c.levels * c.port_bandwidth_Bps  # every server's cable to each level's switch

    def shift_invariant(self, period: int, n: int) -> bool:
        return n == self.config.nodes and period % n == 0  # only the trivial shift (a step is its own first period)

    def port_bandwidth(self) -> float:
        return self.config.node_bandwidth_Bps  # one port per level

    def min_route_latency(self) -> float:
        return self.config.link_latency_s  # a route crosses at least one switch

    def pattern_floor(self, collective: str, name: str, n: int, nbytes: float, limit: float = math.inf
                      ) -> float | None:
        """:meth:`LibraryFabric.pattern_floor` in closed form for all-pairs steps on the whole BCube
        (``direct``: every rank sends to every other, one digit step of n): there it folds to the
        whole step (n(n-1) transfers), here it is counted. Per step with s bytes per transfer: the
        slowest transfer (h differing digits: h switch latencies + s at h ports, largest at h = 1 or
        h = levels), the busiest port ((n-1) s at the node bandwidth), the average link load (each
        rank's routes cross levels x (r-1) x r^(levels-1) digits, 2 links each). Equal to the
        generic bound (tested); any other schedule takes the generic path."""
        c = self.config
        pats = patterns(name, collective, n, self.algo_params(n)) if n == c.nodes and collective != "p2p" else None
        bounded = self.port_bandwidth() is not None and self.route_bounds(np.zeros(1, np.int64), np.ones(1, np.int64))
        if not (pats and bounded) or any(p.shape is None or p.shape[:4] != ("digit", n, 1, n) for p in pats):
            return super().pattern_floor(collective, name, n, nbytes, limit)
        k = self.chunking(nbytes)
        m = nbytes / k
        p = self.pricing(name)
        r, levels, port, lat = c.radix, c.levels, c.port_bandwidth_Bps, c.link_latency_s * (1 - 1e-12)
        shortest = self.min_route_latency()
        digits = levels * (r - 1) * r ** (levels - 1)  # sum over one rank's destinations of differing digits
        total = 0.0
        for pat in pats:
            size, red = pat.shape[4], pat.shape[5]
            slowest = max(h * lat + size * m / (h * port) for h in (1, levels))
            slowest = max(slowest, shortest + (n - 1) * size * m / self.port_bandwidth())
            slowest = max(slowest, shortest + n * size * 2 * digits * m / self.link_capacity())
            total += pat.count * (p.step_overhead_s + p.alpha_s + slowest + (n - 1) * red * p.gamma * m)
        return k * (total + p.fixed_s)
