"""The cluster's contention model: against the topology layer, views against each other, phase models."""

from __future__ import annotations

import numpy as np
import pytest

from estimator.cluster.contention import Contention
from estimator.cluster.views import GraphView, RingSpanView, TreeView, view_for
from estimator.collectives.algorithms import algorithm
from estimator.collectives.params import AlgoParams
from estimator.collectives.pricing import PricingParams, compile_schedule, merge_concurrent
from estimator.fabrics.registry import make_fabric
from estimator.topology.builders import fat_tree, leaf_spine

M = 64 * 2**20


def _ring(n):
    return algorithm("ring").schedule("all_reduce", n, float(M), AlgoParams())


def _alone_and_merged(topo, jobs):
    """Seconds of each job's ring alone, and of all of them merged step by step (topology layer)."""
    alone = [compile_schedule(_ring(len(g)), topo, PricingParams(), g).time(M) for g in jobs]
    merged = merge_concurrent([(_ring(len(g)), g) for g in jobs])  # transfers in bytes, its nbytes = 1
    return alone, compile_schedule(merged, topo, PricingParams()).time(1.0)


@pytest.mark.parametrize("jobs", [
    [[0, 1, 4, 5], [2, 3, 6, 7]],             # two 4-GPU jobs, each across the same two leaves
    [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14]],  # three jobs, one GPU per leaf
    [[0, 5], [1, 4]],                           # crossing in opposite directions
])
def test_aligned_stretch_is_the_merged_schedule_price(jobs):
    """Equal jobs communicating in lockstep: the topology layer's merged-schedule price is each
    job's alone price x the aligned stretch (4:1 oversubscribed leaves, no latencies)."""
    topo = leaf_spine(16, 4, 1e9, 1, 1e9, 0.0, 0.0, 0.0)
    alone, merged = _alone_and_merged(topo, jobs)
    view = GraphView(16, topo)
    cont = Contention(view.resources, "aligned")
    for i, g in enumerate(jobs):
        cont.add(i, view.job_load(np.array(g)), lambda f: 1.0)
    cont.solve(range(len(jobs)))
    for i in range(len(jobs)):
        assert cont.stretch(i) == pytest.approx(merged / alone[i], rel=1e-9)
    assert max(cont.stretch(i) for i in range(len(jobs))) > 1.0  # they do share


def test_aligned_stretch_can_say_no_contention():
    """Jobs inside their own leaves share nothing: stretch 1, as the merged schedule says."""
    topo = leaf_spine(16, 4, 1e9, 1, 1e9, 0.0, 0.0, 0.0)
    jobs = [[0, 1, 2, 3], [4, 5, 6, 7]]
    alone, merged = _alone_and_merged(topo, jobs)
    view = GraphView(16, topo)
    cont = Contention(view.resources, "aligned")
    for i, g in enumerate(jobs):
        cont.add(i, view.job_load(np.array(g)), lambda f: 1.0)
    cont.solve([0, 1])
    assert merged == pytest.approx(alone[0], rel=1e-12)
    assert cont.stretch(0) == cont.stretch(1) == 1.0


def _random_jobs(rng, hosts, count, sizes):
    free = rng.permutation(hosts)
    out, at = [], 0
    for _ in range(count):
        n = int(rng.choice(sizes))
        out.append(np.sort(free[at:at + n]))
        at += n
    return out


@pytest.mark.parametrize("shape", ["fattree", "leafspine"])
def test_tree_view_equals_graph_view(shape):
    """The tree aggregates (the fast path) give the same loads, placement factors and stretches as
    routing every transfer on the graph, for random placements."""
    rng = np.random.default_rng(7)
    if shape == "fattree":  # k = 4: 2 hosts per edge switch, 4 per pod, 16 hosts
        topo, tree = fat_tree(4, 16, 1e9, 0.0), TreeView(16, 1e9, [(2, 2e9, 2e9), (4, 4e9, 4e9)])
    else:  # 4 per leaf, 2 spines of half a host link: 8:1
        topo, tree = leaf_spine(16, 4, 1e9, 2, 0.25e9, 0, 0, 0), TreeView(16, 1e9, [(4, 0.5e9, 0.5e9)])
    graph = GraphView(16, topo)
    for _trial in range(6):
        jobs = _random_jobs(rng, 16, 4, [2, 3, 4])
        conts = []
        for view in (tree, graph):
            cont = Contention(view.resources, "aligned")
            for i, g in enumerate(jobs):
                cont.add(i, view.job_load(g), lambda f: 1.0)
            cont.solve(range(len(jobs)))
            conts.append(cont)
        for i, g in enumerate(jobs):
            a, b = tree.job_load(g), graph.job_load(g)
            assert a.factor == pytest.approx(b.factor, rel=1e-12)
            assert a.traffic_Bps == pytest.approx(b.traffic_Bps, rel=1e-12)
            assert conts[0].stretch(i) == pytest.approx(conts[1].stretch(i), rel=1e-12)


def test_fabric_views():
    """Which view each fabric family gets, and what it makes of a job."""
    ft = make_fabric({"name": "fattree", "nodes": 64})
    assert isinstance(view_for(ft), TreeView) and view_for(ft).blocks == (4, 16)
    ocs = make_fabric({"name": "ocs", "nodes": 64, "topology": "ring"})
    load = view_for(ocs).job_load(np.array([3, 9, 20]))
    assert len(load.ids) == 0 and load.setup_s == 25e-3  # its own circuits, paid at start
    tera = view_for(make_fabric({"name": "terarack", "nodes": 64}))
    assert isinstance(tera, RingSpanView)
    assert sorted(tera.span(np.array([62, 1, 3])).tolist()) == [0, 1, 2, 62, 63]  # the arc over 0
    assert sorted(tera.span(np.array([10, 12])).tolist()) == [10, 11]
    torus = view_for(make_fabric({"name": "torus2d", "nodes": 16}))
    assert isinstance(torus, GraphView) and torus.blocks == (4,)


def _pair(mode, duty, u=1.0):
    """Two jobs on one shared resource, each using it at ``u``, constant duty cycle."""
    from estimator.cluster.views import JobLoad

    cont = Contention(1, mode)
    for key in (0, 1):
        cont.add(key, JobLoad(np.array([0]), np.array([u]), 1.0, 1.0), lambda f: duty)
    cont.solve([0, 1])
    return cont


def test_phase_models_on_a_shared_link():
    # aligned: both always overlap -> twice as slow
    assert _pair("aligned", 0.3).stretch(0) == pytest.approx(2.0)
    # independent: the other communicates 30 % of the time -> 1 / (0.7 / 1 + 0.3 / 2)
    assert _pair("independent", 0.3).stretch(0) == pytest.approx(1 / (0.7 + 0.3 / 2))
    # interleaved: 0.3 + 0.3 fits in time -> not slowed; 0.7 + 0.7 does not -> 1.4
    assert _pair("interleaved", 0.3).stretch(0) == 1.0
    assert _pair("interleaved", 0.7).stretch(0) == pytest.approx(1.4)
    # half-rate users fit together even when aligned
    assert _pair("aligned", 0.9, u=0.5).stretch(0) == 1.0


def test_duty_cycle_fixed_point():
    """A stretched job communicates a larger share of a longer iteration: independent phases
    solve for it. Compute 1, communication 1 alone: d(f) = f / (1 + f)."""
    from estimator.cluster.views import JobLoad

    cont = Contention(1, "independent")
    for key in (0, 1):
        cont.add(key, JobLoad(np.array([0]), np.array([1.0]), 1.0, 1.0), lambda f: f / (1 + f))
    cont.solve([0, 1])
    f = cont.stretch(0)
    d = f / (1 + f)
    assert f == pytest.approx(1 / ((1 - d) + d / 2), rel=1e-3)  # the fixed point stops at duty moves < 1e-4
    assert 1.33 < f < 1.5


def test_independent_equals_enumerating_every_combination():
    """The summed-load distribution (built job by job) against all 2^6 on/off combinations."""
    import itertools

    from estimator.cluster.views import JobLoad

    shares = [0.5, 0.25, 0.5, 0.75, 0.375, 0.625]  # on the 1/1024 grid: exact
    duties = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    cont = Contention(1, "independent")
    for key, (u, d) in enumerate(zip(shares, duties, strict=True)):
        cont.add(key, JobLoad(np.array([0]), np.array([u]), 1.0, 1.0), lambda f, d=d: d)
    cont.solve(range(6))
    for k in range(6):
        others = [j for j in range(6) if j != k]
        expect = 0.0
        for on in itertools.product((0, 1), repeat=5):
            p = np.prod([duties[j] if x else 1 - duties[j] for j, x in zip(others, on, strict=True)])
            load = shares[k] + sum(shares[j] for j, x in zip(others, on, strict=True) if x)
            expect += p / max(1.0, load)
        assert cont.stretch(k) == pytest.approx(1 / expect, rel=1e-12)
    assert cont.stretch(0) > 1.05


def test_normal_approximation_beyond_exact_jobs():
    """A crowded link (more other jobs than EXACT_JOBS): the normal approximation against the
    exact distribution (the same link with EXACT_JOBS raised)."""
    from estimator.cluster import contention as c
    from estimator.cluster.views import JobLoad

    def build():
        cont = Contention(1, "independent")
        for key in range(24):
            cont.add(key, JobLoad(np.array([0]), np.array([0.125]), 1.0, 1.0), lambda f, k=key: 0.2 + 0.025 * k)
        cont.solve(range(24))
        return [cont.stretch(k) for k in range(24)]

    approx = build()
    saved = c.EXACT_JOBS
    c.EXACT_JOBS = 64
    try:
        exact = build()
    finally:
        c.EXACT_JOBS = saved
    assert exact[0] > 1.05
    for a, e in zip(approx, exact, strict=True):
        assert a == pytest.approx(e, rel=0.01)


def test_removing_a_job_frees_the_link():
    from estimator.cluster.views import JobLoad

    cont = Contention(2, "aligned")
    load = JobLoad(np.array([0, 1]), np.array([1.0, 0.5]), 1.0, 1.0)
    cont.add("a", load, lambda f: 0.5)
    cont.add("b", load, lambda f: 0.5)
    cont.solve(["a", "b"])
    assert cont.stretch("a") == 2.0
    touched = cont.remove("b")
    assert touched == {"a"}
    cont.solve(touched)
    assert cont.stretch("a") == 1.0 and cont.sum_u[0] == pytest.approx(1.0)
