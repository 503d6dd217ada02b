"""Closed forms vs explicit schedules, and the hand formulas, on the ideal switch."""

from __future__ import annotations

import math

import pytest

from estimator.collectives.algorithms import algorithm
from estimator.errors import EstimatorError
from estimator.fabrics.ideal import SWITCH_OFFERS, IdealFabric

ALPHA, BW = 0.7e-6, 300e9


def ideal(n: int = 64, **kw) -> IdealFabric:
    return IdealFabric.from_dict({"name": "ideal", "nodes": n, **kw})


@pytest.mark.parametrize("n", [2, 3, 8, 64])
@pytest.mark.parametrize("m", [1.0, 1e6, 67108864.0])
def test_ring_all_reduce_is_exact_alpha_beta(n, m):
    cost = ideal(n).collective_cost("all_reduce", m, "ring")
    assert cost.time_s == pytest.approx(2 * (n - 1) * ALPHA + 2 * (n - 1) / n * m / BW, rel=1e-12)
    assert cost.steps == 2 * (n - 1)
    explicit = ideal(n).collective_cost("all_reduce", m, "ring", explicit=True)
    assert explicit.time_s == pytest.approx(cost.time_s, rel=1e-12)


@pytest.mark.parametrize("n", [2, 4, 16, 64])
def test_halving_doubling_formula(n):
    m = 1e7
    lg = int(math.log2(n))
    want = 2 * lg * ALPHA + 2 * (n - 1) / n * m / BW  # Thakur, Rabenseifner & Gropp 2005
    assert ideal(n).collective_cost("all_reduce", m, "halving_doubling").time_s == pytest.approx(want, rel=1e-12)
    assert ideal(n).collective_cost("all_reduce", m, "halving_doubling", explicit=True).time_s == pytest.approx(
        want, rel=1e-12)


@pytest.mark.parametrize("n", [2, 5, 8, 13, 64])
def test_double_binary_tree_formula(n):
    m = 1e7
    h = (n - 1).bit_length()
    want = sum(2 * (ALPHA + (2 if 3 * 2**s < n else 1) * m / 2 / BW) for s in range(h))
    assert ideal(n).collective_cost("all_reduce", m, "double_binary_tree").time_s == pytest.approx(want, rel=1e-12)
    assert ideal(n).collective_cost("all_reduce", m, "double_binary_tree", explicit=True).time_s == pytest.approx(
        want, rel=1e-12)


def test_hand_checked_64_node_switch():
    # 64 MiB on 64 GPUs, 300 GB/s, 0.7 us. HD: 12 alpha + 2*63/64*M/B; DBT: H = 6 levels, c_s = 2 for s <= 4
    m = 64 * 2**20
    f = ideal(64)
    assert f.collective_cost("all_reduce", m, "halving_doubling").time_s == pytest.approx(
        12 * 0.7e-6 + 2 * 63 / 64 * m / 300e9, rel=1e-12)
    assert f.collective_cost("all_reduce", m, "halving_doubling").time_s == pytest.approx(448.80192e-6, rel=1e-7)
    dbt = 2 * (6 * 0.7e-6 + 5 * m / 300e9 + m / 2 / 300e9)
    assert f.collective_cost("all_reduce", m, "double_binary_tree").time_s == pytest.approx(dbt, rel=1e-12)


def _valid(coll, name, n):
    try:
        algorithm(name).check(coll, n)
    except EstimatorError:
        return False
    return True


def test_closed_forms_equal_schedules_for_every_algorithm_up_to_64():
    f = ideal(64, memory_bandwidth_Bps=50e9)  # reductions priced too
    checked = 0
    for coll, names in SWITCH_OFFERS.items():
        extra = ("radix2", "radix3", "radix8") if coll in ("all_reduce", "reduce_scatter", "all_gather") else ()
        extra += ("pipelined_dbt1", "pipelined_dbt3") if coll == "all_reduce" else ()
        for name in names + extra:
            for n in range(1, 65):
                if not _valid(coll, name, n):
                    continue
                fast = f.collective_cost(coll, 3e6, name, n)
                slow = f.collective_cost(coll, 3e6, name, n, explicit=True)
                assert fast.steps == slow.steps, (coll, name, n)
                assert fast.time_s == pytest.approx(slow.time_s, rel=1e-9, abs=0), (coll, name, n)
                checked += 1
    assert checked > 1500


def test_constraints_are_validated():
    f = ideal(64)
    with pytest.raises(EstimatorError, match="power of 2"):
        f.collective_cost("all_reduce", 1e6, "recursive_doubling", 6)
    with pytest.raises(EstimatorError, match="power of 4"):
        f.collective_cost("all_reduce", 1e6, "radix4", 32)
    with pytest.raises(EstimatorError, match="even"):
        f.collective_cost("all_gather", 1e6, "neighbor_exchange", 7)
    with pytest.raises(EstimatorError, match="not offered"):
        f.collective_cost("broadcast", 1e6, "ring")
    with pytest.raises(EstimatorError, match="group of 65"):
        f.collective_cost("all_reduce", 1e6, "ring", 65)
    with pytest.raises(EstimatorError, match="unknown collective"):
        f.collective_cost("allsum", 1e6)


def test_auto_picks_the_fastest_valid():
    f = ideal(64)
    for m in (1e3, 1e5, 1e8):
        best = f.collective_cost("all_reduce", m, "auto")
        for name in SWITCH_OFFERS["all_reduce"]:
            if _valid("all_reduce", name, 64):
                assert best.time_s <= f.collective_cost("all_reduce", m, name).time_s
    # for a group of 6 the power-of-two algorithms are skipped rather than failing
    assert f.collective_cost("all_reduce", 1e3, "auto", 6).algorithm not in ("recursive_doubling", "halving_doubling")


def test_radix_k_trades_steps_for_nothing_on_a_switch():
    f = ideal(64)
    r2 = f.collective_cost("all_reduce", 1e6, "radix2")
    r4 = f.collective_cost("all_reduce", 1e6, "radix4")
    assert (r2.steps, r4.steps) == (12, 6)
    assert r2.time_s - r4.time_s == pytest.approx(6 * ALPHA, rel=1e-9)


def test_pipelined_tree_is_the_tree_with_one_chunk_and_approaches_2M_over_B():
    f = ideal(64)
    m = 64 * 2**20
    one = f.collective_cost("all_reduce", m, "pipelined_dbt1")
    assert one.time_s == pytest.approx(f.collective_cost("all_reduce", m, "double_binary_tree").time_s, rel=1e-12)
    deep = f.collective_cost("all_reduce", m, "pipelined_dbt256")
    assert deep.steps == 2 * (6 + 256 - 1)
    # steady state: every rank sends M/(2C) in both trees or receives from two children -> M/C per step
    assert deep.time_s == pytest.approx(deep.steps * ALPHA + 2 * (6 + 255) * m / 256 / BW, rel=0.02)
    assert deep.time_s < 0.35 * one.time_s


def test_inorder_tree_matches_nccl_btree_picture():
    # NCCL src/graph/trees.cc comment, 13 ranks: 0-8; 8: 4, 12; 4: 2, 6; 12: 10; 2: 1, 3; 6: 5, 7; 10: 9, 11
    from estimator.collectives.trees import inorder_parents, second_tree_rank

    want = {8: 0, 4: 8, 12: 8, 2: 4, 6: 4, 10: 12, 1: 2, 3: 2, 5: 6, 7: 6, 9: 10, 11: 10}
    parents = inorder_parents(13)
    assert {r: parents[r] for r in want} == want
    for n in range(2, 65):  # every rank is interior in at most one of the two trees
        interior_a = {parents_r for parents_r in inorder_parents(n)[1:]}
        interior_b = {second_tree_rank(p, n) for p in inorder_parents(n)[1:]}
        assert len(interior_a & interior_b) <= 1
