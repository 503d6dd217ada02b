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

import gc

import numpy as np

from estimator.collectives.params import AlgoParams, local_size, need_power, torus_dims
from estimator.collectives.trees import tree_height
from estimator.errors import EstimatorError

SAMPLE_RANKS = 64  # a large digit step's sample: the transfers out of about this many ranks per digit
SAMPLE_EDGES = 8   # a large tree step's sample: the first and last this many edges of each level it sends


class StepPattern:
    """One step: ``src``, ``dst``, ``size`` (bytes per byte of M) and ``red`` (reduced bytes per
    byte of M) arrays, ``count`` (steps of the schedule that are exactly this step) and ``period``
    (P > 0: shifting every rank by P mod n maps the step onto itself; 0: unknown).

    Large steps are built lazily: ``shape`` names a step a fabric may price without arrays
    (``("digit", n, stride, k, size, red)``: :func:`digit_step`; ``("dimwise", n, k, size, red)``:
    every digit at once; ``("shift", n, by, size, red)``: every rank r to r + by mod n, reducing red), :meth:`first` gives the transfers
    out of ranks 0..P-1 only and :meth:`sample` a small subset of the transfers (used for lower
    bounds: every bound of :meth:`LibraryFabric.pattern_floor` only grows with more transfers)."""

    __slots__ = ("_arrays", "_build", "_first", "_sample", "count", "period", "shape", "translate", "window")

    def __init__(self, src=None, dst=None, size=None, red=None, count: int = 1, period: int = 0, *, build=None,
                 first=None, sample=None, shape: tuple | None = None):
        self._arrays = None if build is not None else (src, dst, size, red)
        self._build, self._first, self._sample = build, first, sample
        self.count, self.period, self.shape = count, period, shape
        self.translate: tuple | None = None  # (family, offset): the family's first step shifted by offset ranks
        self.window: tuple | None = None  # (n, c): a step of the pipelined chain of n ranks and c chunks

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = self._build()
        return self._arrays

    src = property(lambda self: self.arrays[0])
    dst = property(lambda self: self.arrays[1])
    size = property(lambda self: self.arrays[2])
    red = property(lambda self: self.arrays[3])

    def first(self, period: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The transfers out of ranks 0..period-1."""
        if self._first is not None and self._arrays is None:
            return self._first(period)
        src, dst, size, red = self.arrays
        keep = src < period
        return src[keep], dst[keep], size[keep], red[keep]

    def sample(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Some of the step's transfers (all of them if the step is small or already built)."""
        if self._sample is not None and self._arrays is None:
            return self._sample()
        return self.arrays


Patterns = list[StepPattern]


def _arrays(src: np.ndarray, dst: np.ndarray, size: float | np.ndarray, red: float | np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    src = np.asarray(src, dtype=np.int64)

    def per_transfer(x):  # (a read-only view on large steps; np.full on small ones, ~20x cheaper per call)
        if np.ndim(x):
            return np.asarray(x, dtype=float)
        return np.full(len(src), float(x)) if len(src) <= 4096 else np.broadcast_to(float(x), src.shape)

    return src, np.asarray(dst, dtype=np.int64), per_transfer(size), per_transfer(red)


def distinct(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values (not np.unique: its first call imports numpy.ma, ~20 ms)."""
    a = np.sort(a)
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if len(a) else a


def _pat(src: np.ndarray, dst: np.ndarray, size: float | np.ndarray, red: float | np.ndarray, count: int = 1,
         period: int = 0) -> StepPattern:
    return StepPattern(*_arrays(src, dst, size, red), count, period)


# ---- rings ----------------------------------------------------------------------------------
def _by_rank(n: int, out_of, count: int = 1, period: int = 0, shape: tuple | None = None) -> StepPattern:
    """A lazy step over ranks 0..n-1 given ``out_of(ranks) -> arrays`` (the transfers out of those
    ranks): built on first use, its first period and its sample (the first and last
    :data:`SAMPLE_RANKS` ranks) without the others."""
    def sample():
        w = min(n, SAMPLE_RANKS)
        return out_of(distinct(np.concatenate([np.arange(w), np.arange(n - w, n)])))

    return StepPattern(count=count, period=period, build=lambda: out_of(np.arange(n)),
                       first=lambda p: out_of(np.arange(min(p, n))), sample=sample, shape=shape)


def ring_step(rings: int, k: int, chunk: float, reduce: bool, bidirectional: bool = False, period: int = 0,
              across: bool = False) -> StepPattern | None:
    """One step of ``rings`` rings of length k >= 2 run concurrently over ranks 0..rings*k-1: the
    rows of the rings x k grid of ranks (ring i = i*k, ..., i*k + k-1), or with ``across`` its
    columns read as rings (ring i = i, i + rings, ..., i + (k-1)*rings). It repeats k-1 times.
    ``period``: the rank shift that maps it onto itself, if the caller knows one. Built on first use;
    a one-way ring over all ranks, or one-way rings across, is a shift step (shape ``("shift", ...)``)."""
    if k < 2:
        return None
    r = chunk if reduce else 0.0

    def step(ranks: np.ndarray, by: int) -> np.ndarray:  # the rank ``by`` places further round its ring
        if across:
            return (ranks + by * rings) % (rings * k)
        return ranks - ranks % k + (ranks % k + by) % k

    def out_of(ranks: np.ndarray):
        if not bidirectional:
            return _arrays(ranks, step(ranks, 1), chunk, r)
        dst = np.stack([step(ranks, 1), step(ranks, -1)], axis=1).ravel()
        return _arrays(np.repeat(ranks, 2), dst, chunk / 2, r / 2)

    one_shift = not bidirectional and (rings == 1 or across)  # every rank r to r + 1 (or + rings) mod n
    shape = ("shift", rings * k, rings if across else 1, chunk, r) if one_shift else None
    return _by_rank(rings * k, out_of, k - 1, 1 if one_shift else period, shape)


def _ring(coll: str, n: int, bidir: bool) -> Patterns:
    out = []
    if coll in ("all_reduce", "reduce_scatter"):
        out.append(ring_step(1, n, 1 / n, True, bidir, 1))
    if coll in ("all_reduce", "all_gather"):
        out.append(ring_step(1, n, 1 / n, False, bidir, 1))
    return [p for p in out if p is not None]


# ---- digit exchanges -------------------------------------------------------------------------
def digit_step(n: int, stride: int, k: int, size: float, red: float) -> StepPattern:
    """Every rank sends to the k-1 ranks differing from it only in the (mixed-radix) digit of place
    value ``stride`` and size ``k`` (built on first use; shape ``("digit", n, stride, k, size, red)``)."""
    def out_of(r: np.ndarray, offsets=range(1, k)):
        digit = (r // stride) % k
        base = r - digit * stride
        dst = np.concatenate([base + ((digit + j) % k) * stride for j in offsets])
        return _arrays(np.tile(r, len(offsets)), dst, size, red)

    def sample():  # ranks 0..W-1 and the first W of every digit's block (a wide digit: W ranks, W peers each way)
        if k > SAMPLE_RANKS:
            w = SAMPLE_RANKS // 2
            return out_of(np.arange(min(n, SAMPLE_RANKS)), sorted({*range(1, w + 1), *range(k - w, k)}))
        w = min(stride, SAMPLE_RANKS)
        r = distinct(np.concatenate([np.arange(min(n, SAMPLE_RANKS)),
                                     (np.arange(k)[:, None] * stride + np.arange(w)).ravel()]))
        return out_of(r[r < n])

    return StepPattern(count=1, period=k * stride if n % (k * stride) == 0 else 0,
                       build=lambda: out_of(np.arange(n)), first=lambda p: out_of(np.arange(min(p, n))),
                       sample=sample, shape=("digit", n, stride, k, size, red))


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


def _dimwise(coll: str, n: int, k: int) -> Patterns:
    """Dimension-wise (BCube / SiPAC): L = log_k(n) parts, part j walks the digits j, j+1, ...; so
    every step exchanges along all L digits at once, each digit moving the same share."""
    levels = need_power("dimwise", n, k)

    def step(size: float, red: float) -> StepPattern:
        digits = [digit_step(n, k**d, k, size, red) for d in range(levels)]
        return StepPattern(build=lambda: tuple(np.concatenate([x.arrays[i] for x in digits]) for i in range(4)),
                           sample=lambda: tuple(np.concatenate([x.sample()[i] for x in digits]) for i in range(4)),
                           shape=("dimwise", n, k, size, red))

    out = []
    if coll in ("all_reduce", "reduce_scatter"):
        held = 1.0 / levels
        for _ in range(levels):
            held /= k
            out.append(step(held, held))
    if coll in ("all_reduce", "all_gather"):
        held = 1.0 / levels / n
        for _ in range(levels):
            out.append(step(held, 0.0))
            held *= k
    return out


def _recursive_doubling(coll: str, n: int) -> Patterns:
    if coll == "all_gather":
        return _radix(coll, n, 2, "recursive_doubling")
    steps = need_power("recursive_doubling", n, 2)
    return [digit_step(n, 1 << s, 2, 1.0, 1.0) for s in range(steps)]  # partner r ^ 2**s


def _neighbor_exchange(coll: str, n: int) -> Patterns:
    if n % 2:
        raise EstimatorError(f"algorithm 'neighbor_exchange' needs an even group size, got {n}")
    out = [ring_step(1, n, 1 / n, True, period=1)] if coll == "all_reduce" and n >= 2 else []

    def side(r: np.ndarray, right: bool) -> np.ndarray:
        return np.where((r % 2 == 0) == right, (r + 1) % n, (r - 1) % n)

    steps = n // 2

    def hop(right: bool, size: float):
        return lambda q: _arrays(q, side(q, right), size, 0.0)

    out.append(_by_rank(n, hop(True, 1 / n), period=2))
    rights, lefts = (steps - 1) // 2, steps // 2  # later steps: odd s go left, even s right
    if lefts:
        out.append(_by_rank(n, hop(False, 2 / n), lefts, 2))
    if rights:
        out.append(_by_rank(n, hop(True, 2 / n), rights, 2))
    return [p for p in out if p is not None]


# ---- trees ----------------------------------------------------------------------------------
def tree_parents(n: int, b: np.ndarray, second: bool) -> tuple[np.ndarray, np.ndarray]:
    """(child rank, parent rank) of positions ``b`` >= 1 of the in-order tree (NCCL's rule, as
    :func:`~estimator.collectives.trees.inorder_parents`) or of its double-tree twin."""
    low = b & -b
    up = (b ^ low) | (low << 1)
    parent = np.where(up < n, up, b ^ low)
    if second:
        return (n - 1 - b, n - 1 - parent) if n % 2 == 0 else ((b + 1) % n, (parent + 1) % n)
    return b, parent


def _tree_edges(n: int, second: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(child rank, parent rank, send step) of every edge of the in-order tree (or its double-tree twin)."""
    b = np.arange(1, n)
    child, parent = tree_parents(n, b, second)
    return child, parent, np.log2(b & -b).astype(np.int64)


def tree_patterns(coll: str, n: int, size: float, trees: tuple[bool, ...], chunks: int = 1) -> Patterns:
    """Level-by-level (chunks = 1) or pipelined trees: reduce steps, then the mirrored broadcast.
    Steps are built on first use; a step's sample is the edges of the first and last
    :data:`SAMPLE_EDGES` positions of each level it sends."""
    edges: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def step(t: int, up: bool):
        if not edges:
            parts = [_tree_edges(n, x) for x in trees]
            edges.append(tuple(np.concatenate([e[i] for e in parts]) for i in range(3)))
            if chunks == 1:  # one level per step: the edges grouped by level (stable: in edge order)
                order = np.argsort(edges[0][2], kind="stable")
                edges.append(tuple(x[order] for x in edges[0][:2]))
                edges.append(np.searchsorted(edges[0][2][order], np.arange(tree_height(n) + 2)))
        if chunks == 1:
            (child, parent), at = edges[1], edges[2]
            on = slice(at[t], at[t + 1])
        else:
            child, parent, level = edges[0]
            on = (level <= t) & (t < level + chunks)
        return _arrays(child[on], parent[on], size, size) if up else _arrays(parent[on], child[on], size, 0.0)

    levels: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def level(lv: int) -> tuple[np.ndarray, np.ndarray]:  # sampled (child, parent) edges sending at lv
        if lv not in levels:
            count = (((n - 1) >> lv) + 1) // 2  # positions (2m+1) 2**lv < n
            m = distinct(np.concatenate([np.arange(min(count, SAMPLE_EDGES)),
                                         np.arange(max(0, count - SAMPLE_EDGES), count)]))
            pairs = [tree_parents(n, (2 * m + 1) << lv, x) for x in trees]
            levels[lv] = (np.concatenate([c for c, _ in pairs]), np.concatenate([p for _, p in pairs]))
        return levels[lv]

    def sample(t: int, up: bool):
        window = [level(lv) for lv in range(max(0, t - chunks + 1), t + 1)]
        child, parent = np.concatenate([c for c, _ in window]), np.concatenate([p for _, p in window])
        return _arrays(child, parent, size, size) if up else _arrays(parent, child, size, 0.0)

    def lazy(t: int, up: bool) -> StepPattern:
        return StepPattern(build=lambda: step(t, up), sample=lambda: sample(t, up))

    steps = range(tree_height(n) + chunks - 1)
    up, down = [lazy(t, True) for t in steps], [lazy(t, False) for t in steps]
    return {"all_reduce": up + down, "reduce": up, "broadcast": down}[coll]


# ---- multi-dimensional ------------------------------------------------------------------------
def _torus2d(coll: str, n: int, p: AlgoParams) -> Patterns:
    rows, cols = torus_dims(n, p)  # ranks: a rows x cols grid; rings along its rows, then its columns
    out = []
    if coll in ("all_reduce", "reduce_scatter"):
        out += [ring_step(rows, cols, 1 / cols, True, period=cols),
                ring_step(cols, rows, 1 / n, True, period=1, across=True)]
    if coll in ("all_reduce", "all_gather"):
        out += [ring_step(cols, rows, 1 / n, False, period=1, across=True),
                ring_step(rows, cols, 1 / cols, False, period=cols)]
    return [x for x in out if x is not None]


def _hierarchical(n: int, p: AlgoParams, tree: bool) -> Patterns:
    g = local_size(n, p)
    nodes = n // g
    # ranks: a nodes x g grid (rows: servers); rings inside servers, then across them
    intra_rs, intra_ag = ring_step(nodes, g, 1 / g, True), ring_step(nodes, g, 1 / g, False)
    if tree:
        i = np.arange(g)

        def spread(arrays):  # the node-level tree edge between the same GPU index of two servers
            src, dst, size, red = arrays
            return ((src[:, None] * g + i).ravel(), (dst[:, None] * g + i).ravel(), np.repeat(size, g),
                    np.repeat(red, g))

        inter = [StepPattern(count=st.count, build=lambda st=st: spread(st.arrays),
                             sample=lambda st=st: spread(st.sample()))
                 for st in tree_patterns("all_reduce", nodes, 1 / (2 * g), (False, True))]
    else:
        inter = [ring_step(g, nodes, 1 / n, True, across=True), ring_step(g, nodes, 1 / n, False, across=True)]
    return [x for x in (intra_rs, *inter, intra_ag) if x is not None]


# ---- rooted and all-to-all ---------------------------------------------------------------------
def _star(n: int, to_root: bool, size: float, red: float) -> StepPattern:
    """Every rank q >= 1 to the root 0 (``to_root``) or the root to every q >= 1."""
    q = np.arange(1, n)
    zero = np.zeros(n - 1, dtype=np.int64)
    return _pat(q, zero, size, red) if to_root else _pat(zero, q, size, red)


def all_pairs(n: int, size: float, red: float) -> StepPattern:
    """Every rank to every other: one digit of size n (:func:`digit_step`), which a shift by one
    rank maps onto itself (period 1: fabrics that fold price it from rank 0's n-1 transfers)."""
    step = digit_step(n, 1, n, size, red)
    step.period = 1
    return step


def _shift(n: int, by: int, size: float) -> StepPattern:
    """Every rank r to r + ``by`` (mod n); shape ``("shift", n, by, size, 0.0)`` (priced without arrays
    by :mod:`estimator.topology.shift_steps`)."""
    return _by_rank(n, lambda r: _arrays(r, (r + by) % n, size, 0.0), period=1, shape=("shift", n, by, size, 0.0))


def _binomial(coll: str, n: int) -> Patterns:
    """Binomial tree rooted at 0 (:func:`~.generators.binomial`): broadcast step s sends r -> r + 2**s
    for r < 2**s; reduce is its mirror; gather forwards whole subtrees towards the root."""
    out = []
    for s in range((n - 1).bit_length()):
        w = 1 << s
        if coll == "gather":
            r = np.arange(0, n, 2 * w)
            r = r[r + w < n]
            out.append(_pat(r + w, r, np.minimum(w, n - r - w) / n, 0.0))
            continue
        r = np.arange(min(w, n - w))
        out.append(_pat(r, r + w, 1.0, 0.0) if coll == "broadcast" else _pat(r + w, r, 1.0, 1.0))
    return out


def _chain(n: int, c: int) -> Patterns:
    """Pipelined chain broadcast (:func:`~.broadcasts.pipelined_chain_broadcast`): in step t rank i
    forwards chunk t - i to i + 1 (0 <= t - i < c)."""
    out = []
    for t in range(n - 2 + c):
        lo, hi = max(0, t - c + 1), min(n - 2, t) + 1
        step = StepPattern(build=lambda lo=lo, hi=hi: _arrays(np.arange(lo, hi), np.arange(lo + 1, hi + 1), 1.0 / c, 0.0))
        if hi - lo == c:  # a full window: the window of ranks 0..c shifted by lo (no wrap)
            step.translate = (("chain", n, c), lo)
        step.window = (n, c)
        out.append(step)
    return out


def _spanning(n: int, k: int) -> Patterns:
    """BCube's spanning-tree broadcast (:func:`~.broadcasts.spanning_tree_broadcast`): L parts; in
    step s part j's holders (any digits j, ..., j+s-1, others 0) send it along digit j+s."""
    levels = need_power("spanning_tree", n, k)
    out = []
    for s in range(levels):
        src, dst = [], []
        idx = np.arange(k**s)
        for j in range(levels):
            holder = np.zeros(len(idx), dtype=np.int64)
            for q in range(s):
                holder += ((idx // k**q) % k) * k ** ((j + q) % levels)
            d = (j + s) % levels
            for e in range(1, k):
                src.append(holder)
                dst.append(holder + e * k**d)
        out.append(_pat(np.concatenate(src), np.concatenate(dst), 1.0 / levels, 0.0))
    return out


def _ps(n: int) -> Patterns:
    def step(up: bool, ranks: np.ndarray):  # every worker q >= 1 to the server 0 (up) or back
        q = ranks[ranks > 0]
        zero = np.zeros(len(q), dtype=np.int64)
        return _arrays(q, zero, 1.0, 1.0) if up else _arrays(zero, q, 1.0, 0.0)

    return [_by_rank(n, lambda r: step(True, r)), _by_rank(n, lambda r: step(False, r))]


def patterns(name: str, collective: str, n: int, p: AlgoParams) -> Patterns | None:
    """The schedule of algorithm ``name`` as step patterns (``None``: no pattern for it here).
    ``p`` must already carry the algorithm's fixed radix / chunks (``Algorithm.params``). Kept for
    the last :data:`PATTERN_CACHE` requests (a pattern is immutable; its arrays are built once,
    on first use), so ``auto``'s bound and price of one candidate share them."""
    key = (name, collective, n, p)
    if key in _CACHE:
        hit = _CACHE[key] = _CACHE.pop(key)  # most recent last
        return None if hit is None else list(hit)
    collecting = gc.isenabled()
    gc.disable()  # up to n steps of small objects without cycles: collector passes over them tripled the build
    try:
        out = _patterns(name, collective, n, p)  # raises (not cached) for an invalid group
    finally:
        if collecting:
            gc.enable()
    if len(_CACHE) >= PATTERN_CACHE:
        del _CACHE[next(iter(_CACHE))]
    _CACHE[key] = out
    return None if out is None else list(out)


PATTERN_CACHE = 16
_CACHE: dict[tuple, Patterns | None] = {}


def _patterns(name: str, collective: str, n: int, p: AlgoParams) -> Patterns | None:
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
    if base == "dimwise":
        return _dimwise(collective, n, p.radix)
    if base == "direct" and collective in ("all_reduce", "reduce_scatter", "all_gather"):
        # all pairs: every rank to every other = one digit of size n
        rs = [all_pairs(n, 1 / n, 1 / n)] if collective != "all_gather" else []
        return rs + ([all_pairs(n, 1 / n, 0.0)] if collective != "reduce_scatter" else [])
    if base == "direct" and collective == "all_to_all":
        return [all_pairs(n, 1 / n, 0.0)]
    if base == "direct" and collective in ("broadcast", "reduce", "gather"):
        size = 1 / n if collective == "gather" else 1.0
        return [_star(n, collective != "broadcast", size, size if collective == "reduce" else 0.0)]
    if base == "one_shot":
        return [all_pairs(n, 1.0, 1.0)]
    if base == "pairwise":
        return [_shift(n, s, 1 / n) for s in range(1, n)]
    if base == "binomial_tree":
        return _binomial(collective, n)
    if base == "scatter_allgather":
        return [_star(n, False, 1 / n, 0.0), *_ring("all_gather", n, False)]
    if base == "reducescatter_gather":
        return [*_ring("reduce_scatter", n, False), _star(n, True, 1 / n, 0.0)]
    if base == "pipelined_chain":
        if p.chunks < 1:
            raise EstimatorError(f"algorithm 'pipelined_chain' needs chunks >= 1, got {p.chunks}")
        return _chain(n, p.chunks)
    if base == "pipelined_tree":
        if p.chunks < 1:
            raise EstimatorError(f"algorithm 'pipelined_tree' needs chunks >= 1, got {p.chunks}")
        return tree_patterns("broadcast", n, 1 / p.chunks, (False,), p.chunks)
    if base == "spanning_tree":
        return _spanning(n, p.radix)
    if base == "neighbor_exchange":
        return _neighbor_exchange(collective, n)
    if base == "binary_tree":
        return tree_patterns(collective, n, 1.0, (False,))
    if base == "double_binary_tree":
        return tree_patterns(collective, n, 0.5, (False, True))
    if base == "pipelined_dbt":
        if p.chunks < 1:
            raise EstimatorError(f"algorithm 'pipelined_dbt' needs chunks >= 1, got {p.chunks}")
        return tree_patterns(collective, n, 1 / (2 * p.chunks), (False, True), p.chunks)
    if base == "torus2d":
        return _torus2d(collective, n, p)
    if base == "hierarchical":
        return _hierarchical(n, p, tree=False)
    if base == "hierarchical_tree":
        return _hierarchical(n, p, tree=True)
    if base == "ps":
        return _ps(n)
    return None
