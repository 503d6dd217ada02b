"""Analytic routing on rings and tori: price step patterns without building routes or a graph search.

On the ring of :func:`estimator.topology.builders.ring` (endpoint i -> i+1 links, and i+1 -> i if
bidirectional; shortest paths, a tie goes the positive way as the graph router's lowest-link-id
rule does) a transfer's route is an arc: ``h`` consecutive links in one direction. A step's link
loads are then a difference array over arcs (one cumulative sum per direction) and a transfer's
busiest link is a range maximum (a sparse table), so a step over n ranks costs O(n log n) array
work and a schedule is priced from its distinct :class:`~estimator.collectives.patterns.StepPattern`
s. It computes the numbers :func:`estimator.collectives.pricing.compile_schedule` computes on that
topology (tested equal to 1e-12): per transfer ``c0 = α + h·L`` and ``c1 = max load / B`` on its
arc, reductions at the busiest receiver. A torus route (dimension order) is two such arcs, one
along the source's row and one along the destination's column.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from estimator.collectives.patterns import Patterns, StepPattern, distinct
from estimator.collectives.pricing import CompiledSchedule, PricingParams, pareto
from estimator.topology import shift_steps
from estimator.topology.partial import repeat_sum


def _range_max(values: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """max(values[start : start + length]) per query (length >= 1, start + length <= len(values))."""
    table = [values]
    span = 1
    while 2 * span <= int(length.max(initial=1)):
        prev = table[-1]
        table.append(np.maximum(prev[:-span], prev[span:]))
        span *= 2
    level = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(len(start))
    for lv in range(int(level.max(initial=0)) + 1):  # (not np.unique: it imports numpy.ma on first use)
        sel = level == lv
        if not sel.any():
            continue
        t = table[lv]
        s, e = start[sel], start[sel] + length[sel] - (1 << int(lv))
        out[sel] = np.maximum(t[s], t[e])
    return out


def arc_max_loads(ring: np.ndarray, start: np.ndarray, hops: np.ndarray, forward: np.ndarray, nbytes: np.ndarray,
                  rings: int, size: int, overall: bool = False) -> np.ndarray:
    """Per transfer: the largest load (bytes) on its arc, where transfer t walks ``hops[t]`` links
    of ring ``ring[t]`` (``rings`` rings of ``size`` nodes) from link ``start[t]`` on, forward
    (link i: i -> i+1) or backward (link i: i+1 -> i); every transfer's bytes load every link of
    its arc. 0 for an empty arc. ``overall``: only the largest of those (one value): the busiest
    link's load, as loads are >= 0 and a link no arc covers carries 0 (no range maxima)."""
    out = np.zeros(1 if overall else len(start))
    for direction in (True, False):
        sel = (forward == direction) & (hops > 0)
        if not sel.any():
            continue
        base = ring[sel] * 2 * size + start[sel]  # each ring doubled: an arc never leaves its block
        if SPARSE_ARCS * len(base) < rings * size:  # few arcs (a tree's upper levels): their ends only
            peak = _sparse_arc_max(base, hops[sel], nbytes[sel], size, overall)
            if overall:
                out[0] = max(out[0], peak.max())
            else:
                out[sel] = peak
            continue
        cells = rings * 2 * size + 1
        diff = (np.bincount(base, weights=nbytes[sel], minlength=cells)
                - np.bincount(base + hops[sel], weights=nbytes[sel], minlength=cells))
        cum = np.cumsum(diff[:-1]).reshape(rings, 2, size)
        load = cum[:, 0] + cum[:, 1]
        if overall:
            out[0] = max(out[0], load.max())
        else:
            out[sel] = _range_max(np.concatenate([load, load], axis=1).ravel(), base, hops[sel])
    return out


SPARSE_ARCS = 8  # arc_max_loads works on the arcs' ends when there are < 1/8 as many arcs as ring links


def _sparse_arc_max(base: np.ndarray, hops: np.ndarray, nbytes: np.ndarray, size: int, overall: bool = False
                    ) -> np.ndarray:
    """:func:`arc_max_loads`' computation for one direction on the arcs' end points only: the
    loads are piecewise constant between them, so the difference array, its running sum (the
    same additions in the same order: bit-identical) and the range maxima run over O(arcs) points,
    not O(rings x size) links. ``base``: each arc's first position in the doubled rings."""
    period = 2 * size
    ends = base + hops
    cuts = distinct(np.concatenate([base, ends, (base // period) * period]))  # + each ring's start
    diff = (np.bincount(np.searchsorted(cuts, base), weights=nbytes, minlength=len(cuts))
            - np.bincount(np.searchsorted(cuts, ends), weights=nbytes, minlength=len(cuts)))
    total = np.cumsum(diff)

    def cum(at: np.ndarray) -> np.ndarray:  # the running sum at positions ``at``
        return total[np.searchsorted(cuts, at, side="right") - 1]

    first = (cuts // period) * period
    x = (cuts - first) % size  # where a ring's link load may change (each end, folded onto its ring)
    points = distinct(np.concatenate([first + x, first + x + size]))
    ring0 = (points // period) * period
    x = (points - ring0) % size
    load = cum(ring0 + x) + cum(ring0 + size + x)  # a link's two doubled copies, as arc_max_loads adds them
    if overall:  # the busiest link: loads >= 0, so the links no arc covers never exceed it
        return load
    lo = np.searchsorted(points, base, side="right") - 1
    hi = np.searchsorted(points, base + hops - 1, side="right") - 1
    return _range_max(load, lo, hi - lo + 1)


def _arc(src: np.ndarray, dst: np.ndarray, size: int, bidirectional: bool
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first link, links, forward?) of the route from position src to dst on a ring of ``size``."""
    ahead = (dst - src) % size
    forward = ahead <= size - ahead if bidirectional else np.ones(len(src), dtype=bool)
    hops = np.where(forward, ahead, size - ahead)
    return np.where(forward, src, (src - hops) % size), hops, forward


def _step_row(step: StepPattern, loads, bandwidth: float, latencies: np.ndarray, params: PricingParams,
              fold: int = 0, sym: int = 1) -> tuple[np.ndarray, np.ndarray, float]:
    """(c0, c1, reduction slope) of a step given ``loads(src, dst, bytes, period) -> (max load,
    links)``. ``fold`` = the ring size when the step covers the whole ring: a step with a period P
    dividing it is then priced from its transfers out of ranks 0..P-1 only (``loads`` folds the
    ring onto P nodes; a receiver gets what its class mod P gets), the others being shifted copies.
    ``sym``: the topology maps onto itself only under rank shifts by multiples of ``sym`` (a leaf,
    a torus row), so P is the least common multiple of the step's period and ``sym``."""
    period = math.lcm(step.period, sym) if fold and step.period else 0
    period = period if period and fold % period == 0 else 0
    src, dst, size, reduced = step.first(period) if period else step.arrays
    moving = src != dst
    if not moving.any():
        return np.zeros(1), np.zeros(1), 0.0
    src, dst = src[moving], dst[moving]
    peak, hops = loads(src, dst, size[moving], period)
    red = np.bincount(dst % period if period else dst, weights=reduced[moving]).max() * params.gamma
    if len(hops) > 4 * len(latencies):  # only the busiest transfer of each route length can be on the front
        busiest = np.full(len(latencies), -np.inf)
        np.maximum.at(busiest, hops, peak)
        hops = np.flatnonzero(busiest > -np.inf)
        peak = busiest[hops]
    c0, c1 = pareto(params.alpha_s + latencies[hops], peak / bandwidth)
    return c0, c1, float(red)


MAX_DIGIT = 16  # digit_ring_loads costs O(k^5) small-array work: wider digits (all-pairs) use the arrays


@lru_cache(maxsize=256)
def digit_ring_loads(size: int, stride: int, k: int, bidirectional: bool) -> tuple[tuple[int, int], ...]:
    """(links, largest link load in transfers on any of its routes) per class of transfers of a
    digit step (:func:`~estimator.collectives.patterns.digit_step`: rank r sends to
    ``r + (e - d) * stride`` for digit d of r and every e != d < k) on a whole ring of ``size``
    nodes (k x stride divides size), without visiting the nodes.

    The transfers of class (d, e) start at the ranks ``d * stride + q`` (q < stride) of every
    block of P = k x stride and all take the same route length h (a multiple of the stride; the
    shorter way, ties forward). A link's load is then a count of class members in a window (an
    integer formula per class), periodic in P, and linear between consecutive multiples of the
    stride (up to one position: the window ends move together), so the largest load over the
    union of a class's routes is the largest over that union's ends and the block ends inside it.
    Equal to :func:`arc_max_loads` over all transfers (tested)."""
    if k == 2 and bidirectional and size % (2 * stride) == 0:
        # halving-doubling's steps: both classes go `stride` links (the shorter way; at stride =
        # size/2 both forward), and a link's window of `stride` sources holds at most `stride`
        # members of the classes using its direction (all of them at its block's end)
        return ((stride, stride), (stride, stride))
    period = k * stride
    d, e = np.repeat(np.arange(k), k), np.tile(np.arange(k), k)
    d, e = d[d != e], e[d != e]
    ahead = ((e - d) * stride) % size
    forward = ahead <= size - ahead if bidirectional else np.ones(len(d), dtype=bool)
    hops = np.where(forward, ahead, size - ahead)
    # the links any route of class c uses: [lo, hi] (a whole period if longer)
    lo = np.where(forward, d * stride, d * stride - hops)
    hi = np.where(forward, d * stride + stride + hops - 2, d * stride + stride - 2)
    whole = hi - lo + 1 >= period
    lo, hi = np.where(whole, 0, lo), np.where(whole, period - 1, hi)
    blocks = np.arange(int((hi // stride - lo // stride).max()) + 1)
    ends = ((lo // stride)[:, None, None] + blocks[None, :, None]) * stride + np.array([0, stride - 2, stride - 1])
    at = np.clip(np.concatenate([lo[:, None], hi[:, None], ends.reshape(len(d), -1)], axis=1),
                 lo[:, None], hi[:, None])[:, :, None]  # (class, point, 1)
    fwd = forward[:, None, None]
    first = np.where(fwd, at - hops + 1, at + 1)  # sources whose route (of each class) crosses link `at`
    last = np.where(fwd, at, at + hops)
    count = _members(last + 1, d, stride, period) - _members(first, d, stride, period)
    load = np.where(forward[None, None, :] == fwd, count, 0).sum(axis=2).max(axis=1)
    return tuple(zip(hops.tolist(), load.tolist(), strict=True))


def _members(x: np.ndarray, digit: np.ndarray, stride: int, period: int) -> np.ndarray:
    """How many y in [0, x) have y mod period in [digit * stride, digit * stride + stride)."""
    return (x // period) * stride + np.clip(x % period - digit * stride, 0, stride)


def _digit_fits(step: StepPattern, ranks: int, size: int, offset: int) -> bool:
    """True if ``step`` is a digit step over all ``ranks`` endpoints whose exchanges run along rings
    of ``size`` >= 3 nodes, one ring position every ``offset`` ranks (the stride a multiple of it,
    k x stride / offset dividing size): :func:`digit_ring_loads` prices it."""
    if step.shape is None or step.shape[0] != "digit" or step.shape[1] != ranks or size < 3:
        return False
    stride, k = step.shape[2], step.shape[3]
    if k > MAX_DIGIT:
        return False
    return stride % offset == 0 and size % (k * stride // offset) == 0


def _torus_plan(step: StepPattern, rows: int, cols: int) -> tuple[str, int, int] | None:
    """How a digit step over the whole rows x cols torus is priced without arrays: ``("ring", size,
    offset)`` if its exchanges run along every row (its blocks fit in one) or every column (see
    :func:`_digit_fits`); ``("split", a, b)`` if a block spans b whole rows of a digit values each
    (the low part of the digit moves along the row, the high part along the column); else None."""
    if step.shape is None or step.shape[0] != "digit" or step.shape[1] != rows * cols or step.shape[3] > MAX_DIGIT:
        return None
    stride, k = step.shape[2], step.shape[3]
    along = (cols, 1) if k * stride <= cols else (rows, cols)
    if _digit_fits(step, rows * cols, *along):
        return ("ring", *along)
    if cols % stride or (k * stride) % cols or rows < 3 or cols < 3:
        return None
    a = cols // stride
    return ("split", a, k // a) if rows % (k // a) == 0 else None


def _ring_table(size: int, stride: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`digit_ring_loads` (bidirectional) as k x k tables of (links, load) by (digit, target digit)."""
    hops, load = np.zeros((k, k), dtype=np.int64), np.zeros((k, k), dtype=np.int64)
    d, e = np.repeat(np.arange(k), k), np.tile(np.arange(k), k)
    d, e = d[d != e], e[d != e]
    table = np.array(digit_ring_loads(size, stride, k, True))
    hops[d, e], load[d, e] = table[:, 0], table[:, 1]
    return hops, load


def _torus_digit_row(step: StepPattern, rows: int, cols: int, bandwidth: float, latencies: np.ndarray,
                     params: PricingParams) -> tuple[np.ndarray, np.ndarray, float] | None:
    """:func:`_step_row` of a digit step on the torus from :func:`_torus_plan`. A split step's
    transfer from digit (dl, dh) to (el, eh) goes ``(el - dl) * stride`` along its row, then
    ``eh - dh`` rows along its destination's column: every row carries b copies of the row-wise
    digit step (stride, a), every column a copies of the column-wise one (1, b), so a transfer's
    busiest link is the larger of the two tables' entries for its classes."""
    plan = _torus_plan(step, rows, cols)
    if plan is None:
        return None
    if plan[0] == "ring":
        return _digit_row(step, rows * cols, plan[1], plan[2], True, bandwidth, latencies, params)
    _, a, b = plan
    _, _, stride, k, nbytes, reduced = step.shape
    (xh, xl), (yh, yl) = _ring_table(cols, stride, a), _ring_table(rows, 1, b)
    dl, el, dh, eh = (x.ravel() for x in np.meshgrid(np.arange(a), np.arange(a), np.arange(b), np.arange(b),
                                                       indexing="ij"))
    moves = (dl != el) | (dh != eh)
    dl, el, dh, eh = dl[moves], el[moves], dh[moves], eh[moves]
    peak = np.maximum(b * xl[dl, el], a * yl[dh, eh])
    c0, c1 = params.alpha_s + latencies[xh[dl, el] + yh[dh, eh]], peak * nbytes / bandwidth
    red = 0.0
    for _ in range(k - 1):
        red += reduced
    return c0, c1, red * params.gamma


def ring_digits_only(pats: Patterns, size: int) -> bool:
    """Every step of ``pats`` is a digit step :func:`ring_compiled` prices without arrays."""
    return bool(pats) and all(_digit_fits(p, size, size, 1) for p in pats)


def torus_digits_only(pats: Patterns, rows: int, cols: int) -> bool:
    """Every step of ``pats`` is a digit step :func:`torus_compiled` prices without arrays."""
    return bool(pats) and all(_torus_plan(p, rows, cols) is not None for p in pats)


def _digit_row(step: StepPattern, ranks: int, size: int, offset: int, bidirectional: bool, bandwidth: float,
               latencies: np.ndarray, params: PricingParams) -> tuple[np.ndarray, np.ndarray, float] | None:
    """:func:`_step_row` of a digit step from :func:`digit_ring_loads` (see :func:`_digit_fits`);
    None if the step is not one."""
    if not _digit_fits(step, ranks, size, offset):
        return None
    _, _, stride, k, nbytes, reduced = step.shape
    classes = np.array(digit_ring_loads(size, stride // offset, k, bidirectional))
    # one (c0, c1) per class (a dominated pair never sets a step's time: no Pareto pass needed)
    c0, c1 = params.alpha_s + latencies[classes[:, 0]], classes[:, 1] * nbytes / bandwidth
    red = 0.0
    for _ in range(k - 1):  # every rank receives k-1 transfers (summed in order, as np.bincount does)
        red += reduced
    return c0, c1, red * params.gamma


@lru_cache(maxsize=16)
def _latencies(latency: float, longest: int) -> np.ndarray:
    """Latency of a route of h = 0..longest links, summed link by link as a route's is."""
    out = np.concatenate([[0.0], np.cumsum(np.full(longest, latency))])
    out.flags.writeable = False
    return out


MEMO_TRANSFERS = 1 << 16  # steps of at most this many transfers share their link loads within one schedule


def compiled_from_loads(pats: Patterns, loads, bandwidth: float, latency: float, longest: int,
                        params: PricingParams, fold: int = 0, shaped=None, sym: int = 1,
                        route_latency: np.ndarray | None = None) -> CompiledSchedule:
    """``shaped(step, latencies)``: the step's row without its arrays, or None (then ``loads``).
    ``fold`` (the group covers the whole fabric, which a rank shift by ``sym`` maps onto itself):
    periodic steps fold (:func:`_step_row`) and a step that is another shifted by a multiple of
    ``sym`` (``StepPattern.translate``) reuses its row."""
    latencies = _latencies(latency, longest) if route_latency is None else route_latency
    seen: dict[tuple, tuple] = {}  # on a whole fabric, steps that are shifts of one another by a multiple of sym
    routed: dict[tuple, tuple] = {}  # steps moving the same bytes between the same ranks (a reduce-scatter's
    # and an all-gather's) load the links alike: ``loads`` is a pure function of its arguments

    def same_loads(src, dst, nbytes, period):
        if len(src) > MEMO_TRANSFERS:
            return loads(src, dst, nbytes, period)
        key = (period, src.tobytes(), dst.tobytes(), nbytes.tobytes())
        if key not in routed:
            routed[key] = loads(src, dst, nbytes, period)
        return routed[key]

    def row(p: StepPattern):
        key = (p.translate[0], p.translate[1] % sym) if fold and p.translate else None
        if key is not None and key in seen:
            return seen[key]
        out = (shaped and shaped(p, latencies)) or _step_row(p, same_loads, bandwidth, latencies, params, fold, sym)
        if key is not None:
            seen[key] = out
        return out

    return rows_compiled([row(p) for p in pats], [p.count for p in pats], params)


def rows_compiled(rows: list[tuple[np.ndarray, np.ndarray, float]], counts, params: PricingParams
                  ) -> CompiledSchedule:
    """The :class:`CompiledSchedule` of distinct step rows (c0, c1, reduction slope), each repeated
    ``counts`` times."""
    width = max((len(r[0]) for r in rows), default=1)
    c0 = np.full((len(rows), width), -np.inf)
    c1 = np.zeros((len(rows), width))
    for i, (a, b, _) in enumerate(rows):
        c0[i, : len(a)], c1[i, : len(b)] = a, b
    weight = np.array(counts, dtype=float)
    extra = np.full(len(rows), params.step_overhead_s)
    return CompiledSchedule(c0, c1, np.array([r[2] for r in rows]), extra, weight, int(weight.sum()),
                            params.fixed_s, 0, params.reconfig_s)


def ring_compiled(pats: Patterns, size: int, bidirectional: bool, bandwidth: float, latency: float,
                  params: PricingParams, group: int | None = None) -> CompiledSchedule:
    """A :class:`CompiledSchedule` of ``pats`` (ranks = the first endpoints) on the ring; ``group``
    ranks (default: the whole ring, where periodic steps fold, :func:`folded_max_loads`)."""
    reversed_steps: dict[tuple, tuple] = {}  # a step whose reverse was priced (a tree's broadcast level
    # after its reduce level): on a bidirectional ring every reversed arc runs over the same positions
    # the other way, so each transfer's busiest link carries the same, unless a route is a tie (n/2
    # links, both taken forward)

    def loads(src, dst, nbytes, period):
        start, hops, forward = _arc(src, dst, size, bidirectional)
        if period:
            return folded_max_loads(start, hops, forward, nbytes, period), hops
        mirror = bidirectional and len(src) <= MEMO_TRANSFERS and not (size % 2 == 0 and (2 * hops == size).any())
        key = (src.tobytes(), dst.tobytes(), nbytes.tobytes()) if mirror else None
        if key is not None and (key[1], key[0], key[2]) in reversed_steps:
            return reversed_steps[key[1], key[0], key[2]]
        uniform = hops.min() == hops.max()  # every route alike (a tree level on the ring): only the
        # busiest link matters to the step's row
        out = arc_max_loads(np.zeros(len(src), dtype=np.int64), start, hops, forward, nbytes, 1, size,
                            overall=uniform), hops[:1] if uniform else hops
        if key is not None:
            reversed_steps[key] = out
        return out

    whole = group is None or group == size

    def shaped(step, latencies):
        if step.shape is not None and step.shape[0] == "shift":  # pairwise all-to-all, any group (shift_steps.py)
            return shift_steps.ring_row(step, group or size, size, bidirectional, bandwidth, latencies, params)
        return _digit_row(step, size, size, 1, bidirectional, bandwidth, latencies, params) if whole else None

    return compiled_from_loads(pats, loads, bandwidth, latency, size, params, size if whole else 0, shaped)


def folded_max_loads(start: np.ndarray, hops: np.ndarray, forward: np.ndarray, nbytes: np.ndarray, period: int
                     ) -> np.ndarray:
    """:func:`arc_max_loads` for the transfers out of nodes 0..P-1 of a step that a shift by P
    maps onto itself: link loads repeat with period P, so every arc is wrapped onto a P-node
    circle (an arc of h links covers each of its P positions h // P times, plus once more for the
    h mod P after its start) and a transfer's busiest link is the circle's maximum if its arc
    goes all round, else a range maximum."""
    out = np.zeros(len(start))
    for direction in (True, False):
        sel = (forward == direction) & (hops > 0)
        if not sel.any():
            continue
        h, w, a = hops[sel], nbytes[sel], start[sel] % period
        full, rest = np.divmod(h, period)
        diff = np.bincount(a, weights=w, minlength=2 * period + 1) - np.bincount(a + rest, weights=w,
                                                                                 minlength=2 * period + 1)
        cum = np.cumsum(diff[:-1])
        load = cum[:period] + cum[period:] + float((full * w).sum())
        peak = np.full(len(a), load.max())
        part = full == 0
        if part.any():
            peak[part] = _range_max(np.concatenate([load, load]), a[part], rest[part])
        out[sel] = peak
    return out


def torus_compiled(pats: Patterns, rows: int, cols: int, bandwidth: float, latency: float, params: PricingParams,
                   group: int | None = None) -> CompiledSchedule:
    """The same on the rows x cols torus of :func:`estimator.topology.builders.torus2d`: a route
    is an arc along the source's row (X), then one along the destination's column (Y), each the
    shorter way round (ties positive); a 2-long ring's two directions are its one cable's two
    links, which the forward arcs (a tie) use. ``group`` = rows x cols (the whole torus): a step
    that a shift by P = m whole rows maps onto itself is priced from its transfers out of rows
    0..m-1 (every row's X arcs are its class's; each column ring folds onto m positions)."""
    def loads(src, dst, nbytes, period):
        (r1, c1), (r2, c2) = np.divmod(src, cols), np.divmod(dst, cols)
        xs, xh, xf = _arc(c1, c2, cols, True)
        ys, yh, yf = _arc(r1, r2, rows, True)
        along = (folded_column_loads(c2, ys, yh, yf, nbytes, cols, period // cols) if period
                 else arc_max_loads(c2, ys, yh, yf, nbytes, cols, rows))
        return np.maximum(arc_max_loads(r1, xs, xh, xf, nbytes, rows, cols), along), xh + yh

    def shaped(step, latencies):  # digit exchanges along rows, columns, or split between them; shifts
        return (shift_steps.torus_row(step, rows, cols, bandwidth, latencies, params)
                or _torus_digit_row(step, rows, cols, bandwidth, latencies, params))

    fold = rows * cols if group == rows * cols and rows >= 3 else 0
    return compiled_from_loads(pats, loads, bandwidth, latency, rows + cols, params, fold, shaped, cols)


def folded_column_loads(ring: np.ndarray, start: np.ndarray, hops: np.ndarray, forward: np.ndarray,
                        nbytes: np.ndarray, rings: int, period: int) -> np.ndarray:
    """:func:`folded_max_loads` on each of ``rings`` rings at once (transfer t on ring ``ring[t]``):
    every ring's link loads repeat with ``period``."""
    out = np.zeros(len(start))
    for direction in (True, False):
        sel = (forward == direction) & (hops > 0)
        if not sel.any():
            continue
        h, w, a, c = hops[sel], nbytes[sel], start[sel] % period, ring[sel]
        full, rest = np.divmod(h, period)
        cells = rings * 2 * period
        base = c * 2 * period + a
        diff = (np.bincount(base, weights=w, minlength=cells + 1)
                - np.bincount(base + rest, weights=w, minlength=cells + 1))
        cum = np.cumsum(diff[:-1]).reshape(rings, 2, period)
        load = cum[:, 0] + cum[:, 1] + np.bincount(c, weights=full * w, minlength=rings)[:, None]
        peak = load.max(axis=1)[c]
        part = full == 0
        if part.any():
            peak[part] = _range_max(np.concatenate([load, load], axis=1).ravel(), base[part], rest[part])
        out[sel] = peak
    return out


# ---- route bounds for auto's pattern floor (LibraryFabric.route_bounds) -----------------------
def ring_hops(src: np.ndarray, dst: np.ndarray, size: int, bidirectional: bool) -> np.ndarray:
    """Links on the route from ``src`` to ``dst`` on the ring."""
    ahead = (dst - src) % size
    return np.minimum(ahead, size - ahead) if bidirectional else ahead


def torus_hops(src: np.ndarray, dst: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Links on the dimension-order route on a rows x cols torus (endpoint = row * cols + col)."""
    (r1, c1), (r2, c2) = np.divmod(src, cols), np.divmod(dst, cols)
    dc, dr = (c2 - c1) % cols, (r2 - r1) % rows
    return np.minimum(dc, cols - dc) + np.minimum(dr, rows - dr)


def torus_links(rows: int, cols: int) -> int:
    """Directed links of :func:`estimator.topology.builders.torus2d` (a 2-long ring is one cable)."""
    n = rows * cols
    return sum(2 * n if size > 2 else n if size == 2 else 0 for size in (rows, cols))


def fat_tree_compiled(pats: Patterns, half: int, bandwidth: float, latency: float, params: PricingParams,
                      group: int | None = None) -> CompiledSchedule:
    """The same on the k-ary fat tree of :func:`estimator.topology.builders.fat_tree` (``half`` =
    k/2; ranks = the first hosts) with ECMP, by up/down routing: a transfer leaving its edge switch
    spreads evenly over the pod's k/2 aggregation switches, one leaving its pod evenly over all
    (k/2)^2 cores, and each core reaches a pod through one aggregation switch. So in a step every
    host link carries its host's bytes, every up-link of an edge switch 1/(k/2) of what leaves the
    edge (every down-link 1/(k/2) of what enters it), every aggregation-core link 1/(k/2)^2 of
    what leaves (enters) the pod; a transfer's busiest link is the largest of those on its path
    (1, 3 or 5 switch traversals, each ``latency``). ``group`` = the ranks (whole pods): a shift
    by P (a multiple of a pod) maps the tree onto itself, so a P-periodic step is priced from its
    transfers out of ranks 0..P-1 (a receiver's, edge's, pod's in-load is its class mod P's)."""
    from estimator.topology.builders import fat_tree_pair_traversals

    pod = half * half

    def loads(src, dst, nbytes, period):
        into = dst % period if period else dst

        def outward(a, b, group):  # bytes leaving a's group / entering b's group, per transfer (0 inside)
            away = a // group != dst // group
            out = np.bincount(a[away] // group, weights=nbytes[away])
            inn = np.bincount(b[away] // group, weights=nbytes[away])
            peak = np.zeros(len(a))
            peak[away] = np.maximum(out[a[away] // group], inn[b[away] // group])
            return peak

        peak = np.maximum(np.bincount(src, weights=nbytes)[src], np.bincount(into, weights=nbytes)[into])
        peak = np.maximum(peak, outward(src, into, half) / half)
        peak = np.maximum(peak, outward(src, into, pod) / pod)
        return peak, fat_tree_pair_traversals(half, src, dst)

    fold = group if group and group % pod == 0 else 0

    def shaped(step, latencies):
        from estimator.topology.partial import fat_tree_all_pairs_row, is_all_pairs

        n = step.shape[1] if step.shape is not None else 0
        row = shift_steps.fat_tree_row(step, n, half, bandwidth, latencies, params)  # shift steps (pairwise), any n
        if row is not None or fold:
            return row
        # all pairs over a partial last pod: from counts of ranks per edge / pod
        return fat_tree_all_pairs_row(step.shape, n, half, bandwidth, latencies, params) if (
            is_all_pairs(step.shape, n) and (group is None or n == group)) else None

    return compiled_from_loads(pats, loads, bandwidth, latency, 5, params, fold, shaped, sym=pod)


def rail_compiled(pats: Patterns, per_node: int, nodes: int, nvlink: float, nic: float, latency: float,
                  params: PricingParams, group: int | None = None) -> CompiledSchedule:
    """The same on :func:`estimator.topology.builders.rail_optimized` (``nodes`` GPUs, ``per_node``
    per server) with ECMP. Inside a server a transfer takes GPU -> NVSwitch -> GPU, between GPUs
    of one rail GPU -> rail switch -> GPU; otherwise (server a, rail i to server b, rail j) all
    shortest routes have 4 links and ECMP sends 1/2 through the NVSwitch and GPU (a, j) to rail j,
    1/4 rail i -> spine -> rail j, 1/4 rail i -> GPU (b, i) -> NVSwitch; the spine links carry a
    rail's whole capacity. Loads are summed per link class from those shares; a transfer's busiest
    link is the largest over every link its routes touch. ``group`` = the ranks, whole servers: a
    shift by P (whole servers) maps the step's routes onto themselves, so a P-periodic step is
    priced from its transfers out of ranks 0..P-1 (a GPU's loads are its class mod P's; a rail's
    spine link carries every copy: group / P times the base transfers' share)."""
    g = per_node
    servers = -(-nodes // g)
    rails = min(g, nodes) if servers > 1 else 0
    spine_bw = nic * servers

    def loads(src, dst, nbytes, period):
        a, i = np.divmod(src, g)
        b, j = np.divmod(dst, g)
        local, rail = a == b, (i == j) & (a != b)
        cross = ~local & ~rail
        w = nbytes
        relay_src, relay_dst = a * g + j, b * g + i  # GPU (a, j) and GPU (b, i)
        copies = 1
        if period:  # fold: GPUs by class mod P
            dst, relay_dst, copies = dst % period, relay_dst % period, group // period

        def count(idx, weight, sel, size):
            return np.bincount(idx[sel], weights=weight[sel], minlength=size)

        up_nv = (count(src, w, local, nodes) + count(src, w / 2, cross, nodes) + count(relay_dst, w / 4, cross, nodes))
        down_nv = (count(dst, w, local, nodes) + count(dst, w / 4, cross, nodes) + count(relay_src, w / 2, cross, nodes))
        up_nic = (count(src, w, rail, nodes) + count(src, w / 2, cross, nodes) + count(relay_src, w / 2, cross, nodes))
        down_nic = (count(dst, w, rail, nodes) + count(dst, 3 * w / 4, cross, nodes)
                    + count(relay_dst, w / 4, cross, nodes))
        to_spine = count(i, w / 4, cross, max(rails, 1)) * copies
        from_spine = count(j, w / 4, cross, max(rails, 1)) * copies
        peak = np.where(local, np.maximum(up_nv[src], down_nv[dst]) / nvlink,
                        np.maximum(up_nic[src], down_nic[dst]) / nic)
        if cross.any():
            s, d, rs, rd = src[cross], dst[cross], relay_src[cross], relay_dst[cross]
            nv = np.maximum.reduce([up_nv[s], down_nv[rs], up_nv[rd], down_nv[d]]) / nvlink
            ni = np.maximum.reduce([up_nic[s], up_nic[rs], down_nic[rd], down_nic[d]]) / nic
            sp = np.maximum(to_spine[i[cross]], from_spine[j[cross]]) / spine_bw
            peak[cross] = np.maximum.reduce([nv, ni, sp])
        hops = np.where(cross, 3, 1)  # switch traversals on the slowest route
        return peak, hops

    fold = group if group and group % g == 0 else 0
    shift_rows: dict[tuple, tuple] = {}

    def shaped(step, latencies):  # shift steps folding alike (shift_steps.shift_class) share one row
        key = shift_steps.shift_class(step, fold, g) if fold else None
        if key is not None and key not in shift_rows:
            shift_rows[key] = _step_row(step, loads, 1.0, latencies, params, fold, g)
        return shift_rows.get(key)

    # peaks are already seconds per byte of M
    return compiled_from_loads(pats, loads, 1.0, latency, 3, params, fold, shaped, sym=g)


def bcube_compiled(pats: Patterns, radix: int, levels: int, bandwidth: float, latency: float, params: PricingParams
                   ) -> CompiledSchedule | None:
    """The same on :func:`estimator.topology.builders.bcube` (ranks = the first servers) for steps
    whose every transfer goes to a server differing in exactly one digit (dimension-wise, radix-r,
    halving-doubling within a digit): its one shortest route is server -> that level's switch ->
    server, so a transfer's busiest link is its sender's up-link or its receiver's down-link of
    that level (each carrying the bytes all the step's transfers put on it) and its latency one
    switch's. A step with a transfer crossing several digits is routed over every correction order
    (ECMP: :func:`relayed_loads`)."""
    powers = radix ** np.arange(levels + 1)

    def loads(src, dst, nbytes, period):
        level = np.searchsorted(powers, np.abs(dst - src), side="right") - 1  # the highest digit that differs
        place = powers[level]
        if period or not ((src // (place * radix) == dst // (place * radix)) & (src % place == dst % place)).all():
            return relayed_loads(src, dst, nbytes, radix, levels, period)
        up = np.bincount(src * levels + level, weights=nbytes)
        down = np.bincount(dst * levels + level, weights=nbytes)
        return np.maximum(up[src * levels + level], down[dst * levels + level]), np.ones(len(src), dtype=np.int64)

    def shaped(step, latencies):  # digit / dimension-wise steps inside BCube digits: (k-1) transfers per port
        shape = step.shape
        if shape is None or shape[1] != radix**levels:
            return None
        if shape[0] == "digit" and shape[2] == 1 and shape[3] == shape[1] and levels > 1:
            return _bcube_all_pairs(shape, radix, levels, bandwidth, latencies, params)
        if shape[0] == "dimwise" and shape[2] == radix:
            k, nbytes, reduced, received = radix, shape[3], shape[4], levels * (radix - 1)
        elif shape[0] == "digit" and _within_digit(shape[2], shape[3], radix):
            k, nbytes, reduced, received = shape[3], shape[4], shape[5], shape[3] - 1
        else:
            return None
        peak = red = 0.0
        for _ in range(k - 1):  # summed in order, as np.bincount does
            peak += nbytes
        for _ in range(received):
            red += reduced
        return np.array([params.alpha_s + latencies[1]]), np.array([peak / bandwidth]), red * params.gamma

    chain = _relayed_chain(pats, radix, levels, bandwidth, latency, params, per_peer=False)
    if chain is not None:
        return chain

    def shaped_or_shift(step, latencies):  # shift steps (pairwise all-to-all): shift_steps.bcube_row
        row = shift_steps.bcube_row(step, radix, levels, bandwidth, latencies, params)
        return row if row is not None else shaped(step, latencies)

    # a shift by r^(levels-1) adds 1 to the top digit (mod r): it maps BCube onto itself
    return compiled_from_loads(pats, loads, bandwidth, latency, levels, params, radix**levels, shaped_or_shift,
                               radix ** (levels - 1))


def _relayed_chain(pats: Patterns, radix: int, levels: int, bandwidth: float, latency: float, params: PricingParams,
                   per_peer: bool) -> CompiledSchedule | None:
    """A pipelined chain's steps on BCube / SiPAC at once (:func:`estimator.topology.windows.chain_compiled`
    over the :func:`relayed_terms` of its transfers j -> j+1), or None if ``pats`` are not a chain."""
    from estimator.topology.windows import chain_compiled, chain_of

    chain = chain_of(pats)
    if chain is None:
        return None
    n, c = chain
    src = np.arange(n - 1)
    terms, hops, _ = relayed_terms(src, src + 1, np.full(n - 1, 1.0 / c), radix, levels, per_peer=per_peer)
    return chain_compiled(n, c, terms, hops, bandwidth, _latencies(latency, levels), params)


def _bcube_all_pairs(shape: tuple, radix: int, levels: int, bandwidth: float, latencies: np.ndarray,
                     params: PricingParams) -> tuple[np.ndarray, np.ndarray, float]:
    """The row of an all-pairs step (every server to every other, ``size`` each) on the whole BCube.
    Adding a constant to any digit (mod r) and permuting the levels map BCube and the step onto
    themselves and act transitively on the links of each direction, so every link carries the same
    load: the step's link volume over the links, n x (h summed over a server's peers) x size / (n
    levels) = (r-1) r^(levels-1) x size. A transfer differing in h digits crosses h switches."""
    n, size, reduced = shape[1], shape[4], shape[5]
    peers = (radix - 1) * radix ** (levels - 1)
    c0 = params.alpha_s + latencies[1:levels + 1]
    red = 0.0
    for _ in range(n - 1):  # every server receives n-1 transfers (summed in order, as np.bincount does)
        red += reduced
    return c0, np.full(levels, peers * size / bandwidth), red * params.gamma


def hamming_compiled(pats: Patterns, radix: int, levels: int, n: int, channel_bw: float, hop_s: float,
                     params: PricingParams, whole: bool) -> CompiledSchedule:
    """The same on SiPAC's direct-connect graph (:func:`estimator.fabrics.sipac.sipac_topology`:
    every server has its own channel to each server differing in one digit; servers relay, ECMP
    over correction orders): :func:`relayed_loads` with one link per (server, level, target
    digit) and ``hop_s`` per hop. An all-pairs step on the whole graph loads every channel
    equally (digit translations and level permutations act transitively on them):
    r^(levels-1) x size each. ``whole``: the group is the whole graph (periodic steps fold under
    top-digit shifts)."""
    def loads(src, dst, nbytes, period):
        return relayed_loads(src, dst, nbytes, radix, levels, period, per_peer=True)

    def shaped(step, latencies):
        shape = step.shape
        if shape is None or shape[1] != n:
            return None
        if shape[0] == "dimwise" and shape[2] == radix:  # every channel carries one transfer
            size, reduced, received = shape[3], shape[4], levels_of(n) * (radix - 1)
        elif shape[0] == "digit" and _within_digit(shape[2], shape[3], radix):
            size, reduced, received = shape[4], shape[5], shape[3] - 1
        elif whole and shape[0] == "digit" and shape[2] == 1 and shape[3] == n:
            red = 0.0
            for _ in range(n - 1):  # every server receives n-1 transfers (summed in order, as np.bincount does)
                red += shape[5]
            c1 = radix ** (levels - 1) * shape[4] / channel_bw
            return params.alpha_s + latencies[1:levels + 1], np.full(levels, c1), red * params.gamma
        else:
            return None
        red = 0.0
        for _ in range(received):
            red += reduced
        return np.array([params.alpha_s + latencies[1]]), np.array([size / channel_bw]), red * params.gamma

    def levels_of(m: int) -> int:
        out = 0
        while radix ** (out + 1) <= m:
            out += 1
        return out

    chain = _relayed_chain(pats, radix, levels, channel_bw, hop_s, params, per_peer=True)
    if chain is not None:
        return chain
    return compiled_from_loads(pats, loads, channel_bw, hop_s, levels, params, n if whole else 0, shaped,
                               radix ** (levels - 1))


def relayed_loads(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, radix: int, levels: int, period: int = 0,
                  per_peer: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(busiest link load, switches crossed) per transfer on BCube when transfers may differ in
    several digits: the link loads of :func:`relayed_terms` summed, and per transfer the largest on
    any of its routes."""
    terms, h, cells = relayed_terms(src, dst, nbytes, radix, levels, period, per_peer)
    load = np.zeros(2 * cells)
    for _, link, w in terms:
        load += np.bincount(link, weights=w, minlength=2 * cells)
    peak = np.zeros(len(src))
    for t, link, w in terms:  # a term names each transfer at most once: plain indexing is exact
        used = w > 0
        idx = t[used]
        peak[idx] = np.maximum(peak[idx], load[link[used]])
    return peak, h


def relayed_terms(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, radix: int, levels: int, period: int = 0,
                  per_peer: bool = False) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray, int]:
    """The bytes every transfer puts on every link of its routes on BCube, as groups of arrays
    (transfer index, link id, bytes; a group names a transfer at most once), with the digits each
    transfer crosses and the number of link cells per direction (up-links are ids 0..cells-1,
    down-links cells..2 cells-1).

    A transfer differing in the h digits D takes every order of correcting them
    (server -> that level's switch -> the server with the digit corrected, relaying), ECMP
    splitting its flow evenly at every server over the digits still to correct: so it passes the
    server x = src with the digits S of D corrected with weight |S|! (h-|S|)! / h!, and leaves x
    up level l in D - S with weight |S|! (h-|S|-1)! / h! (enters x down level l in S with weight
    (|S|-1)! (h-|S|)! / h!); 2^h h terms per transfer, each naming a (transfer, link) once.
    ``period`` P > 0: the
    transfers are those out of servers 0..P-1 of a step a shift by P maps onto itself (a
    multiple of r^(levels-1), which maps BCube onto itself): link loads are those of the link's
    class mod P. ``per_peer`` (SiPAC): a server has one channel per (level, peer) instead of one
    up- and one down-link per level; a channel's class is (its server's class, level, digit
    offset to the peer)."""
    place = radix ** np.arange(levels)
    ds, dd = (src[:, None] // place) % radix, (dst[:, None] // place) % radix
    differ = ds != dd
    h = differ.sum(axis=1)
    fact = [math.factorial(i) for i in range(levels + 1)]
    terms = []  # (transfer index, link id = server * levels + level, down?, weight)
    active = np.flatnonzero(differ.any(axis=0))  # levels some transfer corrects (the others carry nothing)
    for subset in range(1 << len(active)):
        chosen = np.zeros(levels, dtype=bool)
        chosen[[int(lv) for q, lv in enumerate(active) if (subset >> q) & 1]] = True
        ok = ~(chosen & ~differ).any(axis=1)  # S within D
        if not ok.any():
            continue
        t = np.flatnonzero(ok)
        k = int(chosen.sum())
        x = src[t] + ((dd[t] - ds[t]) * place * chosen).sum(axis=1)  # src with S corrected
        x = x % period if period else x
        ht = h[t]
        for lv in active.tolist():
            if per_peer:  # the channel x -> x with digit lv corrected, if lv is still to correct
                if chosen[lv]:
                    continue
                sel = differ[t, lv]
                frac = np.array([fact[k] * fact[m - k - 1] / fact[m] if m > k else 0.0 for m in range(levels + 1)])
                offset = (dd[t[sel], lv] - ds[t[sel], lv]) % radix
                terms.append((t[sel], (x[sel] * levels + lv) * radix + offset, False, nbytes[t[sel]] * frac[ht[sel]]))
            elif chosen[lv]:  # entered x down level lv, the last digit corrected
                frac = np.array([fact[k - 1] * fact[m - k] / fact[m] if m >= k else 0.0 for m in range(levels + 1)])
                terms.append((t, x * levels + lv, True, nbytes[t] * frac[ht]))
            else:  # leaves x up level lv, if lv is still to correct
                sel = differ[t, lv]
                frac = np.array([fact[k] * fact[m - k - 1] / fact[m] if m > k else 0.0 for m in range(levels + 1)])
                terms.append((t[sel], x[sel] * levels + lv, False, nbytes[t[sel]] * frac[ht[sel]]))
    cells = (period or radix**levels) * levels * (radix if per_peer else 1)
    return [(t, link + (cells if down else 0), w) for t, link, down, w in terms], h, cells


def _within_digit(stride: int, k: int, radix: int) -> bool:
    """True if a digit step (place value ``stride``, size k) only changes one base-``radix`` digit."""
    place = 1
    while place * radix <= stride:
        place *= radix
    sub = stride // place
    return stride % place == 0 and radix % (k * sub) == 0



def star_compiled(pats: Patterns, n: int, bandwidth: float, latency: float, params: PricingParams
                  ) -> CompiledSchedule:
    """The same on :func:`estimator.topology.builders.star` (``n`` ranks on one non-blocking switch,
    ``latency`` on the switch -> endpoint link): a route is the sender's up-link and the receiver's
    down-link, loaded with all the sender sends / the receiver receives in the step. The star maps
    onto itself under any rank permutation, so a P-periodic step is priced from its transfers out
    of ranks 0..P-1 (a receiver's load is its class mod P's)."""
    def loads(src, dst, nbytes, period):
        into = dst % period if period else dst
        up, down = np.bincount(src, weights=nbytes), np.bincount(into, weights=nbytes)
        return np.maximum(up[src], down[into]), np.ones(len(src), dtype=np.int64)

    def shaped(step, latencies):  # shift steps (pairwise all-to-all): one transfer per port
        return shift_steps.star_row(step, n, bandwidth, latencies, params)

    return compiled_from_loads(pats, loads, bandwidth, latency, 1, params, n, shaped)


def leaf_spine_compiled(pats: Patterns, n: int, per_leaf: int, spines: int, endpoint_bw: float, uplink_bw: float,
                        latencies: tuple[float, float, float], params: PricingParams) -> CompiledSchedule:
    """The same on :func:`estimator.topology.builders.leaf_spine` (ranks = the first endpoints, every
    ``per_leaf`` under one leaf) with ECMP: inside a leaf a route is the sender's up-link and the
    receiver's down-link; across leaves it also takes one of the ``spines`` spines, evenly, so every
    leaf -> spine link carries 1/spines of what leaves the leaf and every spine -> leaf link
    1/spines of what enters it. ``latencies`` = (leaf -> endpoint, leaf -> spine, spine -> leaf).
    Over whole leaves a step that a shift by P (a multiple of ``per_leaf``) maps onto itself is
    priced from its transfers out of ranks 0..P-1."""
    intra, lat_up, lat_spine = latencies
    route_latency = np.array([0.0, intra, lat_up + lat_spine + intra])

    def loads(src, dst, nbytes, period):
        into = dst % period if period else dst  # a receiver's class (a fold: see _step_row)
        a, b = src // per_leaf, into // per_leaf
        up, down = np.bincount(src, weights=nbytes), np.bincount(into, weights=nbytes)
        peak = np.maximum(up[src], down[into]) / endpoint_bw
        away = a != dst // per_leaf
        if away.any():
            out = np.bincount(a[away], weights=nbytes[away]) / spines / uplink_bw
            inn = np.bincount(b[away], weights=nbytes[away]) / spines / uplink_bw
            peak[away] = np.maximum(peak[away], np.maximum(out[a[away]], inn[b[away]]))
        return peak, np.where(away, 2, 1)

    def shaped(step, lat):  # a digit step over whole leaves, from (stride, k) alone
        return _leaf_spine_digit_row(step, n, per_leaf, spines, endpoint_bw, uplink_bw, lat, params)

    def shaped_or_shift(step, lat):  # shift steps (pairwise all-to-all) over any number of ranks
        row = shift_steps.leaf_spine_row(step, n, per_leaf, spines, endpoint_bw, uplink_bw, lat, params)
        return row if row is not None or not (fold and spines) else shaped(step, lat)

    fold = n if spines == 0 or n % per_leaf == 0 else 0  # whole leaves: a shift by a leaf maps it onto itself
    return compiled_from_loads(pats, loads, 1.0, 0.0, 2, params, fold, shaped_or_shift, per_leaf if spines else 1,
                               route_latency)


def _leaf_spine_digit_row(step: StepPattern, n: int, per_leaf: int, spines: int, endpoint_bw: float,
                          uplink_bw: float, latencies: np.ndarray, params: PricingParams
                          ) -> tuple[np.ndarray, np.ndarray, float] | None:
    """:func:`leaf_spine_compiled`'s row of a digit step (halving-doubling, recursive doubling,
    radix-k, direct) over ``n`` ranks filling whole leaves, without per-rank arrays: a rank sends
    and receives k - 1 blocks; when a digit's k blocks of ``stride`` ranks span several leaves
    (``stride * k`` a multiple of ``per_leaf``, ``per_leaf`` one of ``stride``, or ``stride`` a
    multiple of ``per_leaf``), k - k_in of them leave the leaf (k_in = blocks per leaf), and every
    leaf sends per_leaf (k - k_in) blocks over ``spines`` uplinks. None for any other step."""
    shape = step.shape
    if shape is None or shape[0] != "digit" or shape[1] != n or n % per_leaf:
        return None
    _, _, stride, k, nbytes, reduced = shape
    if stride % per_leaf == 0:
        k_in = 1
    elif per_leaf % stride == 0 and (stride * k) % per_leaf == 0:
        k_in = per_leaf // stride
    elif per_leaf % (stride * k) == 0:
        k_in = k
    else:
        return None
    port = repeat_sum(nbytes, k - 1) / endpoint_bw
    c0, c1 = [], []
    if k_in > 1:
        c0.append(params.alpha_s + latencies[1])
        c1.append(port)
    if k_in < k:
        leaf = repeat_sum(nbytes, per_leaf * (k - k_in)) / spines / uplink_bw
        c0.append(params.alpha_s + latencies[2])
        c1.append(max(port, leaf))
    return np.array(c0), np.array(c1), repeat_sum(reduced, k - 1) * params.gamma
