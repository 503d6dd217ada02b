"""``fattree``: a three-level k-ary fat tree (Al-Fares et al., SIGCOMM 2008) with ECMP.

Assumes every link has ``link_bandwidth_Bps`` per direction, every switch traversal costs
``link_latency_s`` (on the link leaving the switch), per-hop ECMP over equal-cost next hops, the
first ``nodes`` hosts of a k-ary tree (``k = 0``: the smallest even k with k^3/4 >= nodes).
The tree is rearrangeably non-blocking but ECMP can still collide; algorithms with a step pattern
are priced by analytic up/down routing (:func:`estimator.topology.fat_tree.fat_tree_compiled`,
tested equal to the compiled schedule), the others (all-to-all, ...) from their schedules; the
following have closed forms (tested equal to the schedule):

* ``ring`` / ``bidir_ring`` over the first n hosts: every host sends on its own host link, and at
  most one (bidirectional: two half-size) transfers leave or enter an edge switch or a pod, split
  over k/2 (k^2/4) up-links, so no link carries more than a host link and every transfer moves at
  the link bandwidth. The slowest transfer is the one with the longest path: 1 switch traversal
  within an edge switch, 3 within a pod, 5 across pods (each ``link_latency_s``). So a step is
  the switch formula's step with α + that latency.
* ``halving_doubling``, ``recursive_doubling`` and ``radix``-k when n is a power of k: a step
  exchanges within aligned blocks of k^(d+1) hosts and every host sends and receives the same
  bytes; an edge switch / pod sends and receives at most what its hosts do, spread evenly by ECMP
  over its up-links (and, from the cores, over the destination pod's aggregation switches), so no
  link carries more than a host link and a step is the switch formula's with α + its longest
  route: 5 traversals if a block straddles a pod boundary (k/2)^2 * m, else 3 if one straddles an
  edge boundary (k/2) * m, else 1 (a block of B hosts straddles a multiple of G < n iff G is not a
  multiple of B).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import is_power, log_k
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule
from estimator.errors import EstimatorError
from estimator.fabrics.electrical import GENERIC_OFFERS, LinkConfig, LinkFabric
from estimator.fabrics.unit_compiled import UnitCompiled
from estimator.topology.builders import fat_tree, fat_tree_pair_traversals, fat_tree_traversals
from estimator.topology.fat_tree import fat_tree_compiled
from estimator.topology.graph import Topology
from estimator.topology.leaf_trees import TREES, fat_tree_tree_compiled

RS_AR_AG = ("all_reduce", "reduce_scatter", "all_gather")
RINGS = ("ring", "bidir_ring")


@dataclass
class FatTreeConfig(LinkConfig):
    name: str = "fattree"
    nodes: int = 16
    k: int = 0

    def validate(self) -> None:
        super().validate()
        if self.k and (self.k < 2 or self.k % 2 or self.k**3 // 4 < self.nodes):
            raise EstimatorError(
                f"fabric.k={self.k} must be even and hold fabric.nodes={self.nodes} hosts (k^3/4 = {self.k**3 // 4})"
            )

    def radix(self) -> int:
        if self.k:
            return self.k
        k = 2
        while k**3 // 4 < self.nodes:
            k += 2
        return k


class FatTreeFabric(UnitCompiled, LinkFabric):
    name = "fattree"
    Config = FatTreeConfig
    OFFERS = GENERIC_OFFERS

    def build_topology(self, algorithm: str) -> Topology:
        c = self.config
        return fat_tree(c.radix(), c.nodes, c.link_bandwidth_Bps, c.link_latency_s, "fattree")

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        if collective not in RS_AR_AG:
            return None
        c = self.config
        if algorithm in RINGS:
            hops = fat_tree_traversals(c.radix() // 2, n)  # the longest route of the ring
            return self.switch_like(collective, algorithm, n, nbytes, hops * c.link_latency_s, c.link_bandwidth_Bps)
        k = self._digit_radix(collective, algorithm, n)
        if k is None:
            return None
        time_s, steps = self.switch_like(collective, algorithm, n, nbytes, 0.0, c.link_bandwidth_Bps)
        per_digit = sum(self._block_traversals(k ** (d + 1), n) for d in range(log_k(n, k)))
        uses = 2 if collective == "all_reduce" and algorithm != "recursive_doubling" else 1
        return time_s + uses * per_digit * c.link_latency_s, steps

    def _digit_radix(self, collective: str, algorithm: str, n: int) -> int | None:
        """k of a digit-wise exchange (halving-doubling, recursive doubling, radix-k) that has a
        closed form here: n a power of k, ``collective`` supported."""
        algo = lookup(algorithm)
        if algorithm in ("halving_doubling", "recursive_doubling"):
            k = 2
        elif algo.base == "radix":
            k = algo.fixed_radix or self.algo_params(n).radix
        else:
            return None
        if collective not in algo.closed_forms or k < 2 or n < 2 or not is_power(n, k):
            return None
        return k

    def _block_traversals(self, block: int, n: int) -> int:
        """Longest route between two hosts of one aligned ``block`` among the first ``n`` hosts."""
        half = self.config.radix() // 2
        if half * half < n and (half * half) % block:
            return 5
        return 3 if half < n and half % block else 1

    def port_bandwidth(self) -> float:
        return self.config.link_bandwidth_Bps  # one host link

    def min_route_latency(self) -> float:
        return self.config.link_latency_s  # two hosts on one edge switch

    def route_bounds(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, None]:
        """Route latency = traversals x link latency; one host link caps any transfer."""
        c = self.config
        hops = fat_tree_pair_traversals(c.radix() // 2, src, dst)
        return hops * c.link_latency_s * (1 - 1e-12), np.full(len(src), c.link_bandwidth_Bps), None

    def shift_invariant(self, period: int, n: int) -> bool:
        half = self.config.radix() // 2
        return period % (half * half) == 0  # whole pods

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        pats = patterns(algorithm, collective, n, self.algo_params(n))
        if pats is None:
            return None
        c = self.config
        algo = lookup(algorithm)
        if algo.base in TREES:  # tree steps from per-rank counts (the same rows, far cheaper at scale)
            fast = fat_tree_tree_compiled(algo.base, collective, n, algo.params(self.algo_params(n)).chunks,
                                          c.radix() // 2, c.link_bandwidth_Bps, c.link_latency_s,
                                          self.pricing(algorithm))
            if fast is not None:
                return fast
        return fat_tree_compiled(pats, c.radix() // 2, c.link_bandwidth_Bps, c.link_latency_s, self.pricing(algorithm),
                                 n)
