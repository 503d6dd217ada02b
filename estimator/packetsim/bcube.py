"""Packet-level electrical BCube(r, l) (Guo et al., SIGCOMM 2009), seed 003's baseline for SiPAC.

N = r^L servers (L = l + 1 levels), each with one port per level to an r-port packet switch of that
level (the servers differing only in that level's digit). Every server port runs at
``per_cu_bps / L`` (seed 003 normalises the sum over a CU's links). A switch forwards a packet after
``switch_latency_s`` into the FIFO of its output port towards the next server; that queue holds
``buffer_bytes`` (drop-tail; Netbench's per-output-port queue [seed 003 ref. 5]). Servers relay:
a route corrects the differing digits one level at a time, in an order drawn per flow (ECMP over
the correction orders), each relay adding ``relay_latency_s`` and queueing in server memory.
Port ids: server a's egress at level j is ``a L + j``; the switch port towards server a at level j
is ``N L + a L + j``.
"""

from __future__ import annotations

import numpy as np

from estimator.packetsim.flownet import Ports
from estimator.packetsim.params import CollnetParams


def ports(nodes: int, p: CollnetParams) -> Ports:
    levels = p.levels(nodes)
    n_host = nodes * levels
    rate = np.full(2 * n_host, p.per_cu_bps / 8 / levels)
    latency = np.concatenate([np.full(n_host, p.link_latency_s + p.switch_latency_s), np.full(n_host, p.link_latency_s)])
    buffer = np.concatenate([np.full(n_host, np.inf), np.full(n_host, float(p.buffer_bytes // p.mtu_bytes))])
    host_in = np.concatenate([np.zeros(n_host, dtype=bool), np.ones(n_host, dtype=bool)])
    return Ports(rate, latency, buffer, p.relay_latency_s, host_in)


def routes(nodes: int, p: CollnetParams, src: np.ndarray, dst: np.ndarray,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(route (flows x 2L port ids, -1 padded), hops): per corrected digit, the server's egress and
    the switch's port towards the next server."""
    levels = p.levels(nodes)
    route = np.full((src.shape[0], 2 * levels), -1, dtype=np.int64)
    hops = np.zeros(src.shape[0], dtype=np.int64)
    for rows, j, cur, nxt in corrections(nodes, p.r, levels, src, dst, rng):
        route[rows, hops[rows]] = cur * levels + j
        route[rows, hops[rows] + 1] = nodes * levels + nxt * levels + j
        hops[rows] += 2
    return route, hops


def corrections(nodes: int, r: int, levels: int, src: np.ndarray, dst: np.ndarray, rng: np.random.Generator):
    """Digit correction with one random order of the levels per flow (ECMP over the orders): yields,
    per position in the order, the flows that move there (``rows``), the level ``j`` they correct,
    where they are (``cur``) and where they go (``nxt``, the node with that digit set to dst's)."""
    order = np.argsort(rng.random((src.shape[0], levels)), axis=1)
    cur = src.copy()
    for i in range(levels):
        j = order[:, i]
        stride = r ** j
        want = (dst // stride) % r
        have = (cur // stride) % r
        rows = np.nonzero(want != have)[0]
        nxt = cur[rows] + (want[rows] - have[rows]) * stride[rows]
        yield rows, j[rows], cur[rows], nxt
        cur[rows] = nxt
