"""``fattree``: a three-level k-ary fat tree (Al-Fares et al., SIGCOMM 2008) with ECMP.

Assumes every link has ``link_bandwidth_Bps`` per direction, every switch traversal costs
``link_latency_s`` (on the link leaving the switch), per-hop ECMP over equal-cost next hops, the
first ``nodes`` hosts of a k-ary tree (``k = 0``: the smallest even k with k^3/4 >= nodes).
The tree is rearrangeably non-blocking but ECMP can still collide; all algorithms are priced
from their schedules (compiled once per algorithm and group size).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.errors import EstimatorError
from estimator.fabrics.electrical import GENERIC_OFFERS, LinkConfig, LinkFabric
from estimator.topology.builders import fat_tree
from estimator.topology.graph import Topology


@dataclass
class FatTreeConfig(LinkConfig):
    name: str = "fattree"
    nodes: int = 16
    k: int = 0

    def validate(self) -> None:
        super().validate()
        if self.k and (self.k < 2 or self.k % 2 or self.k**3 // 4 < self.nodes):
            raise EstimatorError(
                f"fabric.k={self.k} must be even and hold fabric.nodes={self.nodes} hosts (k^3/4 = {self.k**3 // 4})"
            )

    def radix(self) -> int:
        if self.k:
            return self.k
        k = 2
        while k**3 // 4 < self.nodes:
            k += 2
        return k


class FatTreeFabric(LinkFabric):
    name = "fattree"
    Config = FatTreeConfig
    OFFERS = GENERIC_OFFERS

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        return fat_tree(c.radix(), c.nodes, c.link_bandwidth_Bps, c.link_latency_s, "fattree")
