"""Shift steps on the OCS's binary-tree wiring (:mod:`estimator.topology.btree`) without routing
per-transfer arrays: pairwise all-to-all (``("shift", n, by, size)``), and any step a shift by one
rank maps onto itself (a ring's, a torus's column rings: every rank sends the same to r + by).

Assumes the whole tree of n = 2^m nodes (other sizes return None: priced from the arrays). Then
NCCL's in-order tree is complete: node x sits at level c = ctz(x) (trailing zero bits; the root 0
at level m), owns the 2^(c+1) - 1 positions around it, and the lowest common ancestor of lo < hi
is the element of [lo, hi] with the most trailing zeros: hi with its bits below h cleared (h = the
highest bit where lo and hi differ), or lo itself if lo has no set bit up to h.

* **Loads.** A subtree is an interval of ranks, so a shift by s moves
  :func:`~estimator.topology.shift_steps.block_leaving` (w, s, n) of its w ranks' transfers out of it
  and as many in: every link at level c carries the same, G(c) (summed over the step's shifts).
* **Routes.** A transfer between lo and hi climbs from each end to their ancestor at level cz: it
  crosses levels min(ctz lo, ctz hi) .. cz - 1 (its busiest link: the largest G there) and
  2 cz - ctz lo - ctz hi links. So a step is priced from the set of (ctz lo, ctz hi, cz) its
  transfers realise: those of the pairs (r, r + s) that do not wrap round and (r, r + n - s) that
  do (a route's length and busiest link do not depend on its direction). That set is found with a
  few integer array operations over the n - s pairs (cached per distance: pairwise's step s and
  step n - s share both), with no per-link arrays; a step then costs O(n) small-integer work.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from estimator.collectives.pricing import PricingParams

Row = tuple[np.ndarray, np.ndarray, float]


@lru_cache(maxsize=4)
def _tables(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For 0..2^m - 1: the positions, their level (ctz; the root 0 at level m) and their highest set
    bit (for 1..; 0 at 0), small integers."""
    x = np.arange(1 << m, dtype=np.int32)
    level = (np.frexp((x & -x).astype(float))[1] - 1).astype(np.int16)
    level[0] = m
    top = (np.frexp(x.astype(float))[1] - 1).astype(np.int16)
    for a in (x, level, top):
        a.flags.writeable = False
    return x, level, top


@lru_cache(maxsize=1 << 15)
def pair_classes(m: int, distance: int) -> np.ndarray:
    """The distinct (ctz lo, ctz hi, level of their common ancestor) over the pairs (lo, lo + distance)
    of the complete tree of 2^m nodes, as rows of a (classes, 3) array. The ancestor's level is
    max(ctz lo, h), h the highest bit where lo and hi differ (lo is the ancestor iff it has no set
    bit up to h, i.e. ctz lo > h)."""
    n = 1 << m
    x, level, top = _tables(m)
    cx, cy = level[: n - distance], level[distance:]
    cz = np.maximum(cx, top[x[: n - distance] ^ x[distance:]])
    k = m + 1
    code = np.flatnonzero(np.bincount((cx * k + cy) * k + cz, minlength=k**3))
    out = np.stack([code // (k * k), (code // k) % k, code % k], axis=1)
    out.flags.writeable = False
    return out


def uniform_shifts(step, n: int) -> tuple[list[tuple[int, float]], float] | None:
    """([(by, bytes), ...], reduced bytes a rank receives) if every rank r of ``step`` (over n ranks)
    sends the same to r + by (a ``shift`` shape, or a step of period 1), else None."""
    shape = step.shape
    if shape is not None:
        if shape[0] != "shift" or shape[1] != n:
            return None
        return ([(shape[2] % n, float(shape[3]))], float(shape[4])) if shape[2] % n else None
    if step.period != 1:
        return None
    src, dst, size, red = step.first(1)
    if not len(src) or (src != 0).any() or (dst == 0).any() or len(set(dst.tolist())) != len(dst):
        return None
    received = 0.0
    for r in red:
        received += float(r)
    return [(int(d), float(s)) for d, s in zip(dst, size, strict=True)], received


def shift_row(step, n: int, bandwidth: float, latencies: np.ndarray, params: PricingParams) -> Row | None:
    """The row (c0, c1, reduction slope) of a uniform shift step (:func:`uniform_shifts`) over the
    whole tree of n = 2^m nodes (see the module docstring); None otherwise."""
    m = n.bit_length() - 1
    if n < 2 or n != 1 << m:
        return None
    shifts = uniform_shifts(step, n)
    if shifts is None:
        return None
    moves, received = shifts
    width = (2 << np.arange(m)) - 1  # subtree widths by level
    load = np.zeros(m)
    for by, size in moves:  # block_leaving(w, by, n) for every width at once
        load += (width - np.maximum(0, width - by) - np.maximum(0, width - (n - by))) * size
    # busiest[low, top]: the largest load over levels low .. top
    grid = np.where(np.arange(m)[None, :] >= np.arange(m)[:, None], load[None, :], -np.inf)
    busiest = np.maximum.accumulate(grid, axis=1)
    classes = np.concatenate([pair_classes(m, d) for by, _ in moves for d in {by, n - by}])
    cx, cy, cz = classes[:, 0], classes[:, 1], classes[:, 2]
    hops = 2 * cz - cx - cy
    peak = busiest[np.minimum(cx, cy), cz - 1]
    return params.alpha_s + latencies[hops], peak / bandwidth, received * params.gamma
