"""The OCS wired as NCCL's binary tree at scale (issue #13): ring and digit steps over the whole
tree priced from their shape, routes walked without the tree's arrays, the tree's arithmetic
(parents, lowest common ancestors, depth), and ``auto``'s route bounds (pruned ``auto`` picks
what pricing every candidate picks; no floor exceeds a price)."""

from __future__ import annotations

import numpy as np
import pytest

import estimator.fabrics.ocs as ocs
import estimator.topology.btree as bt
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import PricingParams
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from estimator.topology import btree_shift
from tests.schedule_checks import check_analytic_equals_graph, check_floors_below_price

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all")
PRICING = PricingParams(alpha_s=1e-6, memory_bandwidth_Bps=1e11)


def _shaped_calls(monkeypatch) -> dict[str, int]:
    used = {"digit_row": 0, "ring_row": 0, "shift_row": 0}
    for name in used:
        module = btree_shift if name == "shift_row" else bt
        real = getattr(module, name)

        def counted(*args, _real=real, _name=name):
            row = _real(*args)
            used[_name] += row is not None
            return row

        monkeypatch.setattr(module, name, counted)
    return used


@pytest.mark.parametrize("nodes", [8, 16, 64, 96, 128])
def test_shaped_rows_equal_the_graph(monkeypatch, nodes):
    """Whole-tree groups: ring and digit steps from their shape, equal to the schedule compiled on
    the graph (1e-12); a partial group as a control (priced from arrays)."""
    monkeypatch.setattr(ocs, "BTREE_ROUTED", 2)
    used = _shaped_calls(monkeypatch)
    f = make_fabric({"name": "ocs", "nodes": nodes, "topology": "btree"})
    checked = check_analytic_equals_graph(f, COLLECTIVES, [nodes, nodes - 3])
    assert {a for _, a, n in checked if n == nodes} >= {"ring", "direct", "binary_tree"}
    assert used["ring_row"] > 0
    if nodes & (nodes - 1) == 0:
        assert used["digit_row"] > 0 and {a for _, a, _ in checked} >= {"halving_doubling", "recursive_doubling"}
        assert used["shift_row"] > 0 and ("all_to_all", "pairwise", nodes) in checked


@pytest.mark.parametrize("nodes", [256, 384, 1024])
def test_shaped_rows_equal_the_array_path(monkeypatch, nodes):
    """Larger trees: every offered algorithm priced with the shapes (group = the tree) equals the
    same patterns priced from their arrays (group unknown); the shapes are used."""
    used = _shaped_calls(monkeypatch)
    f = make_fabric({"name": "ocs", "nodes": nodes, "topology": "btree"})
    compared = 0
    for coll in COLLECTIVES:
        for algo in f.algorithms(coll):
            try:
                pats = patterns(algo, coll, nodes, f.algo_params(nodes))
            except EstimatorError:
                continue
            if not pats:
                continue
            fast = bt.tree_compiled(pats, nodes, 1e10, 3e-7, PRICING, nodes)
            slow = bt.tree_compiled(pats, nodes, 1e10, 3e-7, PRICING)
            for m in (1e3, 2**26):
                assert fast.time(m) == pytest.approx(slow.time(m), rel=1e-12), (coll, algo)
            compared += 1
    assert compared >= 10 and used["ring_row"] > 0
    assert (used["digit_row"] > 0 and used["shift_row"] > 0) or nodes & (nodes - 1)


def test_digit_row_rejects_what_it_cannot_price():
    f = make_fabric({"name": "ocs", "nodes": 96, "topology": "btree"})
    lat = np.arange(20.0)
    radix3 = patterns("direct", "all_to_all", 96, f.algo_params(96))[0]  # one digit of radix 96
    assert radix3.shape[0] == "digit" and bt.digit_row(radix3, 96, 1.0, lat, PRICING) is None
    hd = patterns("halving_doubling", "all_reduce", 64, f.algo_params(64))[0]
    assert bt.digit_row(hd, 64, 1.0, lat, PRICING) is not None
    assert bt.digit_row(hd, 96, 1.0, lat, PRICING) is None  # not the whole tree


@pytest.mark.parametrize("n", [2, 3, 7, 64, 100, 129, 1000])
def test_tree_arithmetic_equals_the_arrays(n):
    tree = bt.inorder_tree(n)
    a, b = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n)))
    assert (bt.inorder_lca(a, b) == tree.lca(a, b)).all()
    assert (bt.inorder_hops(a, b, n) == bt.tree_hops(tree, a, b)).all()
    assert (bt.inorder_parent(np.arange(1, n), n) == tree.parent[1:]).all()
    assert bt.tree_depth(n) == int(tree.depth.max())


@pytest.mark.parametrize("n,transfers", [(100, 60), (1000, 900), (1000, 40), (513, 513)])
def test_walked_routes_equal_subtree_sums(n, transfers):
    """The walk (steps of at most n transfers) against subtree sums + path maxima."""
    rng = np.random.default_rng(n + transfers)
    src, dst = rng.integers(0, n, transfers), rng.integers(0, n, transfers)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    w = rng.uniform(1.0, 5.0, len(src))
    tree = bt.inorder_tree(n)
    top = tree.lca(src, dst)
    up = tree.subtree_sums(np.bincount(src, weights=w, minlength=n) - np.bincount(top, weights=w, minlength=n))
    down = tree.subtree_sums(np.bincount(dst, weights=w, minlength=n) - np.bincount(top, weights=w, minlength=n))
    rise, fall = tree.depth[src] - tree.depth[top], tree.depth[dst] - tree.depth[top]
    dense = np.maximum(tree.path_max(src, rise, up), tree.path_max(dst, fall, down))
    (a, ra), (b, fb) = bt.climb(src, top, w, n), bt.climb(dst, top, w, n)
    assert (ra == rise).all() and (fb == fall).all()
    assert np.allclose(np.maximum(a, b), dense, rtol=1e-12, atol=0)


def _exhaustive(params: dict):
    f = make_fabric(params)
    f.port_bandwidth = lambda: None  # no floor: every candidate is priced
    f.route_bounds = lambda src, dst: None
    return f


@pytest.mark.parametrize("nodes", [128, 200, 256])
def test_btree_pruned_auto_picks_what_exhaustive_auto_picks(nodes):
    params = {"name": "ocs", "nodes": nodes, "topology": "btree"}
    pruned, full = make_fabric(params), _exhaustive(params)
    compared = 0
    for coll in COLLECTIVES:
        for nbytes in (1e2, 1e5, 64 * 2**20):
            b = full.collective_cost(coll, nbytes, "auto")
            a = pruned.collective_cost(coll, nbytes, "auto")
            assert (a.algorithm, a.time_s, a.steps) == (b.algorithm, b.time_s, b.steps), (coll, nbytes)
            compared += 1
    assert compared == 3 * len(COLLECTIVES)


@pytest.mark.parametrize("nodes", [128, 200])
def test_btree_floors_never_exceed_the_schedule_price(nodes):
    f = make_fabric({"name": "ocs", "nodes": nodes, "topology": "btree"})
    assert f.route_bounds(np.array([0]), np.array([1])) is not None
    assert check_floors_below_price(f, COLLECTIVES) > 10


@pytest.mark.parametrize("m", [1, 2, 3, 5, 7])
def test_pair_classes_equal_the_tree(m):
    """(ctz lo, ctz hi, ancestor level) of every pair at every distance, against the tree's arrays."""
    n = 1 << m
    tree = bt.inorder_tree(n)
    level = np.array([m] + [(x & -x).bit_length() - 1 for x in range(1, n)])
    for d in range(1, n):
        lo = np.arange(n - d)
        top = tree.lca(lo, lo + d)
        want = {(int(a), int(b), int(c)) for a, b, c in zip(level[lo], level[lo + d], level[top], strict=True)}
        got = {tuple(int(v) for v in row) for row in btree_shift.pair_classes(m, d)}
        assert got == want, d


def test_shift_row_needs_the_whole_power_of_two_tree():
    f = make_fabric({"name": "ocs", "nodes": 96, "topology": "btree"})
    step = patterns("pairwise", "all_to_all", 96, f.algo_params(96))[0]
    lat = np.arange(30.0)
    assert btree_shift.uniform_shifts(step, 96) == ([(1, step.shape[3])], 0.0)
    assert btree_shift.shift_row(step, 96, 1.0, lat, PRICING) is None  # not a power of two
    step64 = patterns("pairwise", "all_to_all", 64, f.algo_params(64))[5]
    assert btree_shift.shift_row(step64, 64, 1.0, lat, PRICING) is not None
    assert btree_shift.shift_row(step64, 128, 1.0, lat, PRICING) is None  # a group of the tree
