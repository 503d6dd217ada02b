"""TeraRack's explicit all-gathers at scale (issue #13): slots counted from step patterns (distinct
steps once, periodic steps folded) equal routing every transfer of the explicit schedule."""

from __future__ import annotations

import pytest

from estimator.errors import EstimatorError
from estimator.fabrics.optical.wdm_ring import optree_patterns, optree_schedule, pattern_slots, schedule_slots
from estimator.fabrics.terarack import TeraRackConfig, TeraRackFabric

SCHEMES = ("ring", "ne", "one_stage", "optree", "optree_best")
SIZES = [*range(2, 41), 48, 62, 64, 66, 90, 96, 100, 126, 128, 130, 210, 256]


@pytest.mark.parametrize("w", [1, 2, 3, 8, 64])
def test_pattern_slots_equal_the_schedule_routed_transfer_by_transfer(w):
    compared = 0
    for n in SIZES:
        fab = TeraRackFabric(TeraRackConfig(nodes=n, wavelengths=w))
        for scheme in SCHEMES:
            try:
                sched = fab.schedule("all_gather", scheme, n, 1.0)
            except EstimatorError:  # neighbour exchange on an odd ring: the fast path refuses it too
                with pytest.raises(EstimatorError, match="even group size"):
                    fab.explicit_cost("all_gather", scheme, n, 1e6)
                continue
            old = fab._steps_cost(schedule_slots(sched, w), 1.0 / n)
            for nbytes in (0.0, 1e3, 4 * 2**20):
                assert fab.explicit_cost("all_gather", scheme, n, nbytes) == old.time(nbytes), (n, w, scheme)
            compared += 1
    assert compared > 200


@pytest.mark.parametrize("n,digits", [(16, (4, 4)), (24, (3, 2, 4)), (1024, (4, 4, 4, 2, 2, 2, 2)), (1000, (10, 10, 10))])
def test_optree_patterns_are_its_schedule(n, digits):
    for w in (1, 2, 64):
        assert pattern_slots(optree_patterns(n, digits), n, w) == schedule_slots(optree_schedule(n, digits, 1.0), w)


def test_explicit_all_gathers_at_16384_nodes_match_the_closed_forms():
    """Ring, NE and one-stage schedules reproduce the step formulas at 16,384 nodes (one-stage:
    Lemma 1's ceil(N^2/8) wavelengths, ceil(N^2/8w) slots); OpTree's integer stages need a few
    more slots than Theorem 1's continuous formula."""
    n, m = 16384, 64 * 2**20
    fab = TeraRackFabric(TeraRackConfig(nodes=n))
    for scheme in ("ring", "ne", "one_stage"):
        assert fab.collective_cost("all_gather", m, scheme, explicit=True).time_s == pytest.approx(
            fab.collective_cost("all_gather", m, scheme).time_s, rel=1e-12), scheme
    closed = fab.collective_cost("all_gather", m, "optree")
    explicit = fab.collective_cost("all_gather", m, "optree", explicit=True).time_s
    assert closed.time_s <= explicit <= closed.time_s * 1.1
