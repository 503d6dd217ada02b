"""Closed forms for steps over groups that do not fill a topology's regular units (a partial last
pod of a fat tree, ...), where the analytic routers of :mod:`estimator.topology.analytic` would
otherwise build one array entry per transfer.

An all-pairs step (every rank sends ``size`` bytes per byte of M to every other; shape
``("digit", n, 1, n, size, red)``) loads a link by a count of ranks on either side of it: which
edge switch or pod a rank is in, not which rank it is. So its row needs only the distinct counts
of ranks per edge switch and per pod (at most three kinds: whole ones, the last pod, its partial
edge), not the n(n-1) transfers. Rows are equal to the array routers' (tested against the graph).
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.pricing import CompiledSchedule, PricingParams


def is_all_pairs(shape: tuple | None, n: int) -> bool:
    """True if ``shape`` is an all-pairs step over ranks 0..n-1 (:func:`~estimator.collectives.patterns.all_pairs`)."""
    return shape is not None and shape[0] == "digit" and shape[1] == n and shape[2] == 1 and shape[3] == n and n >= 2


def repeat_sum(value: float, times: int) -> float:
    """``value`` added ``times`` times in order (as np.bincount sums equal weights), or multiplied
    beyond 4,096 terms (then within a few ulps)."""
    if times > 4096:
        return value * times
    total = 0.0
    for _ in range(times):
        total += value
    return total


def fat_tree_groups(n: int, half: int) -> tuple[list[tuple[int, int, int]], int]:
    """The distinct (ranks on the edge switch, ranks in its pod, non-empty edge switches in its
    pod) over the non-empty edge switches of the first ``n`` hosts of a fat tree with ``half`` =
    k/2 hosts per edge switch, and the number of non-empty pods."""
    pod = half * half
    whole, rest = divmod(n, pod)
    kinds = [(half, pod, half)] if whole else []
    if rest:
        edges = -(-rest // half)
        if rest >= half:
            kinds.append((half, rest, edges))
        if rest % half:
            kinds.append((rest % half, rest, edges))
    return kinds, whole + (1 if rest else 0)


def fat_tree_all_pairs_row(shape: tuple, n: int, half: int, bandwidth: float, latencies: np.ndarray,
                           params: PricingParams) -> tuple[np.ndarray, np.ndarray, float]:
    """The row (c0, c1 per route length, reduction slope) of an all-pairs step over the first ``n``
    hosts of :func:`estimator.topology.builders.fat_tree` priced as
    :func:`estimator.topology.fat_tree.fat_tree_compiled` routes it: a host link carries (n-1)
    transfers; an edge switch of c ranks sends and receives c(n-c) of them, 1/(k/2) on each of its
    up- and down-links; a pod of m ranks m(n-m), 1/(k/2)^2 on each core link. Transfers under
    one edge switch (1 traversal) load host links only; within a pod (3) also both edges'
    links, so the busiest is the largest edge load of a pod with two non-empty edges; across
    pods (5) also both pods' core links. One (c0, c1) per route length: the busiest of its class
    (a lighter transfer of the same latency never sets the step's time)."""
    size, reduced = shape[4], shape[5]
    kinds, pods = fat_tree_groups(n, half)
    host = repeat_sum(size, n - 1)
    edge = {c: repeat_sum(size, c * (n - c)) / half for c, _, _ in kinds}
    c0, c1 = [], []
    if any(c >= 2 for c, _, _ in kinds):
        c0.append(params.alpha_s + latencies[1])
        c1.append(host / bandwidth)
    inside = [edge[c] for c, _, edges in kinds if edges >= 2]
    if inside:
        c0.append(params.alpha_s + latencies[3])
        c1.append(max(host, *inside) / bandwidth)
    if pods >= 2:
        core = [repeat_sum(size, m * (n - m)) / (half * half) for _, m, _ in kinds]
        c0.append(params.alpha_s + latencies[5])
        c1.append(max(host, *edge.values(), *core) / bandwidth)
    return np.array(c0), np.array(c1), repeat_sum(reduced, n - 1) * params.gamma


def stack_compiled(parts: list[CompiledSchedule]) -> CompiledSchedule:
    """One schedule made of ``parts``' steps in order (same pricing: ``fixed_s`` and reconfiguration
    of the first), rows padded to the widest."""
    width = max(x.c0.shape[1] for x in parts)

    def pad(a: np.ndarray, fill: float) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=fill)

    first = parts[0]
    return CompiledSchedule(np.concatenate([pad(x.c0, -np.inf) for x in parts]),
                            np.concatenate([pad(x.c1, 0.0) for x in parts]),
                            np.concatenate([x.r for x in parts]), np.concatenate([x.extra for x in parts]),
                            np.concatenate([x.weight for x in parts]), sum(x.steps for x in parts), first.fixed_s,
                            sum(x.reconfig_steps for x in parts), first.reconfig_s)
