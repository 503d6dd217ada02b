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

    @property
    def steps(self) -> int:
        return int(self.packets.shape[0])

    @property
    def per_step(self) -> np.ndarray:
        """Packets each node sends (and receives) in each step."""
        return self.packets * self.fanout

    def total_packets(self) -> int:
        return int(self.per_step.sum()) * int(self.dests.shape[1])


def _packets(nbytes: float, packet_bytes: int) -> int:
    return max(1, math.ceil(nbytes / packet_bytes))


def _plan(name: str, phases: list[tuple[np.ndarray, int]]) -> CollectivePlan:
    """Build a plan from (destinations (nodes, fanout), packets per destination) per step."""
    width = max(d.shape[1] for d, _ in phases)
    nodes = phases[0][0].shape[0]
    dests = np.zeros((len(phases), nodes, width), dtype=np.int64)
    for s, (d, _) in enumerate(phases):
        dests[s, :, : d.shape[1]] = d
    fanout = np.array([d.shape[1] for d, _ in phases], dtype=np.int64)
    packets = np.array([c for _, c in phases], dtype=np.int64)
    return CollectivePlan(name, dests, fanout, packets)


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


class CollectiveSource:
    """Releases collective packets: up to ``burst`` per node per slot, gated by step completion."""

    def __init__(self, plan: CollectivePlan, burst: int = 1):
        self.plan = plan
        self.burst = int(burst)
        n = plan.dests.shape[1]
        self.step = np.zeros(n, dtype=np.int64)  # step each node is sending
        self.sent_in_step = np.zeros(n, dtype=np.int64)
        self.received = np.zeros((plan.steps + 1, n), dtype=np.int64)  # row `steps` is a sentinel
        self.needed = np.append(plan.per_step, 0)

    def ready(self) -> np.ndarray:
        """Nodes allowed to inject a packet now."""
        s = self.step
        not_done = s < self.plan.steps
        prev_ok = np.ones_like(not_done)
        has_prev = s > 0
        nodes = np.nonzero(has_prev)[0]
        prev_ok[nodes] = self.received[s[nodes] - 1, nodes] >= self.needed[s[nodes] - 1]
        return np.nonzero(not_done & prev_ok)[0]

    def candidates(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The next packets (up to ``burst`` per node, within its step) in order:
        (node, destination, step tag); a node's packets are contiguous."""
        s = self.step[nodes]
        count = np.minimum(self.burst, self.needed[s] - self.sent_in_step[nodes])
        node = np.repeat(nodes, count)
        start = np.cumsum(count) - count
        k = np.arange(node.shape[0]) - np.repeat(start, count) + self.sent_in_step[node]
        step = self.step[node]
        dst = self.plan.dests[step, node, k % self.plan.fanout[step]]
        return node, dst, step

    def release(self, node: np.ndarray) -> None:
        """Account the packets actually injected (each node's a prefix of its candidates)."""
        np.add.at(self.sent_in_step, node, 1)
        done = np.unique(node[self.sent_in_step[node] >= self.needed[self.step[node]]])
        self.step[done] += 1
        self.sent_in_step[done] = 0

    def deliver(self, dst: np.ndarray, tag: np.ndarray) -> None:
        np.add.at(self.received, (tag, dst), 1)

    def finished(self) -> bool:
        last = self.plan.steps - 1
        return bool(np.all(self.received[last] >= self.needed[last])) and bool(np.all(self.step >= self.plan.steps))
