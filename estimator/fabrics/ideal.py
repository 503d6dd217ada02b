"""``ideal``: N endpoints on one non-blocking switch (the α-β-γ model).

Assumes every endpoint has ``bandwidth_Bps`` per direction into a switch that never blocks and
every message pays ``alpha_s``; reductions cost ``1 / memory_bandwidth_Bps`` per byte (0 = free,
the default, so ring all-reduce is exactly 2(N-1)·α + 2(N-1)/N·M/B). ``chunks`` / ``chunk_bytes``
run a collective as k chunks one after another (k·cost(M/k), ASTRA-sim-style; default one chunk). Every algorithm has a closed
form here (:mod:`estimator.collectives.switch_model`), equal to its schedule priced on the star.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.errors import non_negative, positive
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.library import LibraryFabric, check_chunking
from estimator.topology.builders import star
from estimator.topology.graph import Topology
from estimator.topology.star import star_compiled

SWITCH_OFFERS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "double_binary_tree", "pipelined_dbt", "halving_doubling", "recursive_doubling", "radix4", "bidir_ring",
                   "binary_tree", "neighbor_exchange", "direct", "one_shot", "ps", "torus2d"),
    "reduce_scatter": ("ring", "halving_doubling", "radix4", "bidir_ring", "direct"),
    "all_gather": ("ring", "recursive_doubling", "halving_doubling", "radix4", "bidir_ring", "neighbor_exchange",
                   "direct"),
    "broadcast": ("binomial_tree", "binary_tree", "scatter_allgather", "direct"),
    "reduce": ("binomial_tree", "binary_tree", "reducescatter_gather", "direct"),
    "gather": ("binomial_tree", "direct"),
    "all_to_all": ("direct", "pairwise"),
    "p2p": ("direct",),
}


@dataclass
class IdealConfig(FabricConfig):
    name: str = "ideal"
    nodes: int = 8
    bandwidth_Bps: float = 300.0e9
    alpha_s: float = 0.7e-6
    memory_bandwidth_Bps: float = 0.0
    chunks: int = 1
    chunk_bytes: float = 0.0

    def validate(self) -> None:
        super().validate()
        check_chunking(self)
        positive(self.bandwidth_Bps, "fabric.bandwidth_Bps")
        non_negative(self.alpha_s, "fabric.alpha_s")
        non_negative(self.memory_bandwidth_Bps, "fabric.memory_bandwidth_Bps")


class IdealFabric(LibraryFabric):
    name = "ideal"
    Config = IdealConfig
    OFFERS = SWITCH_OFFERS

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        """Explicit schedules with a step pattern: loads per port on the star, no graph search."""
        pats = patterns(algorithm, collective, n, self.algo_params(n))
        if pats is None:
            return None
        return star_compiled(pats, n, self.config.bandwidth_Bps, 0.0, self.pricing(algorithm))

    def build_topology(self, algorithm: str) -> Topology:
        return star(self.nodes, self.config.bandwidth_Bps, 0.0, "ideal")

    def pricing(self, algorithm: str) -> PricingParams:
        return PricingParams(alpha_s=self.config.alpha_s, memory_bandwidth_Bps=self.config.memory_bandwidth_Bps)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int]:
        c = self.config
        p = self.pricing(algorithm)
        return lookup(algorithm).switch_cost(collective, n, nbytes, c.alpha_s, c.bandwidth_Bps, p.gamma,
                                             self.algo_params(n))


#: two buffer sizes far past every fabric's latency regime: the slope between them is the per-byte cost
#: of the fabric's best large-message all-reduce (64 GiB and 128 GiB; arithmetic only, nothing allocated)
_LARGE = (2.0**36, 2.0**37)


def allreduce_equivalent_Bps(fabric, algorithm: str = "auto") -> float:
    """The per-GPU bandwidth an ideal switch needs so that its bandwidth-optimal all-reduce
    (2(N-1)/N · M / B) moves large buffers as fast as ``fabric``'s ``algorithm`` all-reduce on the
    fabric's ``nodes`` GPUs: 2(N-1)/N over the fabric's seconds per extra byte at large sizes.

    An ideal switch with at least this bandwidth and an alpha no larger than the fabric's
    per-message latency is a lower bound for it (conf/experiment/cross_fabric.yaml sizes its bound
    with it; tests/test_report_bound.py checks). For a fabric whose GPUs inject at most B per
    direction this is at most B; a model that uses several links or wavelengths per GPU at once can
    exceed its nominal per-GPU bandwidth (TeraRack's WRHT at 64 GPUs: about 2x)."""
    n = fabric.nodes
    small, large = (fabric.collective_cost("all_reduce", m, algorithm).time_s for m in _LARGE)
    per_byte = (large - small) / (_LARGE[1] - _LARGE[0])
    return 2.0 * (n - 1) / n / per_byte
