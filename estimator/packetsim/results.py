"""The outcome of one packet-level run: per-node counts, every measured latency, and a summary.

Summary metrics (seed 004 §2-3): ``throughput`` = delivered bits per node per second in the
window divided by the node capacity ``node_bps`` (ideal = offered load); ``loss_ratio`` = lost /
generated in the window (``lost_intra``: of them intra-pod; ``lost_spine``: dropped by a spine switch); latency mean and 99th percentile over all / intra-pod / inter-pod
packets (seconds; NaN when no packet of that kind was delivered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from estimator.packetsim.metrics import Recorder
from estimator.packetsim.params import SimSpec


def _stats(lat: np.ndarray) -> tuple[float, float]:
    if lat.shape[0] == 0:
        return float("nan"), float("nan")
    return float(lat.mean()), float(np.percentile(lat, 99))


@dataclass
class PacketSimResult:
    spec: SimSpec
    sent: np.ndarray
    received: np.ndarray
    lost: np.ndarray
    latency_s: np.ndarray
    intra_pod: np.ndarray
    window_s: float
    slots: int
    slot_s: float
    packets: int  # packets generated over the whole run (warm-up included)
    wall_s: float
    completion_s: float | None = None
    lost_intra: int = 0
    lost_spine: int = 0
    extra: dict[str, Any] | None = None  # network-specific counters added to the summary row

    @classmethod
    def build(cls, spec: SimSpec, rec: Recorder, **kw: Any) -> PacketSimResult:
        lat, local = rec.latencies()
        return cls(spec, rec.sent, rec.received, rec.lost, lat, local, lost_intra=rec.lost_intra,
                   lost_spine=rec.lost_spine, **kw)

    def summary(self) -> dict[str, Any]:
        s = self.spec
        capacity_bits = s.nodes * s.node_bps * self.window_s if self.window_s > 0 else float("nan")
        sent, received, lost = int(self.sent.sum()), int(self.received.sum()), int(self.lost.sum())
        mean, p99 = _stats(self.latency_s)
        mean_in, p99_in = _stats(self.latency_s[self.intra_pod])
        mean_out, p99_out = _stats(self.latency_s[~self.intra_pod])
        row: dict[str, Any] = {
            "network": s.network,
            "nodes": s.nodes,
            "traffic": s.traffic,
            "load": s.load,
            "locality": s.locality,
            "seed": s.seed,
            "offered": sent * s.packet_bits / capacity_bits,
            "throughput": received * s.packet_bits / capacity_bits,
            "throughput_bps_per_node": received * s.packet_bits / (s.nodes * self.window_s),
            "loss_ratio": lost / sent if sent else 0.0,
            "latency_mean_s": mean,
            "latency_p99_s": p99,
            "latency_intra_mean_s": mean_in,
            "latency_intra_p99_s": p99_in,
            "latency_inter_mean_s": mean_out,
            "latency_inter_p99_s": p99_out,
            "sent": sent,
            "received": received,
            "lost": lost,
            "lost_intra": self.lost_intra,
            "lost_spine": self.lost_spine,
            "window_s": self.window_s,
            "packets_simulated": self.packets,
            "slots": self.slots,
            "wall_s": self.wall_s,
            "packets_per_s": self.packets / self.wall_s if self.wall_s > 0 else float("nan"),
        }
        if self.completion_s is not None:
            row["collective_bytes"] = s.collective_bytes
            row["completion_s"] = self.completion_s
        row.update(self.extra or {})
        return row
