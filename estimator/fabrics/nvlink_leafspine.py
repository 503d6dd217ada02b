"""``nvlink_leafspine``: DGX-H100-SuperPOD-like reference of the OPSquare paper (seed 004, Sec. 2).

Assumptions:

* ``gpus_per_node`` GPUs per node on NVLink switches; the node's parallel NVLink switches are one
  aggregated switch (even striping over them is equivalent), each GPU has ``nvlink_bandwidth_Bps``
  per direction into it. That switch is also the node's leaf: it has ``uplinks`` links of
  ``uplink_bandwidth_Bps`` to as many spine switches (one each), ECMP over them.
* Every switch traversal costs ``switch_latency_s`` (intra-node route: 1 switch, inter-node: 3);
  every message pays ``alpha_s``; reductions cost 1 / ``memory_bandwidth_Bps`` per byte (0 = free).
* At most ``spine_ports`` nodes (a spine has one port per node).
* ``latency_model: nccl`` replaces α and switch latencies by NCCL's tuning constants (NCCL
  src/graph/tuning.cc, v2.18/2.19): per step the hardware latency of the slowest transfer's link type
  (NVLink inside a node, NET between nodes) for the algorithm class (Tree for the tree algorithms,
  Ring for all others) and ``nccl_protocol``,
  plus NCCL's base latency once per collective; link bandwidths are scaled by the protocol's wire
  efficiency (LL: 4 data bytes per 8-byte line = 0.5; LL128: 120/128; Simple: 1).

Algorithms: NCCL-style ``hierarchical`` ring (intra-node ring reduce-scatter, inter-node rings,
intra-node all-gather) and ``hierarchical_tree`` (inter-node double binary tree), plus the flat
ones. ``ring``, ``hierarchical`` and ``hierarchical_tree`` all-reduce have closed forms here.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.collectives import switch_model as sw
from estimator.collectives.params import AlgoParams
from estimator.collectives.pricing import PricingParams
from estimator.errors import EstimatorError, non_negative, positive
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.library import LibraryFabric
from estimator.topology.builders import leaf_spine
from estimator.topology.graph import Topology

TREE_ALGOS = {"binary_tree", "double_binary_tree", "pipelined_dbt", "hierarchical_tree", "binomial_tree"}
# NCCL src/graph/tuning.cc (2.18/2.19): baseLat[algo][proto], hwLat[NVLINK|NET][algo][proto], in us
NCCL_BASE_US = {"tree": {"ll": 6.8, "ll128": 14.0, "simple": 0.0}, "ring": {"ll": 6.6, "ll128": 14.0, "simple": 8.4}}
NCCL_HW_US = {
    "nvlink": {"tree": {"ll": 0.6, "ll128": 1.25, "simple": 4.0}, "ring": {"ll": 0.6, "ll128": 1.9, "simple": 3.4}},
    "net": {"tree": {"ll": 5.0, "ll128": 8.5, "simple": 14.0}, "ring": {"ll": 2.7, "ll128": 4.0, "simple": 14.0}},
}
PROTOCOL_EFFICIENCY = {"ll": 0.5, "ll128": 120.0 / 128.0, "simple": 1.0}

OFFERS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("hierarchical", "hierarchical_tree", "ring", "double_binary_tree", "pipelined_dbt", "halving_doubling",
                   "recursive_doubling", "binary_tree", "direct"),
    "reduce_scatter": ("ring", "halving_doubling", "direct"),
    "all_gather": ("ring", "recursive_doubling", "halving_doubling", "direct"),
    "broadcast": ("binomial_tree", "binary_tree", "scatter_allgather", "direct"),
    "reduce": ("binomial_tree", "binary_tree", "reducescatter_gather", "direct"),
    "gather": ("binomial_tree", "direct"),
    "all_to_all": ("direct", "pairwise"),
    "p2p": ("direct",),
}


@dataclass
class NvlinkLeafSpineConfig(FabricConfig):
    name: str = "nvlink_leafspine"
    nodes: int = 64
    gpus_per_node: int = 8
    nvlink_bandwidth_Bps: float = 450.0e9
    uplinks: int = 4
    uplink_bandwidth_Bps: float = 100.0e9
    spine_ports: int = 32
    switch_latency_s: float = 1.0e-6
    alpha_s: float = 0.7e-6
    memory_bandwidth_Bps: float = 0.0
    latency_model: str = "alpha"
    nccl_protocol: str = "simple"
    leaf_buffer_bytes: float = 16.0e6
    spine_buffer_bytes: float = 64.0e6

    def validate(self) -> None:
        super().validate()
        for key in ("nvlink_bandwidth_Bps", "uplink_bandwidth_Bps"):
            positive(getattr(self, key), f"fabric.{key}")
        for key in ("switch_latency_s", "alpha_s", "memory_bandwidth_Bps", "leaf_buffer_bytes", "spine_buffer_bytes"):
            non_negative(getattr(self, key), f"fabric.{key}")
        for key in ("gpus_per_node", "uplinks", "spine_ports"):
            if getattr(self, key) < 1:
                raise EstimatorError(f"fabric.{key} must be a positive integer, got {getattr(self, key)!r}")
        g = self.gpus_per_node
        if self.nodes > g and self.nodes % g:
            raise EstimatorError(f"fabric.nodes={self.nodes} is not a whole number of {g}-GPU nodes")
        if -(-self.nodes // g) > self.spine_ports:
            raise EstimatorError(
                f"fabric.nodes={self.nodes} needs {-(-self.nodes // g)} nodes but a {self.spine_ports}-port spine "
                f"holds {self.spine_ports} (at most {self.spine_ports * g} GPUs); raise fabric.spine_ports"
            )
        if self.latency_model not in ("alpha", "nccl"):
            raise EstimatorError(f"fabric.latency_model must be alpha or nccl, got {self.latency_model!r}")
        if self.nccl_protocol not in PROTOCOL_EFFICIENCY:
            raise EstimatorError(f"fabric.nccl_protocol must be one of simple, ll, ll128, got {self.nccl_protocol!r}")


class NvlinkLeafSpineFabric(LibraryFabric):
    name = "nvlink_leafspine"
    Config = NvlinkLeafSpineConfig
    OFFERS = OFFERS

    def _nccl_class(self, algorithm: str) -> str:
        return "tree" if algorithm in TREE_ALGOS else "ring"

    def topology_key(self, algorithm: str) -> str:
        return self._nccl_class(algorithm) if self.config.latency_model == "nccl" else ""

    def _latencies(self, algorithm: str) -> tuple[float, float]:
        """(intra-node, inter-node) route latency, seconds."""
        c = self.config
        if c.latency_model == "nccl":
            cls, proto = self._nccl_class(algorithm), c.nccl_protocol
            return NCCL_HW_US["nvlink"][cls][proto] * 1e-6, NCCL_HW_US["net"][cls][proto] * 1e-6
        return c.switch_latency_s, 3 * c.switch_latency_s

    def _bandwidths(self) -> tuple[float, float]:
        c = self.config
        eff = PROTOCOL_EFFICIENCY[c.nccl_protocol] if c.latency_model == "nccl" else 1.0
        return c.nvlink_bandwidth_Bps * eff, c.uplink_bandwidth_Bps * eff

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        intra, inter = self._latencies(algorithm)
        nv, up = self._bandwidths()
        # intra route = GPU->leaf (0) + leaf->GPU (intra); inter adds leaf->spine + spine->leaf
        if c.latency_model == "nccl":
            lat_up, lat_spine = 0.0, inter - intra
        else:
            lat_up = lat_spine = c.switch_latency_s
        return leaf_spine(c.nodes, c.gpus_per_node, nv, c.uplinks, up, intra, lat_up, lat_spine, "nvlink_leafspine")

    def pricing(self, algorithm: str) -> PricingParams:
        c = self.config
        if c.latency_model == "nccl":
            base = NCCL_BASE_US[self._nccl_class(algorithm)][c.nccl_protocol] * 1e-6
            return PricingParams(alpha_s=0.0, memory_bandwidth_Bps=c.memory_bandwidth_Bps, fixed_s=base)
        return PricingParams(alpha_s=c.alpha_s, memory_bandwidth_Bps=c.memory_bandwidth_Bps)

    def algo_params(self, n: int) -> AlgoParams:
        return AlgoParams(local=self.config.gpus_per_node)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        if collective != "all_reduce" or algorithm not in ("ring", "hierarchical", "hierarchical_tree"):
            return None
        if n == 1:
            return 0.0, 0
        c = self.config
        p = self.pricing(algorithm)
        a, gamma, m = p.alpha_s, p.gamma, nbytes
        intra_lat, inter_lat = self._latencies(algorithm)
        nv, up = self._bandwidths()
        g = min(c.gpus_per_node, n)
        nodes = n // g
        if algorithm == "ring":
            if n <= c.gpus_per_node:
                t, s = sw.ring("all_reduce")(n, m, a + intra_lat, nv, gamma, AlgoParams())
            else:  # each step has one inter-node transfer per node boundary; it is the slowest
                t, s = sw.ring("all_reduce")(n, m, a + inter_lat, min(nv, c.uplinks * up), gamma, AlgoParams())
            return t + p.fixed_s, s
        if n % g:
            return None
        share = min(nv, c.uplinks * up / g)  # a GPU's share of its node's uplinks (all g send at once)
        intra_rs = sw.ring("reduce_scatter")(g, m, a + intra_lat, nv, gamma, AlgoParams())
        intra_ag = sw.ring("all_gather")(g, m, a + intra_lat, nv, gamma, AlgoParams())
        if algorithm == "hierarchical":
            inter = sw.ring("all_reduce")(nodes, m / g, a + inter_lat, share, gamma, AlgoParams())
        else:
            inter = sw.double_binary_tree_all_reduce(nodes, m / g, a + inter_lat, share, gamma, AlgoParams())
        parts = (intra_rs, inter, intra_ag)
        return sum(x[0] for x in parts) + p.fixed_s, sum(x[1] for x in parts)
