"""Closed-form all-reduce times on OPSquare, to check the packet-level model against.

Parameters come from the same :class:`SimSpec` (seed 004 §2 values): packet time τ = 1500 B at
``link_bps``, one-hop latency H = transceiver + label processing + preamble + propagation.
Chunks are rounded up to whole packets, as the simulator sends them.

* ``ring_alpha_beta``: the textbook α-β ring, 2(n−1)·(α + (S/n)/B) with α = H (one hop) and B =
  ``link_bps`` — what an analytical fabric that ignores pod boundaries would predict.
* ``ring_critical_path``: adds the relay at pod boundaries. A ring in node-id order crosses N pod
  boundaries; an inter-pod edge is two hops (inter-pod switch, then the relay's intra-pod
  transmitter), one packet time τ + H longer. With step-synchronised nodes the last node's
  dependency chain spans 2(n−1) consecutive ring edges, i.e. every pod boundary twice (M ≥ 3):
  T = 2(n−1)·(cτ + H) + 2N·(τ + H).
* ``hierarchical``: intra-pod reduce-scatter (M−1 steps of S/M), inter-pod ring all-reduce of the
  shard among same-index nodes (2(N−1) one-hop steps of S/(MN)), intra-pod all-gather (M−1).
"""

from __future__ import annotations

import math

from estimator.packetsim.params import SimSpec


def _basics(spec: SimSpec) -> tuple[int, int, float, float]:
    pods, m, _ = spec.opsquare.layout(spec.nodes)
    tau = spec.packet_bits / spec.opsquare.link_bps
    p = spec.opsquare
    hop = p.transceiver_s + p.label_processing_s + p.preamble_s + p.propagation_s
    return pods, m, tau, hop


def _packets(nbytes: float, spec: SimSpec) -> int:
    return max(1, math.ceil(nbytes / spec.packet_bytes))


def ring_alpha_beta(spec: SimSpec) -> float:
    _, _, tau, hop = _basics(spec)
    n = spec.nodes
    return 2 * (n - 1) * (hop + _packets(spec.collective_bytes / n, spec) * tau)


def ring_critical_path(spec: SimSpec) -> float:
    pods, _, tau, hop = _basics(spec)
    return ring_alpha_beta(spec) + 2 * pods * (tau + hop)


def hierarchical(spec: SimSpec) -> float:
    pods, m, tau, hop = _basics(spec)
    intra = (m - 1) * (hop + _packets(spec.collective_bytes / m, spec) * tau)
    inter = 2 * (pods - 1) * (hop + _packets(spec.collective_bytes / (m * pods), spec) * tau)
    return 2 * intra + inter
