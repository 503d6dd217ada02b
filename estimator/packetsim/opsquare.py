"""Slotted packet-level model of OPSquare for ML (seed 004 §2, FABRICS.md §5).

Topology: N pods × M nodes, each pod split into P groups of F = M/P nodes. Node ids are
``pod·M + index``; group = index // F. Every node has P intra-pod transmitters (transmitter g
reaches the nodes of group g) and one inter-pod transmitter (to the N×N switch that joins the
nodes with the same index in every pod). All transceivers run at ``link_bps`` (3.6 Tb/s).

Switches are broadcast-and-select without buffers. We take the intra-pod switch g as P F×F
modules: the module (h → g) joins the F nodes of group h to the F nodes of group g, so a node
has one intra-pod receiver per *source* group (split F, as the paper says) and one inter-pod
receiver. Each receiver (switch output) accepts one packet per slot; when several transmitters
address the same output in a slot, one wins uniformly at random (seeded) and the others are
NACKed and retransmit their head-of-line packet after ``retry_s`` (label processing + round-trip
propagation). Transmitters are FIFO (head-of-line blocking) with a ``tx_buffer_bytes`` buffer;
arriving packets that do not fit are lost.

Routing: intra-pod packets take one hop. Inter-pod packets take the inter-pod switch to the node
with the *source's* index in the destination pod, which relays them (O/E/O, its own FIFOs and
buffers) over its intra-pod transmitter: at most two hops, as in the paper.

Timing: one slot = one packet time at ``link_bps`` (1500 B at 3.6 Tb/s = 3.33 ns). A hop sent in
slot t reaches the receiver after the slot plus ``transceiver_s + label_processing_s +
preamble_s + propagation_s`` (80 + 10 + 30 ns). The preamble is counted as latency, not as
transmitter occupancy: a serial 30 ns preamble per 3.33 ns packet would cap throughput at 10 %,
against the paper's near-ideal throughput up to load 0.6 (our reading; documented choice).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

import numpy as np

from estimator.errors import EstimatorError
from estimator.packetsim.metrics import Recorder
from estimator.packetsim.params import SimSpec
from estimator.packetsim.queues import FifoBank
from estimator.packetsim.results import PacketSimResult
from estimator.packetsim.traffic import CollectiveSource, uniform_destinations
from estimator.packetsim.vector import group_rank

FIELDS = ("dst", "src", "birth", "tag")


def _slots(seconds: float, slot: float) -> int:
    return int(math.ceil(seconds / slot - 1e-9))


class OpsquareSim:
    def __init__(self, spec: SimSpec, plan=None):
        self.spec = spec
        p = spec.opsquare
        self.pods, self.m, self.groups = p.layout(spec.nodes)
        self.f = self.m // self.groups
        self.nodes = spec.nodes
        self.tau = spec.packet_bits / p.link_bps
        self.hop_s = p.transceiver_s + p.label_processing_s + p.preamble_s + p.propagation_s
        self.hop_slots = _slots(self.tau + self.hop_s, self.tau)
        retry = p.retry_s if p.retry_s is not None else p.label_processing_s + 2 * p.propagation_s
        self.retry_slots = max(1, _slots(retry, self.tau))
        self.gen_prob = spec.load * spec.node_bps / p.link_bps
        if self.gen_prob > 1.0:
            raise EstimatorError(f"load={spec.load}: offered {spec.load * spec.node_bps:.3g} b/s per node exceeds "
                                 f"one opsquare.link_bps={p.link_bps:.3g} transmitter")
        self.k = self.groups + 1  # transmitters per node
        capacity = p.tx_buffer_bytes // spec.packet_bytes
        if capacity < 1:
            raise EstimatorError(f"opsquare.tx_buffer_bytes={p.tx_buffer_bytes} holds no {spec.packet_bytes}-byte packet")
        self.bank = FifoBank(self.nodes * self.k, capacity, FIELDS)
        self.blocked = np.zeros(self.nodes * self.k, dtype=np.int64)
        self.rng = np.random.default_rng(spec.seed)
        self.source = CollectiveSource(plan, burst=self.k) if plan is not None else None
        node = np.arange(self.nodes)
        self.pod_of = node // self.m
        self.idx_of = node % self.m
        self.group_of = self.idx_of // self.f

    # ---- routing ---------------------------------------------------------------------------
    def _tx(self, holder: np.ndarray, dst: np.ndarray) -> np.ndarray:
        same_pod = self.pod_of[holder] == self.pod_of[dst]
        return holder * self.k + np.where(same_pod, self.group_of[dst], self.groups)

    def _output(self, tx: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(switch output id, receiving node) of each transmitter's head packet."""
        node, kind = np.divmod(tx, self.k)
        intra = kind < self.groups
        relay = self.pod_of[dst] * self.m + self.idx_of[node]
        recv = np.where(intra, dst, relay)
        out = np.where(intra, dst * self.groups + self.group_of[node], self.nodes * self.groups + relay)
        return out, recv

    # ---- one run ---------------------------------------------------------------------------
    def run(self) -> PacketSimResult:
        spec, tau = self.spec, self.tau
        start = time.perf_counter()
        collective = self.source is not None
        end_s = spec.max_time_s if collective else spec.warmup_s + spec.measure_s
        rec = Recorder(self.nodes, self.m, 0.0 if collective else spec.warmup_s, end_s)
        total = _slots(end_s, tau)
        relays: dict[int, list[tuple[np.ndarray, ...]]] = defaultdict(list)
        credits: dict[int, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
        generated = 0
        last_delivery_s = 0.0
        t = -1
        finished = False
        while t + 1 < total:
            t += 1
            if collective:
                for dst, tag in credits.pop(t, ()):
                    self.source.deliver(dst, tag)
                if self.source.finished():
                    finished = True
                    break
                t = self._skip_idle(t, relays, credits)
            parts = relays.pop(t, [])
            if parts:
                self._enqueue(t, rec, *(np.concatenate(c) for c in zip(*parts, strict=True)))
            src, dst, tag = self._generate(t)
            if src.shape[0]:
                generated += src.shape[0]
                rec.generated(t * tau, src)
                self._enqueue(t, rec, src, dst, src, np.full(src.shape[0], t), tag)
            win = self._contend(t)
            if win.shape[0] == 0:
                continue
            head = self.bank.peek(win)
            self.bank.pop(win)
            _, recv = self._output(win, head["dst"])
            final = recv == head["dst"]
            arrive = t + self.hop_slots
            if final.any():
                lat = (t - head["birth"][final]) * tau + tau + self.hop_s
                t_s = t * tau + tau + self.hop_s
                rec.delivered(np.full(lat.shape[0], t_s), head["src"][final], head["dst"][final], lat)
                last_delivery_s = t_s
                if collective:
                    credits[arrive].append((head["dst"][final], head["tag"][final]))
            if not final.all():
                fwd = ~final
                relays[arrive].append(
                    (recv[fwd], head["dst"][fwd], head["src"][fwd], head["birth"][fwd], head["tag"][fwd])
                )
        if collective and not finished:
            raise EstimatorError(f"collective_bytes={spec.collective_bytes:g}: the collective did not finish "
                                 f"within max_time_s={spec.max_time_s:g}")
        return PacketSimResult.build(
            spec, rec, window_s=spec.measure_s if not collective else last_delivery_s,
            slots=t + 1, slot_s=tau, packets=generated, wall_s=time.perf_counter() - start,
            completion_s=last_delivery_s if collective else None,
        )

    def _skip_idle(self, t: int, relays: dict, credits: dict) -> int:
        """Collectives idle while nodes wait for their last packets: when nothing is queued and
        no node may inject, jump to the slot before the next arrival (nothing changes between)."""
        if t in relays or self.bank.count.any() or self.source.ready().shape[0]:
            return t
        pending = [k for k in relays if k > t] + [k for k in credits if k > t]
        if not pending:
            return t
        nxt = min(pending)
        for dst, tag in credits.pop(nxt, ()):  # deliveries due at `nxt` apply before it runs
            self.source.deliver(dst, tag)
        return nxt

    def _generate(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.source is None:
            src = np.nonzero(self.rng.random(self.nodes) < self.gen_prob)[0]
            dst = uniform_destinations(self.rng, src, self.m, self.pods, self.spec.locality)
            return src, dst, np.full(src.shape[0], -1)
        node, dst, tag = self.source.candidates(self.source.ready())
        if node.shape[0] == 0:
            return node, dst, tag
        # back-pressure (collectives never overflow a buffer): each node injects the longest
        # prefix of its candidates that fits its transmitters' free space
        tx = self._tx(node, dst)
        bad = (self.bank.count[tx] + group_rank(tx) >= self.bank.capacity).astype(np.int64)
        cum = np.cumsum(bad)
        first = np.ones(node.shape[0], dtype=bool)
        first[1:] = node[1:] != node[:-1]
        base = np.maximum.accumulate(np.where(first, cum - bad, 0))
        ok = cum == base
        self.source.release(node[ok])
        return node[ok], dst[ok], tag[ok]

    def _enqueue(self, t, rec, holder, dst, src, birth, tag) -> None:
        ok = self.bank.push(self._tx(holder, dst), dst=dst, src=src, birth=birth, tag=tag)
        if not ok.all():
            lost = ~ok
            if self.source is not None:  # a lost collective packet would stall the collective
                raise EstimatorError(f"traffic={self.spec.traffic}: a relay overflowed its "
                                     f"opsquare.tx_buffer_bytes={self.spec.opsquare.tx_buffer_bytes}; "
                                     "collectives assume lossless transfer")
            rec.dropped(np.full(int(lost.sum()), t * self.tau), dst[lost], src[lost])

    def _contend(self, t: int) -> np.ndarray:
        """Transmitters that win their switch output this slot; the losers back off."""
        active = np.nonzero((self.bank.count > 0) & (self.blocked <= t))[0]
        if active.shape[0] == 0:
            return active
        out, _ = self._output(active, self.bank.peek(active)["dst"])
        key = out * (1 << 32) + self.rng.integers(0, 1 << 31, size=active.shape[0])
        order = np.argsort(key)
        so = out[order]
        first = np.ones(so.shape[0], dtype=bool)
        first[1:] = so[1:] != so[:-1]
        self.blocked[active[order[~first]]] = t + self.retry_slots
        return active[order[first]]
