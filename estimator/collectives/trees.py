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


@cache
def dbt_shapes(n: int) -> tuple[frozenset[tuple[int, ...]], frozenset[tuple[int, ...]]]:
    """Distinct per-rank patterns of the double binary tree on ``n`` ranks:
    (child send-steps of each rank over both trees, own send-steps over both trees).
    Loads of pipelined tree steps depend only on these sets. (Vectorised: a row of padded, sorted
    steps per rank, then the distinct rows.)"""
    import numpy as np

    b = np.arange(1, n)
    parents = np.asarray(inorder_parents(n), dtype=np.int64)[1:]
    step = np.log2(b & -b).astype(np.int64) if n > 1 else b
    second = (lambda x: n - 1 - x) if n % 2 == 0 else (lambda x: (x + 1) % n)

    def distinct(ranks: np.ndarray, values: np.ndarray, width: int) -> frozenset[tuple[int, ...]]:
        order = np.lexsort((values, ranks))
        ranks, values = ranks[order], values[order]
        slot = np.arange(len(ranks)) - np.searchsorted(ranks, ranks)  # position in the rank's row
        table = np.full((n, width), 127, dtype=np.int64)  # 127: empty (a step is < 64)
        table[ranks, slot] = values
        keys = np.unique(table @ (128 ** np.arange(width)))
        rows = (keys[:, None] // 128 ** np.arange(width)) % 128
        return frozenset(tuple(int(v) for v in row if v != 127) for row in rows)

    steps2 = np.concatenate([step, step])
    children = distinct(np.concatenate([parents, second(parents)]), steps2, 4)
    sends = distinct(np.concatenate([b, second(b)]), steps2, 2)
    return children, sends
