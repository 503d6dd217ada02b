"""Closed-form rows of shift steps (pairwise all-to-all) on the analytic topologies, without arrays.

A shift step (:func:`estimator.collectives.patterns._shift`, shape ``("shift", n, by, size, red)``)
sends ``size`` bytes per byte of M from every rank i < n to rank (i + by) mod n, which reduces
``red`` of them; pairwise all-to-all is the n - 1 shifts by 1..n-1 (red 0), a one-way ring's step
a shift by 1 and a torus's column rings one by the row length
(:func:`estimator.collectives.patterns.ring_step`). Priced from its transfers' arrays a step costs O(n), a
schedule O(n^2) (268 M transfers at 16,384 ranks); here each step costs O(1) and gives the row
(candidate (c0, c1) pairs, reduction slope) :func:`estimator.topology.analytic.step_row` gives
from the arrays (tested equal to the graph compile, ``tests/test_shift_steps.py``). What makes it
closed form:

* **Blocks** (edge switches, pods, leaves: ranks [lo, lo + w) of a partition into blocks of w, the
  last one possibly partial). Of a block's w senders, ``max(0, w - by) + max(0, w - (n - by))``
  keep their transfer inside it (those below ``n - by`` whose target is below the block's end,
  and those wrapping round to a target at or past its start): :func:`block_leaving` is the rest.
  A block receives from outside as many as leave it (the same formula at n - by). So every full
  block carries the same load, and the partial last block its own.
* **Arcs** (rings, torus rows and columns): a shift moves a run of consecutive ranks by the same
  route length, so a link's load is a count of a run's members in a window; the largest over
  the links a run's routes use is the largest at a breakpoint of that piecewise-linear count
  (:func:`ring_runs_peak`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from estimator.collectives.pricing import PricingParams

Row = tuple[np.ndarray, np.ndarray, float]


def shift_of(step, n: int) -> tuple[int, float] | None:
    """(by, size) if ``step`` is a shift step over exactly ``n`` ranks, else None."""
    shape = getattr(step, "shape", None)
    if shape is None or shape[0] != "shift" or shape[1] != n:
        return None
    return shape[2] % n, shape[3]


def block_leaving(w: int, by: int, n: int) -> int:
    """Senders of a block of ``w`` consecutive ranks (of n) whose shift-by-``by`` target is outside it."""
    return w - max(0, w - by) - max(0, w - (n - by))


def block_widths(n: int, width: int) -> list[int]:
    """Widths of the blocks ranks 0..n-1 fall into (blocks of ``width``, the last one partial)."""
    return ([width] if n >= width else []) + ([n % width] if n % width else [])


def received(step, params: PricingParams) -> float:
    """The reduction slope of a shift step: every rank receives one transfer, reducing the shape's
    ``red`` bytes (a ring's reduce-scatter step; 0 for pairwise all-to-all, which only moves data)."""
    shape = step.shape
    return (float(shape[4]) if len(shape) > 4 else 0.0) * params.gamma


def _row(pairs: list[tuple[float, float]], reduction: float) -> Row:
    """A row from (c0, c1) pairs and the step's reduction slope."""
    return np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]), reduction


def star_row(step, n: int, bandwidth: float, latencies: np.ndarray, params: PricingParams) -> Row | None:
    """On a non-blocking star every rank sends and receives one transfer: its bytes on each port."""
    shift = shift_of(step, n)
    if shift is None or shift[0] == 0:
        return None
    return _row([(params.alpha_s + latencies[1], shift[1] / bandwidth)], received(step, params))


def fat_tree_row(step, n: int, half: int, bandwidth: float, latencies: np.ndarray, params: PricingParams
                 ) -> Row | None:
    """On the k-ary fat tree (any n, a partial last edge / pod included): a host link carries its
    one transfer's bytes b; an edge's up-links 1/(k/2) of what leaves it, at most its k/2 hosts'
    b each, a pod's core links 1/(k/2)^2 of at most (k/2)^2 hosts': never more than b. So every
    transfer takes b / bandwidth, and the step's classes differ in switch traversals only: 1 if a
    transfer stays under its edge switch, 3 if it leaves it but not its pod, 5 if it leaves the pod."""
    shift = shift_of(step, n)
    if shift is None or shift[0] == 0:
        return None
    by, size = shift

    def leaving(width: int) -> int:  # transfers leaving their block, over all blocks of ``width``
        full = n // width
        return full * block_leaving(width, by, n) + (block_leaving(n % width, by, n) if n % width else 0)

    leave_edge, leave_pod = leaving(half), leaving(half * half)
    traversals = [h for h, present in ((1, leave_edge < n), (3, leave_edge > leave_pod), (5, leave_pod > 0))
                  if present]
    return _row([(params.alpha_s + latencies[h], size / bandwidth) for h in traversals], received(step, params))


def leaf_spine_row(step, n: int, per_leaf: int, spines: int, endpoint_bw: float, uplink_bw: float,
                   latencies: np.ndarray, params: PricingParams) -> Row | None:
    """On the leaf-spine (ranks = the first n endpoints, any n): every endpoint port carries b; a
    transfer leaving its leaf also crosses its leaf's and the target leaf's uplinks, each carrying
    1/spines of the b x (senders leaving the leaf) (:func:`block_leaving`, the same for every full
    leaf, its own for a partial last one)."""
    shift = shift_of(step, n)
    if shift is None or shift[0] == 0:
        return None
    by, size = shift
    port = size / endpoint_bw
    widths = block_widths(n, per_leaf)
    leaving = [block_leaving(w, by, n) for w in widths]
    pairs = []
    if any(x < w for x, w in zip(leaving, widths, strict=True)):
        pairs.append((params.alpha_s + latencies[1], port))
    if any(leaving):
        if spines == 0:
            return None
        uplink = max(size * x for x in leaving) / spines / uplink_bw  # (size x count: within an ulp per term)
        pairs.append((params.alpha_s + latencies[2], max(port, uplink)))
    return _row(pairs, received(step, params))


# ---- rings and tori ---------------------------------------------------------------------------
def _ring_hops(ahead: int, size: int, bidirectional: bool) -> tuple[int, bool]:
    """(links, forward?) of the route ``ahead`` positions further round a ring of ``size`` (the
    shorter way, a tie forward, as :func:`estimator.topology.arcs.ring_arc`)."""
    ahead %= size
    if not bidirectional or ahead <= size - ahead:
        return ahead, True
    return size - ahead, False


@lru_cache(maxsize=4096)
def ring_runs_peak(runs: tuple[tuple[int, int, int, bool], ...], size: int) -> tuple[int, ...]:
    """Per run (first source, sources, links, forward?) of a step on a ring of ``size``: the
    largest number of the step's arcs (all runs, same direction) on any link of the run's routes.
    An arc from j forward uses links j..j+h-1, backward links j-h..j-1 (link i joins i and i+1).
    The count on a link x (starts j of a run with (x - j) mod size < h) is piecewise linear in x,
    so its largest over the run's links (an interval) is at the interval's ends or a breakpoint of
    some run's count; all runs are evaluated at all those points at once."""
    first = np.array([(a if fwd else a - h) % size for a, _, h, fwd in runs], dtype=np.int64)
    count = np.array([c for _, c, _, _ in runs], dtype=np.int64)
    hops = np.array([h for _, _, h, _ in runs], dtype=np.int64)
    fwd = np.array([f for _, _, _, f in runs])
    marks = np.stack([first, first + count - 1, first + hops - 1, first + count + hops - 2]).ravel()
    points = sorted(set((np.concatenate([marks - 1, marks, marks + 1]) % size).tolist()))
    x = np.array(points, dtype=np.int64)[:, None]  # (point, 1)
    covered = np.zeros((len(x), len(runs)), dtype=np.int64)
    for lift in (-1, 0, 1, 2):  # the cyclic window [x - h + 1, x] unrolled onto [first, first + count)
        lo = np.maximum(x - hops + 1 + lift * size, first)
        hi = np.minimum(x + lift * size, first + count - 1)
        covered += np.maximum(0, hi - lo + 1)
    covered[:, hops == 0] = 0
    load = {d: covered[:, fwd == d].sum(axis=1) for d in (True, False)}  # arcs on each point's link
    span = np.minimum(count + hops - 1, size)  # a run's routes use links first .. first + span - 1
    inside = (x - first) % size < span  # (point, run)
    out = []
    for r in range(len(runs)):
        use = inside[:, r]
        out.append(int(load[bool(fwd[r])][use].max()) if hops[r] and count[r] and use.any() else 0)
    return tuple(out)


def ring_row(step, n: int, size: int, bidirectional: bool, bandwidth: float, latencies: np.ndarray,
             params: PricingParams) -> Row | None:
    """On a ring of ``size`` nodes (ranks = the first n <= size): ranks below n - by go ``by``
    positions forward, the others wrap to ``by - n`` (the same when n = size): two runs of arcs."""
    shift = shift_of(step, n)
    if shift is None or shift[0] == 0:
        return None
    by, nbytes = shift
    if n == size:  # the whole ring: every rank goes the same way, every link of it carries h arcs
        h, _ = _ring_hops(by, size, bidirectional)
        return _row([(params.alpha_s + latencies[h], h * nbytes / bandwidth)], received(step, params))
    runs = []
    for first, count, ahead in ((0, n - by, by), (n - by, by, by - n)):
        if count:
            runs.append((first, count, *_ring_hops(ahead, size, bidirectional)))
    peaks = ring_runs_peak(tuple(runs), size)
    return _row([(params.alpha_s + latencies[h], peak * nbytes / bandwidth)
                 for (_, _, h, _), peak in zip(runs, peaks, strict=True)], received(step, params))


def torus_row(step, rows: int, cols: int, bandwidth: float, latencies: np.ndarray, params: PricingParams
              ) -> Row | None:
    """On the rows x cols torus (ranks = the first n endpoints, row by row; fewer than all:
    :func:`_torus_part_row`). On the whole torus (dimension order: along the source's row, then the target's
    column): a shift by q rows and t columns moves every rank t columns (every row link of the
    route's direction carries one arc per position of its length), and into column c every rank
    q rows, or q + 1 with the carry (c < t; the same for the whole column): two classes."""
    n = step.shape[1] if getattr(step, "shape", None) is not None else 0
    shift = shift_of(step, n) if 2 <= n <= rows * cols else None
    if shift is None or shift[0] == 0:
        return None
    if n < rows * cols:
        return _torus_part_row(*shift, n, rows, cols, bandwidth, latencies, params, received(step, params))
    (q, t), nbytes = divmod(shift[0], cols), shift[1]
    x, _ = _ring_hops(t, cols, True)
    pairs = []
    for carry in ((0, 1) if t else (0,)):
        y, _ = _ring_hops(q + carry, rows, True)
        pairs.append((params.alpha_s + latencies[x + y], max(x, y) * nbytes / bandwidth))
    return _row(pairs, received(step, params))



def _torus_part_row(by: int, nbytes: float, n: int, rows: int, cols: int, bandwidth: float,
                    latencies: np.ndarray, params: PricingParams, reduction: float) -> Row:
    """A shift over the first n < rows x cols endpoints of the torus: ranks below n - by move
    ``by`` (run A), the others ``by - n`` (run B); each run moves t columns (its offset mod cols)
    and q or q + 1 rows (with the carry): up to four classes (run, carry), each with one route.
    A row's sources split into at most four runs of columns (A / B, then carry or not), so its
    row links' loads are :func:`ring_runs_peak` of those; rows come in a few kinds (wholly A,
    the row where B starts, wholly B, the partial last row), one of each is evaluated. A
    column's targets come from one A run of rows and one B run, each with one row shift (its
    carry is the column's: below t), and columns change kind only where some run's source
    column crosses the carry or the end of run A / of the ranks: one column per kind."""
    split = n - by
    offset = {"A": by, "B": by - n}
    t = {k: d % cols for k, d in offset.items()}
    x_route = {k: _ring_hops(t[k], cols, True) for k in offset}
    y_route = {(k, c): _ring_hops((offset[k] - t[k]) // cols + c, rows, True) for k in offset for c in (0, 1)}
    x_peak: dict[tuple, int] = {}
    y_peak: dict[tuple, int] = {}
    full, rest = divmod(n, cols)
    first_b = split // cols
    for r in sorted({0, first_b - 1, first_b, first_b + 1, full - 1, full}):
        if not 0 <= r < full + (rest > 0):
            continue
        width = cols if r < full else rest
        a_end = min(max(split - r * cols, 0), width)  # columns [0, a_end) are in run A, the rest in B
        parts = []
        for k, (lo, hi) in (("A", (0, a_end)), ("B", (a_end, width))):
            edge = cols - t[k]  # source columns from here on carry
            for carry, (u, v) in ((0, (lo, min(hi, edge))), (1, (max(lo, edge), hi))):
                if v > u:
                    parts.append(((k, carry), (u, v - u, *x_route[k])))
        for (cls, _), peak in zip(parts, ring_runs_peak(tuple(run for _, run in parts), cols), strict=True):
            x_peak[cls] = max(x_peak.get(cls, 0), peak)
    kinds = {0, t["A"], t["B"], (t["A"] + split) % cols, (t["B"] + split) % cols, (t["B"] + n) % cols}
    for c in sorted(kinds):
        source_a, source_b = (c - t["A"]) % cols, (c - t["B"]) % cols
        below = first_b + (source_b < split % cols)
        groups = [(("A", int(c < t["A"])), 0, first_b + (source_a < split % cols)),
                  (("B", int(c < t["B"])), below, full + (source_b < rest) - below)]
        groups = [(cls, r0, m) for cls, r0, m in groups if m > 0]
        peaks = ring_runs_peak(tuple((r0, m, *y_route[cls]) for cls, r0, m in groups), rows)
        for (cls, _, _), peak in zip(groups, peaks, strict=True):
            y_peak[cls] = max(y_peak.get(cls, 0), peak)
    return _row([(params.alpha_s + latencies[x_route[cls[0]][0] + y_route[cls][0]],
                  max(peak, y_peak.get(cls, 0)) * nbytes / bandwidth) for cls, peak in sorted(x_peak.items())],
                reduction)


def shift_class(step, n: int, period: int) -> tuple | None:
    """A key equal for shift steps whose transfers out of ranks 0..period-1 are the same up to
    targets' multiples of ``period`` beyond the first block (shifts by period..n-period with one
    residue): on a fabric a shift by ``period`` maps onto itself, such steps fold (:func:`_step_row`)
    to the same row. None if ``step`` is not a shift step over n ranks."""
    shift = shift_of(step, n)
    if shift is None:
        return None
    by, size = shift
    red = step.shape[4] if len(step.shape) > 4 else 0.0
    if period <= by <= n - period:
        return ("bulk", by % period, size, red)
    return ("edge", by, size, red)



def bcube_row(step, radix: int, levels: int, bandwidth: float, latencies: np.ndarray, params: PricingParams
              ) -> Row | None:
    """On the whole BCube (ECMP over digit-correction orders, :func:`~estimator.topology.relayed.
    relayed_loads`) every transfer's busiest link carries exactly one transfer's bytes b, and the
    longest routes correct every digit from the lowest nonzero digit d0 of ``by`` up (L - d0 switches).

    Why. Adding ``by`` digit by digit, a transfer changes digit d iff (by_d + carry_d) mod r != 0.
    A route through server x, having corrected the digits S, then going up level l, belongs to the
    one source whose carries, recomputed digit by digit from x (un-correcting S), are consistent:
    one candidate source per S. Draw one uniform order of all L digits; each transfer's routes are
    that order restricted to its digits (ECMP), and the candidate of S uses the link iff exactly S
    of its digits come before l. Two such S, S' differ first at a digit m, below which their
    carries agree, so both change m or neither: m is in both or neither, a contradiction. So the
    link's load is at most b (disjoint events). For l = d0 the greedy S (from the lowest digit up:
    the digits before l that the candidate changes) always exists, so the sender's up-link of
    level d0, which its own routes start on, carries exactly b. Every level above d0 can be
    changed by some source (choose the carries), so some transfer takes L - d0 switches."""
    n = radix**levels
    shift = shift_of(step, n)
    if shift is None or shift[0] == 0:
        return None
    by, size = shift
    d0 = 0
    while by % radix == 0:
        by //= radix
        d0 += 1
    return _row([(params.alpha_s + latencies[levels - d0], size / bandwidth)], received(step, params))
