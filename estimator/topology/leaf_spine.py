"""Analytic routing on the leaf-spine (:func:`estimator.topology.builders.leaf_spine`): ECMP over
the spines; digit steps over whole leaves from (stride, k).
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns, StepPattern
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology import shift_steps
from estimator.topology.analytic import compiled_from_loads
from estimator.topology.partial import repeat_sum


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
        into = dst % period if period else dst  # a receiver's class (a fold: see step_row)
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
        return leaf_spine_digit_row(step, n, per_leaf, spines, endpoint_bw, uplink_bw, lat, params)

    def shaped_or_shift(step, lat):  # shift steps (pairwise all-to-all) over any number of ranks
        row = shift_steps.leaf_spine_row(step, n, per_leaf, spines, endpoint_bw, uplink_bw, lat, params)
        return row if row is not None or not (fold and spines) else shaped(step, lat)

    fold = n if spines == 0 or n % per_leaf == 0 else 0  # whole leaves: a shift by a leaf maps it onto itself
    return compiled_from_loads(pats, loads, 1.0, 0.0, 2, params, fold, shaped_or_shift, per_leaf if spines else 1,
                               route_latency)


def leaf_spine_digit_row(step: StepPattern, n: int, per_leaf: int, spines: int, endpoint_bw: float,
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
