"""Shared pieces of the electrical baseline fabrics (ring, torus2d, fattree, bcube, superpod, custom).

``LinkConfig`` adds the parameters every link-based fabric has: per-direction link bandwidth,
per-link latency, per-message ``alpha_s`` and the reduction throughput ``memory_bandwidth_Bps``
(0 = reductions free). ``LinkFabric`` prices with them; subclasses build the topology and may add
closed forms that reuse the switch formulas with an effective α and bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.pricing import PricingParams
from estimator.errors import non_negative, positive
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.library import LibraryFabric

# every algorithm that runs on any topology (no shape constraint beyond the algorithm's own)
GENERIC_OFFERS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "bidir_ring", "double_binary_tree", "pipelined_dbt", "halving_doubling", "recursive_doubling",
                   "binary_tree", "radix4", "neighbor_exchange", "direct", "ps", "torus2d"),
    "reduce_scatter": ("ring", "bidir_ring", "halving_doubling", "direct"),
    "all_gather": ("ring", "bidir_ring", "recursive_doubling", "neighbor_exchange", "direct"),
    "broadcast": ("binomial_tree", "binary_tree", "scatter_allgather", "direct",
                  # pipelined (NCCL-style ring / tree) broadcasts, estimator/collectives/broadcasts.py
                  "pipelined_chain", "pipelined_chain64", "pipelined_tree", "pipelined_tree64"),
    "reduce": ("binomial_tree", "binary_tree", "reducescatter_gather", "direct"),
    "gather": ("direct", "binomial_tree"),
    "all_to_all": ("direct", "pairwise"),
    "p2p": ("direct",),
}


def offers_with(first: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """GENERIC_OFFERS with the given algorithms moved/added to the front per collective."""
    out = dict(GENERIC_OFFERS)
    for coll, names in first.items():
        out[coll] = tuple(names) + tuple(a for a in GENERIC_OFFERS.get(coll, ()) if a not in names)
    return out


@dataclass
class LinkConfig(FabricConfig):
    link_bandwidth_Bps: float = 12.5e9
    link_latency_s: float = 5.0e-6
    alpha_s: float = 0.0
    memory_bandwidth_Bps: float = 0.0

    def validate(self) -> None:
        super().validate()
        positive(self.link_bandwidth_Bps, "fabric.link_bandwidth_Bps")
        non_negative(self.link_latency_s, "fabric.link_latency_s")
        non_negative(self.alpha_s, "fabric.alpha_s")
        non_negative(self.memory_bandwidth_Bps, "fabric.memory_bandwidth_Bps")


class LinkFabric(LibraryFabric):
    OFFERS = GENERIC_OFFERS

    def pricing(self, algorithm: str) -> PricingParams:
        return PricingParams(alpha_s=self.config.alpha_s, memory_bandwidth_Bps=self.config.memory_bandwidth_Bps)

    def switch_like(self, collective: str, algorithm: str, n: int, nbytes: float, extra_latency: float,
                    bandwidth: float) -> tuple[float, int]:
        """The switch closed form with α + ``extra_latency`` and port bandwidth ``bandwidth``."""
        p = self.pricing(algorithm)
        return lookup(algorithm).switch_cost(collective, n, nbytes, p.alpha_s + extra_latency, bandwidth, p.gamma,
                                             self.algo_params(n))
