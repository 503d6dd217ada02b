"""Tree shapes used by the tree algorithms.

In-order binary tree (the shape of NCCL's ``ncclGetBtree``, src/graph/trees.cc): rank ``r`` with
lowest set bit ``l`` has children ``r - l/2`` and ``r + l/2``; a missing right child is replaced by
the first existing ``r + l/4, r + l/8, ...``; rank 0 is the root and its only child is the largest
power of two below ``n``. Odd ranks are leaves.

The *send step* of rank ``r`` (reduce direction) is the number of trailing zeros of ``r``: every
child of ``r`` has fewer trailing zeros, so a level-by-level schedule is valid. ``H`` send steps
exist: ``floor(log2(n-1)) + 1`` for ``n >= 2``.

Double binary tree (Sanders, Speck & Träff 2009), as recent NCCL builds it in ``ncclGetDtree``
(src/graph/trees.cc): the second tree is the first mirrored (position b is rank n-1-b, n even) or
shifted by one (position b is rank b+1 mod n, n odd), so every rank but a root is a leaf in one of
the trees. (NCCL 2.4's first version swapped the two cases.)
"""

from __future__ import annotations

from functools import cache


def tz(r: int) -> int:
    """Trailing zeros of ``r > 0``."""
    return (r & -r).bit_length() - 1


def tree_height(n: int) -> int:
    """Number of send steps of the in-order binary tree on ``n`` ranks (0 for n = 1)."""
    return (n - 1).bit_length() if n >= 2 else 0


@cache
def inorder_parents(n: int) -> tuple[int, ...]:
    """``parents[r]`` of the in-order binary tree on ``n`` ranks; ``parents[0] == -1``.
    NCCL's rule: with ``l`` the lowest set bit of r, the parent is ``(r ^ l) | (l << 1)``, or
    ``r ^ l`` when that is out of range."""
    import numpy as np

    r = np.arange(n, dtype=np.int64)
    low = r & -r
    up = (r ^ low) | (low << 1)
    parents = np.where(up < n, up, r ^ low)
    if n:
        parents[0] = -1
    return tuple(parents.tolist())


def children_at_step(n: int, s: int) -> int:
    """Most children any rank receives from in send step ``s``: 2 if ``3 * 2**s < n`` else 1."""
    return 2 if 3 * (1 << s) < n else 1


def second_tree_rank(b: int, n: int) -> int:
    """Actual rank of position ``b`` of the second tree of the double binary tree."""
    return n - 1 - b if n % 2 == 0 else (b + 1) % n


def inorder_child_steps(b: int, n: int) -> tuple[int, ...]:
    """Send steps of the children of position ``b`` of the in-order binary tree on ``n`` ranks
    (same tree as :func:`inorder_parents`): the root's one child is the largest power of two
    below n; a position with trailing zeros t >= 1 has its left child ``b - 2**(t-1)`` (step t-1)
    and as right child the first ``b + 2**j < n`` for j = t-1, t-2, ..., 0 (step j); odd
    positions are leaves."""
    if b == 0:
        return ((n - 1).bit_length() - 1,) if n >= 2 else ()
    t = tz(b)
    right = next((j for j in range(t - 1, -1, -1) if b + (1 << j) < n), None)
    return () if t == 0 else (t - 1,) if right is None else (right, t - 1)


@cache
def dbt_shapes(n: int) -> tuple[frozenset[tuple[int, ...]], frozenset[tuple[int, ...]]]:
    """Distinct per-rank patterns of the double binary tree on ``n`` ranks:
    (child send-steps of each rank over both trees, own send-steps over both trees), each sorted.
    Loads of pipelined tree steps depend only on these sets.

    Found without visiting every rank: a rank holds position ``p1 = r`` in the first tree and
    ``p2`` in the second (:func:`second_tree_rank`); one of the two is odd (a leaf) except at the
    roots. A position's children depend only on its trailing zeros t unless it is a root or its
    natural right child ``b + 2**(t-1)`` is out of range (``special``: at most one position per
    t). So every rank touching a special position is evaluated, and for every other rank the
    shape is ``((t-1, t-1), (0, t))`` with t its non-leaf position's trailing zeros; a t counts
    if some such rank exists (searched among the first positions with t trailing zeros, which
    the few special ones cannot all exclude). Tested equal to the shapes read off
    :func:`inorder_parents` for every n up to a few hundred."""
    if n < 2:
        return frozenset({()}) if n else frozenset(), frozenset({()}) if n else frozenset()

    def pos2(r: int) -> int:  # position of rank r in the second tree
        return n - 1 - r if n % 2 == 0 else (r - 1) % n

    def rank2(b: int) -> int:
        return second_tree_rank(b, n)

    def shape(r: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        p1, p2 = r, pos2(r)
        kids = tuple(sorted(inorder_child_steps(p1, n) + inorder_child_steps(p2, n)))
        sends = tuple(sorted(tz(p) for p in (p1, p2) if p))
        return kids, sends

    special = {0} | {b for t in range(1, n.bit_length())
                     for b in [((n - 1) >> t << t) if ((n - 1) >> t) & 1 else ((n - 1) >> t << t) - (1 << t)]
                     if b > 0 and tz(b) == t and b + (1 << (t - 1)) >= n}
    ranks = special | {rank2(b) for b in special}
    found = {shape(r) for r in ranks}
    for t in range(1, n.bit_length()):
        tries = 0
        for b in range(1 << t, n, 1 << (t + 1)):  # positions with t trailing zeros
            if b in special:
                continue
            if (b not in ranks and pos2(b) not in special) or rank2(b) not in ranks:
                found.add(((t - 1, t - 1), (0, t)))
                break
            tries += 1
            if tries > 2 * len(special) + 2:
                break
    return frozenset(k for k, _ in found), frozenset(s for _, s in found)
