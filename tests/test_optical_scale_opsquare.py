"""OPSquare's explicit ``hierarchical_ring`` all-reduce at scale (issue #13): the library's
``hierarchical`` schedule routed on the OPSquare topology without a graph search equals compiling
it on the graph (the path before: a search per destination, > 12 s at 128 x 128 pods)."""

from __future__ import annotations

import pytest

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import AlgoParams
from estimator.collectives.pricing import PricingParams, compile_schedule
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric

SHAPES = [(1, 8, 2, 0.0), (4, 4, 2, 0.0), (4, 4, 4, 1e-6), (3, 6, 3, 0.0), (8, 8, 2, 2e-7), (2, 2, 1, 0.0),
          (2, 1, 1, 0.0), (5, 3, 1, 0.0), (16, 16, 4, 0.0)]


def _on_the_graph(f, n: int, nbytes: float) -> float:
    _, per_pod = f._shape(n)
    sched = lookup("hierarchical").schedule("all_reduce", n, nbytes, AlgoParams(local=per_pod))
    return compile_schedule(sched, f.topology(), PricingParams(alpha_s=f.cfg.host_overhead_s)).time(nbytes)


@pytest.mark.parametrize("pods,m,groups,host", SHAPES)
def test_routed_equals_the_schedule_compiled_on_the_graph(pods, m, groups, host):
    f = make_fabric({"name": "opsquare", "pods": pods, "pod_nodes": m, "groups": groups, "nodes": pods * m,
                     "host_overhead_s": host})
    compared = 0
    for n in (x for x in range(2, pods * m + 1) if x <= m or x % m == 0):
        for nbytes in (1.0, 3e6, 64 * 2**20):
            fast = f.collective_cost("all_reduce", nbytes, "hierarchical_ring", group_size=n, explicit=True).time_s
            assert fast == pytest.approx(_on_the_graph(f, n, nbytes), rel=1e-12, abs=0), (n, nbytes)
            compared += 1
    assert compared >= 3


def test_explicit_at_128_by_128_pods_equals_the_closed_form():
    """At 16,384 nodes the explicit schedule still reproduces the analytical ring model."""
    f = make_fabric({"name": "opsquare", "pods": 128, "pod_nodes": 128, "nodes": 16384})
    for nbytes in (1e3, 64 * 2**20):
        closed = f.collective_cost("all_reduce", nbytes, "hierarchical_ring").time_s
        explicit = f.collective_cost("all_reduce", nbytes, "hierarchical_ring", explicit=True).time_s
        assert explicit == pytest.approx(closed, rel=1e-9)


def test_routed_refuses_two_hop_transfers():
    from estimator.collectives.patterns import patterns

    f = make_fabric({"name": "opsquare", "pods": 4, "pod_nodes": 4, "nodes": 16})
    with pytest.raises(EstimatorError, match="one-hop"):
        f.routed(patterns("ring", "all_reduce", 16, AlgoParams()))  # rank 3 -> 4: another pod and position
