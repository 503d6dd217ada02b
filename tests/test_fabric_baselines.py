"""ring, torus2d, bcube, fattree, superpod, custom: closed forms vs schedules, hand-checked numbers."""

from __future__ import annotations

import math

import pytest

from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric

RS_AR_AG = ("all_reduce", "reduce_scatter", "all_gather")


def _same(fabric, coll, name, m=1e6):
    fast = fabric.collective_cost(coll, m, name)
    slow = fabric.collective_cost(coll, m, name, explicit=True)
    assert fast.steps == slow.steps
    assert fast.time_s == pytest.approx(slow.time_s, rel=1e-9, abs=0), (fabric.name, coll, name, fabric.nodes)


def test_ring_fabric_closed_forms_equal_schedules():
    for n in range(2, 65):
        f = make_fabric({"name": "ring", "nodes": n, "memory_bandwidth_Bps": 1e10})
        for coll in RS_AR_AG:
            _same(f, coll, "ring")
            _same(f, coll, "bidir_ring")


def test_torus_fabric_closed_forms_equal_schedules():
    for n in range(2, 65):
        for rows in (r for r in range(1, math.isqrt(n) + 1) if n % r == 0):
            f = make_fabric({"name": "torus2d", "nodes": n, "rows": rows, "cols": n // rows,
                             "memory_bandwidth_Bps": 1e10})
            for coll in RS_AR_AG:
                _same(f, coll, "torus2d")


def test_bcube_closed_forms_equal_schedules():
    shapes = [(r, lv) for r in range(2, 65) for lv in range(1, 7) if r**lv <= 64]
    assert len(shapes) == 76
    for r, levels in shapes:
        f = make_fabric({"name": "bcube", "nodes": r**levels, "radix": r, "memory_bandwidth_Bps": 1e10})
        for coll in RS_AR_AG:
            _same(f, coll, "dimwise")
            _same(f, coll, "radix")


def test_hand_checked_ring_of_64():
    # 64 nodes, 50 GB/s / 500 ns links, ring all-reduce: 126 steps of (500 ns + (M/64) / 50 GB/s)
    f = make_fabric({"name": "ring", "nodes": 64, "link_bandwidth_Bps": 50e9, "link_latency_s": 500e-9})
    one_mib = f.collective_cost("all_reduce", 2**20, "ring")
    assert one_mib.time_s == pytest.approx(126 * (500e-9 + 16384 / 50e9), rel=1e-12)
    assert one_mib.time_s == pytest.approx(104.28768e-6, rel=1e-9)
    big = f.collective_cost("all_reduce", 64 * 2**20, "ring")
    assert big.time_s == pytest.approx(2.70541152e-3, rel=1e-9)
    assert f.collective_cost("all_reduce", 2**20, "ring", explicit=True).time_s == pytest.approx(one_mib.time_s)


def test_hand_checked_all_to_all_on_torus_link_sharing():
    # 4x4 torus, X-then-Y routing, ties go +: each +X/+Y link carries 3 (src, dst col) pairs x 4 rows
    # x M/16 = 0.75 M; the 4-hop transfers see it: 4 x 500 ns + 0.75 M / B. Without sharing M/16 / B.
    f = make_fabric({"name": "torus2d", "nodes": 16, "link_bandwidth_Bps": 50e9, "link_latency_s": 500e-9})
    m = 16e6
    cost = f.collective_cost("all_to_all", m, "direct")
    assert cost.time_s == pytest.approx(4 * 500e-9 + 0.75 * m / 50e9, rel=1e-12)
    assert cost.time_s > 10 * (m / 16 / 50e9)


def test_bcube_dimwise_uses_all_levels():
    f = make_fabric({"name": "bcube", "nodes": 512, "radix": 8})
    dim = f.collective_cost("all_reduce", 64e6, "dimwise").time_s
    one = f.collective_cost("all_reduce", 64e6, "radix").time_s
    assert dim < one / 2.5  # 3 levels busy instead of 1


@pytest.mark.parametrize("params,match", [
    ({"name": "bcube", "nodes": 500, "radix": 8}, "power"),
    ({"name": "torus2d", "nodes": 16, "rows": 3, "cols": 5}, "must equal"),
    ({"name": "fattree", "nodes": 20, "k": 4}, "hold"),
    ({"name": "superpod", "nodes": 12}, "whole number"),
    ({"name": "ring", "nodes": 8, "link_bandwidth_Bps": 0.0}, "positive"),
    ({"name": "custom", "nodes": 9}, "has 8 endpoints"),
    ({"name": "custom", "topology": "topologies/nope.yaml"}, "cannot read"),
])
def test_baseline_validation(params, match):
    with pytest.raises(EstimatorError, match=match):
        make_fabric(params)


def test_every_baseline_prices_every_collective():
    fabrics = [
        {"name": "ring", "nodes": 8}, {"name": "torus2d", "nodes": 16}, {"name": "fattree", "nodes": 16},
        {"name": "bcube", "nodes": 16, "radix": 4}, {"name": "superpod", "nodes": 16}, {"name": "custom"},
        {"name": "nvlink_leafspine", "nodes": 16},
    ]
    for params in fabrics:
        f = make_fabric(params)
        for coll in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "gather", "all_to_all",
                     "p2p"):
            cost = f.collective_cost(coll, 1e6, "auto")
            assert cost.time_s > 0 and cost.steps >= 1, (params["name"], coll)


def test_fattree_never_beats_a_star_with_the_same_links():
    ft = make_fabric({"name": "fattree", "nodes": 16, "link_latency_s": 0.0})
    star = make_fabric({"name": "ideal", "nodes": 16, "bandwidth_Bps": 12.5e9, "alpha_s": 0.0})
    lower = star.collective_cost("all_reduce", 1e7, "ring").time_s
    got = ft.collective_cost("all_reduce", 1e7, "ring").time_s
    assert got >= lower * (1 - 1e-12)
    assert got <= lower * (1 + 1e-9)  # per-hop ECMP spreads the ring's neighbour flows without collisions


def test_superpod_cross_server_is_nic_bound():
    f = make_fabric({"name": "superpod", "nodes": 16, "alpha_s": 0.0, "switch_latency_s": 0.0})
    # GPU0 -> GPU8 (same rail, other server): one NIC of 25 GB/s, ECMP can also relay over NVLink to
    # other rails, so it is at least as fast as the NIC alone
    assert f.p2p_time(0, 8, 25e6) <= 25e6 / 25e9 + 1e-12
    assert f.p2p_time(0, 1, 300e6) == pytest.approx(300e6 / 300e9, rel=1e-12)


def test_custom_builder_file_prices_like_the_builtin_fabric():
    custom = make_fabric({"name": "custom", "nodes": 16, "topology": "topologies/torus_4x4.yaml"})
    torus = make_fabric({"name": "torus2d", "nodes": 16, "link_bandwidth_Bps": 12.5e9, "link_latency_s": 5e-6})
    for coll, algo in (("all_to_all", "direct"), ("all_reduce", "ring"), ("all_reduce", "double_binary_tree")):
        assert custom.collective_cost(coll, 4e6, algo).time_s == pytest.approx(
            torus.collective_cost(coll, 4e6, algo, explicit=True).time_s, rel=1e-12)


def test_leafspine_p2p_hand_checked():
    f = make_fabric({"name": "nvlink_leafspine", "nodes": 16, "latency_model": "alpha"})
    # other node: alpha + 3 switches + M over 4 ECMP spine paths of 100 GB/s (GPU link 450 GB/s is faster)
    assert f.p2p_time(0, 8, 4e8) == pytest.approx(0.7e-6 + 3e-6 + 4e8 / 400e9, rel=1e-12)
    assert f.p2p_time(0, 1, 4.5e8) == pytest.approx(0.7e-6 + 1e-6 + 4.5e8 / 450e9, rel=1e-12)
    assert f.collective_cost("p2p", 4e8, group_size=16).time_s == pytest.approx(f.p2p_time(0, 15, 4e8), rel=1e-12)


def test_fabrics_pickle_after_use():
    import pickle

    for params in ({"name": "torus2d", "nodes": 16}, {"name": "custom", "topology": "topologies/torus_4x4.yaml",
                                                      "nodes": 16}):
        f = make_fabric(params)
        t = f.collective_cost("all_to_all", 1e6).time_s
        assert pickle.loads(pickle.dumps(f)).collective_cost("all_to_all", 1e6).time_s == t
