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
    """Per step: ``succ[s, i]`` = where node i sends in step s; ``packets[s]`` packets each."""

    name: str
    succ: np.ndarray  # (steps, nodes) int64
    packets: np.ndarray  # (steps,) int64

    @property
    def steps(self) -> int:
        return int(self.packets.shape[0])

    def total_packets(self) -> int:
        return int(self.packets.sum()) * int(self.succ.shape[1])


def _packets(nbytes: float, packet_bytes: int) -> int:
    return max(1, math.ceil(nbytes / packet_bytes))


def ring_allreduce(nodes: int, nbytes: float, packet_bytes: int) -> CollectivePlan:
    """Ring all-reduce over all nodes in id order: 2(n−1) steps of nbytes/n to node i+1."""
    steps = 2 * (nodes - 1)
    succ = np.tile((np.arange(nodes) + 1) % nodes, (steps, 1))
    packets = np.full(steps, _packets(nbytes / nodes, packet_bytes), dtype=np.int64)
    return CollectivePlan("ring_allreduce", succ, packets)


def hierarchical_allreduce(pods: int, pod_size: int, nbytes: float, packet_bytes: int) -> CollectivePlan:
    """Intra-pod ring reduce-scatter (M−1 steps of S/M), inter-pod ring all-reduce of the S/M
    shard among same-index nodes (2(N−1) steps of S/(MN)), intra-pod ring all-gather (M−1)."""
    node = np.arange(pods * pod_size)
    pod, idx = np.divmod(node, pod_size)
    intra = pod * pod_size + (idx + 1) % pod_size
    inter = ((pod + 1) % pods) * pod_size + idx
    c_intra = _packets(nbytes / pod_size, packet_bytes)
    c_inter = _packets(nbytes / (pod_size * pods), packet_bytes)
    rows = [intra] * (pod_size - 1) + [inter] * (2 * (pods - 1)) + [intra] * (pod_size - 1)
    counts = [c_intra] * (pod_size - 1) + [c_inter] * (2 * (pods - 1)) + [c_intra] * (pod_size - 1)
    return CollectivePlan("hierarchical_allreduce", np.array(rows), np.array(counts, dtype=np.int64))


class CollectiveSource:
    """Releases collective packets: at most one per node per slot, gated by step completion."""

    def __init__(self, plan: CollectivePlan):
        self.plan = plan
        n = plan.succ.shape[1]
        self.step = np.zeros(n, dtype=np.int64)  # step each node is sending
        self.sent_in_step = np.zeros(n, dtype=np.int64)
        self.received = np.zeros((plan.steps + 1, n), dtype=np.int64)  # row `steps` is a sentinel
        self.needed = np.append(plan.packets, 0)

    def ready(self) -> np.ndarray:
        """Nodes allowed to inject a packet now."""
        s = self.step
        not_done = s < self.plan.steps
        prev_ok = np.ones_like(not_done)
        has_prev = s > 0
        nodes = np.nonzero(has_prev)[0]
        prev_ok[nodes] = self.received[s[nodes] - 1, nodes] >= self.needed[s[nodes] - 1]
        return np.nonzero(not_done & prev_ok)[0]

    def release(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Account one packet sent by each of ``nodes``; return (destinations, step tags)."""
        s = self.step[nodes]
        dst = self.plan.succ[s, nodes]
        self.sent_in_step[nodes] += 1
        full = self.sent_in_step[nodes] >= self.plan.packets[s]
        done = nodes[full]
        self.step[done] += 1
        self.sent_in_step[done] = 0
        return dst, s

    def deliver(self, dst: np.ndarray, tag: np.ndarray) -> None:
        np.add.at(self.received, (tag, dst), 1)

    def finished(self) -> bool:
        return bool(np.all(self.received[self.plan.steps - 1] >= self.plan.packets[-1])) and bool(
            np.all(self.step >= self.plan.steps)
        )
