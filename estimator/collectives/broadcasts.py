"""Broadcasts a baseline's operators would run: pipelined chain and tree, BCube's multi-port spanning trees.

Schedules (same conventions as :mod:`.generators`: root 0, ``M`` = the broadcast buffer) and their
closed forms on a non-blocking switch (:mod:`.switch_model`'s α-β model; tested equal to the
schedules priced on a star):

* ``pipelined_chain`` (NCCL's ring broadcast; Träff's pipelined linear broadcast): ranks form the
  chain 0 -> 1 -> ... -> n-1, the buffer is cut into C = ``p.chunks`` chunks, in step t rank i
  forwards chunk t - i. n - 2 + C steps, each α + M/(C·B) on a switch.
* ``pipelined_tree``: the in-order binary tree of :mod:`.trees` (NCCL's tree shape), C chunks
  pipelined down it (the mirror of the pipelined tree reduce). H + C - 1 steps; a step costs
  α + (most children a rank feeds in it)·M/(C·B).
* ``spanning_tree`` (BCube's one-to-all over L = log_r n edge-disjoint spanning trees, Guo et al.,
  SIGCOMM 2009, Sec. 4): the buffer is cut into L parts; part j is spread along digits j, j+1, ...
  (one digit per step), every holder sending its part to its r - 1 peers of that digit. L steps;
  on a multi-port BCube/SiPAC every step uses all L ports at once; on a single-port switch the
  root's port carries (r-1)·M per step: L·(α + (r-1)·M/B).

Names with a chunk count (``pipelined_chain64``, ``pipelined_tree512``) fix C.
"""

from __future__ import annotations

import itertools
from functools import cache

from estimator.collectives.params import AlgoParams, need_power
from estimator.collectives.schedule import Step, Transfer
from estimator.collectives.trees import inorder_parents, tree_height, tz
from estimator.errors import EstimatorError

Cost = tuple[float, int]


def _chunks(name: str, p: AlgoParams) -> int:
    if p.chunks < 1:
        raise EstimatorError(f"algorithm {name!r} needs chunks >= 1, got {p.chunks}")
    return p.chunks


def pipelined_chain_broadcast(n: int, m: float, p: AlgoParams) -> list[Step]:
    c = _chunks("pipelined_chain", p)
    size = m / c
    return [Step(tuple(Transfer(i, i + 1, size) for i in range(n - 1) if 0 <= t - i < c)) for t in range(n - 2 + c)]


def pipelined_chain_broadcast_cost(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    c = _chunks("pipelined_chain", p)
    steps = n - 2 + c
    return steps * (a + m / c / b), steps


def pipelined_tree_broadcast(n: int, m: float, p: AlgoParams) -> list[Step]:
    c = _chunks("pipelined_tree", p)
    parents = inorder_parents(n)
    size = m / c
    up: list[list[Transfer]] = [[] for _ in range(tree_height(n) + c - 1)]
    for child in range(1, n):
        for k in range(c):
            up[tz(child) + k].append(Transfer(parents[child], child, size))
    return [Step(tuple(t)) for t in reversed(up)]


@cache
def _child_steps(n: int) -> frozenset[tuple[int, ...]]:
    """Distinct tuples of the send steps (trailing zeros) of a rank's children in the in-order tree."""
    parents = inorder_parents(n)
    children: list[list[int]] = [[] for _ in range(n)]
    for child in range(1, n):
        children[parents[child]].append(tz(child))
    return frozenset(tuple(sorted(c)) for c in children if c)


def pipelined_tree_broadcast_cost(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    c = _chunks("pipelined_tree", p)
    steps = tree_height(n) + c - 1
    shapes = _child_steps(n)
    total = 0.0
    for t in range(steps):
        fan = max(sum(1 for s in cs if 0 <= t - s < c) for cs in shapes)
        total += a + fan * m / c / b
    return total, steps


def spanning_tree_broadcast(n: int, m: float, p: AlgoParams) -> list[Step]:
    k = p.radix
    levels = need_power("spanning_tree", n, k)
    part = m / levels
    steps = []
    for s in range(levels):
        transfers = []
        for j in range(levels):
            visited = [(j + q) % levels for q in range(s)]
            d = (j + s) % levels
            for digits in itertools.product(range(k), repeat=len(visited)):
                holder = sum(v * k**dig for v, dig in zip(digits, visited, strict=True))
                transfers += [Transfer(holder, holder + e * k**d, part) for e in range(1, k)]
        steps.append(Step(tuple(transfers)))
    return steps


def spanning_tree_broadcast_cost(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    k = p.radix
    levels = need_power("spanning_tree", n, k)
    return levels * (a + (k - 1) * m / b), levels
