"""Traffic sources of the packet-level runs.

* Uniform random traffic (seed 004 §2): every node offers fixed-size packets as a Bernoulli
  process (``load`` packets per packet time at the node's capacity); with probability ``locality``
  the destination is uniform over the *other* nodes of the source's pod, otherwise uniform over
  the nodes of the *other* pods.
* Collective traffic: the flows of a ring all-reduce (2(n−1) steps to the ring successor, n·chunk
  = buffer) or a hierarchical all-reduce (intra-pod ring reduce-scatter, inter-pod ring
  all-reduce among same-index nodes, intra-pod ring all-gather). A :class:`CollectivePlan` lists,
  per step, every node's destination and the packet count; a node may start step s once it has
  sent step s−1 and received all of step s−1's packets (NCCL-style step synchronisation, no
  global barrier). Partial packets are rounded up to whole packets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def uniform_destinations(
    rng: np.random.Generator, src: np.ndarray, pod_size: int, pods: int, locality: float
) -> np.ndarray:
    """A destination for each source node (ids are ``pod * pod_size + index``)."""
    n = src.shape[0]
    pod, idx = np.divmod(src, pod_size)
    local = rng.random(n) < locality
    shift_local = rng.integers(1, pod_size, size=n)
    shift_pod = rng.integers(1, pods, size=n) if pods > 1 else np.zeros(n, dtype=np.int64)
    other_idx = rng.integers(0, pod_size, size=n)
    dst_local = pod * pod_size + (idx + shift_local) % pod_size
    dst_remote = ((pod + shift_pod) % pods) * pod_size + other_idx
    if pods == 1:
        return dst_local
    return np.where(local, dst_local, dst_remote)


@dataclass(frozen=True)
class CollectivePlan:
    """Per step s: node i sends ``packets[s]`` packets to each of ``dests[s, i, :fanout[s]]``
    (interleaved round-robin over those destinations)."""

    name: str
    dests: np.ndarray  # (steps, nodes, max fanout) int64
    fanout: np.ndarray  # (steps,) int64
    packets: np.ndarray  # (steps,) int64, per destination
    phase: np.ndarray  # (steps,) int64, nondecreasing; a new phase waits for the previous one

    @property
    def steps(self) -> int:
        return int(self.packets.shape[0])

    @property
    def per_step(self) -> np.ndarray:
        """Packets each node sends (and receives) in each step."""
        return self.packets * self.fanout

    @property
    def per_phase(self) -> np.ndarray:
        """Packets each node receives in each phase."""
        return np.bincount(self.phase, weights=self.per_step).astype(np.int64)

    def total_packets(self) -> int:
        return int(self.per_step.sum()) * int(self.dests.shape[1])


def _packets(nbytes: float, packet_bytes: int) -> int:
    return max(1, math.ceil(nbytes / packet_bytes))


def _plan(name: str, phases: list[tuple[np.ndarray, int]], phase: list[int] | None = None) -> CollectivePlan:
    """Build a plan from (destinations (nodes, fanout), packets per destination) per step;
    ``phase`` groups consecutive steps that need not wait for each other (default: none)."""
    width = max(d.shape[1] for d, _ in phases)
    nodes = phases[0][0].shape[0]
    dests = np.zeros((len(phases), nodes, width), dtype=np.int64)
    for s, (d, _) in enumerate(phases):
        dests[s, :, : d.shape[1]] = d
    fanout = np.array([d.shape[1] for d, _ in phases], dtype=np.int64)
    packets = np.array([c for _, c in phases], dtype=np.int64)
    ph = np.arange(len(phases)) if phase is None else np.array(phase, dtype=np.int64)
    return CollectivePlan(name, dests, fanout, packets, ph)


def ring_allreduce(nodes: int, nbytes: float, packet_bytes: int) -> CollectivePlan:
    """Ring all-reduce over all nodes in id order: 2(n−1) steps of nbytes/n to node i+1."""
    succ = ((np.arange(nodes) + 1) % nodes)[:, None]
    c = _packets(nbytes / nodes, packet_bytes)
    return _plan("ring_allreduce", [(succ, c)] * (2 * (nodes - 1)))


def _pod_peers(pods: int, pod_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(next in pod, next same-index node in the next pod, all pod-mates, all same-index peers)."""
    node = np.arange(pods * pod_size)
    pod, idx = np.divmod(node, pod_size)
    intra = pod * pod_size + (idx + 1) % pod_size
    inter = ((pod + 1) % pods) * pod_size + idx
    mates = pod[:, None] * pod_size + (idx[:, None] + np.arange(1, pod_size)) % pod_size
    peers = ((pod[:, None] + np.arange(1, pods)) % pods) * pod_size + idx[:, None]
    return intra[:, None], inter[:, None], mates, peers


def hierarchical_allreduce(pods: int, pod_size: int, nbytes: float, packet_bytes: int) -> CollectivePlan:
    """Intra-pod ring reduce-scatter (M−1 steps of S/M), inter-pod ring all-reduce of the S/M
    shard among same-index nodes (2(N−1) steps of S/(MN)), intra-pod ring all-gather (M−1)."""
    intra, inter, _, _ = _pod_peers(pods, pod_size)
    a = (intra, _packets(nbytes / pod_size, packet_bytes))
    b = (inter, _packets(nbytes / (pod_size * pods), packet_bytes))
    return _plan("hierarchical_allreduce", [a] * (pod_size - 1) + [b] * (2 * (pods - 1)) + [a] * (pod_size - 1))


def hierarchical_direct_allreduce(pods: int, pod_size: int, nbytes: float, packet_bytes: int) -> CollectivePlan:
    """The same three phases, each one round of direct sends: S/M to every pod-mate
    (reduce-scatter), S/(MN) to every same-index node (reduce-scatter and all-gather of the
    shard), S/M to every pod-mate (all-gather)."""
    _, _, mates, peers = _pod_peers(pods, pod_size)
    a = (mates, _packets(nbytes / pod_size, packet_bytes))
    b = (peers, _packets(nbytes / (pod_size * pods), packet_bytes))
    return _plan("hierarchical_direct_allreduce", [a, b, b, a])


def hierarchical_scheduled_allreduce(
    pods: int, pod_size: int, groups: int, nbytes: float, packet_bytes: int
) -> CollectivePlan:
    """The direct phases, each split into contention-free sub-rounds (not waiting for each
    other): in intra-pod sub-round j = 1..F node x sends to the pod-mates y ≡ x + j (mod F), one
    per group, so every transmitter has one destination and every switch output one source; in
    inter-pod sub-round j = 1..N−1 node (p, x) sends to (p + j mod N, x)."""
    f = pod_size // groups
    node = np.arange(pods * pod_size)
    pod, idx = np.divmod(node, pod_size)
    c_intra = _packets(nbytes / pod_size, packet_bytes)
    c_inter = _packets(nbytes / (pod_size * pods), packet_bytes)
    intra: list[tuple[np.ndarray, int]] = []
    for j in range(1, f + 1):
        y = (idx[:, None] + j) % f + f * np.arange(groups)[None, :]
        if j == f:  # y ≡ x: drop the node itself
            y = np.sort(np.where(y == idx[:, None], pod_size, y), axis=1)[:, : groups - 1]
        if y.shape[1]:
            intra.append((pod[:, None] * pod_size + y, c_intra))
    inter = [(((pod + j) % pods * pod_size + idx)[:, None], c_inter) for j in range(1, pods)]
    steps = intra + inter + inter + intra
    phase = [0] * len(intra) + [1] * len(inter) + [2] * len(inter) + [3] * len(intra)
    return _plan("hierarchical_scheduled_allreduce", steps, phase)


class CollectiveSource:
    """Releases collective packets: up to ``burst`` per node per slot, gated by step completion."""

    def __init__(self, plan: CollectivePlan, burst: int = 1):
        self.plan = plan
        self.burst = int(burst)
        n = plan.dests.shape[1]
        self.step = np.zeros(n, dtype=np.int64)  # step each node is sending
        self.sent_in_step = np.zeros(n, dtype=np.int64)
        phases = int(plan.phase[-1]) + 1
        self.received = np.zeros((phases, n), dtype=np.int64)  # per phase
        self.needed = np.append(plan.per_step, 0)  # per step (sending)
        self.phase_needed = plan.per_phase
        # waits[s] = the phase step s must have fully received first (-1: none)
        waits = np.full(plan.steps + 1, -1, dtype=np.int64)
        new_phase = np.nonzero(plan.phase[1:] != plan.phase[:-1])[0] + 1
        waits[new_phase] = plan.phase[new_phase - 1]
        self.waits = waits

    def ready(self) -> np.ndarray:
        """Nodes allowed to inject a packet now."""
        s = self.step
        not_done = s < self.plan.steps
        prev_ok = np.ones_like(not_done)
        w = self.waits[s]
        nodes = np.nonzero(w >= 0)[0]
        prev_ok[nodes] = self.received[w[nodes], nodes] >= self.phase_needed[w[nodes]]
        return np.nonzero(not_done & prev_ok)[0]

    def candidates(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The next packets (up to ``burst`` per node, within its step) in order:
        (node, destination, phase tag); a node's packets are contiguous."""
        s = self.step[nodes]
        count = np.minimum(self.burst, self.needed[s] - self.sent_in_step[nodes])
        node = np.repeat(nodes, count)
        start = np.cumsum(count) - count
        k = np.arange(node.shape[0]) - np.repeat(start, count) + self.sent_in_step[node]
        step = self.step[node]
        dst = self.plan.dests[step, node, k % self.plan.fanout[step]]
        return node, dst, self.plan.phase[step]

    def release(self, node: np.ndarray) -> None:
        """Account the packets actually injected (each node's a prefix of its candidates)."""
        np.add.at(self.sent_in_step, node, 1)
        done = np.unique(node[self.sent_in_step[node] >= self.needed[self.step[node]]])
        self.step[done] += 1
        self.sent_in_step[done] = 0

    def deliver(self, dst: np.ndarray, tag: np.ndarray) -> None:
        np.add.at(self.received, (tag, dst), 1)

    def finished(self) -> bool:
        return bool(np.all(self.received >= self.phase_needed[:, None])) and bool(
            np.all(self.step >= self.plan.steps)
        )
