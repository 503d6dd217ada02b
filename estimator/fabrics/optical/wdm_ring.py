"""Pricing explicit all-gather schedules on a bidirectional WDM ring (TeraRack), and OpTree's
explicit schedule.

Model (seed 002 Sec. III): a transfer of ``q`` items (an item = one node's ``d`` bytes) occupies
``q`` wavelengths on every directed fibre link of its shorter path round the ring (antipodal ties
alternate direction by source parity), one item per wavelength ("load balance"). A step whose busiest directed link carries
``L`` items needs ``ceil(L / w)`` time slots of ``d / B + a`` each (``w`` wavelengths per link).
This is the wavelength count the paper's Lemma 1 bounds (ceil(N^2/8) for one-stage all-to-all on
a ring), so the slot counts of the paper's step formulas can be checked from the schedules.

At scale the same slots are counted from the schedules' step patterns
(:mod:`estimator.collectives.patterns`: each distinct step once, with its repeat count) by
:func:`pattern_slots`: a step that a shift by P ranks maps onto itself (P even, so the parity rule
for antipodal pairs is shifted too) has link loads of period P, so only the transfers out of ranks
0..P-1 are routed and their arcs wrapped onto a P-link circle
(:func:`estimator.topology.arcs.folded_max_loads`). A 16,384-node one-stage all-to-all is
then 2 x 16,383 transfers, not 2.7e8 (equal to :func:`schedule_slots`, tested).
"""

from __future__ import annotations

import math

import numpy as np

from estimator.collectives.patterns import StepPattern, digit_step
from estimator.collectives.schedule import Schedule, Step, Transfer
from estimator.errors import EstimatorError
from estimator.topology.arcs import folded_max_loads


def _clockwise(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(clockwise hops, takes the clockwise arc?): the shorter arc; antipodal pairs alternate by
    source parity so the two directions share them."""
    fwd = (dst - src) % n
    return fwd, (fwd < n - fwd) | ((fwd == n - fwd) & (src % 2 == 0))


def max_link_load(n: int, src: np.ndarray, dst: np.ndarray, items: np.ndarray) -> float:
    """Largest number of items on one directed link when each (src -> dst) takes its shorter arc."""
    fwd, cw = _clockwise(n, src, dst)  # clockwise hops
    load = np.zeros((2, n + 1))
    # clockwise: links src, src+1, ..., src+fwd-1 (link i = i -> i+1); counter: links i -> i-1
    for direction, mask, start, length in (
        (0, cw, src, fwd),
        (1, ~cw, (src - (n - fwd)) % n, n - fwd),
    ):
        s, ln, q = start[mask], length[mask], items[mask]
        end = s + ln
        wrap = end > n
        np.add.at(load[direction], s, q)
        np.add.at(load[direction], np.minimum(end, n), -q)
        np.add.at(load[direction], np.zeros(int(wrap.sum()), dtype=int), q[wrap])
        np.add.at(load[direction], (end - n)[wrap], -q[wrap])
    return float(np.cumsum(load[:, :n], axis=1).max())


def step_slots(step: Step, n: int, w: int, item_bytes: float) -> int:
    ts = [t for t in step.transfers if t.src != t.dst and t.nbytes > 0]
    if not ts:
        return 0
    src = np.fromiter((t.src for t in ts), dtype=np.int64, count=len(ts))
    dst = np.fromiter((t.dst for t in ts), dtype=np.int64, count=len(ts))
    items = np.fromiter((math.ceil(t.nbytes / item_bytes - 1e-9) for t in ts), dtype=float, count=len(ts))
    return math.ceil(max_link_load(n, src, dst, items) / w - 1e-9)


def schedule_slots(schedule: Schedule, w: int) -> int:
    """Time slots of an all-gather schedule (items of ``nbytes / nodes``) on a ``w``-wavelength ring."""
    item = schedule.nbytes / schedule.nodes
    if item <= 0:
        raise EstimatorError("WDM ring pricing needs a positive buffer size")
    cache: dict[int, int] = {}
    total = 0
    for st in schedule.steps:
        key = id(st)
        if key not in cache:
            cache[key] = step_slots(st, schedule.nodes, w, item)
        total += cache[key]
    return total


def _slots(load: float, w: int) -> int:
    return math.ceil(load / w - 1e-9)


def pattern_step_slots(step: StepPattern, n: int, w: int) -> int:
    """:func:`step_slots` of one step pattern (sizes per byte of the buffer; an item = 1/n)."""
    fold = step.period if step.period and n % step.period == 0 else 0
    if fold % 2 and n % 2 == 0:
        fold *= 2  # the antipodal parity rule is invariant under even shifts only (2P divides n)
    src, dst, size, _ = step.first(fold) if fold else step.arrays
    keep = (src != dst) & (size > 0)
    if not keep.any():
        return 0
    src, dst = src[keep], dst[keep]
    items = np.ceil(size[keep] / (1.0 / n) - 1e-9)
    if not fold:
        return _slots(max_link_load(n, src, dst, items), w)
    fwd, cw = _clockwise(n, src, dst)
    hops = np.where(cw, fwd, n - fwd)
    start = np.where(cw, src, (src - hops) % n)
    return _slots(float(folded_max_loads(start, hops, cw, items, fold).max()), w)


def pattern_slots(pats: list[StepPattern], n: int, w: int) -> int:
    """Time slots of an all-gather given as step patterns (each distinct step once, x its count)."""
    return sum(p.count * pattern_step_slots(p, n, w) for p in pats)


def optree_patterns(n: int, digits: tuple[int, ...]) -> list[StepPattern]:
    """:func:`optree_schedule` as step patterns: stage j is a digit exchange (place value = the
    child group size, radix ``digits[j]``) of everything held, ``prod(digits[:j])`` items."""
    if math.prod(digits) != n:
        raise EstimatorError(f"OpTree: stage sizes {digits} do not multiply to {n}")
    group, held, out = n, 1, []
    for m in digits:
        out.append(digit_step(n, group // m, m, held / n, 0.0))
        group, held = group // m, held * m
    return out


def near_equal_digits(n: int, k: int) -> tuple[int, ...]:
    """At most k integer factors of n, as equal as possible (largest first); fewer when n has
    fewer prime factors than k (e.g. a prime n is one stage)."""
    digits = []
    rest = n
    for stages_left in range(k, 0, -1):
        target = rest ** (1 / stages_left)
        divisors = [d for d in range(2, rest + 1) if rest % d == 0]
        if not divisors:
            break
        d = min(divisors, key=lambda x: (abs(math.log(x) - math.log(target)), x))
        digits.append(d)
        rest //= d
        if rest == 1:
            break
    if rest != 1:
        raise EstimatorError(f"OpTree: {n} nodes do not split into {k} integer stages")
    return tuple(sorted(digits, reverse=True))


def optree_schedule(n: int, digits: tuple[int, ...], nbytes: float) -> Schedule:
    """OpTree all-gather (seed 002 Sec. III-D-1): stage j splits every group of the previous stage
    into ``digits[j]`` children; the nodes at the same position of sibling children exchange
    everything they hold (prod(digits[:j]) items) by one-stage all-to-all."""
    if math.prod(digits) != n:
        raise EstimatorError(f"OpTree: stage sizes {digits} do not multiply to {n}")
    item = nbytes / n
    group, held = n, 1
    steps = []
    for m in digits:
        child = group // m
        transfers = []
        for base in range(0, n, group):
            for pos in range(child):
                members = [base + c * child + pos for c in range(m)]
                transfers += [Transfer(a, b, held * item) for a in members for b in members if a != b]
        steps.append(Step(tuple(transfers)))
        group, held = child, held * m
    return Schedule("all_gather", "optree", n, nbytes, tuple(steps))
