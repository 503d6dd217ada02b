"""The baseline broadcasts (pipelined chain / tree, BCube's spanning trees): closed forms equal the
schedules priced on a star, every rank receives the whole buffer, and `auto` on a baseline picks them."""

from __future__ import annotations

import pytest

from estimator.collectives.algorithms import algorithm
from estimator.collectives.params import AlgoParams
from estimator.collectives.pricing import PricingParams, compile_schedule
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from estimator.topology.builders import star

NAMES = ("pipelined_chain", "pipelined_chain3", "pipelined_tree", "pipelined_tree1", "pipelined_tree5", "spanning_tree")


def _received(sched, n):
    got = [0.0] * n
    got[0] = sched.nbytes
    for st in sched.steps:
        for t in st.transfers:
            got[t.dst] += t.nbytes
    return got


@pytest.mark.parametrize("name", NAMES)
def test_closed_form_equals_schedule_on_a_star(name):
    checked = 0
    for n in range(2, 65):
        p = AlgoParams(radix=4 if name == "spanning_tree" else 2)
        if name == "spanning_tree" and n not in (4, 16, 64):
            with pytest.raises(EstimatorError):
                algorithm(name).check("broadcast", n, p)
            continue
        sched = algorithm(name).schedule("broadcast", n, 3e6, p)
        assert _received(sched, n) == pytest.approx([3e6] * n)  # every rank gets the whole buffer exactly once
        topo = star(n, 25e9, 0.0, "s")
        slow = compile_schedule(sched, topo, PricingParams(alpha_s=1e-6)).time(3e6)
        fast, steps = algorithm(name).switch_cost("broadcast", n, 3e6, 1e-6, 25e9, 0.0, p)
        assert steps == sched.num_steps
        assert fast == pytest.approx(slow, rel=1e-9)
        checked += 1
    assert checked >= 3


def test_pipelining_beats_the_binomial_tree_for_large_buffers_on_a_baseline():
    torus = make_fabric({"name": "torus2d", "nodes": 64, "link_bandwidth_Bps": 64e9, "link_latency_s": 1e-6})
    big = torus.collective_cost("broadcast", 100e6, "auto")
    binomial = torus.collective_cost("broadcast", 100e6, "binomial_tree")
    assert big.algorithm != "binomial_tree" and big.time_s < 0.5 * binomial.time_s


def test_auto_on_the_sipac_baselines_runs_the_broadcast_operators_would():
    # the audit's complaint: the baselines broadcast with a non-pipelined binomial tree only
    bcube = make_fabric({"name": "bcube", "nodes": 64, "radix": 4, "node_bandwidth_Bps": 256e9})
    assert bcube.collective_cost("broadcast", 2**20, "auto").algorithm == "spanning_tree"  # L ports at once
    torus = make_fabric({"name": "torus2d", "nodes": 64, "link_bandwidth_Bps": 64e9, "link_latency_s": 1e-6})
    c = torus.collective_cost("broadcast", 2**20, "auto")
    assert c.algorithm == "pipelined_tree"
    assert c.time_s < 0.5 * torus.collective_cost("broadcast", 2**20, "binomial_tree").time_s
