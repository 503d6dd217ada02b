"""Closed forms on a non-blocking switch (the α-β-γ model).

Assumptions: every rank has one full-duplex port of ``bw`` bytes/s per direction into a switch
that never blocks; each step costs ``alpha`` (per message, paid once per step because a rank's
messages of one step go out concurrently) plus the busiest port's bytes / ``bw`` plus the busiest
rank's reduced bytes × ``gamma`` (s/byte = 1 / memory bandwidth; 0 = reductions are free).
These are exactly what :mod:`.pricing` gives for the generated schedules on a star topology
(tested for every algorithm and every n <= 64).

With L = log2 n, k-ary m = log_k n, H = floor(log2(n-1)) + 1, the formulas are

* ring (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005):
  all-reduce 2(n-1)α + 2(n-1)/n·M/B + (n-1)/n·Mγ; reduce-scatter / all-gather half the steps.
* recursive doubling all-reduce (Thakur et al. 2005): L(α + M/B + Mγ).
* halving-doubling, Rabenseifner (Thakur et al. 2005): 2Lα + 2(n-1)/n·M/B + (n-1)/n·Mγ.
* radix-k halving/doubling: 2mα + 2(n-1)/n·M/B + (n-1)/n·Mγ (k-1 peers per step share the port).
* binary tree all-reduce (non-pipelined): Σ_{s<H} 2(α + c_s·M/B) + c_s·Mγ, where c_s = 2 if
  3·2^s < n else 1 is the most children a rank receives from in step s (see :mod:`.trees`).
* double binary tree all-reduce (Sanders et al. 2009, each tree carries M/2, non-pipelined):
  Σ_{s<H} 2(α + c_s·M/(2B)) + c_s·Mγ/2.
"""

from __future__ import annotations

from collections.abc import Callable

from estimator.collectives.params import AlgoParams, local_size, need_power, torus_dims
from estimator.collectives.trees import children_at_step, dbt_shapes, tree_height
from estimator.errors import EstimatorError

Cost = tuple[float, int]
ClosedForm = Callable[[int, float, float, float, float, AlgoParams], Cost]


def _ph(count: int, alpha: float, bw: float, gamma: float, load: float, red: float = 0.0) -> Cost:
    """``count`` equal steps, each moving ``load`` through the busiest port, reducing ``red``."""
    if count <= 0:
        return 0.0, 0
    return count * (alpha + load / bw + red * gamma), count


def _sum(*parts: Cost) -> Cost:
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def ring(coll: str) -> ClosedForm:
    def cf(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
        rs = _ph(n - 1, a, b, g, m / n, m / n) if coll in ("all_reduce", "reduce_scatter") else (0.0, 0)
        ag = _ph(n - 1, a, b, g, m / n) if coll in ("all_reduce", "all_gather") else (0.0, 0)
        return _sum(rs, ag)

    return cf


def recursive_doubling_all_reduce(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    return _ph(need_power("recursive_doubling", n, 2), a, b, g, m, m)


def _radix_phases(n: int, m: float, a: float, b: float, g: float, k: int, name: str, rs: bool, ag: bool) -> Cost:
    levels = need_power(name, n, k)
    total, steps = 0.0, 0
    for s in range(levels):
        if rs:  # step s: (k-1) transfers of M/k^(s+1), all reduced
            load = (k - 1) * m / k ** (s + 1)
            total += a + load / b + load * g
            steps += 1
        if ag:  # step s (from the small end): (k-1) transfers of M/k^(levels-s)
            total += a + (k - 1) * m / k ** (levels - s) / b
            steps += 1
    return total, steps


def radix(coll: str, fixed_k: int | None = None, name: str = "radix") -> ClosedForm:
    def cf(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
        rs = coll in ("all_reduce", "reduce_scatter")
        ag = coll in ("all_reduce", "all_gather")
        return _radix_phases(n, m, a, b, g, fixed_k or p.radix, name, rs, ag)

    return cf


def neighbor_exchange(coll: str) -> ClosedForm:
    def cf(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
        if n % 2:
            raise EstimatorError(f"algorithm 'neighbor_exchange' needs an even group size, got {n}")
        rs = _ph(n - 1, a, b, g, m / n, m / n) if coll == "all_reduce" else (0.0, 0)
        return _sum(rs, _ph(1, a, b, g, m / n), _ph(n // 2 - 1, a, b, g, 2 * m / n))

    return cf


def direct(coll: str) -> ClosedForm:
    def cf(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
        if n < 2:
            return 0.0, 0
        spread = (n - 1) * m / n
        if coll == "all_reduce":
            return _sum(_ph(1, a, b, g, spread, spread), _ph(1, a, b, g, spread))
        if coll == "reduce_scatter":
            return _ph(1, a, b, g, spread, spread)
        if coll in ("all_gather", "all_to_all", "gather"):
            return _ph(1, a, b, g, spread)
        if coll == "broadcast":
            return _ph(1, a, b, g, (n - 1) * m)
        if coll == "reduce":
            return _ph(1, a, b, g, (n - 1) * m, (n - 1) * m)
        if coll == "p2p":
            return _ph(1, a, b, g, m)
        raise AssertionError(coll)

    return cf


def one_shot_all_reduce(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    return _ph(1 if n > 1 else 0, a, b, g, (n - 1) * m, (n - 1) * m)


def ps_all_reduce(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    if n < 2:
        return 0.0, 0
    return _sum(_ph(1, a, b, g, (n - 1) * m, (n - 1) * m), _ph(1, a, b, g, (n - 1) * m))


def pairwise_all_to_all(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    return _ph(n - 1, a, b, g, m / n)


def _tree(n: int, size: float, a: float, b: float, g: float, up: bool, down: bool) -> Cost:
    total = 0.0
    h = tree_height(n)
    for s in range(h):
        c = children_at_step(n, s)
        if up:
            total += a + c * size / b + c * size * g
        if down:
            total += a + c * size / b
    return total, h * (int(up) + int(down))


def binary_tree(coll: str) -> ClosedForm:
    up = coll in ("all_reduce", "reduce")
    down = coll in ("all_reduce", "broadcast")
    return lambda n, m, a, b, g, p: _tree(n, m, a, b, g, up, down)


def double_binary_tree_all_reduce(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    return _tree(n, m / 2, a, b, g, True, True)


def binomial(coll: str) -> ClosedForm:
    def cf(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
        rounds = (n - 1).bit_length()
        if coll == "broadcast":
            return _ph(rounds, a, b, g, m)
        if coll == "reduce":
            return _ph(rounds, a, b, g, m, m)
        total = sum(a + min(1 << s, n - (1 << s)) * m / n / b for s in range(rounds))
        return total, rounds

    return cf


def torus2d(coll: str) -> ClosedForm:
    def cf(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
        rows, cols = torus_dims(n, p)
        rs = ag = (0.0, 0)
        if coll in ("all_reduce", "reduce_scatter"):
            rs = _sum(_ph(cols - 1, a, b, g, m / cols, m / cols), _ph(rows - 1, a, b, g, m / n, m / n))
        if coll in ("all_reduce", "all_gather"):
            ag = _sum(_ph(cols - 1, a, b, g, m / cols), _ph(rows - 1, a, b, g, m / n))
        return _sum(rs, ag)

    return cf


def hierarchical(coll: str) -> ClosedForm:
    def cf(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
        loc = local_size(n, p)
        nodes = n // loc
        intra_rs = _ph(loc - 1, a, b, g, m / loc, m / loc)
        inter = _sum(_ph(nodes - 1, a, b, g, m / n, m / n), _ph(nodes - 1, a, b, g, m / n))
        return _sum(intra_rs, inter, _ph(loc - 1, a, b, g, m / loc))

    return cf


def hierarchical_tree_all_reduce(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    loc = local_size(n, p)
    parts = (
        _ph(loc - 1, a, b, g, m / loc, m / loc),
        double_binary_tree_all_reduce(n // loc, m / loc, a, b, g, p),
        _ph(loc - 1, a, b, g, m / loc),
    )
    return _sum(*parts)


def pipelined_dbt_all_reduce(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    """Pipelined double binary tree: per reduce step t, the busiest rank receives from every child
    whose chunk window [s, s + C) holds t, and sends in every tree whose window holds t; the
    broadcast phase mirrors it (no reductions). Chunks are M / (2C)."""
    c = p.chunks
    if c < 1:
        raise EstimatorError(f"algorithm 'pipelined_dbt' needs chunks >= 1, got {c}")
    child_sets, send_sets = dbt_shapes(n)
    size = m / (2 * c)
    total = 0.0
    steps = tree_height(n) + c - 1
    for t in range(steps):
        down = max(sum(1 for s in cs if 0 <= t - s < c) for cs in child_sets)
        up = max(sum(1 for s in ss if 0 <= t - s < c) for ss in send_sets)
        load = max(up, down) * size
        total += 2 * (a + load / b) + down * size * g
    return total, 2 * steps


def scatter_allgather_broadcast(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    """α + (n-1)/n·M/B (scatter from the root's port) + (n-1)(α + M/(nB))."""
    return _sum(_ph(1, a, b, g, (n - 1) * m / n), _ph(n - 1, a, b, g, m / n))


def reducescatter_gather_reduce(n: int, m: float, a: float, b: float, g: float, p: AlgoParams) -> Cost:
    """(n-1)(α + M/(nB) + M/n·γ) + α + (n-1)/n·M/B (gather into the root's port)."""
    return _sum(_ph(n - 1, a, b, g, m / n, m / n), _ph(1, a, b, g, (n - 1) * m / n))
