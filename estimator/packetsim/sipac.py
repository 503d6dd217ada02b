"""Packet-level SiPAC(r, l) (seed 003 Sec. 2): CUs joined by MRR wavelength-selective switches.

N = r^L CUs (L = l + 1 levels); a CU's L optical ports carry ``per_cu_bps / L`` each, and the WSS
gives it a dedicated wavelength channel to each of its r - 1 peers on that level (``1/(r-1)`` of the
port: "arbitration-free high-bandwidth light paths ... with no output port blocking"). A channel is
passive light: no switch, no switch buffer, no queue but the sending CU's own egress (its memory).
Non-peers are reached through CUs that relay (an O/E/O hop, ``relay_latency_s``), correcting one
digit per hop in an order drawn per flow, as in the electrical BCube (:mod:`.bcube`), so the two
differ only in the switch. Port ids: the channel from CU a at level j to the peer whose digit j is
v is ``(a L + j) r + v``.
"""

from __future__ import annotations

import numpy as np

from estimator.packetsim.bcube import corrections
from estimator.packetsim.flownet import Ports
from estimator.packetsim.params import CollnetParams


def ports(nodes: int, p: CollnetParams) -> Ports:
    levels = p.levels(nodes)
    n = nodes * levels * p.r
    rate = np.full(n, p.per_cu_bps / 8 / levels / (p.r - 1))
    return Ports(rate, np.full(n, p.link_latency_s), np.full(n, np.inf), p.relay_latency_s, np.ones(n, dtype=bool))


def routes(nodes: int, p: CollnetParams, src: np.ndarray, dst: np.ndarray,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(route (flows x L channel ids, -1 padded), hops): one channel per corrected digit."""
    levels = p.levels(nodes)
    route = np.full((src.shape[0], levels), -1, dtype=np.int64)
    hops = np.zeros(src.shape[0], dtype=np.int64)
    for rows, j, cur, nxt in corrections(nodes, p.r, levels, src, dst, rng):
        route[rows, hops[rows]] = (cur * levels + j) * p.r + (nxt // p.r**j) % p.r
        hops[rows] += 1
    return route, hops
