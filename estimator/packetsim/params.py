"""Typed, validated parameters of a packet-level run (built from the ``packetsim`` Hydra config).

Units are SI (seconds, bits/s, bytes). Defaults and their sources live in ``conf/packetsim.yaml``;
the dataclass defaults below repeat them so the library is usable without Hydra.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from estimator import limits
from estimator.errors import EstimatorError, require

NETWORKS = ("opsquare", "leafspine", "bcube", "sipac")
COLLNETS = ("bcube", "sipac")  # collective traffic on seed 003's networks (estimator/packetsim/collnet.py)
COLLNET_TRAFFICS = ("incast", "all_to_all", "dimwise_all_reduce", "hybrid")
TRAFFICS = (
    "uniform",
    "ring_allreduce",
    "hierarchical_allreduce",
    "hierarchical_direct_allreduce",
    "hierarchical_scheduled_allreduce",
    *COLLNET_TRAFFICS,
)


@dataclass(frozen=True)
class OpsquareParams:
    """OPSquare for ML (seed 004 §2): N pods × M nodes, P groups of F = M/P nodes per pod."""

    pods: int | None = None  # N; null = sqrt(nodes)
    nodes_per_pod: int | None = None  # M; null = sqrt(nodes)
    groups: int | None = None  # P; null = M / group_size
    group_size: int = 4  # F = M/P when groups is null
    link_bps: float = 3.6e12  # per transceiver
    transceiver_s: float = 80e-9
    label_processing_s: float = 10e-9
    preamble_s: float = 30e-9
    propagation_s: float = 0.0
    tx_buffer_bytes: int = 1_000_000
    retry_s: float | None = None  # NACK round trip; null = label_processing_s + 2·propagation_s

    def layout(self, nodes: int) -> tuple[int, int, int]:
        """(N pods, M nodes per pod, P groups) for ``nodes``, validated."""
        root = math.isqrt(nodes)
        m = self.nodes_per_pod or (root if root * root == nodes else None)
        n = self.pods or (nodes // m if m else None)
        require(
            m is not None and n is not None and n * m == nodes,
            f"nodes={nodes}: OPSquare needs nodes = opsquare.pods × opsquare.nodes_per_pod "
            "(or a perfect square when they are null)",
        )
        p = self.groups or max(1, m // self.group_size)
        require(m % p == 0, f"opsquare.groups={p} must divide opsquare.nodes_per_pod={m}")
        require(n >= 2 and m >= 2, f"nodes={nodes}: OPSquare needs at least 2 pods of 2 nodes")
        return n, m, p


@dataclass(frozen=True)
class LeafSpineParams:
    """NVLink leaf-spine (seed 004 §2): 8-GPU pods, 4 leaf planes, one spine per plane."""

    gpus_per_pod: int = 8
    planes: int = 4  # NVLink switches per pod = spine switches
    gpu_link_bps: float = 900e9  # per GPU per plane (4 × 900 Gb/s = 3.6 Tb/s)
    uplink_bps: float = 800e9  # leaf -> spine and spine -> leaf, per plane
    switch_latency_s: float = 1e-6
    leaf_buffer_bytes: int = 16_000_000
    spine_buffer_bytes: int = 64_000_000
    propagation_s: float = 0.0

    def pods(self, nodes: int) -> int:
        require(
            nodes % self.gpus_per_pod == 0 and nodes // self.gpus_per_pod >= 2,
            f"nodes={nodes}: leaf-spine needs a multiple of leafspine.gpus_per_pod="
            f"{self.gpus_per_pod} with at least 2 pods",
        )
        return nodes // self.gpus_per_pod


def dimwise_sizes(nbytes: float, levels: int, r: int) -> list[float]:
    """Bytes per (CU, same-level peer) in each reduce-scatter step of the dimension-wise all-reduce of
    ``nbytes`` per CU (the all-gather mirrors them): step s sends ``nbytes / (L r^(s+1))``."""
    return [nbytes / (levels * r ** (s + 1)) for s in range(levels)]


@dataclass(frozen=True)
class CollnetParams:
    """SiPAC(r, l) and the electrical BCube(r, l) for collective traffic (seed 003 Sec. 4); defaults
    and sources in ``conf/packetsim.yaml`` (``collnet:``)."""

    r: int = 8
    per_cu_bps: float = 2048e9  # the sum over a CU's links
    mtu_bytes: int = 9000
    window_bytes: int = 65535
    initial_window: int = 3
    rto_s: float = 300e-6
    buffer_bytes: int = 150_000  # per switch output port (BCube only)
    switch_latency_s: float = 1e-6
    relay_latency_s: float = 1e-6
    link_latency_s: float = 20e-9

    def levels(self, nodes: int) -> int:
        """L with r^L = nodes, validated."""
        levels, n = 0, 1
        while n < nodes:
            n *= self.r
            levels += 1
        require(self.r >= 2 and n == nodes and levels >= 1,
                f"nodes={nodes}: BCube / SiPAC need nodes = collnet.r^L (r = {self.r}, L >= 1)")
        return levels


@dataclass(frozen=True)
class SimSpec:
    """One packet-level run."""

    network: str = "opsquare"
    nodes: int = 256
    load: float = 0.6  # offered load per node, fraction of node_bps
    locality: float = 0.5  # share of traffic whose destination is in the source's pod
    seed: int = 1
    traffic: str = "uniform"
    packet_bytes: int = 1500
    node_bps: float = 3.6e12  # per-node injection capacity that load is relative to
    warmup_s: float = 20e-6
    measure_s: float = 20e-6
    collective_bytes: float = 4_194_304.0  # per-node all-reduce buffer (collective traffic)
    max_time_s: float = 1e-3  # collective runs stop here (error) if not finished
    opsquare: OpsquareParams = field(default_factory=OpsquareParams)
    leafspine: LeafSpineParams = field(default_factory=LeafSpineParams)
    collnet: CollnetParams = field(default_factory=CollnetParams)

    def __post_init__(self) -> None:
        require(self.network in NETWORKS, f"network={self.network!r}: choose one of {', '.join(NETWORKS)}")
        require(self.traffic in TRAFFICS, f"traffic={self.traffic!r}: choose one of {', '.join(TRAFFICS)}")
        require(0.0 < self.load <= 1.0, f"load={self.load!r} must be in (0, 1]")
        require(0.0 <= self.locality <= 1.0, f"locality={self.locality!r} must be in [0, 1]")
        require(self.seed >= 0, f"seed={self.seed!r} must be >= 0 (numpy seeds are non-negative)")
        require(self.packet_bytes > 0, f"packet_bytes={self.packet_bytes!r} must be positive")
        require(self.warmup_s >= 0, f"warmup_s={self.warmup_s!r} must be >= 0")
        require(self.measure_s > 0, f"measure_s={self.measure_s!r} must be > 0")
        require(self.collective_bytes > 0, f"collective_bytes={self.collective_bytes!r} must be > 0")
        require(self.max_time_s > 0, f"max_time_s={self.max_time_s!r} must be > 0")
        limits.check_count(self.nodes, "devices", "nodes")  # before any layout arithmetic
        require(self.nodes >= 4, f"nodes={self.nodes} must be >= 4 (two pods of two)")
        require(self.packet_bytes <= 1 << 20, f"packet_bytes={self.packet_bytes} must be <= 1 MiB")
        if self.network in COLLNETS:
            self._check_collnet()
            return
        require(self.traffic not in COLLNET_TRAFFICS,
                f"traffic={self.traffic!r} runs on network=bcube or sipac, not {self.network}")
        packets = self.nodes * self.load * self.node_bps * (self.warmup_s + self.measure_s) / (8 * self.packet_bytes)
        require(packets <= limits.get().sim_packets,
                f"nodes x load x node_bps x (warmup_s + measure_s) asks for {packets:.3g} packets, more than "
                f"limits.sim_packets = {limits.get().sim_packets}")
        if self.network == "opsquare":
            self.opsquare.layout(self.nodes)
        else:
            self.leafspine.pods(self.nodes)
            require(self.traffic == "uniform", f"traffic={self.traffic!r}: the leaf-spine model runs uniform traffic only")

    def _check_collnet(self) -> None:
        c = self.collnet
        require(self.traffic in COLLNET_TRAFFICS,
                f"traffic={self.traffic!r}: network={self.network} runs {', '.join(COLLNET_TRAFFICS)}")
        levels = c.levels(self.nodes)
        for name in ("per_cu_bps", "rto_s"):
            require(getattr(c, name) > 0, f"collnet.{name} must be > 0")
        for name in ("switch_latency_s", "relay_latency_s", "link_latency_s"):
            require(getattr(c, name) >= 0, f"collnet.{name} must be >= 0")
        require(64 <= c.mtu_bytes <= 1 << 20, f"collnet.mtu_bytes={c.mtu_bytes} must be in 64 .. 1 MiB")
        require(c.window_bytes >= c.mtu_bytes, f"collnet.window_bytes={c.window_bytes} must hold one packet")
        require(c.initial_window >= 1, "collnet.initial_window must be >= 1")
        require(c.buffer_bytes >= c.mtu_bytes, f"collnet.buffer_bytes={c.buffer_bytes} must hold one packet")
        n, m = self.nodes, float(self.collective_bytes)
        pkts = lambda nbytes: max(1, math.ceil(nbytes / c.mtu_bytes))  # noqa: E731
        if self.traffic == "incast":
            packets = (n - 1) * pkts(m)
        elif self.traffic == "all_to_all":
            packets = n * (n - 1) * pkts(m)
        else:  # the all-reduce's 2L neighbour exchanges (+ the hybrid's all-to-all of m / n per pair)
            packets = 2 * sum(n * levels * (c.r - 1) * pkts(size) for size in dimwise_sizes(m, levels, c.r))
            packets += n * (n - 1) * pkts(m / n) if self.traffic == "hybrid" else 0
        require(packets <= limits.get().sim_packets,
                f"traffic={self.traffic} of collective_bytes={self.collective_bytes:g} on {self.nodes} nodes is "
                f"{packets:.3g} packets, more than limits.sim_packets = {limits.get().sim_packets}")

    @property
    def packet_bits(self) -> int:
        return 8 * self.packet_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, cfg: dict[str, Any]) -> SimSpec:
        """Build from a plain mapping (the resolved Hydra config), with one-line type errors."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in cfg.items() if k in known}
        kwargs["opsquare"] = _sub(OpsquareParams, "opsquare", cfg.get("opsquare") or {})
        kwargs["leafspine"] = _sub(LeafSpineParams, "leafspine", cfg.get("leafspine") or {})
        kwargs["collnet"] = _sub(CollnetParams, "collnet", cfg.get("collnet") or {})
        for f in fields(cls):
            if f.name in kwargs and f.name not in ("opsquare", "leafspine", "collnet"):
                kwargs[f.name] = _coerce(f.name, f.default, kwargs[f.name])
        return cls(**kwargs)


def _sub(kind: type, prefix: str, values: dict[str, Any]) -> Any:
    known = {f.name: f for f in fields(kind)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise EstimatorError(f"{prefix}: unknown parameter(s) {unknown}; known: {sorted(known)}")
    out = {}
    for key, value in values.items():
        default = known[key].default
        if default is None:  # optional field: the type named first in its annotation
            default = 0 if str(known[key].type).startswith("int") else 0.0
        out[key] = None if value is None else _coerce(f"{prefix}.{key}", default, value)
    return kind(**out)


def _coerce(name: str, default: Any, value: Any) -> Any:
    """Convert a config value to the type of its default, or raise a one-line error."""
    if isinstance(default, str):
        return str(value)
    if isinstance(value, bool):
        raise EstimatorError(f"{name} must be a number, got {value!r}")
    if isinstance(default, int) and not isinstance(default, bool):
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value)
        raise EstimatorError(f"{name} must be an integer, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise EstimatorError(f"{name} must be a number, got {value!r}") from None
    require(math.isfinite(number), f"{name} must be finite, got {value!r}")
    return number
