"""Packet-level collectives on a network of explicit ports, with a TCP-like window transport.

Used for seed 003's comparison of SiPAC with an electrical BCube (:mod:`.bcube`, :mod:`.sipac`): the
mechanism the paper credits for SiPAC's gain is that a packet switch queues (and, with finite
buffers, drops) where the WSS's dedicated wavelength channels do not. What this engine models:

* **Ports.** Every directed link is a FIFO output port with a rate, a latency to the next device
  (link + switch or relay latency) and a buffer: switch ports hold ``buffer`` bytes (drop-tail: a
  packet arriving at a full queue is lost), host ports (a server's or CU's egress, which queue in
  its memory) are unbounded. FIFO departures are computed in closed form per batch
  (:func:`~estimator.packetsim.vector.fifo_departures`). A packet's route is a fixed list of ports.
* **Transport** (per flow, NewReno-like, as Netbench's TCP [seed 003 ref. 5]): at most ``cwnd``
  packets in flight, ``cwnd`` starting at ``initial_window`` and growing by one per ACK up to
  ``window`` (slow start), then by 1/cwnd; an ACK returns after the route's latencies (ACKs do not
  queue). A lost packet is detected by three later ACKs of its flow (fast retransmit: cwnd halves)
  or after ``rto_s`` (timeout: cwnd = 1) and is sent again. No spurious timeouts (only dropped
  packets are resent).
* **Time.** Slots of one packet time at the fastest port; arrivals are processed per slot, their
  exact (continuous) times kept; buffer space is returned at the slot its packet leaves.

Phases (:class:`Phase`) run one after the other with a barrier between them (a collective's steps);
the result is the time the last packet of the last phase is delivered.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from estimator.errors import EstimatorError
from estimator.packetsim.vector import fifo_departures, group_rank


@dataclass(frozen=True)
class Ports:
    """``rate_Bps``, ``latency_s`` (to the next device) and ``buffer_pkts`` (inf: unbounded) per port."""

    rate_Bps: np.ndarray
    latency_s: np.ndarray
    buffer_pkts: np.ndarray
    relay_s: float = 0.0  # added when a packet continues from a host it arrived at (an O/E/O relay)
    host_in: np.ndarray | None = None  # True for ports whose far end is a host (relay applies there)


@dataclass(frozen=True)
class Phase:
    """Flows that start together: ``packets[f]`` packets over ``route[f, :hops[f]]`` (port ids)."""

    route: np.ndarray  # (flows, max hops) int, -1 padded
    hops: np.ndarray
    packets: np.ndarray


@dataclass(frozen=True)
class Transport:
    mtu_bytes: int = 9000
    window_bytes: int = 65535
    initial_window: int = 3
    rto_s: float = 300e-6
    dupacks: int = 3


@dataclass
class PhaseResult:
    completion_s: float
    packets: int
    dropped: int
    timeouts: int
    fast_retransmits: int


def run_phases(ports: Ports, phases: list[Phase], tr: Transport, max_time_s: float) -> list[PhaseResult]:
    return [run_phase(ports, ph, tr, max_time_s) for ph in phases]


def run_phase(ports: Ports, ph: Phase, tr: Transport, max_time_s: float) -> PhaseResult:
    """Simulate one phase from an idle network; its completion time is the last delivery."""
    nports = ports.rate_Bps.shape[0]
    flows = ph.packets.shape[0]
    if flows == 0 or int(ph.packets.sum()) == 0:
        return PhaseResult(0.0, 0, 0, 0, 0)
    service = tr.mtu_bytes / ports.rate_Bps  # seconds per packet on each port
    slot = float(service.min())
    free = np.zeros(nports)
    occ = np.zeros(nports, dtype=np.int64)
    releases: dict[int, list[np.ndarray]] = defaultdict(list)
    arrivals: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = defaultdict(list)  # flow, hop, time
    acks: dict[int, list[np.ndarray]] = defaultdict(list)
    wmax = max(1, tr.window_bytes // tr.mtu_bytes)
    route, hops, total = ph.route, ph.hops, ph.packets.astype(np.int64)
    # an ACK comes back over the route's latencies (no queueing); relays add their delay too
    used = np.maximum(route, 0)
    lat_route = np.where(route >= 0, ports.latency_s[used], 0.0).sum(axis=1)
    relays = 0 if ports.host_in is None else (
        np.where(route >= 0, ports.host_in[used], False).sum(axis=1) - 1)  # hosts passed through on the way
    ack_delay = lat_route + ports.relay_s * relays
    sent_new = np.zeros(flows, dtype=np.int64)
    retx = np.zeros(flows, dtype=np.int64)
    inflight = np.zeros(flows, dtype=np.int64)
    delivered = np.zeros(flows, dtype=np.int64)
    cwnd = np.full(flows, float(min(tr.initial_window, wmax)))
    ssthresh = np.full(flows, float(wmax))
    lost = np.zeros(flows, dtype=np.int64)  # dropped, not yet detected
    lost_since = np.full(flows, np.inf)  # when the oldest undetected loss was sent
    acks_after_loss = np.zeros(flows, dtype=np.int64)
    timers: dict[int, list[np.ndarray]] = defaultdict(list)  # slot -> flows whose timeout may fire then
    rto_slots = max(1, int(math.ceil(tr.rto_s / slot)))
    dropped = timeouts = fast = 0
    last_delivery = 0.0
    remaining = int(total.sum())
    k = 0
    max_slots = int(math.ceil(max_time_s / slot))
    touched = np.arange(flows)  # flows whose window may have opened (every flow at the start)
    while True:
        t = k * slot
        rel = releases.pop(k, None)
        if rel:
            occ -= np.bincount(np.concatenate(rel), minlength=nports)
        parts = [touched] if touched.shape[0] else []
        got = acks.pop(k, None)
        if got:
            fa, cnt = np.unique(np.concatenate(got), return_counts=True)
            inflight[fa] -= cnt
            cw = cwnd[fa]
            cw = np.where(cw < ssthresh[fa], cw + cnt, cw + cnt / np.maximum(cw, 1.0))
            cwnd[fa] = np.minimum(cw, wmax)
            hit = lost[fa] > 0
            acks_after_loss[fa[hit]] += cnt[hit]
            fr = fa[hit][acks_after_loss[fa[hit]] >= tr.dupacks]
            if fr.shape[0]:  # fast retransmit
                fast += fr.shape[0]
                ssthresh[fr] = np.maximum(cwnd[fr] / 2, 2.0)
                cwnd[fr] = ssthresh[fr]
                retx[fr] += lost[fr]
                inflight[fr] -= lost[fr]
                lost[fr], lost_since[fr], acks_after_loss[fr] = 0, np.inf, 0
            parts.append(fa)
        due = timers.pop(k, None)
        if due:
            fd = np.unique(np.concatenate(due))
            to = fd[(lost[fd] > 0) & (lost_since[fd] + tr.rto_s <= t + 1e-15)]
            if to.shape[0]:  # retransmission timeout
                timeouts += to.shape[0]
                ssthresh[to] = np.maximum(inflight[to] / 2, 2.0)
                cwnd[to] = 1.0
                retx[to] += lost[to]
                inflight[to] -= lost[to]
                lost[to], lost_since[to], acks_after_loss[to] = 0, np.inf, 0
                parts.append(to)
        cand = np.unique(np.concatenate(parts)) if len(parts) > 1 else (parts[0] if parts else touched)
        touched = np.zeros(0, dtype=np.int64)
        sent_any = False
        if cand.shape[0]:
            room = np.maximum(np.floor(cwnd[cand]).astype(np.int64) - inflight[cand], 0)
            send = np.minimum(room, retx[cand] + (total[cand] - sent_new[cand]))
            go = send > 0
            if go.any():
                fc, sc = cand[go], send[go]
                from_retx = np.minimum(sc, retx[fc])
                retx[fc] -= from_retx
                sent_new[fc] += sc - from_retx
                inflight[fc] += sc
                f_new = np.repeat(fc, sc)
                arrivals[k].append((f_new, np.zeros(f_new.shape[0], dtype=np.int64), np.full(f_new.shape[0], t)))
                sent_any = True
        batch = arrivals.pop(k, None)
        if batch:
            f = np.concatenate([b[0] for b in batch])
            h = np.concatenate([b[1] for b in batch])
            at = np.concatenate([b[2] for b in batch])
            order = np.argsort(at, kind="stable")
            f, h, at = f[order], h[order], at[order]
            port = route[f, h]
            ok = occ[port] + group_rank(port) < ports.buffer_pkts[port]
            if not ok.all():
                fb, nb = np.unique(f[~ok], return_counts=True)
                dropped += int(nb.sum())
                newly = fb[lost[fb] == 0]
                lost_since[newly] = t
                timers[k + rto_slots].append(newly)
                lost[fb] += nb
            f, h, at, port = f[ok], h[ok], at[ok], port[ok]
            if f.shape[0]:
                occ += np.bincount(port, minlength=nports)
                done = fifo_departures(port, at, service, free)
                rel_slot = (done / slot).astype(np.int64)
                for s in np.unique(rel_slot):
                    releases[int(s)].append(port[rel_slot == s])
                arrive = done + ports.latency_s[port]
                final = h + 1 >= hops[f]
                if final.any():
                    ff = f[final]
                    fu, cu = np.unique(ff, return_counts=True)
                    delivered[fu] += cu
                    remaining -= ff.shape[0]
                    last_delivery = max(last_delivery, float(arrive[final].max()))
                    back = arrive[final] + ack_delay[ff]
                    bslot = (back / slot).astype(np.int64)
                    for s in np.unique(bslot):
                        acks[int(s)].append(ff[bslot == s])
                onward = ~final
                if onward.any():
                    nxt = arrive[onward]
                    if ports.host_in is not None:
                        nxt = nxt + np.where(ports.host_in[port[onward]], ports.relay_s, 0.0)
                    nslot = (nxt / slot).astype(np.int64)
                    fo, ho = f[onward], h[onward] + 1
                    for s in np.unique(nslot):
                        sel = nslot == s
                        arrivals[int(max(s, k + 1))].append((fo[sel], ho[sel], nxt[sel]))
        if remaining <= 0:
            break
        k += 1
        if k > max_slots:
            raise EstimatorError(f"packet-level collective not finished after max_time_s={max_time_s:g} s "
                                 f"({int(delivered.sum())} of {int(total.sum())} packets delivered)")
        if not (arrivals or acks or releases or timers) and not sent_any:
            # nothing in flight and nothing can be sent: a flow is stuck (a route through a zero buffer)
            raise EstimatorError("packet-level collective stalled: a route has no usable buffer")
    return PhaseResult(last_delivery, int(total.sum()), dropped, timeouts, fast)

