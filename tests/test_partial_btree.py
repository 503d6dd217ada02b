"""The OCS wired as a binary tree (``topology=btree``): analytic tree routing equals compiling the
schedule on the graph, for whole and partial groups (a group that is not the whole tree)."""

from __future__ import annotations

import numpy as np
import pytest

import estimator.fabrics.ocs as ocs
from estimator.collectives.trees import inorder_parents
from estimator.fabrics.registry import make_fabric
from estimator.topology.btree import inorder_tree, tree_hops
from tests.schedule_checks import check_analytic_equals_graph

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all")


@pytest.mark.parametrize("nodes,groups", [(7, [7, 5]), (16, [16, 9]), (13, [13]), (33, [33, 20]), (100, [100, 37])])
def test_btree_routing_equals_graph(monkeypatch, nodes, groups):
    monkeypatch.setattr(ocs, "BTREE_ROUTED", 2)  # route every group analytically (default: >= 128 ranks)
    f = make_fabric({"name": "ocs", "nodes": nodes, "topology": "btree"})
    checked = check_analytic_equals_graph(f, COLLECTIVES, groups)
    assert {a for _, a, _ in checked} >= {"ring", "binary_tree", "ps", "direct"}
    assert {n for _, _, n in checked} == set(groups)


def test_btree_large_groups_are_routed_analytically():
    f = make_fabric({"name": "ocs", "nodes": 200, "topology": "btree"})
    assert f.analytic_compiled("all_reduce", "ring", 200) is not None
    assert f.analytic_compiled("all_reduce", "ring", 100) is None  # small: compiled on the graph


def test_tree_hops_and_depth_follow_the_parents():
    n = 21
    parents = inorder_parents(n)
    tree = inorder_tree(n)
    for v in range(n):
        up, depth = v, 0
        while parents[up] >= 0:
            up, depth = parents[up], depth + 1
        assert tree.depth[v] == depth
    # 1 -> 2 -> 3: 1's parent is 2, 3's parent is 2
    assert tree_hops(tree, np.array([1, 1, 5]), np.array([3, 2, 5])).tolist() == [2, 1, 0]
