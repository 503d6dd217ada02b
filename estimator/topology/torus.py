"""Analytic routing on the 2D torus (:func:`estimator.topology.builders.torus2d`): a route
(dimension order) is an arc along the source's row, then one along the destination's column
(:mod:`.arcs`); digit steps along rows, columns or split between both from (stride, k).
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns, StepPattern
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology import shift_steps
from estimator.topology.analytic import compiled_from_loads
from estimator.topology.arcs import (
    MAX_DIGIT,
    arc_max_loads,
    digit_fits,
    digit_row,
    range_max,
    ring_arc,
    ring_table,
)


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
        xs, xh, xf = ring_arc(c1, c2, cols, True)
        ys, yh, yf = ring_arc(r1, r2, rows, True)
        along = (folded_column_loads(c2, ys, yh, yf, nbytes, cols, period // cols) if period
                 else arc_max_loads(c2, ys, yh, yf, nbytes, cols, rows))
        return np.maximum(arc_max_loads(r1, xs, xh, xf, nbytes, rows, cols), along), xh + yh

    def shaped(step, latencies):  # digit exchanges along rows, columns, or split between them; shifts
        return (shift_steps.torus_row(step, rows, cols, bandwidth, latencies, params)
                or _torus_digit_row(step, rows, cols, bandwidth, latencies, params))

    fold = rows * cols if group == rows * cols and rows >= 3 else 0
    return compiled_from_loads(pats, loads, bandwidth, latency, rows + cols, params, fold, shaped, cols)


def torus_plan(step: StepPattern, rows: int, cols: int) -> tuple[str, int, int] | None:
    """How a digit step over the whole rows x cols torus is priced without arrays: ``("ring", size,
    offset)`` if its exchanges run along every row (its blocks fit in one) or every column (see
    :func:`digit_fits`); ``("split", a, b)`` if a block spans b whole rows of a digit values each
    (the low part of the digit moves along the row, the high part along the column); else None."""
    if step.shape is None or step.shape[0] != "digit" or step.shape[1] != rows * cols or step.shape[3] > MAX_DIGIT:
        return None
    stride, k = step.shape[2], step.shape[3]
    along = (cols, 1) if k * stride <= cols else (rows, cols)
    if digit_fits(step, rows * cols, *along):
        return ("ring", *along)
    if cols % stride or (k * stride) % cols or rows < 3 or cols < 3:
        return None
    a = cols // stride
    return ("split", a, k // a) if rows % (k // a) == 0 else None


def _torus_digit_row(step: StepPattern, rows: int, cols: int, bandwidth: float, latencies: np.ndarray,
                     params: PricingParams) -> tuple[np.ndarray, np.ndarray, float] | None:
    """:func:`step_row` of a digit step on the torus from :func:`torus_plan`. A split step's
    transfer from digit (dl, dh) to (el, eh) goes ``(el - dl) * stride`` along its row, then
    ``eh - dh`` rows along its destination's column: every row carries b copies of the row-wise
    digit step (stride, a), every column a copies of the column-wise one (1, b), so a transfer's
    busiest link is the larger of the two tables' entries for its classes."""
    plan = torus_plan(step, rows, cols)
    if plan is None:
        return None
    if plan[0] == "ring":
        return digit_row(step, rows * cols, plan[1], plan[2], True, bandwidth, latencies, params)
    _, a, b = plan
    _, _, stride, k, nbytes, reduced = step.shape
    (xh, xl), (yh, yl) = ring_table(cols, stride, a), ring_table(rows, 1, b)
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


def torus_digits_only(pats: Patterns, rows: int, cols: int) -> bool:
    """Every step of ``pats`` is a digit step :func:`torus_compiled` prices without arrays."""
    return bool(pats) and all(torus_plan(p, rows, cols) is not None for p in pats)


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
            peak[part] = range_max(np.concatenate([load, load], axis=1).ravel(), base[part], rest[part])
        out[sel] = peak
    return out


def torus_hops(src: np.ndarray, dst: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Links on the dimension-order route on a rows x cols torus (endpoint = row * cols + col)."""
    (r1, c1), (r2, c2) = np.divmod(src, cols), np.divmod(dst, cols)
    dc, dr = (c2 - c1) % cols, (r2 - r1) % rows
    return np.minimum(dc, cols - dc) + np.minimum(dr, rows - dr)


def torus_links(rows: int, cols: int) -> int:
    """Directed links of :func:`estimator.topology.builders.torus2d` (a 2-long ring is one cable)."""
    n = rows * cols
    return sum(2 * n if size > 2 else n if size == 2 else 0 for size in (rows, cols))
