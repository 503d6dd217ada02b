"""``nvlink_leafspine``: NVLink nodes on a leaf-spine network -- the OPSquare paper's NVIDIA reference
(seed 004, Sec. 2) and, through ``conf/system/*.yaml``, real DGX boxes.

Topology (every latency model):

* ``gpus_per_node`` GPUs per node on NVLink switches; the node's parallel NVLink switches are one
  aggregated switch (even striping over them is equivalent), each GPU has ``nvlink_bandwidth_Bps``
  per direction into it. That switch is also the node's leaf: it has ``uplinks`` links of
  ``uplink_bandwidth_Bps`` (a DGX's NICs), one to each of ``uplinks`` spine switches (ECMP over
  them). With one uplink per GPU this is a rail-optimised network: spine *i* is rail *i*.
* At most ``spine_ports`` nodes (a spine has one port per node); ``spine_ports: 0`` sizes the
  spines from ``nodes`` (a rail switch with as many ports as nodes: no limit, the system presets).

Latency models (``latency_model``):

* ``nccl`` (default): NCCL's algorithms and protocols as :mod:`estimator.collectives.nccl` models
  them (ring, tree, NVLS, NVLS-tree, CollNet x LL, LL128, Simple; channels, pipeline fill, NCCL
  2.18.5 tuner constants), on the *achievable* link rates: NVLink x the efficiency of
  ``nvlink_technology``, uplinks x that of ``uplink_technology``
  (:data:`~estimator.collectives.nccl.LINK_EFFICIENCY`). One communicator's rings and trees leave a node through
  ``ring_uplinks`` of its uplinks (0 = all of them, what NCCL's channel search finds on a DGX; NCCL 2.10 on Jean
  Zay's Omni-Path nodes built 2 channels through one: its log, validation row ``jeanzay-a100x32-allreduce-4GB``);
  a group placed on a share of a node's uplinks (:mod:`~estimator.parallel.placement`) uses at most that many of
  its share. ``algorithm=auto`` / ``default`` is the
  (algorithm, protocol) NCCL's tuner picks; ``nccl_protocol`` forces a protocol. NVLS needs
  ``nvls: true`` (NVSwitch gen3 + Hopper), CollNet (IB SHARP) ``collnet: true``. Collectives NCCL
  runs as send/recv (all-to-all, gather, p2p) and named library algorithms (hierarchical,
  double_binary_tree, direct, ...) are priced on the topology with α + switch latencies and the
  achievable rates.
* ``alpha``: the α-β model of the paper (the behaviour before the NCCL model): every switch
  traversal costs ``switch_latency_s`` (intra-node route 1 switch, inter-node 3), every message
  ``alpha_s``, links at 100 % of their rate; ``hierarchical`` ring (intra-node reduce-scatter,
  inter-node rings, intra-node all-gather), ``hierarchical_tree``, flat ones; closed forms for
  ``ring``, ``hierarchical`` and ``hierarchical_tree`` all-reduce.
* ``nccl_hw``: the α model's schedules with α and switch latencies replaced by NCCL's per-step
  hardware latencies (tuning.cc hwLat NVLink inside a node, NET between nodes; Tree row for tree
  algorithms, Ring otherwise) + baseLat once, link rates x the protocol's wire efficiency
  (LL 0.5, LL128 120/128, Simple 1) for ``nccl_protocol`` (auto = simple).

Reductions cost 1 / ``memory_bandwidth_Bps`` per byte on the schedule paths (0 = free).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.collectives import nccl
from estimator.collectives import switch_model as sw
from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.algorithms import collective_name
from estimator.collectives.params import AlgoParams, is_power
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.errors import EstimatorError, non_negative, positive
from estimator.fabrics.base import CollectiveCost, FabricConfig
from estimator.fabrics.library import LibraryFabric, check_chunking, server_cut_bytes
from estimator.topology.builders import leaf_spine
from estimator.topology.graph import Topology
from estimator.topology.leaf_spine import leaf_spine_compiled
from estimator.topology.leaf_trees import TREES, leaf_spine_tree_compiled

TREE_ALGOS = {"binary_tree", "double_binary_tree", "pipelined_dbt", "hierarchical_tree", "binomial_tree"}
PROTOCOL_EFFICIENCY = {"ll": 0.5, "ll128": 120.0 / 128.0, "simple": 1.0}
NCCL_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")
LIBRARY_OFFERS: dict[str, tuple[str, ...]] = {
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
OFFERS = LIBRARY_OFFERS  # the schedule library's algorithms (every latency model)
XOR_EXCHANGES = ("halving_doubling", "recursive_doubling")


@dataclass
class NvlinkLeafSpineConfig(FabricConfig):
    name: str = "nvlink_leafspine"
    nodes: int = 64
    gpus_per_node: int = 8
    nvlink_bandwidth_Bps: float = 450.0e9
    uplinks: int = 4
    uplink_bandwidth_Bps: float = 100.0e9
    spine_ports: int = 0  # sized from nodes (conf/fabric/nvlink_leafspine.yaml)
    switch_latency_s: float = 1.0e-6
    alpha_s: float = 0.7e-6
    memory_bandwidth_Bps: float = 0.0
    latency_model: str = "nccl"
    nccl_protocol: str = "auto"
    gpu_arch: str = "hopper"
    cpu: str = "intel"
    nvlink_technology: str = "nvlink4"
    uplink_technology: str = "ib_ndr"
    nvls: bool = False
    collnet: bool = False
    nccl_channels: int = 16
    ring_uplinks: int = 0  # uplinks one NCCL communicator's channels leave a node through (0 = all; module docstring)
    pipeline_bytes: float = 2.94e6
    nvls_efficiency: float = 0.739
    nvls_latency_s: float = 37.1e-6
    nvls_latency_v219_s: float = 29.8e-6
    nccl_version: str = "2.18.5"
    gpu_nic_path: str = "pxb"
    chunks: int = 1
    chunk_bytes: float = 0.0
    leaf_buffer_bytes: float = 16.0e6
    spine_buffer_bytes: float = 64.0e6

    def validate(self) -> None:
        super().validate()
        check_chunking(self)
        for key in ("nvlink_bandwidth_Bps", "uplink_bandwidth_Bps", "nvls_efficiency"):
            positive(getattr(self, key), f"fabric.{key}")
        for key in ("switch_latency_s", "alpha_s", "memory_bandwidth_Bps", "leaf_buffer_bytes", "spine_buffer_bytes",
                    "pipeline_bytes", "nvls_latency_s", "nvls_latency_v219_s"):
            non_negative(getattr(self, key), f"fabric.{key}")
        for key in ("gpus_per_node", "uplinks", "nccl_channels"):
            if getattr(self, key) < 1:
                raise EstimatorError(f"fabric.{key} must be a positive integer, got {getattr(self, key)!r}")
        if self.spine_ports < 0:
            raise EstimatorError(f"fabric.spine_ports must be >= 0 (0 = sized from nodes), got {self.spine_ports!r}")
        if isinstance(self.ring_uplinks, bool) or not isinstance(self.ring_uplinks, int) or self.ring_uplinks < 0:
            raise EstimatorError(f"fabric.ring_uplinks must be a whole number of uplinks >= 0 (0 = all), "
                                 f"got {self.ring_uplinks!r}")
        g = self.gpus_per_node
        if self.nodes > g and self.nodes % g:
            raise EstimatorError(f"fabric.nodes={self.nodes} is not a whole number of {g}-GPU nodes")
        if self.spine_ports and -(-self.nodes // g) > self.spine_ports:
            raise EstimatorError(
                f"fabric.nodes={self.nodes} needs {-(-self.nodes // g)} nodes but a {self.spine_ports}-port spine "
                f"holds {self.spine_ports} (at most {self.spine_ports * g} GPUs); raise fabric.spine_ports (0 = sized from nodes)"
            )
        choices = {"latency_model": ("nccl", "alpha", "nccl_hw"), "nccl_protocol": ("auto", *nccl.PROTOCOLS),
                   "gpu_arch": nccl.ARCHS, "cpu": nccl.CPUS, "nvlink_technology": tuple(nccl.LINK_EFFICIENCY),
                   "uplink_technology": tuple(nccl.LINK_EFFICIENCY), "gpu_nic_path": nccl.GPU_NIC_PATHS}
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise EstimatorError(f"fabric.{key} must be one of {', '.join(allowed)}, got {getattr(self, key)!r}")
        if self.nccl_version.count(".") < 2:  # 2.20 on the command line is the number 2.2
            raise EstimatorError(f"fabric.nccl_version must be major.minor.patch like 2.20.5 (quote it), "
                                 f"got {self.nccl_version!r}")
        nccl.parse_version(self.nccl_version)  # a malformed version is a one-line error here
        if self.nvls and self.gpu_arch != "hopper":
            raise EstimatorError(f"fabric.nvls=true needs gpu_arch=hopper (NVLink SHARP, NVSwitch gen3), got {self.gpu_arch!r}")


def _library(algorithm: str) -> bool:
    """True if ``algorithm`` names a schedule of the algorithm library."""
    try:
        lookup(algorithm)
    except EstimatorError:
        return False
    return True


class NvlinkLeafSpineFabric(LibraryFabric):
    name = "nvlink_leafspine"
    Config = NvlinkLeafSpineConfig
    OFFERS = OFFERS

    # ---- the NCCL model ------------------------------------------------------------------------
    @property
    def _nccl(self) -> bool:
        return self.config.latency_model == "nccl"

    def nccl_system(self, n: int) -> nccl.NcclSystem:
        """What NCCL's tuner sees for a group of the first ``n`` GPUs."""
        c = self.config
        nodes = max(1, -(-n // c.gpus_per_node))
        nics = min(c.uplinks, c.ring_uplinks or c.uplinks)  # the links this communicator's channels use
        return nccl.NcclSystem(
            ranks=n, nodes=nodes, arch=c.gpu_arch, intra_Bps=self._bandwidths()[0],
            inter_Bps=nics * self._bandwidths()[1], intra_link="nvlink", channels=c.nccl_channels,
            nvls=c.nvls, collnet=c.collnet, nvls_efficiency=c.nvls_efficiency, pipeline_bytes=c.pipeline_bytes,
            nvls_latency_s=self._nvls_latency(), cpu=c.cpu, nics=nics, gpu_nic_path=c.gpu_nic_path,
        )

    def _nvls_latency(self) -> float:
        """The executed NVLS latency of the configured NCCL version (nccl.py docstring, "NCCL version")."""
        c = self.config
        new = nccl.parse_version(c.nccl_version) >= nccl.NVLS_REWORK_VERSION
        return c.nvls_latency_v219_s if new else c.nvls_latency_s

    def _nccl_protocols(self) -> tuple[str, ...]:
        p = self.config.nccl_protocol
        return nccl.PROTOCOLS if p == "auto" else (p,)

    def algorithms(self, collective: str) -> tuple[str, ...]:
        coll = collective_name(collective)
        lib = LIBRARY_OFFERS.get(coll, ())
        if not self._nccl or coll not in NCCL_COLLECTIVES:
            return lib
        s = self.nccl_system(self.nodes)
        own = tuple(a for a in nccl.ALGORITHMS
                    if a == "ring" or any(nccl.available(coll, a, p, s) for p in nccl.PROTOCOLS))
        return own + tuple(a for a in lib if a not in own)

    def collective_cost(self, collective: str, nbytes: float, algorithm: str = "default",
                        group_size: int | None = None, explicit: bool = False) -> CollectiveCost:
        coll = collective_name(collective)
        algorithm = algorithm or "default"
        if explicit and self._nccl and algorithm in nccl.ALGORITHMS and not (
                _library(algorithm) and lookup(algorithm).supports(coll)):  # NCCL's ring broadcast / reduce
            raise EstimatorError(f"fabric {self.name!r}: NCCL's {algorithm!r} (latency_model=nccl) is priced by "
                                 "NCCL's model, not a schedule; for explicit schedules use a library algorithm "
                                 f"({', '.join(LIBRARY_OFFERS.get(coll, ()))}) or latency_model=alpha|nccl_hw")
        if not self._nccl or explicit or coll not in NCCL_COLLECTIVES or not (
                algorithm in ("default", "auto") or algorithm in nccl.ALGORITHMS):
            return super().collective_cost(coll, nbytes, algorithm, group_size, explicit)
        n = self._group(group_size)
        if not (nbytes >= 0):
            raise EstimatorError(f"bytes must be a non-negative number, got {nbytes!r}")
        key = (coll, algorithm, n, float(nbytes), False)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._nccl_cost(coll, algorithm, n, float(nbytes))
        return hit

    def _nccl_cost(self, coll: str, algorithm: str, n: int, nbytes: float) -> CollectiveCost:
        if n == 1:
            return CollectiveCost(coll, "ring" if algorithm in ("default", "auto") else algorithm, 1, nbytes, 0.0, 0)
        s = self.nccl_system(n)
        k = self.chunking(nbytes)
        m = nbytes / k
        algos = nccl.ALGORITHMS if algorithm in ("default", "auto") else (algorithm,)
        protos = self._nccl_protocols()
        if not any(nccl.available(coll, a, p, s) for a in algos for p in protos):
            raise EstimatorError(f"fabric {self.name!r}: NCCL runs no {algorithm}/{'/'.join(protos)} {coll} on {n} GPUs "
                                 f"({s.nodes} node(s); nvls={self.config.nvls}, collnet={self.config.collnet})")
        algo, proto = nccl.choose(coll, s, m, algos, protos)
        steps, _ = nccl.depth(coll, algo, s)
        return CollectiveCost(coll, algo, n, nbytes, k * nccl.exec_time(coll, algo, proto, s, m), k * steps,
                              protocol=proto)

    def resolve(self, collective: str, algorithm: str, n: int, nbytes: float = 1.0) -> str:
        if algorithm == "default" and self._nccl and collective_name(collective) in NCCL_COLLECTIVES:
            algorithm = "auto"
        return super().resolve(collective, algorithm, n, nbytes)

    # ---- the schedule library (alpha / nccl_hw models, and non-NCCL algorithms) ----------------
    def _nccl_class(self, algorithm: str) -> str:
        return "tree" if algorithm in TREE_ALGOS else "ring"

    def _hw_protocol(self) -> str:
        p = self.config.nccl_protocol
        return "simple" if p == "auto" else p

    def topology_key(self, algorithm: str) -> str:
        return self._nccl_class(algorithm) if self.config.latency_model == "nccl_hw" else ""

    def _latencies(self, algorithm: str) -> tuple[float, float]:
        """(intra-node, inter-node) route latency, seconds."""
        c = self.config
        if c.latency_model == "nccl_hw":
            cls, proto = self._nccl_class(algorithm), self._hw_protocol()
            hw = nccl.PROTOCOLS.index(proto)
            return nccl.HW_LAT_US["nvlink"][cls][hw] * 1e-6, nccl.HW_LAT_US["net"][cls][hw] * 1e-6
        return c.switch_latency_s, 3 * c.switch_latency_s

    def _bandwidths(self) -> tuple[float, float]:
        """(per-GPU NVLink, per-uplink) bandwidth the model uses, bytes/s per direction."""
        c = self.config
        if c.latency_model == "nccl_hw":
            eff = PROTOCOL_EFFICIENCY[self._hw_protocol()]
            return c.nvlink_bandwidth_Bps * eff, c.uplink_bandwidth_Bps * eff
        if c.latency_model == "nccl":
            return (c.nvlink_bandwidth_Bps * nccl.LINK_EFFICIENCY[c.nvlink_technology],
                    c.uplink_bandwidth_Bps * nccl.LINK_EFFICIENCY[c.uplink_technology])
        return c.nvlink_bandwidth_Bps, c.uplink_bandwidth_Bps

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        intra, inter = self._latencies(algorithm)
        nv, up = self._bandwidths()
        # intra route = GPU->leaf (0) + leaf->GPU (intra); inter adds leaf->spine + spine->leaf
        if c.latency_model == "nccl_hw":
            lat_up, lat_spine = 0.0, inter - intra
        else:
            lat_up = lat_spine = c.switch_latency_s
        return leaf_spine(c.nodes, c.gpus_per_node, nv, c.uplinks, up, intra, lat_up, lat_spine, "nvlink_leafspine")

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        """Explicit schedules with a step pattern, priced on the leaf-spine by per-link-class loads
        (ECMP over the spines), as :meth:`build_topology`'s graph would route them."""
        pats = patterns(algorithm, collective, n, self.algo_params(n))
        if pats is None:
            return None
        c = self.config
        intra, inter = self._latencies(algorithm)
        nv, up = self._bandwidths()
        lat_up, lat_spine = (0.0, inter - intra) if c.latency_model == "nccl_hw" else (c.switch_latency_s,) * 2
        spines = c.uplinks if c.nodes > c.gpus_per_node else 0
        algo = lookup(algorithm)
        if algo.base in TREES:  # tree steps from per-rank counts (the same rows, far cheaper at scale)
            fast = leaf_spine_tree_compiled(algo.base, collective, n, algo.params(self.algo_params(n)).chunks,
                                            c.gpus_per_node, spines, nv, up,
                                            np.array([0.0, intra, lat_up + lat_spine + intra]), self.pricing(algorithm))
            if fast is not None:
                return fast
        return leaf_spine_compiled(pats, n, c.gpus_per_node, spines, nv, up, (intra, lat_up, lat_spine),
                                   self.pricing(algorithm))

    def pricing(self, algorithm: str) -> PricingParams:
        c = self.config
        if c.latency_model == "nccl_hw":
            base = nccl.BASE_LAT_US[self._nccl_class(algorithm)][nccl.PROTOCOLS.index(self._hw_protocol())] * 1e-6
            return PricingParams(alpha_s=0.0, memory_bandwidth_Bps=c.memory_bandwidth_Bps, fixed_s=base)
        return PricingParams(alpha_s=c.alpha_s, memory_bandwidth_Bps=c.memory_bandwidth_Bps)

    def algo_params(self, n: int) -> AlgoParams:
        return AlgoParams(local=self.config.gpus_per_node)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        if algorithm in XOR_EXCHANGES:
            return self._xor_exchange(collective, algorithm, n, nbytes)
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


    def _xor_exchange(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        """Halving-doubling / recursive doubling with power-of-two n and ``gpus_per_node``: partners
        r XOR 2^d are in the same node for the low digits (GPU -> leaf -> GPU, one transfer per
        NVLink) and have the same local index in another node for the others (all g GPUs of a node
        send to one other node: GPU -> leaf -> g x 1/uplinks on each uplink -> spine -> leaf -> GPU,
        so each gets min(NVLink, uplinks x uplink / g)). Each phase is the switch formula's with
        α + that route's latency (tested equal to the schedule)."""
        algo = lookup(algorithm)
        c = self.config
        if n <= 1 or collective not in algo.closed_forms or not (is_power(n, 2) and is_power(c.gpus_per_node, 2)):
            return None
        p = self.pricing(algorithm)
        a, gamma = p.alpha_s, p.gamma
        intra_lat, inter_lat = self._latencies(algorithm)
        nv, up = self._bandwidths()
        loc = min(n, c.gpus_per_node)
        inter_bytes = nbytes if algorithm == "recursive_doubling" and collective == "all_reduce" else nbytes / loc
        parts = [algo.switch_cost(collective, loc, nbytes, a + intra_lat, nv, gamma)]
        if n > loc:
            share = min(nv, c.uplinks * up / loc)
            parts.append(algo.switch_cost(collective, n // loc, inter_bytes, a + inter_lat, share, gamma))
        steps = sum(x[1] for x in parts)
        return sum(x[0] for x in parts) + (p.fixed_s if steps else 0.0), steps

    # ---- auto pruning hooks (see LibraryFabric.pattern_floor) -----------------------------------
    def port_bandwidth(self) -> float:
        return self._bandwidths()[0]  # a GPU's one link to its node's switch

    def _latency_floors(self) -> tuple[float, float]:
        """The shortest (intra-node, inter-node) route latency over the per-algorithm topologies."""
        both = [self._latencies(a) for a in ("ring", "double_binary_tree")]  # nccl_hw: ring / tree rows
        return min(x[0] for x in both), min(x[1] for x in both)

    def min_route_latency(self) -> float:
        return min(self._latency_floors())

    def route_bounds(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, None]:
        """Same node: GPU -> leaf -> GPU (intra-node latency, NVLink); otherwise through a spine
        (inter-node latency) at most min(NVLink, all the node's uplinks)."""
        c = self.config
        nv, up = self._bandwidths()
        intra, inter = self._latency_floors()
        same = src // c.gpus_per_node == dst // c.gpus_per_node
        lat = np.where(same, intra, inter) * (1 - 1e-12)
        bw = np.where(same, nv, min(nv, c.uplinks * up))
        return lat, bw, None

    def cut_seconds(self, src: np.ndarray, dst: np.ndarray, size: np.ndarray, period: int = 0) -> float:
        """Bytes leaving (entering) a node cross its leaf's uplinks: at most uplinks x uplink bandwidth."""
        c = self.config
        return server_cut_bytes(src, dst, size, c.gpus_per_node, period) / (c.uplinks * self._bandwidths()[1])

    def shift_invariant(self, period: int, n: int) -> bool:
        return period % self.config.gpus_per_node == 0 and n % self.config.gpus_per_node == 0  # whole nodes
