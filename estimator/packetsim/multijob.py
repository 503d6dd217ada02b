"""Packet level: several data-parallel jobs sharing a leaf-spine (the multi-job traffic driver).

Network: ``hosts`` GPUs, ``per_leaf`` under each leaf switch, every leaf with one uplink to each of
``spines`` spine switches. A GPU's port runs at ``host_bps`` (one packet per slot: the time step
is one packet at that rate); leaf<->spine links at ``uplink_bps``. Switches are output-queued with
unbounded buffers (lossless, as an RDMA fabric with flow control; no drops), ``switch_latency_s``
before a packet joins its output FIFO (as :mod:`.leafspine`); a leaf sprays a host's packets over
the spines round-robin (per-packet ECMP). FIFO departures come from the Lindley recursion
(:func:`.vector.fifo_departures`).

Jobs: each loops ``iterations`` times over compute (``compute_s``, no traffic) then a ring
all-reduce of ``nbytes`` over its GPUs in id order: 2(n-1) steps, in each every GPU sends
``nbytes / n`` (whole packets) to the next; a GPU starts step s once it has sent step s-1 and
received its predecessor's step s-1 (NCCL-style step gating), and ends the all-reduce when it has
received the last step. A job's first compute starts at ``offset_s``. Reported: every job's
iteration times (all-reduce end to all-reduce end at its first GPU).

Deterministic: no randomness (round-robin spraying; packets reaching a FIFO at the same instant
are served round-robin over their senders, the order rotating every slot, so no job is favoured).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from estimator.errors import EstimatorError, require
from estimator.packetsim.vector import fifo_departures

NS = 1e-9


@dataclass(frozen=True)
class Net:
    hosts: int
    per_leaf: int
    spines: int = 1
    host_bps: float = 100e9
    uplink_bps: float = 100e9
    switch_latency_s: float = 1e-6
    packet_bytes: int = 4096

    def __post_init__(self) -> None:
        require(self.per_leaf >= 1 and self.hosts % self.per_leaf == 0 and self.hosts // self.per_leaf >= 2,
                f"multi-job packet sim: hosts={self.hosts} must be >= 2 leaves of per_leaf={self.per_leaf}")
        require(self.spines >= 1, "multi-job packet sim: spines must be >= 1")
        require(self.host_bps > 0 and self.uplink_bps > 0, "multi-job packet sim: link rates must be positive")
        require(self.switch_latency_s >= 0 and self.packet_bytes > 0, "multi-job packet sim: bad latency / packet size")

    @property
    def leaves(self) -> int:
        return self.hosts // self.per_leaf


@dataclass(frozen=True)
class JobSpec:
    gpus: tuple[int, ...]
    compute_s: float
    nbytes: float
    offset_s: float = 0.0


@dataclass(frozen=True)
class JobTimes:
    iteration_ends_s: np.ndarray  # all-reduce end of every iteration at the job's first GPU

    def mean_iter_s(self, warmup: int) -> float:
        ends = self.iteration_ends_s
        require(len(ends) > warmup + 1, "multi-job packet sim: not enough iterations after warm-up")
        return float(np.diff(ends[warmup:]).mean())


class _Ports:
    """Output ports: leaf downlink to each host, leaf uplink to each spine, spine port to each leaf."""

    def __init__(self, net: Net):
        self.net = net
        self.down0 = 0
        self.up0 = net.hosts
        self.spine0 = self.up0 + net.leaves * net.spines
        total = self.spine0 + net.spines * net.leaves
        bits = 8 * net.packet_bytes
        self.service = np.full(total, bits / net.uplink_bps / NS)
        self.service[: net.hosts] = bits / net.host_bps / NS
        self.free = np.zeros(total)


def simulate_jobs(net: Net, jobs: list[JobSpec], iterations: int, max_time_s: float = 10.0) -> list[JobTimes]:
    """Run the jobs until each has finished ``iterations`` all-reduces (see the module doc)."""
    require(jobs, "multi-job packet sim: no jobs")
    used: set[int] = set()
    for j in jobs:
        require(len(j.gpus) >= 2, "multi-job packet sim: a job needs at least 2 GPUs")
        require(all(0 <= g < net.hosts for g in j.gpus), "multi-job packet sim: a job GPU is not on the network")
        require(not used & set(j.gpus), "multi-job packet sim: two jobs share a GPU")
        require(j.compute_s >= 0 and j.nbytes > 0 and j.offset_s >= 0, "multi-job packet sim: bad job parameters")
        used |= set(j.gpus)
    return _Engine(net, jobs, iterations, max_time_s).run()


class _Engine:
    def __init__(self, net: Net, jobs: list[JobSpec], iterations: int, max_time_s: float):
        self.net, self.jobs, self.iterations = net, jobs, iterations
        self.slot = 8 * net.packet_bytes / net.host_bps / NS  # ns
        self.latency = net.switch_latency_s / NS
        self.max_slots = int(math.ceil(max_time_s / NS / self.slot))
        # ranks of all jobs, flattened
        host, job_of, succ, pred, steps, packets, compute, offset = [], [], [], [], [], [], [], []
        for j, spec in enumerate(jobs):
            g = sorted(spec.gpus)
            n, base = len(g), len(host)
            for i, h in enumerate(g):
                host.append(h)
                job_of.append(j)
                succ.append(base + (i + 1) % n)
                pred.append(base + (i - 1) % n)
                steps.append(2 * (n - 1))
                packets.append(max(1, math.ceil(spec.nbytes / n / net.packet_bytes)))
                compute.append(spec.compute_s / NS)
                offset.append(spec.offset_s / NS)
        self.host = np.array(host)
        self.job_of = np.array(job_of)
        self.succ = np.array(succ)
        self.steps = np.array(steps)
        self.packets = np.array(packets)
        self.compute = np.array(compute)
        self.first = np.array([job_of.index(j) for j in range(len(jobs))])
        ranks = len(host)
        self.window = 2 * int(self.steps.max())
        self.recv = np.zeros((ranks, self.window), dtype=np.int64)  # packets received per (global step mod window)
        self.step = np.zeros(ranks, dtype=np.int64)  # step of the current iteration being sent
        self.sent = np.zeros(ranks, dtype=np.int64)  # packets of it sent
        self.iteration = np.zeros(ranks, dtype=np.int64)
        self.comm_from = np.array(offset) + self.compute  # when the current all-reduce may start
        self.done_sending = np.zeros(ranks, dtype=bool)
        self.spray = np.zeros(net.hosts, dtype=np.int64)
        self.ports = _Ports(net)
        self.ends: list[list[float]] = [[] for _ in jobs]

    def run(self) -> list[JobTimes]:
        calendar: dict[int, list[dict[str, np.ndarray]]] = defaultdict(list)
        t = 0
        while t < self.max_slots:
            now = t * self.slot
            while t in calendar:  # a hop may end within this slot: its next hop is due now too
                for batch in calendar.pop(t):
                    self._hop(batch, calendar)
            self._finish_iterations(now)
            if all(len(e) >= self.iterations for e in self.ends):
                return [JobTimes(np.array(e) * NS) for e in self.ends]
            if not self._inject(now, calendar) and not calendar:  # every GPU computes: skip to the next start
                waiting = self.comm_from[(self.iteration < self.iterations) & ~self.done_sending]
                t = max(t + 1, int(np.floor(waiting.min() / self.slot + 1e-9))) if len(waiting) else t + 1
                continue
            t += 1
        raise EstimatorError(f"multi-job packet sim: not finished within {self.max_slots * self.slot * NS:g} s")

    def _gate(self, now: float) -> np.ndarray:
        """Ranks that may put a packet on their port now."""
        g = self.iteration * self.steps + self.step
        prev_ok = (self.step == 0) | (self.recv[np.arange(len(g)), (g - 1) % self.window] >= self.packets)
        return np.flatnonzero((now >= self.comm_from) & ~self.done_sending & prev_ok
                              & (self.iteration < self.iterations))

    def _inject(self, now: float, calendar) -> bool:
        k = self._gate(now)
        if not len(k):
            return False
        k = np.roll(k, -int(round(now / self.slot)) % len(k))  # ties at a FIFO go round-robin over senders
        net = self.net
        src, dst = self.host[k], self.host[self.succ[k]]
        tag = self.iteration[k] * self.steps[k] + self.step[k]
        arrive = now + self.slot  # serialised on the host port, at the leaf one slot later
        leaf_s, leaf_d = src // net.per_leaf, dst // net.per_leaf
        spine = self.spray[src] % net.spines
        self.spray[src] += (leaf_s != leaf_d)
        self._enqueue(calendar, {"rank": self.succ[k], "tag": tag, "dst": dst, "spine": spine,
                                 "stage": np.where(leaf_s == leaf_d, 2, 0), "leaf": leaf_s,
                                 "arrive": np.full(len(k), arrive)})
        self.sent[k] += 1
        full = k[self.sent[k] >= self.packets[k]]
        last = full[self.step[full] + 1 >= self.steps[full]]
        more = full[self.step[full] + 1 < self.steps[full]]
        self.done_sending[last] = True
        self.step[more] += 1
        self.sent[full] = 0
        return True

    def _enqueue(self, calendar, batch: dict[str, np.ndarray]) -> None:
        slots = np.floor(batch["arrive"] / self.slot + 1e-9).astype(np.int64)
        if slots.min() == slots.max():
            calendar[int(slots[0])].append(batch)
            return
        for s in np.unique(slots):
            sel = slots == s
            calendar[int(s)].append({key: v[sel] for key, v in batch.items()})

    def _hop(self, b: dict[str, np.ndarray], calendar) -> None:
        """Packets arriving at a switch (stage 0: source leaf bound up, 1: spine, 2: leaf bound
        down) or at their GPU (stage 3)."""
        net, p = self.net, self.ports
        stage = b["stage"]
        if (stage == 3).any():
            d = stage == 3
            np.add.at(self.recv, (b["rank"][d], b["tag"][d] % self.window), 1)
        moving = stage < 3
        if not moving.any():
            return
        b = {key: v[moving] for key, v in b.items()}
        stage = b["stage"]
        dst_leaf = b["dst"] // net.per_leaf
        port = np.where(stage == 0, p.up0 + b["leaf"] * net.spines + b["spine"],
                        np.where(stage == 1, p.spine0 + b["spine"] * net.leaves + dst_leaf, p.down0 + b["dst"]))
        done = fifo_departures(port, b["arrive"] + self.latency, p.service, p.free)
        b["arrive"] = done
        b["stage"] = stage + 1
        self._enqueue(calendar, b)

    def _finish_iterations(self, now: float) -> None:
        g_last = self.iteration * self.steps + self.steps - 1
        ranks = np.arange(len(g_last))
        over = np.flatnonzero(self.done_sending & (self.recv[ranks, g_last % self.window] >= self.packets))
        if not len(over):
            return
        for k in over.tolist():  # this iteration's counters are spent: clear them for the one after next
            g0 = self.iteration[k] * self.steps[k]
            self.recv[k, (g0 + np.arange(self.steps[k])) % self.window] = 0
        self.iteration[over] += 1
        self.step[over] = 0
        self.sent[over] = 0
        self.done_sending[over] = False
        self.comm_from[over] = now + self.compute[over]
        for j, k in enumerate(self.first):
            if k in over:
                self.ends[j].append(now)
