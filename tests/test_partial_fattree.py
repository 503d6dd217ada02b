"""Fat trees whose group ends in a partial pod / edge switch: the all-pairs step (``direct``,
``one_shot``) is priced from counts of ranks per edge switch and pod, equal to compiling the
schedule on the graph."""

from __future__ import annotations

import pytest

from estimator.collectives.patterns import patterns
from estimator.fabrics.registry import make_fabric
from estimator.topology.partial import fat_tree_groups
from tests.schedule_checks import check_analytic_equals_graph, check_floors_below_price

ALL_PAIRS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")


@pytest.mark.parametrize("k,n", [(4, 3), (4, 5), (4, 6), (4, 13), (6, 7), (6, 10), (6, 31), (8, 37), (8, 70)])
def test_partial_pod_all_pairs_equals_graph(k, n):
    f = make_fabric({"name": "fattree", "nodes": n, "k": k, "alpha_s": 2e-6, "memory_bandwidth_Bps": 1e11})
    checked = check_analytic_equals_graph(f, ALL_PAIRS, [n])
    assert {c for c, a, _ in checked if a == "direct"} == set(ALL_PAIRS)


def test_partial_pod_all_pairs_needs_no_transfer_arrays():
    """At 16,384 hosts (k = 42: 37 whole pods of 441 + 67 hosts) the step is priced from its shape:
    its transfer arrays are never built (they would hold 268 million transfers)."""
    f = make_fabric({"name": "fattree", "nodes": 16384})
    assert f.config.radix() == 42
    comp = f.analytic_compiled("all_to_all", "direct", 16384)
    (pat,) = patterns("direct", "all_to_all", 16384, f.algo_params(16384))
    assert pat._arrays is None  # noqa: SLF001 (built lazily: still unbuilt)
    # every class of route: under one edge switch (1 traversal), in a pod (3), across pods (5)
    lat = f.config.link_latency_s
    assert sorted(comp.c0[0].tolist()) == pytest.approx([lat, 3 * lat, 5 * lat])
    assert comp.c1[0].max() == pytest.approx(16383 / 16384 / f.config.link_bandwidth_Bps, rel=1e-12)


def test_fat_tree_groups_counts_the_partial_pod_and_edge():
    # k = 4: 2 hosts per edge, 4 per pod; 13 = 3 whole pods + one pod holding 1 host
    assert fat_tree_groups(13, 2) == ([(2, 4, 2), (1, 1, 1)], 4)
    # k = 6: 9 per pod; 16 = 1 whole pod + 7 hosts on two whole edges and one edge of 1
    assert fat_tree_groups(16, 3) == ([(3, 9, 3), (3, 7, 3), (1, 7, 3)], 2)
    assert fat_tree_groups(18, 3) == ([(3, 9, 3)], 2)


@pytest.mark.parametrize("n", [7, 13])
def test_partial_pod_floors_stay_below_the_price(n):
    f = make_fabric({"name": "fattree", "nodes": n, "k": 4, "alpha_s": 2e-6, "memory_bandwidth_Bps": 1e11})
    assert check_floors_below_price(f, ALL_PAIRS) > 0


@pytest.mark.parametrize("k,n", [(4, 5), (4, 13), (6, 31), (8, 37), (8, 128)])
def test_tree_all_reduces_from_counts_equal_graph(k, n, monkeypatch):
    """Binary / double binary / pipelined DBT on whole and partial pods are priced from per-rank
    counts (leaf_trees.tree_compiled, nested edge / pod groups), equal to the graph; the per-step
    array path is not used for them."""
    f = make_fabric({"name": "fattree", "nodes": n, "k": k, "alpha_s": 2e-6, "memory_bandwidth_Bps": 1e11})

    def refuse(pats, *args, **kwargs):
        raise AssertionError("a tree all-reduce went through fat_tree_compiled")

    trees = {"binary_tree", "double_binary_tree", "pipelined_dbt"}
    with monkeypatch.context() as m:
        m.setattr("estimator.fabrics.fattree.fat_tree_compiled", refuse)
        for coll in ("all_reduce", "reduce", "broadcast"):
            for algo in set(f.algorithms(coll)) & trees:
                f.analytic_compiled(coll, algo, n)
    checked = check_analytic_equals_graph(f, ("all_reduce", "reduce", "broadcast"), [n])
    assert {a for _, a, _ in checked} >= trees & set(f.algorithms("all_reduce"))
