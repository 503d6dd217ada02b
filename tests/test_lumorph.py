"""Lumorph (seed 000): Lumorph-k vs Ring on the ideal switch, explicit schedule = closed form."""

import pytest

from estimator.errors import EstimatorError
from estimator.fabrics.lumorph import LumorphConfig, LumorphFabric, lumorph_k_schedule, radix_digits
from estimator.fabrics.registry import make_fabric

SMALL = 1024  # bytes: alpha-dominated at 300 GB/s


def ideal_ring(n, algorithm="ring"):
    """All-reduce on the `ideal` switch fabric (seed 000's baseline: alpha 0.7 us, 300 GB/s)."""
    fab = make_fabric({"name": "ideal", "nodes": n})
    return lambda b: fab.collective_cost("all_reduce", b, algorithm).time_s


@pytest.mark.parametrize("n", [64, 128, 256])
def test_lumorph_cuts_alpha_dominated_allreduce_vs_ring_on_ideal_switch(n):
    fab = make_fabric({"name": "lumorph", "nodes": n})
    ring = ideal_ring(n)(SMALL)
    red = {k: 1 - fab.collective_cost("all_reduce", SMALL, f"lumorph_{k}").time_s / ring for k in (2, 4)}
    print(f"N={n}: time reduction vs Ring on ideal switch at {SMALL} B: Lumorph-2 {red[2]:.0%}, "
          f"Lumorph-4 {red[4]:.0%} (paper: nearly 80%)")
    assert red[4] >= 0.70
    assert red[2] >= 0.40
    assert red[4] > red[2]
    # vs Tree: the library's (non-pipelined) double binary tree pays only 2 log2(N) x 0.7 us, so at
    # 1 KB it beats Lumorph's 4.4 us rounds (the paper claims ~80% less than Tree too: a mismatch,
    # see the report); from 1 MiB on Lumorph-4 wins, as the tree is not bandwidth-optimal
    tree = ideal_ring(n, "double_binary_tree")
    for size in (SMALL, 2**20):
        red_tree = 1 - fab.collective_cost("all_reduce", size, "lumorph_4").time_s / tree(size)
        print(f"N={n}: Lumorph-4 vs Tree on ideal switch at {size} B: {red_tree:.0%} less time")
    assert tree(SMALL) < fab.collective_cost("all_reduce", SMALL, "lumorph_4").time_s
    assert fab.collective_cost("all_reduce", 2**20, "lumorph_4").time_s < tree(2**20)
    # the gain grows with the number of GPUs (paper: "performance improves with the number of GPUs")
    if n > 64:
        small = make_fabric({"name": "lumorph", "nodes": n // 2})
        prev = 1 - small.collective_cost("all_reduce", SMALL, "lumorph_4").time_s / ideal_ring(n // 2)(SMALL)
        assert red[4] > prev


@pytest.mark.parametrize("n", [64, 128, 256])
def test_crossover_where_bandwidth_takes_over(n):
    fab = make_fabric({"name": "lumorph", "nodes": n})
    m4 = fab._model_cached("all_reduce", "lumorph_4", n)
    m2 = fab._model_cached("all_reduce", "lumorph_2", n)
    ring = ideal_ring(n)
    ar, br = ring(0.0), ring(1.0) - ring(0.0)
    # Lumorph-2 is bandwidth-optimal like Ring: its beta term equals its alpha term at this size
    beta_eq_alpha = m2.fixed_s / m2.per_byte_s
    # Lumorph-4 drives 3 circuits with 5 of 16 wavelengths each: 15/16 of the egress, so Ring on
    # the ideal switch overtakes it at a finite buffer size
    cross = (ar - m4.fixed_s) / (m4.per_byte_s - br)
    print(f"N={n}: Lumorph-2 beta = alpha at {beta_eq_alpha / 2**20:.2f} MiB; "
          f"Lumorph-4 vs Ring crossover at {cross / 2**20:.1f} MiB")
    assert m4.per_byte_s > br and cross > 0
    t4, tr = fab.collective_cost("all_reduce", cross * 1.01, "lumorph_4").time_s, ring(cross * 1.01)
    assert t4 > tr
    assert fab.collective_cost("all_reduce", cross * 0.99, "lumorph_4").time_s < ring(cross * 0.99)


@pytest.mark.parametrize("n,k", [(8, 2), (16, 4), (32, 4), (16, 8), (8, 8), (8, 4), (32, 8)])  # last two: mixed radix
def test_explicit_schedule_priced_by_library_equals_closed_form(n, k):
    fab = LumorphFabric(LumorphConfig(nodes=n, max_radix=max(4, k), mzi_degree=max(3, k - 1)))  # k = 8: a hypothetical 1x7 MZI
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        closed = fab.collective_cost(coll, 3e6, f"lumorph_{k}")
        explicit = fab.collective_cost(coll, 3e6, f"lumorph_{k}", explicit=True)
        assert explicit.time_s == pytest.approx(closed.time_s, rel=1e-9), coll
        assert explicit.time_s == pytest.approx(fab.library_cost(coll, f"lumorph_{k}", n, 3e6), rel=1e-12), coll
        assert fab.schedule(coll, f"lumorph_{k}", n, 3e6).num_steps == closed.steps
        sched = lumorph_k_schedule(coll, n, k, 3e6)
        assert sched.num_steps == closed.steps
    assert lumorph_k_schedule("all_reduce", n, k, 1.0).num_steps == 2 * len(radix_digits(n, k))


def test_rounds_and_auto():
    fab = LumorphFabric(LumorphConfig(nodes=128))
    assert radix_digits(128, 4) == (4, 4, 4, 2)
    assert fab.collective_cost("all_reduce", 1024, "lumorph_4").steps == 8
    assert fab.collective_cost("all_reduce", 1024, "lumorph_2").steps == 14
    small = fab.collective_cost("all_reduce", 1024, "auto")
    assert small.algorithm.startswith("lumorph_") and small.algorithm != "lumorph_2"
    big = fab.collective_cost("all_reduce", 2**30, "auto")
    assert big.time_s <= min(fab.collective_cost("all_reduce", 2**30, a).time_s for a in fab.valid_algorithms("all_reduce", 128))
    assert big.algorithm != "lumorph_4"  # split circuits lose 1/16 of the bandwidth


def test_radix_is_limited_by_the_tiles_1x3_mzi_switches():
    # seed 000 Sec. 2: 1x3 MZIs -> at most 3 circuits per tile -> k = 2, 4 only; auto never offers Lumorph-8
    fab = LumorphFabric(LumorphConfig(nodes=256))
    assert fab.algorithms("all_reduce") == ("lumorph_2", "lumorph_4", "ring", "dnc")
    assert fab.collective_cost("all_reduce", 1024, "auto").algorithm in ("lumorph_2", "lumorph_4")
    with pytest.raises(EstimatorError, match="1x3 MZI"):
        make_fabric({"name": "lumorph", "max_radix": 8})
    with pytest.raises(EstimatorError, match="unknown algorithm 'lumorph_8'"):
        fab.collective_cost("all_to_all", 1e6, "lumorph_8")


def test_non_power_of_two_uses_ring():
    fab = LumorphFabric(LumorphConfig(nodes=96))
    assert fab.collective_cost("all_reduce", 1e6, "default", group_size=6).algorithm == "ring"
    assert fab.collective_cost("all_reduce", 1e6, "default", group_size=96).algorithm == "ring"
    assert fab.collective_cost("all_reduce", 1e6, "auto", group_size=96).algorithm in ("ring", "dnc")
    with pytest.raises(EstimatorError, match="cannot run"):
        fab.collective_cost("all_reduce", 1e6, "lumorph_2", group_size=6)


@pytest.mark.parametrize(
    "params",
    [{"tiles_per_server": 33}, {"max_radix": 6}, {"bandwidth_Bps": 0}, {"wavelengths": 0}, {"bogus": 1}],
)
def test_bad_config_is_one_line_error(params):
    with pytest.raises(EstimatorError) as exc:
        make_fabric({"name": "lumorph", **params})
    assert "\n" not in str(exc.value)


def test_broadcast_and_all_to_all_any_size():
    fab = LumorphFabric(LumorphConfig(nodes=96))
    b2 = fab.collective_cost("broadcast", 1e6, "lumorph_2")
    b4 = fab.collective_cost("broadcast", 1e6, "lumorph_4")
    assert b2.steps == 7 and b4.steps == 4  # ceil(log2 96), ceil(log4 96)
    # k = 4 splits the egress over 3 circuits of 5/16: each round is 16/5 times slower per byte
    assert b4.time_s - 4 * 4.4e-6 == pytest.approx(4 * 1e6 / (300e9 * 5 / 16))
    a2a = fab.collective_cost("all_to_all", 96e6, "lumorph_4")
    assert a2a.steps == 32  # ceil(95 / 3) rounds of at most 3 circuits


def test_paper_accounting_charges_every_round():
    n = 64
    ours = LumorphFabric(LumorphConfig(nodes=n)).collective_cost("all_reduce", 1024, "lumorph_4")
    paper = LumorphFabric(LumorphConfig(nodes=n, reconfig_every_round=True))
    cost = paper.collective_cost("all_reduce", 1024, "lumorph_4")
    assert cost.time_s - ours.time_s == pytest.approx(3.7e-6)  # the reused all-gather circuits
    assert cost.reconfig_s == pytest.approx(6 * 3.7e-6)
    assert paper.collective_cost("all_reduce", 1024, "lumorph_4", explicit=True).time_s == pytest.approx(cost.time_s)
    assert make_fabric({"name": "lumorph", "reconfig_every_round": True}).cfg.reconfig_every_round is True


@pytest.mark.parametrize("every", [False, True])
def test_array_priced_explicit_schedule_equals_the_library_on_circuit_meshes(every):
    fab = LumorphFabric(LumorphConfig(nodes=64, reconfig_every_round=every))
    for n in (2, 4, 32, 64):
        for k in (2, 4):
            for coll in ("all_reduce", "reduce_scatter", "all_gather"):
                fast = fab.explicit_cost(coll, f"lumorph_{k}", n, 1e5)
                assert fast == pytest.approx(fab.library_cost(coll, f"lumorph_{k}", n, 1e5), rel=1e-12)
