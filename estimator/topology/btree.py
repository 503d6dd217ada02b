"""Analytic routing on a tree wiring (the OCS's ``btree``: NCCL's in-order binary tree, one circuit
per edge, :func:`estimator.fabrics.ocs.binary_tree_topology`), without building routes.

A tree has one route between two nodes: up from the source to their lowest common ancestor, then
down to the destination. A step's load on the up-link of node v (v -> parent) is the bytes of the
transfers leaving v's subtree: +w at the source, -w at the common ancestor, summed over the
subtree; likewise the down-links from the destinations. A transfer's busiest link is the largest
load on its path, found with ancestor tables (binary lifting, O(log depth) per transfer), and its
latency is its number of links x the link latency. So a step over T transfers on n nodes costs
O((n + T) log depth) array work and gives the numbers
:func:`estimator.collectives.pricing.compile_schedule` gives on the graph (tested equal to 1e-12).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams


class Tree:
    """Parent, depth, nodes by depth and ancestor tables (``up[j][v]``: the 2^j-th ancestor, the
    root its own) of a rooted tree given by ``parents`` (-1 at the root)."""

    def __init__(self, parents: np.ndarray):
        n = len(parents)
        self.n = n
        root = parents < 0
        self.parent = np.where(root, np.arange(n), parents)
        depth = np.zeros(n, dtype=np.int64)
        known = root.copy()
        while not known.all():  # one pass per level (a tree of depth D: D passes)
            ready = ~known & known[self.parent]
            depth[ready] = depth[self.parent[ready]] + 1
            known |= ready
        self.depth = depth
        order = np.argsort(-depth.astype(np.int16), kind="stable")  # (a tree of n nodes is < 2^15 deep here)
        bounds = np.flatnonzero(np.diff(depth[order])) + 1
        self.levels = [lv for lv in np.split(order, bounds) if len(lv) and depth[lv[0]] > 0]  # deepest first
        self.up = [self.parent]
        while (1 << len(self.up)) <= int(depth.max(initial=0)):
            self.up.append(self.up[-1][self.up[-1]])

    def subtree_sums(self, values: np.ndarray) -> np.ndarray:
        """Per node, the sum of ``values`` over its subtree."""
        acc = values.astype(float).copy()
        for nodes in self.levels:
            acc += np.bincount(self.parent[nodes], weights=acc[nodes], minlength=self.n)
        return acc

    def lift(self, v: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """The ``steps``-th ancestor of each ``v``."""
        for j, table in enumerate(self.up):
            sel = (steps >> j) & 1 == 1
            v = np.where(sel, table[v], v)
        return v

    def lca(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Lowest common ancestor per pair."""
        da, db = self.depth[a], self.depth[b]
        a, b = self.lift(a, np.maximum(da - db, 0)), self.lift(b, np.maximum(db - da, 0))
        for table in reversed(self.up):
            differ = table[a] != table[b]
            a, b = np.where(differ, table[a], a), np.where(differ, table[b], b)
        return np.where(a == b, a, self.parent[a])

    def path_max(self, v: np.ndarray, steps: np.ndarray, link: np.ndarray) -> np.ndarray:
        """Largest ``link[u]`` (the link between u and its parent) over the ``steps`` links above v."""
        best = np.zeros(len(v))
        table = link
        for j in range(len(self.up)):
            sel = (steps >> j) & 1 == 1
            best = np.where(sel, np.maximum(best, table[v]), best)
            v = np.where(sel, self.up[j][v], v)
            if j + 1 < len(self.up):
                table = np.maximum(table, table[self.up[j]])
        return best


@lru_cache(maxsize=8)
def inorder_tree(n: int) -> Tree:
    """:func:`estimator.collectives.trees.inorder_parents` as a :class:`Tree`."""
    from estimator.collectives.patterns import _tree_parents

    below = _tree_parents(n, np.arange(1, n, dtype=np.int64), False)[1]  # the parents of positions 1..n-1
    return Tree(np.concatenate([[-1], below]).astype(np.int64))


def tree_hops(tree: Tree, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Links on the route from ``src`` to ``dst``."""
    top = tree.depth[tree.lca(src, dst)]
    return tree.depth[src] + tree.depth[dst] - 2 * top


def tree_compiled(pats: Patterns, tree: Tree, bandwidth: float, latency: float, params: PricingParams
                  ) -> CompiledSchedule:
    """A :class:`CompiledSchedule` of ``pats`` (ranks = the first nodes) on ``tree``, every link
    ``bandwidth`` per direction and ``latency``."""
    from estimator.topology.analytic import _compiled

    def loads(src, dst, nbytes, period):
        top = tree.lca(src, dst)
        up = tree.subtree_sums(np.bincount(src, weights=nbytes, minlength=tree.n)
                               - np.bincount(top, weights=nbytes, minlength=tree.n))
        down = tree.subtree_sums(np.bincount(dst, weights=nbytes, minlength=tree.n)
                                 - np.bincount(top, weights=nbytes, minlength=tree.n))
        rise, fall = tree.depth[src] - tree.depth[top], tree.depth[dst] - tree.depth[top]
        peak = np.maximum(tree.path_max(src, rise, up), tree.path_max(dst, fall, down))
        return peak, rise + fall

    longest = 2 * int(tree.depth.max(initial=0))
    return _compiled(pats, loads, bandwidth, latency, longest, params)
