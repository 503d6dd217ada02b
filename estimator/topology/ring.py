"""Analytic routing on the ring (:func:`estimator.topology.builders.ring`): every route is an arc
(:mod:`.arcs`); digit steps along the whole ring from (stride, k); shift steps from
:func:`.shift_steps.ring_row`; a step whose reverse was priced reuses its loads.
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology import shift_steps
from estimator.topology.analytic import MEMO_TRANSFERS, compiled_from_loads
from estimator.topology.arcs import arc_max_loads, digit_fits, digit_row, folded_max_loads, ring_arc


def ring_compiled(pats: Patterns, size: int, bidirectional: bool, bandwidth: float, latency: float,
                  params: PricingParams, group: int | None = None) -> CompiledSchedule:
    """A :class:`CompiledSchedule` of ``pats`` (ranks = the first endpoints) on the ring; ``group``
    ranks (default: the whole ring, where periodic steps fold, :func:`folded_max_loads`)."""
    reversed_steps: dict[tuple, tuple] = {}  # a step whose reverse was priced (a tree's broadcast level
    # after its reduce level): on a bidirectional ring every reversed arc runs over the same positions
    # the other way, so each transfer's busiest link carries the same, unless a route is a tie (n/2
    # links, both taken forward)

    def loads(src, dst, nbytes, period):
        start, hops, forward = ring_arc(src, dst, size, bidirectional)
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
        return digit_row(step, size, size, 1, bidirectional, bandwidth, latencies, params) if whole else None

    return compiled_from_loads(pats, loads, bandwidth, latency, size, params, size if whole else 0, shaped)


def ring_digits_only(pats: Patterns, size: int) -> bool:
    """Every step of ``pats`` is a digit step :func:`ring_compiled` prices without arrays."""
    return bool(pats) and all(digit_fits(p, size, size, 1) for p in pats)


def ring_hops(src: np.ndarray, dst: np.ndarray, size: int, bidirectional: bool) -> np.ndarray:
    """Links on the route from ``src`` to ``dst`` on the ring."""
    ahead = (dst - src) % size
    return np.minimum(ahead, size - ahead) if bidirectional else ahead
