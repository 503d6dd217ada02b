"""Concurrent parallel groups priced together on the fabric's topology (estimator/parallel/concurrent.py)."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel import concurrent
from estimator.parallel.concurrent import concurrent_cost, concurrent_p2p, members
from estimator.parallel.placement import group_cost


def fabric(name, nodes=16):
    return estimator.make_fabric(estimator.resolve_config([f"fabric={name}", f"fabric.nodes={nodes}"])["fabric"])


def test_members_tile_the_ranks():
    assert members(8, 2, 4) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert members(8, 2, 1) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    groups = members(64, 4, 8)
    assert sorted(r for g in groups for r in g) == list(range(64))
    with pytest.raises(EstimatorError, match="do not tile"):
        members(12, 4, 2)


def test_non_blocking_switch_prices_concurrent_groups_as_alone():
    f = fabric("ideal")
    for size, stride in ((4, 1), (4, 4), (2, 8)):
        alone = f.collective_cost("all_reduce", 2**24, "default", group_size=size).time_s
        assert concurrent_cost(f, "all_reduce", 2**24, size, stride)[0] == pytest.approx(alone, rel=1e-9)


def test_groups_sharing_ring_links_slow_each_other_down():
    f = fabric("ring")
    alone = f.collective_cost("all_reduce", 2**24, "default", group_size=4).time_s
    # four adjacent groups of 4 on a 16-node ring use disjoint links: as alone
    assert concurrent_cost(f, "all_reduce", 2**24, 4, 1)[0] == pytest.approx(alone, rel=1e-9)
    # four interleaved groups (ranks 4 apart) route over the same links: each is much slower
    assert concurrent_cost(f, "all_reduce", 2**24, 4, 4)[0] > 3 * alone
    # one group of all 16 is the group alone
    whole = f.collective_cost("all_reduce", 2**24, "default", group_size=16).time_s
    assert concurrent_cost(f, "all_reduce", 2**24, 16, 1)[0] == pytest.approx(whole, rel=1e-9)
    # every pipeline boundary (4-stage pipelines, stages 4 ranks apart) sending at once on the ring
    assert concurrent_p2p(f, 2**24, 4, 4) > 3 * f.p2p_time(0, 4, 2**24)


def test_pricing_mode_per_fabric():
    assert group_cost(fabric("ring"), "all_reduce", 2**20, 4, 4)[2] == "concurrent"
    assert group_cost(fabric("lumorph"), "all_reduce", 2**20, 4, 4)[2] == "alone"
    leaf = estimator.make_fabric(estimator.resolve_config(["system=dgx_a100", "fabric.nodes=64"])["fabric"])
    assert group_cost(leaf, "all_reduce", 2**20, 8, 8)[2] == "node"


def test_route_budget_falls_back_to_alone(monkeypatch):
    f = fabric("torus2d", 64)
    monkeypatch.setattr(concurrent, "MAX_ROUTES", 64)  # 32 groups x 2 pairs of a 2-rank exchange = 64: fits
    assert concurrent_cost(f, "all_reduce", 2**22, 2, 32) is not None
    assert concurrent_cost(f, "all_reduce", 2**22, 8, 8) is None  # 8 groups x >= 16 pairs each: over budget
    assert group_cost(f, "all_reduce", 2**22, 8, 8)[2] == "alone"


def test_estimate_records_how_each_group_was_priced():
    res = estimate(estimator.resolve_config([
        "model=llama2_7b", "parallelism=hybrid", "device=a100", "fabric=ring", "fabric.nodes=16", "parallelism.tp=2",
        "parallelism.pp=2", "parallelism.global_batch=16", "parallelism.zero=1"]))
    kinds = {c["group"]: c["pricing"] for c in res.collectives}
    assert kinds == {"tp": "concurrent", "pp": "concurrent", "dp": "concurrent"}
    strided = estimate(estimator.resolve_config([
        "model=llama2_7b", "parallelism=hybrid", "device=a100", "fabric=ring", "fabric.nodes=16", "parallelism.tp=2",
        "parallelism.pp=2", "parallelism.global_batch=16", "parallelism.zero=1", "parallelism.order=dp-tp-pp"]))
    # TP pairs 4 ranks apart on the ring share links with the other pairs: TP communication gets slower
    assert strided.metrics["tp_comm_time_s"] > 2 * res.metrics["tp_comm_time_s"]


def test_terarack_interleaved_groups_share_the_ring_wavelengths():
    f = fabric("terarack", 1024)
    alone = f.collective_cost("all_gather", 2**26, "default", group_size=16).time_s
    t, _, how = group_cost(f, "all_gather", 2**26, 16, 1)
    assert how == "alone" and t == alone  # contiguous groups: disjoint ring segments
    t, _, how = group_cost(f, "all_gather", 2**26, 16, 64)
    one_wavelength = estimator.make_fabric(estimator.resolve_config(
        ["fabric=terarack", "fabric.nodes=1024", "fabric.wavelengths=1"])["fabric"])
    # 64 interleaved groups on 64 wavelengths: one wavelength each
    assert how == "wavelength-share"
    assert t == pytest.approx(one_wavelength.collective_cost("all_gather", 2**26, "default", group_size=16).time_s)
    assert t > 10 * alone
