"""Routes that correct several digits, relayed by servers (BCube, SiPAC): ECMP over every order of
correcting the digits a transfer changes, as terms (transfer, link, bytes); pipelined chains priced
all at once from those terms (:mod:`.windows`).
"""

from __future__ import annotations

import math

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology.analytic import route_latencies
from estimator.topology.windows import chain_compiled, chain_of


def relayed_loads(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, radix: int, levels: int, period: int = 0,
                  per_peer: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(busiest link load, switches crossed) per transfer on BCube when transfers may differ in
    several digits: the link loads of :func:`relayed_terms` summed, and per transfer the largest on
    any of its routes."""
    terms, h, cells = relayed_terms(src, dst, nbytes, radix, levels, period, per_peer)
    load = np.zeros(2 * cells)
    for _, link, w in terms:
        load += np.bincount(link, weights=w, minlength=2 * cells)
    peak = np.zeros(len(src))
    for t, link, w in terms:  # a term names each transfer at most once: plain indexing is exact
        used = w > 0
        idx = t[used]
        peak[idx] = np.maximum(peak[idx], load[link[used]])
    return peak, h


def relayed_terms(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, radix: int, levels: int, period: int = 0,
                  per_peer: bool = False) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray, int]:
    """The bytes every transfer puts on every link of its routes on BCube, as groups of arrays
    (transfer index, link id, bytes; a group names a transfer at most once), with the digits each
    transfer crosses and the number of link cells per direction (up-links are ids 0..cells-1,
    down-links cells..2 cells-1).

    A transfer differing in the h digits D takes every order of correcting them
    (server -> that level's switch -> the server with the digit corrected, relaying), ECMP
    splitting its flow evenly at every server over the digits still to correct: so it passes the
    server x = src with the digits S of D corrected with weight |S|! (h-|S|)! / h!, and leaves x
    up level l in D - S with weight |S|! (h-|S|-1)! / h! (enters x down level l in S with weight
    (|S|-1)! (h-|S|)! / h!); 2^h h terms per transfer, each naming a (transfer, link) once.
    ``period`` P > 0: the
    transfers are those out of servers 0..P-1 of a step a shift by P maps onto itself (a
    multiple of r^(levels-1), which maps BCube onto itself): link loads are those of the link's
    class mod P. ``per_peer`` (SiPAC): a server has one channel per (level, peer) instead of one
    up- and one down-link per level; a channel's class is (its server's class, level, digit
    offset to the peer)."""
    place = radix ** np.arange(levels)
    ds, dd = (src[:, None] // place) % radix, (dst[:, None] // place) % radix
    differ = ds != dd
    h = differ.sum(axis=1)
    fact = [math.factorial(i) for i in range(levels + 1)]
    terms = []  # (transfer index, link id = server * levels + level, down?, weight)
    active = np.flatnonzero(differ.any(axis=0))  # levels some transfer corrects (the others carry nothing)
    for subset in range(1 << len(active)):
        chosen = np.zeros(levels, dtype=bool)
        chosen[[int(lv) for q, lv in enumerate(active) if (subset >> q) & 1]] = True
        ok = ~(chosen & ~differ).any(axis=1)  # S within D
        if not ok.any():
            continue
        t = np.flatnonzero(ok)
        k = int(chosen.sum())
        x = src[t] + ((dd[t] - ds[t]) * place * chosen).sum(axis=1)  # src with S corrected
        x = x % period if period else x
        ht = h[t]
        for lv in active.tolist():
            if per_peer:  # the channel x -> x with digit lv corrected, if lv is still to correct
                if chosen[lv]:
                    continue
                sel = differ[t, lv]
                frac = np.array([fact[k] * fact[m - k - 1] / fact[m] if m > k else 0.0 for m in range(levels + 1)])
                offset = (dd[t[sel], lv] - ds[t[sel], lv]) % radix
                terms.append((t[sel], (x[sel] * levels + lv) * radix + offset, False, nbytes[t[sel]] * frac[ht[sel]]))
            elif chosen[lv]:  # entered x down level lv, the last digit corrected
                frac = np.array([fact[k - 1] * fact[m - k] / fact[m] if m >= k else 0.0 for m in range(levels + 1)])
                terms.append((t, x * levels + lv, True, nbytes[t] * frac[ht]))
            else:  # leaves x up level lv, if lv is still to correct
                sel = differ[t, lv]
                frac = np.array([fact[k] * fact[m - k - 1] / fact[m] if m > k else 0.0 for m in range(levels + 1)])
                terms.append((t[sel], x[sel] * levels + lv, False, nbytes[t[sel]] * frac[ht[sel]]))
    cells = (period or radix**levels) * levels * (radix if per_peer else 1)
    return [(t, link + (cells if down else 0), w) for t, link, down, w in terms], h, cells


def relayed_chain(pats: Patterns, radix: int, levels: int, bandwidth: float, latency: float, params: PricingParams,
                   per_peer: bool) -> CompiledSchedule | None:
    """A pipelined chain's steps on BCube / SiPAC at once (:func:`estimator.topology.windows.chain_compiled`
    over the :func:`relayed_terms` of its transfers j -> j+1), or None if ``pats`` are not a chain."""
    chain = chain_of(pats)
    if chain is None:
        return None
    n, c = chain
    src = np.arange(n - 1)
    terms, hops, _ = relayed_terms(src, src + 1, np.full(n - 1, 1.0 / c), radix, levels, per_peer=per_peer)
    return chain_compiled(n, c, terms, hops, bandwidth, route_latencies(latency, levels), params)


def within_digit(stride: int, k: int, radix: int) -> bool:
    """True if a digit step (place value ``stride``, size k) only changes one base-``radix`` digit."""
    place = 1
    while place * radix <= stride:
        place *= radix
    sub = stride // place
    return stride % place == 0 and radix % (k * sub) == 0
