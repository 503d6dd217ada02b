"""Analytic routing on one non-blocking switch (:func:`estimator.topology.builders.star`)."""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology import shift_steps
from estimator.topology.analytic import compiled_from_loads


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
