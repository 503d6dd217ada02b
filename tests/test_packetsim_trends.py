"""Seed 004's stated trends, at 256 nodes, from the packet-level models (estimator.packetsim)."""

from __future__ import annotations

import numpy as np
import pytest

from estimator.packetsim import SimSpec, simulate


def run(**kw):
    kw.setdefault("nodes", 256)
    return simulate(SimSpec(**kw))


@pytest.mark.parametrize("locality", [0.33, 0.67])
def test_opsquare_near_ideal_throughput_and_no_loss_up_to_load_06(locality):
    for load in (0.2, 0.6):
        s = run(load=load, locality=locality, warmup_s=10e-6, measure_s=10e-6).summary()
        assert s["lost"] == 0
        assert s["throughput"] == pytest.approx(load, rel=0.03)


def test_opsquare_latency_intra_half_us_inter_within_6us():
    low = run(load=0.1, locality=0.5, warmup_s=5e-6, measure_s=10e-6).summary()
    assert low["latency_intra_mean_s"] < 0.5e-6
    assert low["latency_inter_mean_s"] < 6e-6
    # two hops cost more than one: the inter-pod path goes through a relay node
    assert low["latency_inter_mean_s"] > 1.5 * low["latency_intra_mean_s"]
    high = run(load=1.0, locality=0.33).summary()
    assert high["latency_intra_p99_s"] < 0.5e-6
    assert high["latency_inter_p99_s"] < 6e-6  # bounded by the 1 MB transmitter buffers


def test_opsquare_loss_only_when_inter_pod_channel_is_overloaded():
    s = run(load=1.0, locality=0.0, warmup_s=10e-6, measure_s=10e-6).summary()
    assert s["loss_ratio"] > 0.2
    assert s["throughput"] < 0.7  # limited by the single inter-pod transceiver per node


def test_leafspine_local_latency_is_the_switch_latency_at_low_load():
    s = run(network="leafspine", load=0.1, locality=0.67, warmup_s=5e-6, measure_s=10e-6).summary()
    assert s["latency_intra_mean_s"] == pytest.approx(1e-6, rel=0.1)
    assert s["latency_inter_mean_s"] == pytest.approx(3e-6, rel=0.1)  # three switches
    assert s["lost"] == 0


def test_leafspine_inter_pod_latency_saturates_and_spine_side_loss_at_high_load():
    hi = {load: run(network="leafspine", load=load, locality=0.33).summary() for load in (0.6, 1.0)}
    for s in hi.values():
        assert 15e-6 < s["latency_inter_mean_s"] < 30e-6  # paper: saturates near 25 us
    assert hi[0.6]["lost"] == 0
    assert hi[1.0]["loss_ratio"] > 0.1
    # with a third local traffic the node throughput stays below half the capacity (paper §3)
    assert hi[1.0]["throughput"] < 0.5


def test_opsquare_beats_leafspine_on_latency_and_throughput_at_same_point():
    o = run(load=0.8, locality=0.33, warmup_s=10e-6, measure_s=10e-6).summary()
    ls = run(network="leafspine", load=0.8, locality=0.33, warmup_s=10e-6, measure_s=10e-6).summary()
    assert o["throughput"] > ls["throughput"] + 0.2
    assert o["latency_intra_mean_s"] * 5 < ls["latency_intra_mean_s"]


@pytest.mark.parametrize("network", ["opsquare", "leafspine"])
def test_same_seed_same_results_other_seed_differs(network):
    kw = dict(network=network, nodes=64, load=0.9, locality=0.3, warmup_s=2e-6, measure_s=4e-6)
    a, b, c = run(seed=7, **kw), run(seed=7, **kw), run(seed=8, **kw)
    for name in ("sent", "received", "lost", "latency_s", "intra_pod"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.latency_s, c.latency_s)
    sa, sb = a.summary(), b.summary()
    for key in sa:
        if key not in ("wall_s", "packets_per_s"):
            assert sa[key] == sb[key] or (sa[key] != sa[key] and sb[key] != sb[key])


def test_per_node_counts_are_consistent():
    r = run(network="leafspine", nodes=64, load=1.0, locality=0.2, warmup_s=4e-6, measure_s=8e-6)
    assert r.sent.shape == r.received.shape == r.lost.shape == (64,)
    assert r.received.sum() == r.latency_s.shape[0]
    assert (r.latency_s > 0).all()
    # every measured packet is accounted for within what was generated before the window closed
    assert r.received.sum() + r.lost.sum() <= r.packets


def test_slower_contention_feedback_costs_throughput_on_opsquare():
    from estimator.packetsim import OpsquareParams

    kw = dict(nodes=64, load=0.8, locality=0.0, warmup_s=5e-6, measure_s=5e-6)
    fast = run(opsquare=OpsquareParams(retry_s=3.4e-9), **kw).summary()
    slow = run(opsquare=OpsquareParams(retry_s=120e-9), **kw).summary()
    assert slow["throughput"] < fast["throughput"] - 0.1
    assert slow["latency_inter_mean_s"] > fast["latency_inter_mean_s"]
