"""Topology layer: routing, YAML loading, contention between concurrent collectives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from estimator.collectives import algorithm, mark_reconfigurations, merge_concurrent, price_schedule
from estimator.collectives.pricing import PricingParams
from estimator.errors import EstimatorError
from estimator.topology import builders
from estimator.topology.loader import load_topology, topology_from_dict

REPO = Path(__file__).resolve().parents[1]


def test_ecmp_splits_over_spines():
    topo = builders.leaf_spine(16, 8, 100e9, 4, 50e9, 1e-6, 1e-6, 1e-6)
    r = topo.route(0, 9)
    assert r.latency_s == pytest.approx(3e-6)
    spine_links = [lk for lk in r.links if "spine" in topo.labels[topo.link_ends(lk)[1]]]
    assert len(spine_links) == 4
    assert np.allclose(r.fractions[np.isin(r.links, spine_links)], 0.25)
    assert topo.route(0, 1).latency_s == pytest.approx(1e-6)


def test_dimension_order_goes_x_then_y():
    topo = builders.torus2d(4, 4, 1e9, 1e-6)
    r = topo.route(0, 5)  # (0,0) -> (1,1): +X then +Y
    ends = [topo.link_ends(lk) for lk in r.links]
    assert [topo.labels[b] for _, b in ends] == ["node0_1", "node1_1"]
    assert topo.route(0, 3).links.size == 1  # wrap-around is one hop


def test_unreachable_endpoint_is_an_error():
    topo = topology_from_dict({"endpoints": 3, "links": [["gpu0", "gpu1"]], "defaults": {"bandwidth_Bps": 1e9}})
    with pytest.raises(EstimatorError, match="unreachable"):
        topo.route(0, 2)


@pytest.mark.parametrize("doc,match", [
    ({"endpoints": 2, "links": [["gpu0", "gpuX"]], "defaults": {"bandwidth_Bps": 1e9}}, "undeclared"),
    ({"endpoints": 2, "links": [["gpu0", "gpu1"]]}, "bandwidth"),
    ({"endpoints": 2, "links": [["gpu0", "gpu1"]], "defaults": {"bandwidth_Bps": -1}}, "positive bandwidth"),
    ({"endpoints": 2, "routing": "magic", "links": [["gpu0", "gpu1"]]}, "routing"),
    ({"builder": {"type": "torus2d", "rows": 2}}, "builder torus2d"),
    ({"endpoints": 2, "links": [], "colour": 1}, "unknown key"),
])
def test_bad_topology_documents(doc, match):
    with pytest.raises(EstimatorError, match=match):
        topology_from_dict(doc)


def test_shipped_topology_files_load():
    files = sorted((REPO / "topologies").glob("*.yaml"))
    assert files
    for f in files:
        assert load_topology(f).num_endpoints >= 2


def test_contention_shared_link_vs_disjoint():
    # two leaves of 4 endpoints, one spine; each leaf has ONE uplink
    topo = builders.leaf_spine(8, 4, 100e9, 1, 100e9, 0.0, 0.0, 0.0)
    ring2 = algorithm("ring").schedule("all_reduce", 2, 8e6)
    params = PricingParams(alpha_s=1e-6)
    alone_cross = price_schedule(ring2, topo, params, ranks=[0, 4])
    both_cross = price_schedule(merge_concurrent([(ring2, [0, 4]), (ring2, [1, 5])]), topo, params)
    assert both_cross > alone_cross * 1.5  # both cross leaf0<->spine: they share it
    alone_local = price_schedule(ring2, topo, params, ranks=[0, 1])
    both_local = price_schedule(merge_concurrent([(ring2, [0, 1]), (ring2, [4, 5])]), topo, params)
    assert both_local == pytest.approx(alone_local, rel=1e-12)  # disjoint links: no slowdown


def test_reconfiguration_marks_changed_circuits():
    sched = algorithm("halving_doubling").schedule("all_reduce", 8, 1e6)
    marked = mark_reconfigurations(sched)
    # halving uses partners at distance 1, 2, 4, doubling 4, 2, 1: the middle pair keeps its circuits
    assert [s.reconfigure for s in marked.steps] == [True, True, True, False, True, True]
    ring = mark_reconfigurations(algorithm("ring").schedule("all_reduce", 8, 1e6))
    assert sum(s.reconfigure for s in ring.steps) == 1
    star = builders.star(8, 300e9)
    base = price_schedule(marked, star, PricingParams(alpha_s=0.7e-6))
    with_reconf = price_schedule(marked, star, PricingParams(alpha_s=0.7e-6, reconfig_s=3.7e-6))
    assert with_reconf - base == pytest.approx(5 * 3.7e-6, rel=1e-9)


@pytest.mark.parametrize("make", [
    lambda: builders.bcube(3, 3, 10e9, 1e-6),
    lambda: builders.fat_tree(4, 16, 10e9, 1e-6),
    lambda: builders.leaf_spine(32, 8, 100e9, 4, 50e9, 1e-6, 2e-6, 3e-6),
    lambda: builders.rail_optimized(32, 8, 300e9, 25e9, 1e-6),
    lambda: builders.ring(12, 10e9, 1e-6),
    lambda: builders.star(16, 10e9, 1e-6),
])
def test_bulk_dag_pricing_equals_per_route_pricing(make):
    from estimator.collectives.pricing import _bulk_step, _routed_step
    from estimator.collectives.schedule import Transfer

    topo = make()
    rng = np.random.default_rng(7)
    n = topo.num_endpoints
    moving = [Transfer(int(a), int(b), float(rng.uniform(1, 10)))
              for a, b in rng.integers(0, n, size=(6 * n, 2)) if a != b]
    params = PricingParams(alpha_s=1e-7)
    ranks = list(range(n))
    r0, r1 = _routed_step(moving, topo, ranks, params)
    b0, b1 = _bulk_step(moving, topo, ranks, params)
    assert np.allclose(r0, b0, rtol=1e-12, atol=0)
    assert np.allclose(r1, b1, rtol=1e-9, atol=0)


def test_per_step_extra_time_is_added():
    from estimator.collectives.schedule import Schedule, Step

    sched = algorithm("ring").schedule("all_gather", 4, 4e6)
    slow = Schedule(sched.collective, sched.algorithm, 4, sched.nbytes,
                    (Step(sched.steps[0].transfers, False, 1e-3), *sched.steps[1:]))
    star = builders.star(4, 100e9)
    assert price_schedule(slow, star) - price_schedule(sched, star) == pytest.approx(1e-3, rel=1e-9)


def test_route_cache_is_bounded_and_prices_do_not_change(monkeypatch):
    """Custom graphs keep the schedule path; the route cache drops its oldest routes beyond
    ROUTE_BUDGET entries and re-routes on demand, with identical prices."""
    from estimator.fabrics import custom
    from estimator.fabrics.registry import make_fabric
    from estimator.topology import graph

    free = make_fabric({"name": "custom", "nodes": 8})
    ref = free.collective_cost("all_to_all", 1e6, "pairwise", explicit=True).time_s
    monkeypatch.setattr(graph, "ROUTE_BUDGET", 20)
    monkeypatch.setattr(custom, "_GRAPH_COMPILED", {})  # compile again (configs of one file share schedules)
    tight = make_fabric({"name": "custom", "nodes": 8})
    assert tight.collective_cost("all_to_all", 1e6, "pairwise", explicit=True).time_s == ref
    topo = tight.topology("pairwise")
    assert 0 < topo._route_entries <= 20 and len(topo._routes) < 8 * 7
