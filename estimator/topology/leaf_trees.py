"""Tree all-reduces (binary tree, double binary tree, pipelined double binary tree) on a leaf-spine,
priced from per-rank transfer counts instead of per-transfer float loads.

In a tree step every transfer moves the same bytes s, so a link's load is a count of transfers
times s: a GPU's up-link carries what it sends (one edge per tree at most), its down-link what it
receives, a leaf's uplinks (ECMP over the spines) the transfers leaving it. A step is the edges
whose send step falls in a window of levels (:func:`estimator.collectives.patterns.tree_patterns`); with
all edges sorted by level a window is one slice, and its row needs integer counts per rank and
per leaf (bincounts of ints) and two maxima: the busiest transfer that stays under its leaf and
the busiest that crosses the spines. The reverse (broadcast) step of a window puts the same counts
on the mirrored links, so its transfers' peaks are the same. Loads are summed as ``s`` added
count times, in order, as :func:`estimator.topology.leaf_spine.leaf_spine_compiled` sums equal
weights: the rows are that function's, bit for bit (tested), at a fraction of its cost.
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.collectives.trees import tree_height
from estimator.topology.partial import repeat_sum

TREES = {"binary_tree": ((False,), 1.0), "double_binary_tree": ((False, True), 0.5), "pipelined_dbt": ((False, True), 0.5)}


def leaf_spine_tree_compiled(base: str, collective: str, n: int, chunks: int, per_leaf: int, spines: int,
                             endpoint_bw: float, uplink_bw: float, route_latency: np.ndarray, params: PricingParams
                             ) -> CompiledSchedule | None:
    """The :class:`CompiledSchedule` of tree algorithm ``base`` (:data:`TREES`) for ``collective``
    (all_reduce, reduce, broadcast) over ranks 0..n-1 under leaves of ``per_leaf``, with
    ``spines`` spines (0: one leaf); ``route_latency`` = (0, under one leaf, across the spines).
    None for anything else."""
    return tree_compiled(base, collective, n, chunks, endpoint_bw, ((per_leaf, spines, uplink_bw),),
                         route_latency[1:], params)


def fat_tree_tree_compiled(base: str, collective: str, n: int, chunks: int, half: int, bandwidth: float,
                           latency: float, params: PricingParams) -> CompiledSchedule | None:
    """The same on the k-ary fat tree (``half`` = k/2, ranks = the first hosts): edge switches of
    k/2 hosts whose up-links take 1/(k/2) of what leaves them, pods of (k/2)^2 hosts whose core
    links take 1/(k/2)^2 (:func:`estimator.topology.fat_tree.fat_tree_compiled`); a route crosses
    1, 3 or 5 switches, ``latency`` each."""
    from estimator.topology.analytic import route_latencies

    latencies = route_latencies(latency, 5)
    return tree_compiled(base, collective, n, chunks, bandwidth, ((half, half, bandwidth), (half * half, half * half,
                         bandwidth)), latencies[[1, 3, 5]], params)


def tree_compiled(base: str, collective: str, n: int, chunks: int, host_bw: float,
                  levels: tuple[tuple[int, int, float], ...], route_latency: np.ndarray, params: PricingParams
                  ) -> CompiledSchedule | None:
    """Tree algorithm ``base`` over ranks 0..n-1 on nested groups: ``levels`` = (ranks per group,
    the number of links the bytes leaving / entering a group spread over, their bandwidth), inner
    first; a transfer leaving its level-L group leaves every inner one, and its busiest link is
    the largest of its host links and, per level it leaves, its source group's out-load and its
    destination group's in-load. ``route_latency[k]``: the latency of a route leaving k levels."""
    from estimator.collectives.patterns import tree_parents

    if base not in TREES or collective not in ("all_reduce", "reduce", "broadcast") or n < 2 or chunks < 1:
        return None
    trees, share = TREES[base]
    chunks = chunks if base == "pipelined_dbt" else 1
    size = share / chunks
    height = tree_height(n)
    edges = []  # (child, parent) of every edge, by level (the send step): positions (2m+1) 2^lv < n
    for lv in range(height):
        b = (2 * np.arange((((n - 1) >> lv) + 1) // 2) + 1) << lv
        edges += [tree_parents(n, b, second) for second in trees]
    child = np.concatenate([e[0] for e in edges]).astype(np.int32)
    parent = np.concatenate([e[1] for e in edges]).astype(np.int32)
    starts = np.concatenate([[0], np.cumsum([len(e[0]) for e in edges])])[:: len(trees)]
    leaves = np.zeros(len(child), dtype=np.int64)  # per edge: how many levels it leaves
    for group, _, _ in levels:
        leaves += child // group != parent // group
    if any(not links and (leaves > lv).any() for lv, (_, links, _) in enumerate(levels)):
        return None
    rows = []
    for t in range(height + chunks - 1):  # the window of levels max(0, t - chunks + 1) .. t
        lo, hi = starts[max(0, t - chunks + 1)], starts[min(t, height - 1) + 1]
        c, p, k = child[lo:hi], parent[lo:hi], leaves[lo:hi]
        sends, recvs = np.bincount(c, minlength=n), np.bincount(p, minlength=n)
        busiest = np.maximum(sends[c], recvs[p])  # per transfer: its host links' counts
        far = np.flatnonzero(k)  # the (few) transfers leaving their innermost group
        cf, pf, kf = c[far], p[far], k[far]
        c0, c1 = [], []
        group_loads = []  # per level: (out, in) counts of transfers leaving each group, per far transfer
        for lv, (group, _, _) in enumerate(levels):
            away = kf > lv
            groups = -(-n // group)
            out = np.bincount(cf[away] // group, minlength=groups)
            inn = np.bincount(pf[away] // group, minlength=groups)
            group_loads.append(np.maximum(out[cf // group], inn[pf // group]))
        for cls in range(len(levels) + 1):
            mine = k == 0 if cls == 0 else kf == cls
            if not mine.any():
                continue
            peak = repeat_sum(size, int((busiest if cls == 0 else busiest[far])[mine].max())) / host_bw
            for lv in range(cls):
                _, links, bw = levels[lv]
                peak = max(peak, repeat_sum(size, int(group_loads[lv][mine].max())) / links / bw)
            c0.append(params.alpha_s + route_latency[cls])
            c1.append(peak)
        rows.append((c0, c1, repeat_sum(size, int(recvs.max())) * params.gamma))
    up = rows
    down = [(c0, c1, 0.0) for c0, c1, _ in rows]  # mirrored links, same counts; nothing reduced
    chosen = {"all_reduce": up + down, "reduce": up, "broadcast": down}[collective]
    width = max(len(r[0]) for r in chosen)
    c0 = np.full((len(chosen), width), -np.inf)
    c1 = np.zeros((len(chosen), width))
    for i, (a0, a1, _) in enumerate(chosen):
        c0[i, : len(a0)], c1[i, : len(a1)] = a0, a1
    weight = np.ones(len(chosen))
    return CompiledSchedule(c0, c1, np.array([r[2] for r in chosen]), np.full(len(chosen), params.step_overhead_s),
                            weight, len(chosen), params.fixed_s, 0, params.reconfig_s)
