"""Analytic routing on a ring: price step patterns without building routes or a graph search.

On the ring of :func:`estimator.topology.builders.ring` (endpoint i -> i+1 links, and i+1 -> i if
bidirectional; shortest paths, a tie goes the positive way as the graph router's lowest-link-id
rule does) a transfer's route is an arc: ``h`` consecutive links in one direction. A step's link
loads are then a difference array over arcs (one cumulative sum per direction) and a transfer's
busiest link is a range maximum (a sparse table), so a step over n ranks costs O(n log n) array
work and a schedule is priced from its distinct :class:`~estimator.collectives.patterns.StepPattern`
s. It computes the numbers :func:`estimator.collectives.pricing.compile_schedule` computes on that
topology (tested equal to 1e-12): per transfer ``c0 = α + h·L`` and ``c1 = max load / B`` on its
arc, reductions at the busiest receiver.
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns, StepPattern
from estimator.collectives.pricing import CompiledSchedule, PricingParams, pareto


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
    for lv in np.unique(level):
        sel = level == lv
        t = table[lv]
        s, e = start[sel], start[sel] + length[sel] - (1 << int(lv))
        out[sel] = np.maximum(t[s], t[e])
    return out


def ring_step(step: StepPattern, size: int, bidirectional: bool, bandwidth: float, latencies: np.ndarray,
              params: PricingParams) -> tuple[np.ndarray, np.ndarray, float]:
    """(c0, c1, reduction slope) of one step on a ``size``-node ring (see the module docstring)."""
    moving = step.src != step.dst
    if not moving.any():
        return np.zeros(1), np.zeros(1), 0.0
    src, dst, nbytes = step.src[moving], step.dst[moving], step.size[moving]
    ahead = (dst - src) % size
    forward = ahead <= size - ahead if bidirectional else np.ones(len(src), dtype=bool)
    hops = np.where(forward, ahead, size - ahead)
    start = np.where(forward, src, (src - hops) % size)  # backward link i carries i+1 -> i
    c1 = np.empty(len(src))
    for direction in (True, False):
        sel = forward == direction
        if not sel.any():
            continue
        diff = np.zeros(2 * size + 1)
        np.add.at(diff, start[sel], nbytes[sel])
        np.add.at(diff, start[sel] + hops[sel], -nbytes[sel])
        cum = np.cumsum(diff[:-1])
        load = (cum[:size] + cum[size:]) / bandwidth
        c1[sel] = _range_max(np.concatenate([load, load]), start[sel], hops[sel])
    c0 = params.alpha_s + latencies[hops]
    red = np.bincount(dst, weights=step.red[moving]).max() * params.gamma
    c0, c1 = pareto(c0, c1)
    return c0, c1, float(red)


def ring_compiled(pats: Patterns, size: int, bidirectional: bool, bandwidth: float, latency: float,
                  params: PricingParams) -> CompiledSchedule:
    """A :class:`CompiledSchedule` of ``pats`` (ranks = the first endpoints) on the ring."""
    latencies = np.concatenate([[0.0], np.cumsum(np.full(size, latency))])  # h links: summed as a route is
    rows = [ring_step(p, size, bidirectional, bandwidth, latencies, params) for p in pats]
    width = max((len(r[0]) for r in rows), default=1)
    c0 = np.full((len(rows), width), -np.inf)
    c1 = np.zeros((len(rows), width))
    for i, (a, b, _) in enumerate(rows):
        c0[i, : len(a)], c1[i, : len(b)] = a, b
    weight = np.array([p.count for p in pats], dtype=float)
    extra = np.full(len(rows), params.step_overhead_s)
    return CompiledSchedule(c0, c1, np.array([r[2] for r in rows]), extra, weight, int(weight.sum()),
                            params.fixed_s, 0, params.reconfig_s)


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
