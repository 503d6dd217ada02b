"""``superpod``: NVIDIA DGX SuperPOD-like cluster (the baseline SiPAC compares with, seed 003).

Assumes DGX servers of ``gpus_per_node`` GPUs on an NVSwitch (``nvlink_bandwidth_Bps`` per GPU
and direction), one NIC per GPU (``nic_bandwidth_Bps``) into a rail-optimised network: GPU i of
every server on rail switch i, rails joined by a non-blocking spine (each rail's uplink carries its
whole downlink capacity). Every switch traversal costs ``switch_latency_s``; ECMP; GPUs may relay
through the NVSwitch to another rail (as NCCL's PXN does). The defaults are DGX A100 SuperPOD
numbers (NVIDIA DGX SuperPOD reference architecture: NVLink 600 GB/s bidirectional per GPU,
8 x 200 Gb/s HDR InfiniBand per server). Algorithms are priced from their schedules, except
``hierarchical``, which has a closed form (tested equal to its schedule): its intra-server ring
steps go GPU -> NVSwitch -> GPU (the only 2-hop path; one transfer per NVLink) and its inter-server
rings join GPUs of the same local index, GPU -> rail switch -> GPU (one transfer per NIC link),
so each phase is the switch formula's with α + ``switch_latency_s`` at NVLink or NIC bandwidth.
Likewise ``halving_doubling`` / ``recursive_doubling`` with power-of-two servers and group: their
partners r XOR 2^d are in the same server for the low digits (NVLink) and on the same rail for the
others (NIC), one transfer per link: the digits within a server, then those across servers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import AlgoParams, is_power, local_size
from estimator.collectives.patterns import patterns, tree_patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.errors import EstimatorError, non_negative, positive
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.electrical import LinkFabric, offers_with
from estimator.fabrics.library import server_cut_bytes
from estimator.topology.builders import rail_optimized
from estimator.topology.graph import Topology
from estimator.topology.partial import stack_compiled
from estimator.topology.rail import rail_compiled
from estimator.topology.star import star_compiled

XOR_EXCHANGES = ("halving_doubling", "recursive_doubling")


@dataclass
class SuperPodConfig(FabricConfig):
    name: str = "superpod"
    nodes: int = 64
    gpus_per_node: int = 8
    nvlink_bandwidth_Bps: float = 300.0e9
    nic_bandwidth_Bps: float = 25.0e9
    switch_latency_s: float = 1.0e-6
    alpha_s: float = 0.7e-6
    memory_bandwidth_Bps: float = 0.0

    def validate(self) -> None:
        super().validate()
        if self.gpus_per_node < 1:
            raise EstimatorError(f"fabric.gpus_per_node must be a positive integer, got {self.gpus_per_node}")
        if self.nodes > self.gpus_per_node and self.nodes % self.gpus_per_node:
            raise EstimatorError(
                f"fabric.nodes={self.nodes} is not a whole number of {self.gpus_per_node}-GPU servers"
            )
        positive(self.nvlink_bandwidth_Bps, "fabric.nvlink_bandwidth_Bps")
        positive(self.nic_bandwidth_Bps, "fabric.nic_bandwidth_Bps")
        for key in ("switch_latency_s", "alpha_s", "memory_bandwidth_Bps"):
            non_negative(getattr(self, key), f"fabric.{key}")


class SuperPodFabric(LinkFabric):
    name = "superpod"
    Config = SuperPodConfig
    OFFERS = offers_with({"all_reduce": ("hierarchical", "hierarchical_tree", "ring")})

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        return rail_optimized(c.nodes, c.gpus_per_node, c.nvlink_bandwidth_Bps, c.nic_bandwidth_Bps,
                              c.switch_latency_s, "superpod")

    def pricing(self, algorithm: str) -> PricingParams:
        return PricingParams(alpha_s=self.config.alpha_s, memory_bandwidth_Bps=self.config.memory_bandwidth_Bps)

    def algo_params(self, n: int) -> AlgoParams:
        return AlgoParams(local=self.config.gpus_per_node)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        c = self.config
        a, g = c.alpha_s + c.switch_latency_s, self.pricing(algorithm).gamma
        nv, nic = c.nvlink_bandwidth_Bps, c.nic_bandwidth_Bps
        if n <= 1:
            return None
        if algorithm == "hierarchical" and collective == "all_reduce":
            loc = local_size(n, self.algo_params(n))
            ring = lookup("ring")
            parts = (ring.switch_cost("reduce_scatter", loc, nbytes, a, nv, g),
                     ring.switch_cost("all_reduce", n // loc, nbytes / loc, a, nic, g),
                     ring.switch_cost("all_gather", loc, nbytes, a, nv, g))
        elif algorithm in XOR_EXCHANGES and collective in lookup(algorithm).closed_forms and is_power(n, 2) and is_power(c.gpus_per_node, 2):
            loc = min(n, c.gpus_per_node)
            algo = lookup(algorithm)
            inter_bytes = nbytes if algorithm == "recursive_doubling" and collective == "all_reduce" else nbytes / loc
            parts = (algo.switch_cost(collective, loc, nbytes, a, nv, g),
                     algo.switch_cost(collective, n // loc, inter_bytes, a, nic, g))
        else:
            return None
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    def port_bandwidth(self) -> float:
        return self.config.nvlink_bandwidth_Bps + self.config.nic_bandwidth_Bps  # NVLink + NIC

    def min_route_latency(self) -> float:
        return self.config.switch_latency_s  # every route crosses a switch

    def route_bounds(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, None]:
        """Same server: GPU -> NVSwitch -> GPU only (one switch, NVLink); same rail: GPU -> rail
        switch -> GPU only (one switch, NIC); otherwise at least two switches, and at most NVLink +
        NIC (both of the GPU's links) and at most the server's g NIC links (it leaves the server)."""
        c = self.config
        g = c.gpus_per_node
        server = src // g == dst // g
        rail = src % g == dst % g
        lat = np.where(server | rail, 1.0, 2.0) * c.switch_latency_s * (1 - 1e-12)
        bw = np.where(server, c.nvlink_bandwidth_Bps,
                      np.where(rail, c.nic_bandwidth_Bps,
                               min(c.nvlink_bandwidth_Bps + c.nic_bandwidth_Bps, g * c.nic_bandwidth_Bps)))
        return lat, bw, None

    def cut_seconds(self, src: np.ndarray, dst: np.ndarray, size: np.ndarray, period: int = 0) -> float:
        """Bytes leaving (entering) a server cross its GPUs' NIC links: at most g x NIC bandwidth.
        And a transfer between two servers' GPUs of the same local index has one route, GPU -> rail
        switch -> GPU: all such bytes a GPU sends (receives) cross its own NIC link."""
        g, nic = self.config.gpus_per_node, self.config.nic_bandwidth_Bps
        server = server_cut_bytes(src, dst, size, g, period) / (g * nic)
        rail = (src % g == dst % g) & (src // g != dst // g)
        if not rail.any():
            return server
        into = dst % period if period else dst
        out = np.bincount(src[rail], weights=size[rail]).max()
        inn = np.bincount(into[rail], weights=size[rail]).max()
        return max(server, float(max(out, inn)) / nic)

    def shift_invariant(self, period: int, n: int) -> bool:
        return period % self.config.gpus_per_node == 0 and n % self.config.gpus_per_node == 0  # whole servers

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        if algorithm == "hierarchical_tree" and collective == "all_reduce":
            fast = self._hierarchical_tree(n)
            if fast is not None:
                return fast
        pats = patterns(algorithm, collective, n, self.algo_params(n))
        if pats is None:
            return None
        c = self.config
        return rail_compiled(pats, c.gpus_per_node, c.nodes, c.nvlink_bandwidth_Bps, c.nic_bandwidth_Bps,
                             c.switch_latency_s, self.pricing(algorithm), n)

    def _hierarchical_tree(self, n: int) -> CompiledSchedule | None:
        """``hierarchical_tree`` all-reduce over whole servers, its inter-server steps priced per
        server: they join GPUs of one local index (GPU -> rail switch -> GPU, the only route), and
        every rail carries the same copy of the server-level double binary tree, so a step's row
        is that tree step's on a star of ``servers`` ports of NIC bandwidth (one switch) --
        O(servers), not O(GPUs). The intra-server ring steps: one transfer per GPU, on its NVLink."""
        c = self.config
        g = c.gpus_per_node
        if g < 2 or n % g or n // g < 2:
            return None
        pats = patterns("hierarchical_tree", "all_reduce", n, self.algo_params(n))
        p = self.pricing("hierarchical_tree")
        intra = [self._server_ring_row(x, p) for x in (pats[0], pats[-1])]
        trees = star_compiled(tree_patterns("all_reduce", n // g, 1 / (2 * g), (False, True)), n // g,
                              c.nic_bandwidth_Bps, c.switch_latency_s, p)
        return stack_compiled([intra[0], trees, intra[1]])

    def _server_ring_row(self, step, p: PricingParams) -> CompiledSchedule:
        """A step of rings inside every server (each GPU sends one transfer to another GPU of its
        server: GPU -> NVSwitch -> GPU, one transfer per NVLink), as :func:`rail_compiled` prices it."""
        c = self.config
        _, _, size, red = step.first(c.gpus_per_node)  # every transfer alike: the first server's
        one = np.ones((1, 1))
        return CompiledSchedule(one * (p.alpha_s + c.switch_latency_s), one * (size[0] / c.nvlink_bandwidth_Bps),
                                np.array([red[0] * p.gamma]), np.array([p.step_overhead_s]),
                                np.array([float(step.count)]), step.count, p.fixed_s, 0, p.reconfig_s)
