"""``algorithm=auto`` skips a candidate that does not fit the group (issue #27): a radix-10 BCube of
1,000 servers offers halving-doubling (powers of two only); auto must price the others and pick
the cheapest of them, exactly what pricing every candidate by name picks."""

from __future__ import annotations

import pytest

from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric

CASES = [
    {"name": "bcube", "radix": 10, "nodes": 100},
    {"name": "bcube", "radix": 3, "nodes": 27},
    {"name": "torus2d", "nodes": 30},
    {"name": "fattree", "nodes": 24},
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"{p['name']}{p['nodes']}")
@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "broadcast"])
def test_auto_picks_the_cheapest_candidate_that_fits(params, collective):
    fabric = make_fabric(params)
    priced, misfits = {}, []
    for name in fabric.algorithms(collective):
        try:
            priced[name] = fabric.collective_cost(collective, 2**20, name).time_s
        except EstimatorError:
            misfits.append(name)
    assert priced, "some candidate fits"
    auto = make_fabric(params).collective_cost(collective, 2**20, "auto")  # a fresh fabric: no memo
    assert auto.algorithm in priced
    assert auto.time_s == pytest.approx(min(priced.values()), rel=1e-12)
    if params["name"] == "bcube" and params["nodes"] == 100 and collective == "all_reduce":
        assert "halving_doubling" in misfits  # the case the issue found


def test_bcube_radix_10_at_1000_servers_auto_does_not_raise():
    fabric = make_fabric({"name": "bcube", "radix": 10, "nodes": 1000})
    with pytest.raises(EstimatorError, match="power of 2"):
        fabric.collective_cost("all_reduce", 64 * 2**20, "halving_doubling")
    cost = fabric.collective_cost("all_reduce", 64 * 2**20, "auto")
    assert cost.algorithm != "halving_doubling" and cost.time_s > 0
