"""``torus2d``: a rows x cols 2D torus (TPU-style), each node linked to its four neighbours.

Assumes full-duplex links of ``link_bandwidth_Bps`` / ``link_latency_s``, dimension-order routing
(X then Y, shorter way round), nodes that forward. The ``torus2d`` algorithm (ring per dimension)
on the whole torus has a closed form: every step each node uses one of its own links, so it is
the switch formula with α + link latency. Every other algorithm with a step pattern is priced by
analytic dimension-order routing (:mod:`estimator.topology.analytic`); the rest (all-to-all, ...)
from the schedule, where link sharing shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.collectives.params import AlgoParams, torus_dims
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule
from estimator.errors import EstimatorError
from estimator.fabrics.electrical import LinkConfig, LinkFabric, offers_with
from estimator.fabrics.unit_compiled import UnitCompiled
from estimator.topology.builders import torus2d
from estimator.topology.graph import Topology
from estimator.topology.torus import torus_compiled, torus_digits_only, torus_hops, torus_links

RS_AR_AG = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass
class Torus2dConfig(LinkConfig):
    name: str = "torus2d"
    nodes: int = 16
    rows: int = 0  # 0 = the most square factorisation of nodes
    cols: int = 0

    def validate(self) -> None:
        super().validate()
        if self.rows or self.cols:
            if self.rows < 1 or self.cols < 1:
                raise EstimatorError(f"fabric.rows = {self.rows}, fabric.cols = {self.cols}: set both >= 1 "
                                     "(rows x cols = fabric.nodes), or both 0 for the most square torus")
            if self.rows * self.cols != self.nodes:
                raise EstimatorError(
                    f"fabric.rows x fabric.cols = {self.rows} x {self.cols} must equal fabric.nodes = {self.nodes}"
                )

    def dims(self) -> tuple[int, int]:
        return torus_dims(self.nodes, AlgoParams(rows=self.rows, cols=self.cols))


class Torus2dFabric(UnitCompiled, LinkFabric):
    name = "torus2d"
    Config = Torus2dConfig
    OFFERS = offers_with({c: ("torus2d",) for c in RS_AR_AG})

    def build_topology(self, algorithm: str) -> Topology:
        rows, cols = self.config.dims()
        return torus2d(rows, cols, self.config.link_bandwidth_Bps, self.config.link_latency_s, "torus2d")

    def algo_params(self, n: int) -> AlgoParams:
        if n != self.nodes:
            return AlgoParams()
        rows, cols = self.config.dims()
        return AlgoParams(rows=rows, cols=cols)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        if algorithm != "torus2d" or n != self.nodes:
            return None
        c = self.config
        return self.switch_like(collective, algorithm, n, nbytes, c.link_latency_s, c.link_bandwidth_Bps)

    def port_bandwidth(self) -> float:
        return 4 * self.config.link_bandwidth_Bps  # at most four neighbours

    def min_route_latency(self) -> float:
        return self.config.link_latency_s

    def route_bounds(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Dimension-order routes: hops = wrap-around distance per dimension, one link per hop."""
        c = self.config
        rows, cols = c.dims()
        hops = torus_hops(src, dst, rows, cols)
        return hops * c.link_latency_s * (1 - 1e-12), np.full(len(src), c.link_bandwidth_Bps), hops

    def link_capacity(self) -> float:
        rows, cols = self.config.dims()
        return torus_links(rows, cols) * self.config.link_bandwidth_Bps

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        pats = patterns(algorithm, collective, n, self.algo_params(n))
        if pats is None:
            return None
        c = self.config
        rows, cols = c.dims()
        return torus_compiled(pats, rows, cols, c.link_bandwidth_Bps, c.link_latency_s, self.pricing(algorithm), n)

    def priced_without_arrays(self, pats: list, n: int) -> bool:
        return n == self.nodes and torus_digits_only(pats, *self.config.dims())

    def shift_invariant(self, period: int, n: int) -> bool:
        return n == self.config.nodes and period % self.config.dims()[1] == 0  # whole rows: a row rotation
