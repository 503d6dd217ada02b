"""Analytic routing on SiPAC's direct-connect graph (a Hamming graph: every server has a channel to
each server differing in one digit; servers relay, ECMP over correction orders, :mod:`.relayed`).
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology.analytic import compiled_from_loads
from estimator.topology.relayed import relayed_chain, relayed_loads, within_digit


def hamming_compiled(pats: Patterns, radix: int, levels: int, n: int, channel_bw: float, hop_s: float,
                     params: PricingParams, whole: bool) -> CompiledSchedule:
    """The same on SiPAC's direct-connect graph (:func:`estimator.fabrics.sipac.sipac_topology`:
    every server has its own channel to each server differing in one digit; servers relay, ECMP
    over correction orders): :func:`relayed_loads` with one link per (server, level, target
    digit) and ``hop_s`` per hop. An all-pairs step on the whole graph loads every channel
    equally (digit translations and level permutations act transitively on them):
    r^(levels-1) x size each. ``whole``: the group is the whole graph (periodic steps fold under
    top-digit shifts)."""
    def loads(src, dst, nbytes, period):
        return relayed_loads(src, dst, nbytes, radix, levels, period, per_peer=True)

    def shaped(step, latencies):
        shape = step.shape
        if shape is None or shape[1] != n:
            return None
        if shape[0] == "dimwise" and shape[2] == radix:  # every channel carries one transfer
            size, reduced, received = shape[3], shape[4], levels_of(n) * (radix - 1)
        elif shape[0] == "digit" and within_digit(shape[2], shape[3], radix):
            size, reduced, received = shape[4], shape[5], shape[3] - 1
        elif whole and shape[0] == "digit" and shape[2] == 1 and shape[3] == n:
            red = 0.0
            for _ in range(n - 1):  # every server receives n-1 transfers (summed in order, as np.bincount does)
                red += shape[5]
            c1 = radix ** (levels - 1) * shape[4] / channel_bw
            return params.alpha_s + latencies[1:levels + 1], np.full(levels, c1), red * params.gamma
        else:
            return None
        red = 0.0
        for _ in range(received):
            red += reduced
        return np.array([params.alpha_s + latencies[1]]), np.array([size / channel_bw]), red * params.gamma

    def levels_of(m: int) -> int:
        out = 0
        while radix ** (out + 1) <= m:
            out += 1
        return out

    chain = relayed_chain(pats, radix, levels, channel_bw, hop_s, params, per_peer=True)
    if chain is not None:
        return chain
    return compiled_from_loads(pats, loads, channel_bw, hop_s, levels, params, n if whole else 0, shaped,
                               radix ** (levels - 1))
