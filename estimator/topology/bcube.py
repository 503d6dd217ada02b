"""Analytic routing on BCube (:func:`estimator.topology.builders.bcube`): a transfer changing one
digit goes server -> that level's switch -> server; others over every correction order
(:mod:`.relayed`); all-pairs steps on the whole BCube in closed form.
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology import shift_steps
from estimator.topology.analytic import compiled_from_loads
from estimator.topology.relayed import relayed_chain, relayed_loads, within_digit


def bcube_compiled(pats: Patterns, radix: int, levels: int, bandwidth: float, latency: float, params: PricingParams
                   ) -> CompiledSchedule | None:
    """The same on :func:`estimator.topology.builders.bcube` (ranks = the first servers) for steps
    whose every transfer goes to a server differing in exactly one digit (dimension-wise, radix-r,
    halving-doubling within a digit): its one shortest route is server -> that level's switch ->
    server, so a transfer's busiest link is its sender's up-link or its receiver's down-link of
    that level (each carrying the bytes all the step's transfers put on it) and its latency one
    switch's. A step with a transfer crossing several digits is routed over every correction order
    (ECMP: :func:`relayed_loads`)."""
    powers = radix ** np.arange(levels + 1)

    def loads(src, dst, nbytes, period):
        level = np.searchsorted(powers, np.abs(dst - src), side="right") - 1  # the highest digit that differs
        place = powers[level]
        if period or not ((src // (place * radix) == dst // (place * radix)) & (src % place == dst % place)).all():
            return relayed_loads(src, dst, nbytes, radix, levels, period)
        up = np.bincount(src * levels + level, weights=nbytes)
        down = np.bincount(dst * levels + level, weights=nbytes)
        return np.maximum(up[src * levels + level], down[dst * levels + level]), np.ones(len(src), dtype=np.int64)

    def shaped(step, latencies):  # digit / dimension-wise steps inside BCube digits: (k-1) transfers per port
        shape = step.shape
        if shape is None or shape[1] != radix**levels:
            return None
        if shape[0] == "digit" and shape[2] == 1 and shape[3] == shape[1] and levels > 1:
            return _bcube_all_pairs(shape, radix, levels, bandwidth, latencies, params)
        if shape[0] == "dimwise" and shape[2] == radix:
            k, nbytes, reduced, received = radix, shape[3], shape[4], levels * (radix - 1)
        elif shape[0] == "digit" and within_digit(shape[2], shape[3], radix):
            k, nbytes, reduced, received = shape[3], shape[4], shape[5], shape[3] - 1
        else:
            return None
        peak = red = 0.0
        for _ in range(k - 1):  # summed in order, as np.bincount does
            peak += nbytes
        for _ in range(received):
            red += reduced
        return np.array([params.alpha_s + latencies[1]]), np.array([peak / bandwidth]), red * params.gamma

    chain = relayed_chain(pats, radix, levels, bandwidth, latency, params, per_peer=False)
    if chain is not None:
        return chain

    def shaped_or_shift(step, latencies):  # shift steps (pairwise all-to-all): shift_steps.bcube_row
        row = shift_steps.bcube_row(step, radix, levels, bandwidth, latencies, params)
        return row if row is not None else shaped(step, latencies)

    # a shift by r^(levels-1) adds 1 to the top digit (mod r): it maps BCube onto itself
    return compiled_from_loads(pats, loads, bandwidth, latency, levels, params, radix**levels, shaped_or_shift,
                               radix ** (levels - 1))


def _bcube_all_pairs(shape: tuple, radix: int, levels: int, bandwidth: float, latencies: np.ndarray,
                     params: PricingParams) -> tuple[np.ndarray, np.ndarray, float]:
    """The row of an all-pairs step (every server to every other, ``size`` each) on the whole BCube.
    Adding a constant to any digit (mod r) and permuting the levels map BCube and the step onto
    themselves and act transitively on the links of each direction, so every link carries the same
    load: the step's link volume over the links, n x (h summed over a server's peers) x size / (n
    levels) = (r-1) r^(levels-1) x size. A transfer differing in h digits crosses h switches."""
    n, size, reduced = shape[1], shape[4], shape[5]
    peers = (radix - 1) * radix ** (levels - 1)
    c0 = params.alpha_s + latencies[1:levels + 1]
    red = 0.0
    for _ in range(n - 1):  # every server receives n-1 transfers (summed in order, as np.bincount does)
        red += reduced
    return c0, np.full(levels, peers * size / bandwidth), red * params.gamma
