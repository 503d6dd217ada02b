"""A pipelined chain's steps priced all at once from the link terms of its transfers.

The chain broadcast (:func:`estimator.collectives.patterns._chain`) sends, in step t, over the
transfers j -> j+1 with j <= t <= j + c - 1 (a window of at most c consecutive transfers): n + c - 2
steps, nearly all distinct windows, so pricing them one by one costs O(n c) routing work, too much
at 65,536 ranks. But a transfer's routes are the same in every step; only which other transfers
share its links changes. So from the (transfer, link, bytes) terms of the whole chain (each
transfer's routes, e.g. :func:`estimator.topology.relayed.relayed_terms`), a link's load over the
steps is piecewise constant: a user j's bytes count for t in [j, j + c - 1]. Every term (i, link)
gives, for each constant piece inside its transfer's own steps [i, i + c - 1], a segment of steps
where transfer i sees that load on that link. A step's busiest load per route length is then the
largest segment covering it (a range "max-assign" done offline with a sparse table pushed down),
and its row the Pareto front of (α + route latency, load / bandwidth) over route lengths: what
pricing each step's transfers gives (:func:`estimator.topology.analytic.step_row`), since a
transfer's busiest link is the largest load on its routes and, within one route length, only the
busiest transfer survives the Pareto front. Identical rows are merged.
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams, pareto
from estimator.topology.analytic import rows_compiled


def chain_of(pats: Patterns) -> tuple[int, int] | None:
    """(n, c) if ``pats`` are a whole pipelined chain's steps (:attr:`StepPattern.window`), else None."""
    if not pats:
        return None
    window = pats[0].window
    if window is None or len(pats) != window[0] + window[1] - 2 or any(p.window != window for p in pats):
        return None
    return window


def _segments(terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]], c: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(transfer, first step, last step, load) per constant piece of every term's link load within
    its transfer's steps."""
    t = np.concatenate([g[0] for g in terms])
    link = np.concatenate([g[1] for g in terms])
    w = np.concatenate([g[2] for g in terms])
    keep = w > 0
    t, link, w = t[keep], link[keep], w[keep]
    order = np.lexsort((t, link))
    t, link, w = t[order], link[order], w[order]
    _, first, users = np.unique(link, return_index=True, return_counts=True)
    alone = np.repeat(users == 1, users)  # a link used by one transfer carries its bytes in all its steps
    shared = users > 1
    first, users = first[shared], users[shared]
    # a shared link's load changes where a user's steps start (j) or end (j + c): its pieces
    group = np.repeat(np.arange(len(first)), 2 * users)
    member = np.repeat(first, 2 * users) + _ranks(2 * users) % np.repeat(users, 2 * users)
    cut = t[member] + np.where(_ranks(2 * users) < np.repeat(users, 2 * users), 0, c)
    order = np.lexsort((cut, group))
    group, cut = group[order], cut[order]
    piece = (group[1:] == group[:-1]) & (cut[1:] > cut[:-1])  # [cut[q], cut[q+1]) within one link
    p_group, p_lo, p_end = group[:-1][piece], cut[:-1][piece], cut[1:][piece]
    # every user of the piece's link: on the link in that piece if its steps cover it
    per = users[p_group]
    p_idx = np.repeat(np.arange(len(p_group)), per)
    user = np.repeat(first[p_group], per) + _ranks(per)
    on = (t[user] <= p_lo[p_idx]) & (p_lo[p_idx] <= t[user] + c - 1)
    p_idx, user = p_idx[on], user[on]
    load = np.bincount(p_idx, weights=w[user], minlength=len(p_group))  # summed in transfer order
    return (np.concatenate([t[alone], t[user]]), np.concatenate([t[alone], p_lo[p_idx]]),
            np.concatenate([t[alone] + c - 1, p_end[p_idx] - 1]), np.concatenate([w[alone], load[p_idx]]))


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0..k-1 for each k in ``counts``, concatenated."""
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(int(counts.sum())) - starts


def _max_cover(cls: np.ndarray, lo: np.ndarray, hi: np.ndarray, value: np.ndarray, classes: int, steps: int,
               longest: int) -> np.ndarray:
    """(classes x steps): per class and step the largest value of a segment [lo, hi] covering it
    (0 where none does). Each segment is put on two overlapping power-of-two blocks, then every
    block's value is pushed down to its two halves."""
    levels = max(1, int(longest).bit_length())
    table = np.zeros((levels, classes, steps))
    length = hi - lo + 1
    k = np.floor(np.log2(length)).astype(np.int64)
    k = np.where((1 << (k + 1)) <= length, k + 1, k)  # guard log2 rounding at exact powers of two
    k = np.where((1 << k) > length, k - 1, k)
    for start in (lo, hi - (1 << k) + 1):
        np.maximum.at(table, (k, cls, start), value)
    for lv in range(levels - 1, 0, -1):
        half = 1 << (lv - 1)
        np.maximum(table[lv - 1], table[lv], out=table[lv - 1])
        np.maximum(table[lv - 1][:, half:], table[lv][:, : steps - half], out=table[lv - 1][:, half:])
    return table[0]


def chain_compiled(n: int, c: int, terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]], hops: np.ndarray,
                   bandwidth: float, latencies: np.ndarray, params: PricingParams) -> CompiledSchedule:
    """The chain of ``n`` ranks and ``c`` chunks priced from ``terms`` (transfer j = j -> j+1, bytes
    per byte of the buffer on each link of its routes) and ``hops`` (route length per transfer)."""
    steps = n + c - 2
    i, lo, hi, load = _segments(terms, c)
    best = _max_cover(hops[i], lo, hi, load, int(hops.max()) + 1, steps, c)
    key = np.zeros(steps, dtype=np.int64)  # a step's row as one integer: its per-class loads' codes
    for loads in best:
        values, code = np.unique(loads, return_inverse=True)
        key = np.unique(key * len(values) + code, return_inverse=True)[1]  # renumbered: stays < steps
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    out = []
    for row in best.T[first]:
        h = np.flatnonzero(row > 0)
        out.append((*pareto(params.alpha_s + latencies[h], row[h] / bandwidth), 0.0))
    return rows_compiled(out, counts, params)
