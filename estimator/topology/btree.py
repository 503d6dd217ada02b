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

Two kinds of step over the whole tree are priced without arrays, from the tree's shape. NCCL's
in-order tree is the Cartesian tree of positions 0..n-1 keyed by the number of trailing zero bits
(ctz; the root 0 counts as infinite): the node u of ctz c owns the interval
[u - 2^c + 1, min(u + 2^c - 1, n - 1)], the lowest common ancestor of a < b is the element of
[a, b] with the largest ctz, and below the largest power of two < n every level is complete.

* **Ring steps** (every rank to r + 1 and / or r - 1, :func:`ring_row`): every subtree is an
  interval, so exactly one ring transfer leaves it and one enters it per direction of the ring:
  every link carries the same load, and the longest route is 0 -> 1 (the tree's full depth).
* **Digit steps** with a power-of-two stride s = 2^j and radix k = 2^r, k x s dividing n
  (halving-doubling, recursive doubling, radix-2^r, ``direct`` = one digit of radix n;
  :func:`digit_row`): the ranks fall into aligned blocks of P = k x s; a block's first rank a sits
  above the complete subtree of the other P - 1, whose loads are a function of the level c only
  (``_digit_levels``), and every link above a block carries the k - 1 transfers of its first rank.
  A transfer's route length and busiest link then follow from (ctz of its ends, ctz of their common
  ancestor), of which there are O(r^3 + j r) classes; transfers to or from a block's first rank
  are longest in the block of rank 0 (its route climbs every level to the root).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology import btree_shift


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
    from estimator.collectives.patterns import tree_parents

    below = tree_parents(n, np.arange(1, n, dtype=np.int64), False)[1]  # the parents of positions 1..n-1
    return Tree(np.concatenate([[-1], below]).astype(np.int64))


def inorder_parent(v: np.ndarray, n: int) -> np.ndarray:
    """The parent of each node v >= 1 of :func:`inorder_tree` (n), by NCCL's rule."""
    low = v & -v
    up = (v ^ low) | (low << 1)
    return np.where(up < n, up, v ^ low)


def inorder_lca(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The lowest common ancestor of each pair in :func:`inorder_tree` (any n > both): the element
    of [lo, hi] with the most trailing zero bits. With h the highest bit where lo and hi differ,
    that is hi with its bits below h cleared, unless lo's bits up to h are all zero (then lo)."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    h = np.frexp((lo ^ hi).astype(float))[1] - 1  # (exact: ranks < 2^53)
    h = np.maximum(h, 0)
    top = (hi >> h) << h
    return np.where((lo == hi) | (lo & ((2 << h) - 1) == 0), lo, top)


def climb(ends: np.ndarray, top: np.ndarray, nbytes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per transfer climbing from ``ends`` up to its ancestor ``top`` in :func:`inorder_tree` (n):
    the largest load (bytes of all these climbs) on the links it crosses, and how many it crosses.
    Walks the routes level by level, parents by arithmetic: O(links crossed) and no tree arrays,
    where :meth:`Tree.subtree_sums` + :meth:`Tree.path_max` cost O(n log depth) per step."""
    load = np.zeros(n)
    walked = []
    idx = np.flatnonzero(ends != top)
    v = ends[idx]
    while len(idx):
        walked.append((idx, v))
        np.add.at(load, v, nbytes[idx])
        v = inorder_parent(v, n)
        keep = v != top[idx]
        idx, v = idx[keep], v[keep]
    peak = np.zeros(len(ends))
    links = np.zeros(len(ends), dtype=np.int64)
    for idx, v in walked:  # a transfer appears at most once per level: plain fancy assignment is safe
        peak[idx] = np.maximum(peak[idx], load[v])
        links[idx] += 1
    return peak, links


def inorder_hops(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """Links on the route from ``src`` to ``dst`` in :func:`inorder_tree` (n), without its arrays."""
    top = inorder_lca(src, dst)
    return climb(src, top, np.zeros(len(src)), n)[1] + climb(dst, top, np.zeros(len(src)), n)[1]


WALK_LINKS = 4  # walk a step's routes if they cross < this x n links in all (else subtree sums, O(n log depth))


def _walk_cheaper(src: np.ndarray, dst: np.ndarray, top: np.ndarray, n: int) -> bool:
    """True if walking the routes (:func:`climb`) should beat the subtree sums: their links crossed,
    estimated from about 256 evenly spaced transfers, are < :data:`WALK_LINKS` x n. Only speed
    depends on it (both are exact)."""
    if len(src) > WALK_LINKS * n:
        return False
    pick = np.arange(0, len(src), max(1, len(src) // 256))
    zero = np.zeros(len(pick))
    links = climb(src[pick], top[pick], zero, n)[1].sum() + climb(dst[pick], top[pick], zero, n)[1].sum()
    return links * len(src) < WALK_LINKS * n * len(pick)


def tree_hops(tree: Tree, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Links on the route from ``src`` to ``dst``."""
    top = tree.depth[tree.lca(src, dst)]
    return tree.depth[src] + tree.depth[dst] - 2 * top


Row = tuple[np.ndarray, np.ndarray, float]


def _power(x: int) -> int | None:
    """log2(x) if x is a power of two, else None."""
    return x.bit_length() - 1 if x > 0 and x & (x - 1) == 0 else None


def _received(reduced: float, times: int) -> float:
    """``reduced`` summed ``times`` times in order (as np.bincount sums a receiver's transfers)."""
    total = 0.0
    for _ in range(times):
        total += reduced
    return total


def _row(hops: list[int], peaks: list[float], nbytes: float, bandwidth: float, latencies: np.ndarray,
         params: PricingParams, red: float) -> Row:
    """A step row from per-class (links, busiest link load in transfers of ``nbytes``)."""
    return (params.alpha_s + latencies[np.array(hops, dtype=np.int64)],
            np.array(peaks, dtype=float) * nbytes / bandwidth, red * params.gamma)


def ring_row(step, n: int, bandwidth: float, latencies: np.ndarray, params: PricingParams) -> Row | None:
    """The row of a ring step over the whole n-node tree (a step a shift by one rank maps onto
    itself, whose rank 0 sends only to ranks 1 and / or n - 1), else None. A subtree is an interval
    of ranks: one forward transfer leaves it (its last rank's, or n - 1's to 0) and one enters (to
    its first rank), likewise backward, so every link carries the forward plus the backward bytes
    and every transfer's busiest link carries that; the longest route is 0 <-> 1, through every
    level (depth of 1 = floor(log2(n - 1)) + 1)."""
    shifts = btree_shift.uniform_shifts(step, n) if n >= 3 else None
    if shifts is None or any(by not in (1, n - 1) for by, _ in shifts[0]):
        return None
    moves, received = shifts
    return _row([(n - 1).bit_length()], [1.0], sum(size for _, size in moves), bandwidth, latencies, params, received)


def _digit_levels(j: int, r: int) -> list[int]:
    """Transfers on the up- (= down-) link of a node of ctz c < j + r inside a block, for a digit step
    of stride 2^j and radix k = 2^r: its subtree is an aligned block of 2^(c+1) ranks minus the first;
    below the stride all its ranks' k - 1 partners are outside, above it the partners whose digit
    differs in a bit above c are, plus one transfer from each of its ranks with low part 0 to the
    block's first rank."""
    k = 1 << r
    out = []
    for c in range(j + r):
        width = (1 << (c + 1)) - 1
        inside = 1 << max(0, c + 1 - j)  # digit values within the aligned block
        out.append(width * (k - inside) + inside - 1)
    return out


def digit_row(step, n: int, bandwidth: float, latencies: np.ndarray, params: PricingParams) -> Row | None:
    """The row of a digit step (shape ``("digit", n, stride, k, size, red)``) over the whole n-node
    tree with power-of-two stride and k, k x stride dividing n (see the module docstring), else None.

    Classes (levels: ctz inside a block of P = k x stride = 2^p; a node's links are those up to
    its parent, a route climbs levels ctz(end) .. ctz(lca) - 1 on each side):

    * ends with the same nonzero low part q (ctz cq < j) and digits differing highest at bit h:
      both at level cq, their ancestor at j + h;
    * low part 0, both digits nonzero (digit ctz cd, ce): the ancestor is one of them (level
      max(cd, ce), cd != ce) or above both (any level up to r - 1);
    * low part 0 and one digit 0 (the block's first rank a): the route climbs from the other end's
      level to the block's top (p - 1) and on through the levels above the block to a; longest
      for a = 0 (every level p .. floor(log2(n - 1)) exists, then the root)."""
    shape = step.shape
    if shape is None or shape[0] != "digit" or shape[1] != n:
        return None
    _, _, stride, k, nbytes, reduced = shape
    j, r = _power(stride), _power(k)
    if j is None or r is None or r == 0 or n % (k * stride):
        return None
    p = j + r
    load = _digit_levels(j, r)
    hops, peaks = [], []

    def add(cx: int, cy: int, cz: int, extra: int = 0) -> None:
        hops.append(2 * cz - cx - cy + extra)
        peaks.append(max(load[min(cx, cy):cz]))

    for cq in range(j):
        for h in range(r):
            add(cq, cq, j + h)
    for cz in range(r):
        for cd in range(cz + 1):
            for ce in range(cz + 1):
                if (cd == cz) + (ce == cz) != 2:  # the ancestor is one end (the other below) or above both
                    add(j + cd, j + ce, j + cz)
    above = max(0, (n - 1).bit_length() - p)  # levels p .. floor(log2(n - 1)), each one link
    for co in range(r):
        hops.append(p - (j + co) + above)
        peaks.append(max(load[j + co:p]))
    return _row(hops, peaks, nbytes, bandwidth, latencies, params, _received(reduced, k - 1))


def tree_depth(n: int) -> int:
    """The depth of :func:`inorder_tree` (n): rank 1's, below every level 1 .. floor(log2(n - 1))."""
    return (n - 1).bit_length()


def tree_compiled(pats: Patterns, nodes: int, bandwidth: float, latency: float, params: PricingParams,
                  group: int = 0) -> CompiledSchedule:
    """A :class:`CompiledSchedule` of ``pats`` (ranks = the first nodes) on :func:`inorder_tree`
    (``nodes``), every link ``bandwidth`` per direction and ``latency``. ``group`` = ``nodes`` (the
    whole tree): ring and digit steps are priced from their shape (:func:`ring_row`,
    :func:`digit_row`); the tree's arrays are built only for other steps."""
    from estimator.topology.analytic import MEMO_TRANSFERS, compiled_from_loads

    reversed_steps: dict[tuple, tuple] = {}  # a tree's links go both ways alike: a step's reverse (a
    # broadcast level after the reduce level) has the same per-transfer peaks and route lengths

    def loads(src, dst, nbytes, period):
        key = (src.tobytes(), dst.tobytes(), nbytes.tobytes()) if len(src) <= MEMO_TRANSFERS else None
        if key is not None and (key[1], key[0], key[2]) in reversed_steps:
            return reversed_steps[key[1], key[0], key[2]]
        out = routed_loads(src, dst, nbytes)
        if key is not None:
            reversed_steps[key] = out
        return out

    def routed_loads(src, dst, nbytes):
        top = inorder_lca(src, dst)
        if _walk_cheaper(src, dst, top, nodes):
            (up, rise), (down, fall) = climb(src, top, nbytes, nodes), climb(dst, top, nbytes, nodes)
            return np.maximum(up, down), rise + fall
        tree = inorder_tree(nodes)
        rise, fall = tree.depth[src] - tree.depth[top], tree.depth[dst] - tree.depth[top]
        up = tree.subtree_sums(np.bincount(src, weights=nbytes, minlength=tree.n)
                               - np.bincount(top, weights=nbytes, minlength=tree.n))
        down = tree.subtree_sums(np.bincount(dst, weights=nbytes, minlength=tree.n)
                                 - np.bincount(top, weights=nbytes, minlength=tree.n))
        peak = np.maximum(tree.path_max(src, rise, up), tree.path_max(dst, fall, down))
        return peak, rise + fall

    def shaped(step, latencies):
        if group != nodes:
            return None
        return (digit_row(step, nodes, bandwidth, latencies, params)
                or ring_row(step, nodes, bandwidth, latencies, params)
                or btree_shift.shift_row(step, nodes, bandwidth, latencies, params))

    return compiled_from_loads(pats, loads, bandwidth, latency, 2 * tree_depth(nodes), params, shaped=shaped)
