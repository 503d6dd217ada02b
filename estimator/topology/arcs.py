"""Routes as arcs on rings: link loads by difference arrays, a transfer's busiest link by range maxima.

On the ring of :func:`estimator.topology.builders.ring` (endpoint i -> i+1 links, and i+1 -> i if
bidirectional; shortest paths, a tie goes the positive way as the graph router's lowest-link-id
rule does) a transfer's route is an arc: ``h`` consecutive links in one direction. A step's link
loads are then a difference array over arcs (one cumulative sum per direction) and a transfer's
busiest link is a range maximum (a sparse table), so a step over n ranks costs O(n log n) array
work. A digit step (halving-doubling, recursive doubling, radix-k) along whole rings is priced from
(stride, k) alone (:func:`digit_ring_loads`). Used by :mod:`.ring`, :mod:`.torus` (a route is two
arcs) and the WDM ring of :mod:`estimator.fabrics.optical.wdm_ring`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from estimator.collectives.patterns import StepPattern, distinct
from estimator.collectives.pricing import PricingParams


def range_max(values: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
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
            out[sel] = range_max(np.concatenate([load, load], axis=1).ravel(), base, hops[sel])
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
    return range_max(load, lo, hi - lo + 1)


def ring_arc(src: np.ndarray, dst: np.ndarray, size: int, bidirectional: bool
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first link, links, forward?) of the route from position src to dst on a ring of ``size``."""
    ahead = (dst - src) % size
    forward = ahead <= size - ahead if bidirectional else np.ones(len(src), dtype=bool)
    hops = np.where(forward, ahead, size - ahead)
    return np.where(forward, src, (src - hops) % size), hops, forward


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
            peak[part] = range_max(np.concatenate([load, load]), a[part], rest[part])
        out[sel] = peak
    return out


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


def digit_fits(step: StepPattern, ranks: int, size: int, offset: int) -> bool:
    """True if ``step`` is a digit step over all ``ranks`` endpoints whose exchanges run along rings
    of ``size`` >= 3 nodes, one ring position every ``offset`` ranks (the stride a multiple of it,
    k x stride / offset dividing size): :func:`digit_ring_loads` prices it."""
    if step.shape is None or step.shape[0] != "digit" or step.shape[1] != ranks or size < 3:
        return False
    stride, k = step.shape[2], step.shape[3]
    if k > MAX_DIGIT:
        return False
    return stride % offset == 0 and size % (k * stride // offset) == 0


def ring_table(size: int, stride: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`digit_ring_loads` (bidirectional) as k x k tables of (links, load) by (digit, target digit)."""
    hops, load = np.zeros((k, k), dtype=np.int64), np.zeros((k, k), dtype=np.int64)
    d, e = np.repeat(np.arange(k), k), np.tile(np.arange(k), k)
    d, e = d[d != e], e[d != e]
    table = np.array(digit_ring_loads(size, stride, k, True))
    hops[d, e], load[d, e] = table[:, 0], table[:, 1]
    return hops, load


def digit_row(step: StepPattern, ranks: int, size: int, offset: int, bidirectional: bool, bandwidth: float,
               latencies: np.ndarray, params: PricingParams) -> tuple[np.ndarray, np.ndarray, float] | None:
    """:func:`step_row` of a digit step from :func:`digit_ring_loads` (see :func:`digit_fits`);
    None if the step is not one."""
    if not digit_fits(step, ranks, size, offset):
        return None
    _, _, stride, k, nbytes, reduced = step.shape
    classes = np.array(digit_ring_loads(size, stride // offset, k, bidirectional))
    # one (c0, c1) per class (a dominated pair never sets a step's time: no Pareto pass needed)
    c0, c1 = params.alpha_s + latencies[classes[:, 0]], classes[:, 1] * nbytes / bandwidth
    red = 0.0
    for _ in range(k - 1):  # every rank receives k-1 transfers (summed in order, as np.bincount does)
        red += reduced
    return c0, c1, red * params.gamma
