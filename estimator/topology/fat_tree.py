"""Analytic routing on the k-ary fat tree (:func:`estimator.topology.builders.fat_tree`): up/down
ECMP, per-link-class loads.
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology import shift_steps
from estimator.topology.analytic import compiled_from_loads
from estimator.topology.builders import fat_tree_pair_traversals
from estimator.topology.partial import fat_tree_all_pairs_row, is_all_pairs


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
        n = step.shape[1] if step.shape is not None else 0
        row = shift_steps.fat_tree_row(step, n, half, bandwidth, latencies, params)  # shift steps (pairwise), any n
        if row is not None or fold:
            return row
        # all pairs over a partial last pod: from counts of ranks per edge / pod
        return fat_tree_all_pairs_row(step.shape, n, half, bandwidth, latencies, params) if (
            is_all_pairs(step.shape, n) and (group is None or n == group)) else None

    return compiled_from_loads(pats, loads, bandwidth, latency, 5, params, fold, shaped, sym=pod)
