"""SuperPOD at sizes that are not a power of two (e.g. 65,528 = 8,191 servers): ``hierarchical_tree``
is priced per server (every rail carries one copy of the server-level tree) and ``auto`` prunes
``pipelined_dbt`` with the rail cut (same-index transfers between servers cross the GPUs' own NIC
links). Prices equal the graph's; the cut stays below the price; pruning keeps auto's choice."""

from __future__ import annotations

import pytest

from estimator.collectives.patterns import patterns
from estimator.fabrics.registry import make_fabric
from estimator.topology.rail import rail_compiled
from tests.schedule_checks import check_analytic_equals_graph, check_floors_below_price

PODS = [
    {"name": "superpod", "nodes": 24, "gpus_per_node": 8},
    {"name": "superpod", "nodes": 40, "gpus_per_node": 8, "alpha_s": 1e-6},
    {"name": "superpod", "nodes": 15, "gpus_per_node": 3, "memory_bandwidth_Bps": 1e11},
    {"name": "superpod", "nodes": 12, "gpus_per_node": 2, "memory_bandwidth_Bps": 1e11},
]


@pytest.mark.parametrize("params", PODS, ids=lambda p: f"{p['nodes']}x{p['gpus_per_node']}")
def test_hierarchical_tree_per_server_equals_graph(params):
    f = make_fabric(params)
    n, g = params["nodes"], params["gpus_per_node"]
    checked = check_analytic_equals_graph(f, ("all_reduce",), [n, n - g, n - 1])  # whole fabric, fewer servers, a partial server
    assert ("all_reduce", "hierarchical_tree", n) in checked
    assert ("all_reduce", "hierarchical_tree", n - g) in checked


@pytest.mark.parametrize("params", PODS, ids=lambda p: f"{p['nodes']}x{p['gpus_per_node']}")
def test_hierarchical_tree_per_server_is_the_per_gpu_routing(params):
    """The per-server rows are the per-GPU analytic routing's, to the bit."""
    f = make_fabric(params)
    c, n = f.config, params["nodes"]
    fast = f.analytic_compiled("all_reduce", "hierarchical_tree", n)
    slow = rail_compiled(patterns("hierarchical_tree", "all_reduce", n, f.algo_params(n)), c.gpus_per_node, c.nodes,
                         c.nvlink_bandwidth_Bps, c.nic_bandwidth_Bps, c.switch_latency_s,
                         f.pricing("hierarchical_tree"), n)
    assert fast.steps == slow.steps
    for m in (1.0, 3e6, 2.0**26):
        assert fast.time(m) == slow.time(m)


@pytest.mark.parametrize("params", PODS, ids=lambda p: f"{p['nodes']}x{p['gpus_per_node']}")
def test_rail_cut_floor_stays_below_the_price(params):
    assert check_floors_below_price(make_fabric(params), ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")) > 0


def test_rail_cut_counts_a_gpus_same_index_transfers():
    import numpy as np

    f = make_fabric({"name": "superpod", "nodes": 32, "gpus_per_node": 8})
    nic = f.config.nic_bandwidth_Bps
    # GPUs 8 and 24 (index 0 of servers 1 and 3) both send to GPU 16 (index 0 of server 2): 2 units on its NIC
    src, dst, size = np.array([8, 24]), np.array([16, 16]), np.array([1.0, 1.0])
    assert f.cut_seconds(src, dst, size) == pytest.approx(2.0 / nic)
    # different local index: the transfers may relay over NVLink to other rails: only the server cut (g NICs)
    assert f.cut_seconds(np.array([9, 25]), dst, size) == pytest.approx(2.0 / (8 * nic))


@pytest.mark.parametrize("params", [*PODS, {"name": "superpod", "nodes": 56, "gpus_per_node": 8}],
                         ids=lambda p: f"{p['nodes']}x{p['gpus_per_node']}")
def test_pruned_auto_picks_what_exhaustive_auto_picks(params):
    pruned, full = make_fabric(params), make_fabric(params)
    full.port_bandwidth = lambda: None  # no floor: every candidate is priced
    full.route_bounds = lambda src, dst: None
    for coll in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
        for nbytes in (1e2, 1e5, 1e8):
            a = pruned.collective_cost(coll, nbytes, "auto")
            b = full.collective_cost(coll, nbytes, "auto")
            assert (a.algorithm, a.time_s, a.steps) == (b.algorithm, b.time_s, b.steps)
