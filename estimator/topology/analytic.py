"""Analytic routing: price a schedule's step patterns from per-transfer link loads, without building
routes or searching a graph.

A fabric with a regular topology gives, for a step's transfers (``src``, ``dst``, bytes), each
transfer's busiest link load and route length (``loads``); :func:`step_row` turns that into the
step's (c0, c1) pairs — per transfer ``c0 = alpha + route latency`` and ``c1 = max load /
bandwidth``, Pareto-reduced — and its reduction slope at the busiest receiver, which is what
:func:`estimator.collectives.pricing.compile_schedule` computes on the same topology's graph (each
topology's module is tested equal to it, to 1e-12). :func:`compiled_from_loads` does this for
every distinct step of a schedule, folding periodic steps on topologies that a rank shift maps
onto itself and sharing loads between steps that move the same bytes between the same ranks.

Each topology's loads live in its own module: :mod:`.ring` (arcs on a ring, shared machinery in
:mod:`.arcs`), :mod:`.torus` (two arcs, dimension order), :mod:`.fat_tree` (up/down ECMP),
:mod:`.rail` (the rail-optimised SuperPOD), :mod:`.bcube` and :mod:`.hamming` (SiPAC; ECMP over
digit-correction orders, :mod:`.relayed`), :mod:`.star` (one switch), :mod:`.leaf_spine`,
:mod:`.btree` (the OCS's binary-tree wiring); shift steps (pairwise all-to-all) in
:mod:`.shift_steps`, pipelined chains in :mod:`.windows`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from estimator.collectives.patterns import Patterns, StepPattern
from estimator.collectives.pricing import CompiledSchedule, PricingParams, pareto


def step_row(step: StepPattern, loads, bandwidth: float, latencies: np.ndarray, params: PricingParams,
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


@lru_cache(maxsize=16)
def route_latencies(latency: float, longest: int) -> np.ndarray:
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
    periodic steps fold (:func:`step_row`) and a step that is another shifted by a multiple of
    ``sym`` (``StepPattern.translate``) reuses its row."""
    latencies = route_latencies(latency, longest) if route_latency is None else route_latency
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
        out = (shaped and shaped(p, latencies)) or step_row(p, same_loads, bandwidth, latencies, params, fold, sym)
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
