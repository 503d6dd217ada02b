"""Lumorph (seed 000): Lumorph-k vs Ring on the ideal switch, explicit schedule = closed form."""

import pytest

from estimator.errors import EstimatorError
from estimator.fabrics.lumorph import LumorphConfig, LumorphFabric, lumorph_k_schedule, radix_digits
from estimator.fabrics.optical.circuits import price_on_circuits
from estimator.fabrics.registry import make_fabric

SMALL = 1024  # bytes: alpha-dominated at 300 GB/s


def ideal_ring(n):
    """Ring all-reduce on the ideal switch (alpha 0.7 us, 300 GB/s): the `ideal` fabric when it is
    registered, else the same alpha-beta ring on a Lumorph with no reconfiguration."""
    try:
        fab = make_fabric({"name": "ideal", "nodes": n})
        return lambda b: fab.collective_cost("all_reduce", b, "ring").time_s
    except EstimatorError:
        fab = LumorphFabric(LumorphConfig(nodes=n, reconfig_s=0.0))
        return lambda b: fab.collective_cost("all_reduce", b, "ring").time_s


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


@pytest.mark.parametrize("n,k", [(8, 2), (16, 4), (32, 4), (16, 8)])
def test_explicit_schedule_equals_closed_form(n, k):
    fab = LumorphFabric(LumorphConfig(nodes=n))
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        sched = lumorph_k_schedule(coll, n, k, 3e6)
        t, _ = price_on_circuits(sched, 300e9, 0.7e-6, 3.7e-6, 16)
        if coll == "all_gather":
            t_closed = fab.collective_cost(coll, 3e6, f"lumorph_{k}").time_s
            assert t == pytest.approx(t_closed, rel=1e-9)
        elif coll == "all_reduce":
            assert t == pytest.approx(fab.collective_cost(coll, 3e6, f"lumorph_{k}").time_s, rel=1e-9)
            assert sched.num_steps == 2 * len(radix_digits(n, k))


def test_rounds_and_auto():
    fab = LumorphFabric(LumorphConfig(nodes=128))
    assert radix_digits(128, 4) == (4, 4, 4, 2)
    assert fab.collective_cost("all_reduce", 1024, "lumorph_4").steps == 8
    assert fab.collective_cost("all_reduce", 1024, "lumorph_2").steps == 14
    small = fab.collective_cost("all_reduce", 1024, "auto")
    assert small.algorithm.startswith("lumorph_") and small.algorithm != "lumorph_2"
    big = fab.collective_cost("all_reduce", 2**30, "auto")
    assert big.time_s <= min(fab.collective_cost("all_reduce", 2**30, a).time_s for a in fab.valid_algorithms("all_reduce", 128))
    assert big.algorithm not in ("lumorph_4", "lumorph_8")  # split circuits lose 1/16 of the bandwidth


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
