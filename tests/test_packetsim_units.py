"""Building blocks of the packet-level engines: vectorised FIFO math, queues, traffic, params."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.errors import EstimatorError
from estimator.packetsim.params import SimSpec
from estimator.packetsim.queues import FifoBank
from estimator.packetsim.traffic import (
    CollectiveSource,
    hierarchical_direct_allreduce,
    hierarchical_scheduled_allreduce,
    ring_allreduce,
    uniform_destinations,
)
from estimator.packetsim.vector import fifo_departures, group_rank


@given(st.lists(st.integers(0, 5), max_size=40))
def test_group_rank_counts_earlier_equal_keys(keys):
    arr = np.array(keys, dtype=np.int64)
    expected = [keys[:i].count(k) for i, k in enumerate(keys)]
    assert group_rank(arr).tolist() == expected


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 50)), max_size=30),
       st.lists(st.floats(0, 40), min_size=4, max_size=4))
def test_fifo_departures_equals_sequential_lindley(packets, free0):
    service = np.array([1.0, 2.5, 0.5, 3.0])
    free = np.array(free0)
    port = np.array([p for p, _ in packets], dtype=np.int64)
    ready = np.array([r for _, r in packets])
    done = fifo_departures(port, ready, service, free)
    ref_free = list(free0)
    ref = [0.0] * len(packets)
    for i in sorted(range(len(packets)), key=lambda i: (packets[i][0], packets[i][1], i)):
        p, r = packets[i]
        ref[i] = max(r, ref_free[p]) + service[p]
        ref_free[p] = ref[i]
    assert np.allclose(done, ref)
    assert np.allclose(free, ref_free)


def test_fifo_bank_is_fifo_and_refuses_beyond_capacity():
    bank = FifoBank(2, 3, ("dst",))
    ok = bank.push(np.array([0, 0, 1, 0, 0]), dst=np.array([10, 11, 20, 12, 13]))
    assert ok.tolist() == [True, True, True, True, False]
    assert bank.count.tolist() == [3, 1]
    out = []
    for _ in range(3):
        out.append(int(bank.peek(np.array([0]))["dst"][0]))
        bank.pop(np.array([0]))
    assert out == [10, 11, 12]
    assert bank.push(np.array([0] * 4), dst=np.arange(4)).sum() == 3  # wraps around the ring


def test_uniform_destinations_respect_locality():
    rng = np.random.default_rng(0)
    src = np.repeat(np.arange(64), 500)
    dst = uniform_destinations(rng, src, 8, 8, 0.25)
    same_pod = dst // 8 == src // 8
    assert not (dst == src).any()
    assert same_pod.mean() == pytest.approx(0.25, abs=0.01)
    assert np.bincount(dst, minlength=64).min() > 0.8 * 500  # uniform over nodes


def test_collective_source_waits_for_the_previous_step():
    plan = ring_allreduce(4, 4 * 3000, 1500)  # 2 packets per step, 6 steps
    src = CollectiveSource(plan)
    assert src.ready().tolist() == [0, 1, 2, 3]
    for _ in range(2):
        node, dst, tag = src.candidates(src.ready())
        assert dst.tolist() == [1, 2, 3, 0] and tag.tolist() == [0, 0, 0, 0]
        src.release(node)
    assert src.ready().size == 0  # step 0 sent, nothing received yet
    src.deliver(np.array([1, 1]), np.array([0, 0]))
    assert src.ready().tolist() == [1]


def test_direct_plan_interleaves_destinations_in_bursts():
    plan = hierarchical_direct_allreduce(2, 4, 4 * 3000, 1500)  # 2 pods of 4: 3 pod-mates, 1 peer
    assert plan.fanout.tolist() == [3, 1, 1, 3] and plan.packets.tolist() == [2, 1, 1, 2]
    src = CollectiveSource(plan, burst=4)
    node, dst, _ = src.candidates(np.array([0]))
    assert dst.tolist() == [1, 2, 3, 1]  # round-robin over the pod-mates, burst of 4
    src.release(node[:3])  # only a prefix was accepted
    node, dst, _ = src.candidates(np.array([0]))
    assert dst.tolist() == [1, 2, 3]  # the rest of step 0 (6 packets in all)


def test_scheduled_sub_rounds_are_contention_free_permutations():
    pods, m, groups = 4, 8, 2  # F = 4
    plan = hierarchical_scheduled_allreduce(pods, m, groups, 1e6, 1500)
    f = m // groups
    for s in range(plan.steps):
        d = plan.dests[s, :, : plan.fanout[s]]
        src = np.repeat(np.arange(pods * m), plan.fanout[s])
        dst = d.ravel()
        assert not (dst == src).any()
        intra = (src // m == dst // m).all()
        # one packet stream per switch output: (receiver, source group) pairs are distinct
        out = dst * groups + (src % m) // f if intra else dst
        assert np.unique(out).shape[0] == out.shape[0]
        # and one destination per transmitter: (sender, destination group) pairs are distinct
        tx = src * (groups + 1) + np.where(src // m == dst // m, (dst % m) // f, groups)
        assert np.unique(tx).shape[0] == tx.shape[0]
    # every pod-mate is reached once in each intra phase
    intra_steps = np.nonzero(plan.phase == 0)[0]
    reached = np.concatenate([plan.dests[s, 5, : plan.fanout[s]] for s in intra_steps])
    assert sorted(reached.tolist()) == [0, 1, 2, 3, 4, 6, 7]


@pytest.mark.parametrize("kw,needle", [
    (dict(load=0.0), "load"), (dict(locality=1.5), "locality"), (dict(nodes=250), "nodes=250"),
    (dict(network="x"), "network"), (dict(network="leafspine", nodes=12), "nodes=12"),
    (dict(network="leafspine", traffic="ring_allreduce"), "traffic"),
])
def test_bad_specs_are_one_line_errors(kw, needle):
    with pytest.raises(EstimatorError, match=needle) as err:
        SimSpec(**kw)
    assert "\n" not in str(err.value)


def test_from_mapping_coerces_and_rejects_unknown_keys():
    spec = SimSpec.from_mapping({"nodes": 64.0, "load": "0.5", "opsquare": {"groups": 4, "retry_s": 1e-8}})
    assert spec.nodes == 64 and spec.load == 0.5 and spec.opsquare.groups == 4
    assert spec.opsquare.layout(64) == (8, 8, 4)
    with pytest.raises(EstimatorError, match="opsquare: unknown"):
        SimSpec.from_mapping({"opsquare": {"bogus": 1}})
    with pytest.raises(EstimatorError, match="opsquare.groups=3 must divide"):
        SimSpec.from_mapping({"nodes": 64, "opsquare": {"groups": 3}})
