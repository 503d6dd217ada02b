"""What a job's communication occupies on the fabric: the resources jobs can share.

A *view* of a fabric maps a job's GPUs to a :class:`JobLoad`: the shareable resources its
all-reduce uses (links, wavelengths, relays) and its utilisation ``u`` of each while it
communicates alone, normalised so its bottleneck (a private port or a shared resource) is 1. The
traffic is the ring all-reduce over the job's GPUs in id order (NCCL's ring follows the topology
that way; ring is what NCCL runs for the large gradient buckets of data-parallel training): every
GPU sends one chunk to the next per step, and a step takes as long as its busiest resource. The
fabric's own price of the job's collectives (:mod:`.pricing`) is not replaced: the view only says
how much a placement slows them (``factor``: the bottleneck at the job's placement over the
bottleneck on the fabric's first GPUs, which the fabric prices) and what the job shares.

Views (:func:`view_for`):

* :class:`TreeView` — tree-like electrical fabrics (``fattree``, leaf-spine ``custom`` files,
  ``nvlink_leafspine``, ``ideal``): links aggregated per switch domain (a leaf's or pod's uplinks
  and downlinks). Exact for ECMP's even split (every link of an aggregate carries the same share;
  tested equal to :class:`GraphView` on the same graph).
* :class:`GraphView` — any other fabric with a topology graph (``torus2d``, ``bcube``, ``ring``,
  ``superpod``, ``sipac``'s WSS channels, explicit ``custom`` graphs): every link, routed by the
  topology layer (:meth:`estimator.topology.graph.Topology.route`), ECMP fractions included.
* :class:`CircuitView` — the OCS with circuits per job (``ring`` / ``torus2d`` / ``btree`` /
  ``auto`` wiring): each job gets its own circuits between its servers, nothing is shared; the
  job pays the MEMS reconfiguration ``reconfig_s`` once when it starts.
* :class:`DedicatedView` — Lumorph: each tenant's tiles get their own MZI/fibre circuits (the
  paper assumes enough fibres between servers), nothing is shared; its per-round reconfigurations
  are already in its collective prices.
* :class:`RingSpanView` — TeraRack's WDM ring: a job occupies every wavelength of the ring
  segments its GPUs span (the shortest arc holding them); jobs whose arcs overlap split those
  segments' wavelengths. Contiguous jobs never share.
* :class:`PodRelayView` — OPSquare: a node's own transceivers are its own, but an inter-pod
  transfer between different positions is relayed by the destination pod's node at the sender's
  position (two hops), whose transceiver may belong to another job.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric

EMPTY_IDS = np.zeros(0, dtype=np.int64)
EMPTY_U = np.zeros(0)


@dataclass(frozen=True)
class JobLoad:
    """What one job's all-reduce occupies (see the module doc)."""

    ids: np.ndarray = field(default_factory=lambda: EMPTY_IDS)  # shareable resources it uses
    u: np.ndarray = field(default_factory=lambda: EMPTY_U)  # its utilisation of each, alone (bottleneck = 1)
    factor: float = 1.0  # its bandwidth time at this placement / at the fabric's first GPUs
    traffic_Bps: float = 0.0  # bytes per second it puts on all links (incl. its own ports) communicating alone
    setup_s: float = 0.0  # one-off cost when it starts (circuit reconfiguration)


NO_LOAD = JobLoad()


def ring_pairs(gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sender and receiver of every transfer of one ring step over ``gpus`` (sorted)."""
    g = np.sort(np.asarray(gpus, dtype=np.int64))
    return g, np.roll(g, -1)


class View(ABC):
    kind = ""
    blocks: tuple[int, ...] = ()  # nested locality blocks of consecutive GPU ids (placement)

    def __init__(self, gpus: int):
        self.gpus = gpus

    @property
    def resources(self) -> int:
        """Number of shareable resources (ids 0..resources-1)."""
        return 0

    @property
    def capacity_Bps(self) -> float:
        """Total bandwidth of every link (ports included) the view accounts: link utilisation's denominator."""
        return 0.0

    @abstractmethod
    def load(self, gpus: np.ndarray) -> JobLoad:
        """The job on ``gpus`` (>= 2 of them)."""

    def job_load(self, gpus: np.ndarray) -> JobLoad:
        return NO_LOAD if len(gpus) < 2 else self.load(np.sort(np.asarray(gpus, dtype=np.int64)))

    def block_resources(self, level: int, block: int) -> np.ndarray:
        """Shareable resources leading out of / into a locality block (topology-aware placement)."""
        return EMPTY_IDS


class LinkView(View):
    """A view whose resources have capacities (bytes/s) and whose GPUs also have ports of their
    own: :meth:`_bytes` gives the bytes a ring step puts on each resource per byte of chunk."""

    capacity: np.ndarray
    port_floor_s = 0.0  # seconds per byte of chunk on a GPU's own port (a bottleneck nobody shares)
    port_crossings = 0  # own ports a transfer crosses (counted in the traffic)

    def __init__(self, gpus: int):
        super().__init__(gpus)
        self._ref: dict[int, float] = {}

    @property
    def resources(self) -> int:
        return len(self.capacity)

    @abstractmethod
    def _bytes(self, gpus: np.ndarray) -> np.ndarray: ...

    def _bottleneck(self, a: np.ndarray) -> float:
        """Seconds per byte of chunk of a ring step: its busiest resource or port."""
        return max(self.port_floor_s, float((a / self.capacity).max()) if len(a) else 0.0)

    def reference(self, n: int) -> float:
        """The bottleneck of a job on the fabric's first ``n`` GPUs (what the fabric prices)."""
        hit = self._ref.get(n)
        if hit is None:
            hit = self._ref[n] = self._bottleneck(self._bytes(np.arange(n)))
        return hit

    def load(self, gpus: np.ndarray) -> JobLoad:
        a = self._bytes(gpus)
        tau = self._bottleneck(a)
        ids = np.flatnonzero(a)
        return JobLoad(ids, (a[ids] / self.capacity[ids]) / tau, tau / self.reference(len(gpus)),
                       (self.port_crossings * len(gpus) + float(a.sum())) / tau)


# ---- electrical trees ---------------------------------------------------------------------------
class TreeView(LinkView):
    """Endpoints under nested domains (``levels``: innermost first, each (GPUs per domain, uplink
    capacity, downlink capacity) in bytes/s); every GPU has a private port of ``host_Bps`` each way.
    A transfer between domains of level l crosses the up aggregate of the sender's domain and the
    down aggregate of the receiver's at every level up to where they meet."""

    kind = "links (tree aggregates)"

    def __init__(self, gpus: int, host_Bps: float, levels: list[tuple[int, float, float]]):
        super().__init__(gpus)
        self.host_Bps = float(host_Bps)
        self.port_floor_s, self.port_crossings = 1.0 / self.host_Bps, 2  # up to the leaf, down from it
        self.levels = [(int(b), float(up), float(down)) for b, up, down in levels if b < gpus]
        self.blocks = tuple(b for b, _, _ in self.levels)
        self._offsets, total = [], 0
        for size, _, _ in self.levels:
            domains = -(-gpus // size)
            self._offsets.append((total, total + domains, domains))
            total += 2 * domains
        cap = np.zeros(total)
        for (off_up, off_down, domains), (_, up, down) in zip(self._offsets, self.levels, strict=True):
            cap[off_up:off_up + domains] = up
            cap[off_down:off_down + domains] = down
        self.capacity = cap

    @property
    def capacity_Bps(self) -> float:
        return 2 * self.gpus * self.host_Bps + float(self.capacity.sum())

    def _bytes(self, gpus: np.ndarray) -> np.ndarray:
        """Bytes each aggregate carries per byte of a ring step's chunk."""
        src, dst = ring_pairs(gpus)
        a = np.zeros(len(self.capacity))
        for (size, _, _), (off_up, off_down, _) in zip(self.levels, self._offsets, strict=True):
            ds, dd = src // size, dst // size
            cross = ds != dd
            np.add.at(a, off_up + ds[cross], 1.0)
            np.add.at(a, off_down + dd[cross], 1.0)
        return a

    def block_resources(self, level: int, block: int) -> np.ndarray:
        if level >= len(self.levels):
            return EMPTY_IDS
        off_up, off_down, _ = self._offsets[level]
        return np.array([off_up + block, off_down + block], dtype=np.int64)


# ---- any topology graph -------------------------------------------------------------------------
class GraphView(LinkView):
    """Every link of the fabric's topology graph; transfers routed by the topology layer."""

    kind = "links (topology graph)"

    def __init__(self, gpus: int, topology, blocks: tuple[int, ...] = ()):
        super().__init__(gpus)
        if topology.num_endpoints < gpus:
            raise EstimatorError(f"topology {topology.name!r} has {topology.num_endpoints} endpoints, fewer than {gpus} GPUs")
        self.topology = topology
        self.capacity = np.asarray(topology.bandwidth, dtype=float)
        self.blocks = tuple(b for b in blocks if 1 < b < gpus)

    @property
    def capacity_Bps(self) -> float:
        return float(self.capacity.sum())

    def _bytes(self, gpus: np.ndarray) -> np.ndarray:
        src, dst = ring_pairs(gpus)
        a = np.zeros(len(self.capacity))
        for s, d in zip(src.tolist(), dst.tolist(), strict=True):
            route = self.topology.route(s, d)
            np.add.at(a, route.links, route.fractions)
        return a


# ---- optical mechanisms --------------------------------------------------------------------------
class CircuitView(View):
    """OCS circuits per job: nothing shared; ``reconfig_s`` once at start."""

    kind = "circuits per job (reconfigured at start)"

    def __init__(self, gpus: int, ports: int, port_Bps: float, reconfig_s: float, group_ports=None):
        super().__init__(gpus)
        self.ports, self.port_Bps, self.reconfig_s = ports, port_Bps, reconfig_s
        self.group_ports = group_ports

    @property
    def capacity_Bps(self) -> float:
        return self.gpus * self.ports * self.port_Bps

    def load(self, gpus: np.ndarray) -> JobLoad:
        n = len(gpus)
        if self.group_ports is not None and self.group_ports(n) > self.ports:
            raise EstimatorError(f"OCS: a job of {n} servers needs {self.group_ports(n)} ports per server, "
                                 f"the servers have {self.ports}")
        return JobLoad(factor=1.0, traffic_Bps=n * self.port_Bps, setup_s=self.reconfig_s)


class DedicatedView(View):
    """Every job on its own circuits or links (nothing shared, nothing to set up at start)."""

    kind = "dedicated circuits"

    def __init__(self, gpus: int, port_Bps: float, blocks: tuple[int, ...] = (), kind: str = ""):
        super().__init__(gpus)
        self.port_Bps = port_Bps
        self.blocks = tuple(b for b in blocks if 1 < b < gpus)
        self.kind = kind or self.kind

    @property
    def capacity_Bps(self) -> float:
        return self.gpus * self.port_Bps

    def load(self, gpus: np.ndarray) -> JobLoad:
        return JobLoad(traffic_Bps=len(gpus) * self.port_Bps)


class RingSpanView(View):
    """TeraRack: resource i = the ring segment between node i and i + 1 (all its wavelengths)."""

    kind = "wavelengths per ring segment"

    def __init__(self, gpus: int, segment_Bps: float):
        super().__init__(gpus)
        self.segment_Bps = segment_Bps

    @property
    def resources(self) -> int:
        return self.gpus

    @property
    def capacity_Bps(self) -> float:
        return self.gpus * self.segment_Bps

    def span(self, gpus: np.ndarray) -> np.ndarray:
        """Segments of the shortest arc holding ``gpus`` (all but the largest gap between them)."""
        g = np.sort(gpus)
        gaps = (np.roll(g, -1) - g) % self.gpus
        gaps[gaps == 0] = self.gpus
        m = int(np.argmax(gaps))  # the arc skips the segments from g[m] to g[m + 1]
        start, length = int(g[(m + 1) % len(g)]), self.gpus - int(gaps[m])
        return (start + np.arange(length)) % self.gpus

    def load(self, gpus: np.ndarray) -> JobLoad:
        ids = self.span(gpus)
        return JobLoad(ids, np.ones(len(ids)), 1.0, len(ids) * self.segment_Bps)


class PodRelayView(LinkView):
    """OPSquare: resource i = node i's relay transceiver (inter-pod traffic to position x of pod p
    arrives at node (p, x_sender) and is relayed inside pod p when x differs)."""

    kind = "inter-pod relays"

    def __init__(self, gpus: int, pod_nodes: int, groups: int, transceiver_Bps: float):
        super().__init__(gpus)
        self.pod_nodes, self.transceiver_Bps = pod_nodes, transceiver_Bps
        self.groups = groups
        self.blocks = (pod_nodes,) if pod_nodes < gpus else ()
        self.capacity = np.full(gpus, float(transceiver_Bps))
        self.port_floor_s, self.port_crossings = 1.0 / transceiver_Bps, 1  # its own transmitter

    @property
    def capacity_Bps(self) -> float:
        return self.gpus * (self.groups + 1) * self.transceiver_Bps

    def _bytes(self, gpus: np.ndarray) -> np.ndarray:
        src, dst = ring_pairs(gpus)
        m = self.pod_nodes
        relay = (src // m != dst // m) & (src % m != dst % m)
        a = np.zeros(self.gpus)
        np.add.at(a, (dst[relay] // m) * m + src[relay] % m, 1.0)
        return a


# ---- which view -----------------------------------------------------------------------------------
def _fattree_levels(half: int, bw: float) -> list[tuple[int, float, float]]:
    return [(half, half * bw, half * bw), (half * half, half * half * bw, half * half * bw)]


def tree_levels(fabric: Fabric) -> tuple[float, list[tuple[int, float, float]]] | None:
    """(port bandwidth, levels) of a tree-like fabric, or None."""
    c = fabric.config
    name = fabric.name
    if name == "fattree":
        return c.link_bandwidth_Bps, _fattree_levels(c.radix() // 2, c.link_bandwidth_Bps)
    if name == "ideal":
        return c.bandwidth_Bps, []
    if name == "nvlink_leafspine":
        up = c.uplinks * c.uplink_bandwidth_Bps
        return c.nvlink_bandwidth_Bps, [(c.gpus_per_node, up, up)]
    twin = getattr(fabric, "_twin", None)  # a `custom` file of a standard shape
    if name == "custom" and twin is not None:
        t = twin.config
        if twin.name == "leaf_spine":
            up = t.spines * t.uplink_bw
            return t.endpoint_bw, [(t.per_leaf, up, up)]
        if twin.name == "fattree":
            return t.link_bandwidth_Bps, _fattree_levels(t.radix() // 2, t.link_bandwidth_Bps)
        if twin.name == "star":
            return t.link_bandwidth_Bps, []
    return None


def _blocks(fabric: Fabric) -> tuple[int, ...]:
    c = fabric.config
    for key in ("gpus_per_node", "tiles_per_server", "pod_nodes"):
        if getattr(c, key, None):
            return (int(getattr(c, key)),)
    radix = getattr(c, "radix", None) or getattr(c, "r", None)
    if radix and radix > 1:
        return tuple(int(radix) ** k for k in range(1, 4))
    if getattr(c, "cols", None) or fabric.name == "torus2d":
        from estimator.collectives.params import AlgoParams, torus_dims

        try:
            rows, cols = (c.rows, c.cols) if c.rows and c.cols else torus_dims(c.nodes, AlgoParams())
        except EstimatorError:
            return ()
        return (int(cols),)
    return ()


def view_for(fabric: Fabric) -> View:
    """The view of ``fabric`` (see the module doc)."""
    from estimator.fabrics.library import LibraryFabric

    n = fabric.nodes
    c = fabric.config
    if fabric.name == "ocs" and c.topology in ("ring", "torus2d", "btree", "auto"):
        return CircuitView(n, c.ports, c.port_bps / 8, c.reconfig_s, fabric.group_ports)
    if fabric.name == "lumorph":
        return DedicatedView(n, c.bandwidth_Bps, (c.tiles_per_server,), "dedicated circuits (tiles, wavelengths)")
    if fabric.name == "terarack":
        return RingSpanView(n, c.wavelengths * c.wavelength_bps / 8)
    if fabric.name == "opsquare":
        return PodRelayView(n, c.pod_nodes, c.groups, c.transceiver_bps / 8)
    tree = tree_levels(fabric)
    if tree is not None:
        return TreeView(n, tree[0], tree[1])
    if isinstance(fabric, LibraryFabric):
        return GraphView(n, fabric.topology(), _blocks(fabric))
    port = getattr(fabric, "port_bandwidth", None)
    return DedicatedView(n, float(port()) if callable(port) else 0.0, _blocks(fabric), "no shared resources known")

