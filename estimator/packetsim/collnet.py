"""Collective traffic on seed 003's networks at packet level: SiPAC vs the electrical BCube.

``simulate_collnet(spec)`` builds the network (:mod:`.bcube` or :mod:`.sipac`), turns the traffic
into phases of flows and runs them on the window-transport engine (:mod:`.flownet`):

* ``incast``: every CU sends ``collective_bytes`` to CU 0 (seed 003 Fig. 4a, 1 MB messages);
* ``all_to_all``: every CU sends ``collective_bytes`` to every other CU;
* ``dimwise_all_reduce``: BCube's / Flex-SiPCO's dimension-wise all-reduce of ``collective_bytes``
  per CU (the fluid model's ``dimwise``): 2L phases (reduce-scatter, then all-gather mirrored); in
  phase s every CU sends ``M / (L r^(s+1))`` bytes to each of its r - 1 peers on every level;
* ``hybrid``: the all-reduce, then an all-to-all of ``collective_bytes`` per CU (``M / N`` per pair)
  (seed 003 Fig. 4b: "all-reduce & all-to-all ... 100 MB message size").

Phases are separated by a barrier (a step starts when the previous one is delivered everywhere).
The completion time is the sum over phases; ``lost`` counts dropped packets (all recovered).
"""

from __future__ import annotations

import math
import time

import numpy as np

from estimator.packetsim import bcube, sipac
from estimator.packetsim.flownet import Phase, Transport, run_phase
from estimator.packetsim.params import SimSpec, dimwise_sizes
from estimator.packetsim.results import PacketSimResult


def _pairs(traffic: str, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    if traffic == "incast":
        src = np.arange(1, nodes)
        return src, np.zeros_like(src)
    a, b = np.divmod(np.arange(nodes * nodes), nodes)
    keep = a != b
    return a[keep], b[keep]


def _neighbours(nodes: int, r: int, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (CU, same-level peer) pair: the CUs that differ in exactly one digit."""
    src, dst = [], []
    ids = np.arange(nodes)
    for j in range(levels):
        stride = r**j
        digit = (ids // stride) % r
        for v in range(r):
            other = ids + (v - digit) * stride
            keep = other != ids
            src.append(ids[keep])
            dst.append(other[keep])
    return np.concatenate(src), np.concatenate(dst)


def phases(spec: SimSpec, rng: np.random.Generator) -> list[tuple[str, Phase]]:
    """The traffic as named phases of flows with their routes."""
    c, n, m = spec.collnet, spec.nodes, float(spec.collective_bytes)
    levels = c.levels(n)
    net = bcube if spec.network == "bcube" else sipac
    out: list[tuple[str, Phase]] = []

    def phase(name: str, src: np.ndarray, dst: np.ndarray, nbytes: float) -> None:
        route, hops = net.routes(n, c, src, dst, rng)
        out.append((name, Phase(route, hops, np.full(src.shape[0], max(1, math.ceil(nbytes / c.mtu_bytes))))))

    if spec.traffic in ("incast", "all_to_all"):
        phase(spec.traffic, *_pairs(spec.traffic, n), m)
        return out
    src, dst = _neighbours(n, c.r, levels)
    sizes = dimwise_sizes(m, levels, c.r)
    for s, size in enumerate(sizes):
        phase(f"reduce_scatter_{s}", src, dst, size)
    for s, size in reversed(list(enumerate(sizes))):
        phase(f"all_gather_{s}", src, dst, size)
    if spec.traffic == "hybrid":
        phase("all_to_all", *_pairs("all_to_all", n), m / n)
    return out


def simulate_collnet(spec: SimSpec) -> PacketSimResult:
    from estimator.packetsim.metrics import Recorder

    start = time.perf_counter()
    c = spec.collnet
    rng = np.random.default_rng(spec.seed)
    net = bcube if spec.network == "bcube" else sipac
    ports = net.ports(spec.nodes, c)
    tr = Transport(c.mtu_bytes, c.window_bytes, c.initial_window, c.rto_s)
    total, packets, dropped, timeouts, fast = 0.0, 0, 0, 0, 0
    per_phase = {}
    for name, ph in phases(spec, rng):
        res = run_phase(ports, ph, tr, spec.max_time_s)
        total += res.completion_s
        packets += res.packets
        dropped += res.dropped
        timeouts += res.timeouts
        fast += res.fast_retransmits
        per_phase[name] = res.completion_s
    rec = Recorder(spec.nodes, c.r, 0.0, 0.0)
    out = PacketSimResult.build(spec, rec, window_s=total, slots=0, slot_s=0.0, packets=packets,
                                wall_s=time.perf_counter() - start, completion_s=total)
    out.lost = np.array([dropped])
    out.extra = {"timeouts": timeouts, "fast_retransmits": fast,
                 "phase_completion_s": ", ".join(f"{k} {v * 1e6:.4g} us" for k, v in per_phase.items())}
    return out
