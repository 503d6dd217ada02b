"""Algorithm parameters and constraint checks shared by schedules and closed forms."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from estimator.errors import EstimatorError


@dataclass(frozen=True)
class AlgoParams:
    """Shape parameters an algorithm may need. A fabric fills in what its topology implies.

    radix:  k of radix-k halving/doubling and of dimension-wise (BCube/SiPAC r).
    rows, cols: 2D-torus dimensions (0 = the most square factorisation of n).
    local:  ranks per node for hierarchical algorithms (0 = not set: the algorithm is invalid).
    chunks: pipeline depth of pipelined trees (the buffer is cut into this many chunks per tree).
    """

    radix: int = 2
    rows: int = 0
    cols: int = 0
    local: int = 0
    chunks: int = 8

    def with_(self, **kw: int) -> AlgoParams:
        return replace(self, **kw)


def is_power(n: int, k: int) -> bool:
    if k < 2 or n < 1:
        return False
    while n % k == 0:
        n //= k
    return n == 1


def log_k(n: int, k: int) -> int:
    """Exact integer log of a power ``n`` of ``k``."""
    m = 0
    while n > 1:
        n //= k
        m += 1
    return m


def need_power(algorithm: str, n: int, k: int) -> int:
    if k < 2:
        raise EstimatorError(f"algorithm {algorithm!r} needs a radix k >= 2, got {k}")
    if not is_power(n, k):
        raise EstimatorError(f"algorithm {algorithm!r} needs a group size that is a power of {k}, got {n}")
    return log_k(n, k)


def torus_dims(n: int, p: AlgoParams) -> tuple[int, int]:
    """(rows, cols) of the 2D torus algorithm on ``n`` ranks."""
    if p.rows or p.cols:
        rows, cols = p.rows, p.cols
        if rows <= 0 or cols <= 0 or rows * cols != n:
            raise EstimatorError(f"algorithm 'torus2d': dims {rows}x{cols} do not match a group of {n}")
        return rows, cols
    rows = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return rows, n // rows


def local_size(n: int, p: AlgoParams) -> int:
    """Ranks per node for hierarchical algorithms; a group within one node uses that node only."""
    if p.local < 1:
        raise EstimatorError("algorithm 'hierarchical' needs ranks per node (the fabric sets it)")
    g = min(p.local, n)
    if n % g:
        raise EstimatorError(f"algorithm 'hierarchical': group of {n} is not whole nodes of {g} ranks")
    return g
