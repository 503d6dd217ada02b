"""Tree all-reduces on ``nvlink_leafspine`` priced from per-rank transfer counts
(:mod:`estimator.topology.leaf_trees`), at sizes that are not whole leaves / nodes too: the rows
are the per-transfer router's bit for bit and equal compiling the schedule on the graph."""

from __future__ import annotations

import pytest

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.patterns import patterns
from estimator.fabrics.registry import make_fabric
from estimator.topology.leaf_spine import leaf_spine_compiled
from tests.schedule_checks import check_analytic_equals_graph

TREE_ALGOS = ("binary_tree", "double_binary_tree", "pipelined_dbt")
FABRICS = [
    {"name": "nvlink_leafspine", "nodes": 64, "latency_model": "alpha"},
    {"name": "nvlink_leafspine", "nodes": 24, "gpus_per_node": 4, "latency_model": "alpha", "memory_bandwidth_Bps": 1e11},
    {"name": "nvlink_leafspine", "nodes": 1000, "latency_model": "alpha", "memory_bandwidth_Bps": 1e11},
    {"name": "nvlink_leafspine", "nodes": 40, "latency_model": "nccl_hw"},
    {"name": "nvlink_leafspine", "nodes": 6, "latency_model": "alpha"},  # one node: no spines
]


def _per_transfer(f, coll, algo, n):
    c = f.config
    intra, inter = f._latencies(algo)
    nv, up = f._bandwidths()
    lat_up, lat_spine = (0.0, inter - intra) if c.latency_model == "nccl_hw" else (c.switch_latency_s,) * 2
    spines = c.uplinks if c.nodes > c.gpus_per_node else 0
    return leaf_spine_compiled(patterns(algo, coll, n, f.algo_params(n)), n, c.gpus_per_node, spines, nv, up,
                               (intra, lat_up, lat_spine), f.pricing(algo))


@pytest.mark.parametrize("params", FABRICS, ids=lambda p: f"{p['nodes']}_{p['latency_model']}")
def test_tree_rows_are_the_per_transfer_routers(params):
    f = make_fabric(params)
    nodes = params["nodes"]
    checked = 0
    for n in sorted({nodes, nodes - 1, nodes - 5, max(2, nodes // 3), 2, 3}):  # whole and partial leaves
        for coll in ("all_reduce", "reduce", "broadcast"):
            for algo in TREE_ALGOS:
                if not lookup(algo).supports(coll):
                    continue
                fast, slow = f.analytic_compiled(coll, algo, n), _per_transfer(f, coll, algo, n)
                assert fast.steps == slow.steps
                for m in (1.0, 3e6, 2.0**26):
                    assert fast.time(m) == slow.time(m), (n, coll, algo, m)
                checked += 1
    assert checked >= 20


@pytest.mark.parametrize("params", [FABRICS[0], FABRICS[1], FABRICS[3]], ids=lambda p: f"{p['nodes']}")
def test_tree_rows_equal_the_graph_on_partial_leaves(params):
    f = make_fabric(params)
    n = params["nodes"]
    checked = check_analytic_equals_graph(f, ("all_reduce", "reduce", "broadcast"), [n, n - 3])  # n - 3: a partial leaf
    assert {a for _, a, m in checked if m == n - 3} >= set(TREE_ALGOS)


def test_pruned_auto_picks_what_exhaustive_auto_picks_on_partial_leaves():
    params = {"name": "nvlink_leafspine", "nodes": 40, "latency_model": "alpha", "memory_bandwidth_Bps": 1e11}
    pruned, full = make_fabric(params), make_fabric(params)
    full.port_bandwidth = lambda: None
    full.route_bounds = lambda src, dst: None
    for n in (40, 37):
        for nbytes in (1e2, 1e5, 1e8):
            a = pruned.collective_cost("all_reduce", nbytes, "auto", n)
            b = full.collective_cost("all_reduce", nbytes, "auto", n)
            assert (a.algorithm, a.time_s, a.steps) == (b.algorithm, b.time_s, b.steps)
