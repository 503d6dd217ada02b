"""Vectorised step patterns: the schedules of :mod:`.generators` as numpy arrays, distinct steps once.

A :class:`StepPattern` is one step's transfers as arrays (``src``, ``dst``, bytes and reduced bytes
per byte of the buffer M) and ``count``, how many steps of the schedule are exactly this step. A
schedule's patterns hold the same transfers as its :class:`~.schedule.Schedule` (tested equal per
algorithm), with steps that repeat (a ring's n-1 identical steps, neighbour exchange's alternating
steps) merged: the step order does not change a price (steps are summed), so a 65,536-rank ring is
two patterns, not 131,070 steps of Python objects. Used where a schedule would be too large to
materialise: ``auto``'s lower bounds (:meth:`LibraryFabric.auto_floor`) and the analytic routing of
regular topologies (:mod:`estimator.topology.analytic`).

``patterns(name, collective, n, params)`` returns ``None`` for algorithms without a pattern here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.collectives.params import AlgoParams, local_size, need_power, torus_dims
from estimator.collectives.trees import inorder_parents, tree_height
from estimator.errors import EstimatorError


@dataclass(frozen=True)
class StepPattern:
    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray  # bytes per byte of M
    red: np.ndarray   # reduced bytes per byte of M
    count: int = 1
    period: int = 0   # P > 0: shifting every rank by P (mod n) maps the step onto itself; 0: unknown


Patterns = list[StepPattern]


def _pat(src: np.ndarray, dst: np.ndarray, size: float | np.ndarray, red: float | np.ndarray, count: int = 1,
         period: int = 0) -> StepPattern:
    src = np.asarray(src, dtype=np.int64)
    return StepPattern(src, np.asarray(dst, dtype=np.int64), np.broadcast_to(np.asarray(size, dtype=float), src.shape),
                       np.broadcast_to(np.asarray(red, dtype=float), src.shape), count, period)


# ---- rings ----------------------------------------------------------------------------------
def ring_step(rings: np.ndarray, chunk: float, reduce: bool, bidirectional: bool = False, period: int = 0
              ) -> StepPattern | None:
    """One step of rings (rows of ``rings``, equal length k >= 2) run concurrently; it repeats k-1
    times. ``period``: the rank shift that maps it onto itself, if the caller knows one."""
    k = rings.shape[1]
    if k < 2:
        return None
    nxt = np.roll(rings, -1, axis=1)
    r = chunk if reduce else 0.0
    if not bidirectional:
        return _pat(rings.ravel(), nxt.ravel(), chunk, r, k - 1, period)
    prv = np.roll(rings, 1, axis=1)
    src = np.repeat(rings.ravel(), 2)
    dst = np.stack([nxt.ravel(), prv.ravel()], axis=1).ravel()
    return _pat(src, dst, chunk / 2, r / 2, k - 1, period)


def _ring(coll: str, n: int, bidir: bool) -> Patterns:
    ranks = np.arange(n)[None, :]
    out = []
    if coll in ("all_reduce", "reduce_scatter"):
        out.append(ring_step(ranks, 1 / n, True, bidir, 1))
    if coll in ("all_reduce", "all_gather"):
        out.append(ring_step(ranks, 1 / n, False, bidir, 1))
    return [p for p in out if p is not None]


# ---- digit exchanges -------------------------------------------------------------------------
def digit_step(n: int, stride: int, k: int, size: float, red: float) -> StepPattern:
    """Every rank sends to the k-1 ranks differing from it only in the (mixed-radix) digit of place
    value ``stride`` and size ``k``."""
    r = np.arange(n)
    digit = (r // stride) % k
    base = r - digit * stride
    dst = np.concatenate([base + ((digit + j) % k) * stride for j in range(1, k)])
    return _pat(np.tile(r, k - 1), dst, size, red, period=k * stride if n % (k * stride) == 0 else 0)


def _radix(coll: str, n: int, k: int, name: str) -> Patterns:
    levels = need_power(name, n, k)
    out = []
    if coll in ("all_reduce", "reduce_scatter"):
        held = 1.0
        for d in range(levels):
            part = held / k
            out.append(digit_step(n, k**d, k, part, part))
            held = part
    if coll in ("all_reduce", "all_gather"):
        held = 1.0 / n
        for d in reversed(range(levels)):
            out.append(digit_step(n, k**d, k, held, 0.0))
            held *= k
    return out


def _recursive_doubling(coll: str, n: int) -> Patterns:
    if coll == "all_gather":
        return _radix(coll, n, 2, "recursive_doubling")
    steps = need_power("recursive_doubling", n, 2)
    r = np.arange(n)
    return [_pat(r, r ^ (1 << s), 1.0, 1.0, period=2 << s) for s in range(steps)]


def _neighbor_exchange(coll: str, n: int) -> Patterns:
    if n % 2:
        raise EstimatorError(f"algorithm 'neighbor_exchange' needs an even group size, got {n}")
    out = [ring_step(np.arange(n)[None, :], 1 / n, True, period=1)] if coll == "all_reduce" and n >= 2 else []
    r = np.arange(n)
    even = r % 2 == 0

    def side(right: bool) -> np.ndarray:
        return np.where(even == right, (r + 1) % n, (r - 1) % n)

    steps = n // 2
    out.append(_pat(r, side(True), 1 / n, 0.0, period=2))
    rights, lefts = (steps - 1) // 2, steps // 2  # later steps: odd s go left, even s right
    if lefts:
        out.append(_pat(r, side(False), 2 / n, 0.0, lefts, 2))
    if rights:
        out.append(_pat(r, side(True), 2 / n, 0.0, rights, 2))
    return [p for p in out if p is not None]


# ---- trees ----------------------------------------------------------------------------------
def _tree_edges(n: int, second: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(child rank, parent rank, send step) of every edge of the in-order tree (or its double-tree twin)."""
    b = np.arange(1, n)
    parents = np.asarray(inorder_parents(n), dtype=np.int64)[1:]
    step = np.log2(b & -b).astype(np.int64)
    if second:
        mapped = (n - 1 - b, n - 1 - parents) if n % 2 == 0 else ((b + 1) % n, (parents + 1) % n)
        return mapped[0], mapped[1], step
    return b, parents, step


def _trees(coll: str, n: int, size: float, trees: tuple[bool, ...], chunks: int = 1) -> Patterns:
    """Level-by-level (chunks = 1) or pipelined trees: reduce steps, then the mirrored broadcast."""
    edges = [_tree_edges(n, t) for t in trees]
    child = np.concatenate([e[0] for e in edges])
    parent = np.concatenate([e[1] for e in edges])
    step = np.concatenate([e[2] for e in edges])
    up, down = [], []
    for t in range(tree_height(n) + chunks - 1):
        on = (step <= t) & (t < step + chunks)
        up.append(_pat(child[on], parent[on], size, size))
        down.append(_pat(parent[on], child[on], size, 0.0))
    return {"all_reduce": up + down, "reduce": up, "broadcast": down}[coll]


# ---- multi-dimensional ------------------------------------------------------------------------
def _torus2d(coll: str, n: int, p: AlgoParams) -> Patterns:
    rows, cols = torus_dims(n, p)
    grid = np.arange(n).reshape(rows, cols)
    out = []
    if coll in ("all_reduce", "reduce_scatter"):
        out += [ring_step(grid, 1 / cols, True, period=cols), ring_step(grid.T, 1 / n, True, period=1)]
    if coll in ("all_reduce", "all_gather"):
        out += [ring_step(grid.T, 1 / n, False, period=1), ring_step(grid, 1 / cols, False, period=cols)]
    return [x for x in out if x is not None]


def _hierarchical(n: int, p: AlgoParams, tree: bool) -> Patterns:
    g = local_size(n, p)
    nodes = n // g
    grid = np.arange(n).reshape(nodes, g)  # rows: servers
    intra_rs, intra_ag = ring_step(grid, 1 / g, True), ring_step(grid, 1 / g, False)
    if tree:
        inter = []
        for st in _trees("all_reduce", nodes, 1 / (2 * g), (False, True)):
            i = np.arange(g)
            inter.append(_pat((st.src[:, None] * g + i).ravel(), (st.dst[:, None] * g + i).ravel(),
                              np.repeat(st.size, g), np.repeat(st.red, g), st.count))
    else:
        inter = [ring_step(grid.T, 1 / n, True), ring_step(grid.T, 1 / n, False)]
    return [x for x in (intra_rs, *inter, intra_ag) if x is not None]


def _ps(n: int) -> Patterns:
    q = np.arange(1, n)
    zero = np.zeros(n - 1, dtype=np.int64)
    return [_pat(q, zero, 1.0, 1.0), _pat(zero, q, 1.0, 0.0)]


def patterns(name: str, collective: str, n: int, p: AlgoParams) -> Patterns | None:
    """The schedule of algorithm ``name`` as step patterns (``None``: no pattern for it here).
    ``p`` must already carry the algorithm's fixed radix / chunks (``Algorithm.params``)."""
    from estimator.collectives.algorithms import algorithm

    algo = algorithm(name)
    base = algo.base
    p = algo.params(p)
    if not algo.supports(collective):
        return None
    if n < 2:
        return []
    if base in ("ring", "bidir_ring"):
        return _ring(collective, n, base == "bidir_ring")
    if base == "halving_doubling":
        return _radix(collective, n, 2, "halving_doubling")
    if base == "radix":
        return _radix(collective, n, p.radix, "radix")
    if base == "recursive_doubling":
        return _recursive_doubling(collective, n)
    if base == "neighbor_exchange":
        return _neighbor_exchange(collective, n)
    if base == "binary_tree":
        return _trees(collective, n, 1.0, (False,))
    if base == "double_binary_tree":
        return _trees(collective, n, 0.5, (False, True))
    if base == "pipelined_dbt":
        if p.chunks < 1:
            raise EstimatorError(f"algorithm 'pipelined_dbt' needs chunks >= 1, got {p.chunks}")
        return _trees(collective, n, 1 / (2 * p.chunks), (False, True), p.chunks)
    if base == "torus2d":
        return _torus2d(collective, n, p)
    if base == "hierarchical":
        return _hierarchical(n, p, tree=False)
    if base == "hierarchical_tree":
        return _hierarchical(n, p, tree=True)
    if base == "ps":
        return _ps(n)
    return None
