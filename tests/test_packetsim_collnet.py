"""Packet-level collectives on SiPAC and the electrical BCube (estimator/packetsim/collnet.py, flownet.py)."""

from __future__ import annotations

import numpy as np
import pytest

from estimator.errors import EstimatorError
from estimator.packetsim import SimSpec, bcube, simulate, sipac
from estimator.packetsim.collnet import phases
from estimator.packetsim.flownet import Phase, Ports, Transport, run_phase
from estimator.packetsim.params import CollnetParams

MB = 1048576


def spec(network: str, nodes: int = 16, traffic: str = "incast", nbytes: float = MB, **collnet) -> SimSpec:
    params = {"r": 4, "per_cu_bps": 2048e9, **collnet}
    return SimSpec(network=network, nodes=nodes, traffic=traffic, collective_bytes=nbytes, max_time_s=0.1,
                   collnet=CollnetParams(**params))


def test_one_flow_on_a_dedicated_channel_runs_at_the_channel_rate():
    # SiPAC(4, 0): 4 CUs on one WSS; CU 1 -> CU 0 is one channel of B / (r - 1)
    p = CollnetParams(r=4, per_cu_bps=4096e9)
    ports = sipac.ports(4, p)
    route, hops = sipac.routes(4, p, np.array([1]), np.array([0]), np.random.default_rng(0))
    packets = 117
    res = run_phase(ports, Phase(route, hops, np.array([packets])), Transport(), 1.0)
    service = 9000 / (4096e9 / 8 / 3)
    assert res.completion_s == pytest.approx(packets * service + p.link_latency_s, rel=0.03)
    assert res.dropped == 0 and res.timeouts == 0


def test_a_window_limited_flow_sends_one_window_per_round_trip():
    # one port of 1 TB/s with 100 us of latency: 7 packets (65535 B / 9000 B) per 200 us round trip
    ports = Ports(np.array([1e12]), np.array([100e-6]), np.array([np.inf]))
    ph = Phase(np.array([[0]]), np.array([1]), np.array([70]))
    res = run_phase(ports, ph, Transport(initial_window=7), 1.0)
    assert res.completion_s == pytest.approx(9 * 200e-6 + 100e-6, rel=0.01)  # the 10th window leaves at 9 RTTs


def test_bcube_switch_queues_drop_under_incast_and_the_transport_recovers():
    small = simulate(spec("bcube", buffer_bytes=18000)).summary()
    large = simulate(spec("bcube", buffer_bytes=10**9)).summary()
    assert small["lost"] > 0 and small["timeouts"] + small["fast_retransmits"] > 0
    assert large["lost"] == 0
    assert small["completion_s"] > large["completion_s"]  # the losses cost time


def test_sipac_never_drops_and_is_not_slower_than_bcube():
    for traffic in ("incast", "all_to_all"):
        s = simulate(spec("sipac", traffic=traffic, nbytes=64 * 1024)).summary()
        b = simulate(spec("bcube", traffic=traffic, nbytes=64 * 1024)).summary()
        assert s["lost"] == 0
        assert b["completion_s"] >= s["completion_s"]


def test_same_seed_same_result_and_routes_follow_bcube_digit_correction():
    a, b = simulate(spec("bcube", traffic="all_to_all", nbytes=20000)), simulate(spec("bcube", traffic="all_to_all",
                                                                                       nbytes=20000))
    assert a.completion_s == b.completion_s and int(a.lost.sum()) == int(b.lost.sum())
    p = CollnetParams(r=4)
    route, hops = bcube.routes(16, p, np.array([0, 0, 5]), np.array([1, 5, 5]), np.random.default_rng(1))
    assert list(hops) == [2, 4, 0]  # one digit differs: 2 ports; two digits: 4; itself: none
    assert route[0, 0] == 0 * 2 + 0 and route[0, 1] == 16 * 2 + 1 * 2 + 0  # egress level 0, switch port to CU 1


def test_dimwise_all_reduce_phases_carry_the_buffer():
    s = spec("sipac", nodes=16, traffic="hybrid", nbytes=4 * MB)
    named = phases(s, np.random.default_rng(0))
    assert [n for n, _ in named] == ["reduce_scatter_0", "reduce_scatter_1", "all_gather_1", "all_gather_0",
                                     "all_to_all"]
    first = named[0][1]
    assert first.packets.shape[0] == 16 * 2 * 3  # every CU to its r - 1 peers on each of 2 levels
    assert (first.hops == 1).all()  # peers are one channel away


def test_bad_collnet_input_is_one_line_errors():
    with pytest.raises(EstimatorError, match="collnet.r"):
        spec("bcube", nodes=12)
    with pytest.raises(EstimatorError, match="traffic='uniform'"):
        SimSpec(network="sipac", nodes=16, traffic="uniform", collnet=CollnetParams(r=4))
    with pytest.raises(EstimatorError, match="bcube or sipac"):
        SimSpec(network="opsquare", nodes=16, traffic="incast")
    with pytest.raises(EstimatorError, match="buffer_bytes"):
        spec("bcube", buffer_bytes=100)
    with pytest.raises(EstimatorError, match="sim_packets"):
        spec("bcube", nodes=4096, r=8, traffic="all_to_all", nbytes=1e9)
    # the paper's hybrid at 512 CUs, 100 MB per CU: ~17 M packets (all-reduce steps + M / N per pair), allowed
    spec("bcube", nodes=512, r=8, traffic="hybrid", nbytes=104857600)
