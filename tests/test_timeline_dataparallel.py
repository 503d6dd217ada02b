"""Data-parallel timeline mechanics, with a fixed-cost test fabric so every number is hand-checkable."""

import pytest

from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.timeline.dataparallel import (
    BucketPolicy,
    compute_profile,
    make_buckets,
    simulate_data_parallel,
)
from tests.helpers import chain_workload, linear_fabric

REPLAY = DeviceProfile(name="cpu", peak_flops=1e9, mem_bw_Bps=1e9, replay=True)


def test_compute_profile_phases_and_ready_times():
    w = chain_workload([1e-3, 1e-3], [2e-3, 3e-3], 5e-4, [100, 200])
    p = compute_profile(w, REPLAY)
    assert p.forward_s == pytest.approx(2e-3)
    assert p.backward_s == pytest.approx(5e-3)
    assert p.optimizer_s == pytest.approx(5e-4)
    assert list(p.grad_ready_s) == pytest.approx([4e-3, 7e-3])


def test_ddp_buckets_respect_first_and_regular_caps():
    w = chain_workload([1e-3], [1e-3] * 5, 1e-4, [600, 600, 600, 600, 600])
    p = compute_profile(w, REPLAY)
    policy = BucketPolicy(bucketing="ddp", first_bucket_cap_bytes=500, bucket_cap_bytes=1500)
    buckets = make_buckets(p, policy)
    assert [b.tensors for b in buckets] == [1, 3, 1]
    assert [b.nbytes for b in buckets] == [600, 1800, 600]
    assert buckets[1].ready_s == pytest.approx(p.grad_ready_s[3])  # ready when its last grad is


def test_horovod_fusion_groups_by_cycle_and_threshold():
    w = chain_workload([1e-3], [1e-3] * 4, 1e-4, [100, 100, 100, 100])
    p = compute_profile(w, REPLAY)  # ready at 2, 3, 4, 5 ms
    buckets = make_buckets(p, BucketPolicy(bucketing="horovod", cycle_time_s=2.5e-3, fusion_threshold_bytes=250))
    assert [b.ready_s for b in buckets] == pytest.approx([2.5e-3, 5e-3, 5e-3])
    assert [b.tensors for b in buckets] == [1, 2, 1]  # 3 ready by the 5 ms tick; 250 B cap splits them
    assert sum(b.nbytes for b in buckets) == 400


def test_communication_overlaps_backward_and_exposes_only_the_tail():
    # backward 4 x 1 ms; each gradient 1e6 B -> 1 ms all-reduce; no bucketing
    w = chain_workload([1e-3], [1e-3] * 4, 0.0, [10**6] * 4)
    p = compute_profile(w, REPLAY)
    r = simulate_data_parallel(p, linear_fabric(), BucketPolicy(bucketing="none"), batch_size=2)
    # ARs start at 2,3,4,5 ms (each as its grad is ready) and end at 6 ms; backward ends at 5 ms
    assert r.iter_time_s == pytest.approx(6e-3)
    assert r.compute_time_s == pytest.approx(5e-3)
    assert r.exposed_comm_time_s == pytest.approx(1e-3)
    assert r.comm_time_s == pytest.approx(4e-3)
    assert r.samples_per_s == pytest.approx(8 * 2 / 6e-3)


def test_slow_network_serialises_collectives_on_one_stream():
    w = chain_workload([1e-3], [1e-3] * 4, 1e-3, [10**6] * 4)
    p = compute_profile(w, REPLAY)
    r = simulate_data_parallel(p, linear_fabric(spb=1e-8), BucketPolicy(bucketing="none"), batch_size=2)
    starts = [c["start_s"] for c in r.collectives]
    ends = [c["end_s"] for c in r.collectives]
    assert all(s2 >= e1 for e1, s2 in zip(ends, starts[1:], strict=False))
    assert r.iter_time_s == pytest.approx(2e-3 + 4 * 10e-3 + 1e-3)


def test_single_node_has_no_communication():
    w = chain_workload([1e-3], [1e-3], 1e-3, [10**6])
    r = simulate_data_parallel(compute_profile(w, REPLAY), linear_fabric(nodes=1), BucketPolicy(), batch_size=2)
    assert r.comm_time_s == 0 and r.exposed_comm_time_s == pytest.approx(0)


def test_roofline_device_uses_flops_and_bandwidth():
    w = chain_workload([1e-3], [1e-3], 0.0, [400])  # 1e6 FLOPs per op
    dev = DeviceProfile(name="d", peak_flops=2e9, mem_bw_Bps=1e12, compute_efficiency=0.5)
    p = compute_profile(w, dev)
    assert p.forward_s == pytest.approx(1e6 / 1e9)


def test_bad_policy_is_rejected():
    with pytest.raises(EstimatorError, match="bucketing"):
        BucketPolicy(bucketing="magic")
    with pytest.raises(EstimatorError, match="bucket_cap_bytes"):
        BucketPolicy(bucket_cap_bytes=-1)


def test_interference_stragglers_accumulation_and_input_limit_by_hand():
    # backward 4 x 1 ms, forward 1 ms; each 1e6 B all-reduce takes 1 ms, from 2 ms to 6 ms
    w = chain_workload([1e-3], [1e-3] * 4, 0.0, [10**6] * 4)
    p = compute_profile(w, REPLAY)
    fab = linear_fabric()  # 8 nodes
    r = simulate_data_parallel(p, fab, BucketPolicy(bucketing="none", comm_interference=0.5), batch_size=2)
    # comm overlaps backward during 2..5 ms: backward ends 0.5 x 3 ms later, at 6.5 ms
    assert r.interference_s == pytest.approx(1.5e-3) and r.iter_time_s == pytest.approx(6.5e-3)
    post = simulate_data_parallel(p, fab, BucketPolicy(bucketing="none", overlap=False), batch_size=2)
    assert post.iter_time_s == pytest.approx(5e-3 + 4e-3)  # all-reduces only after backward
    acc = simulate_data_parallel(p, fab, BucketPolicy(bucketing="none", grad_accum=3), batch_size=2)
    assert acc.iter_time_s == pytest.approx(2 * 5e-3 + 6e-3) and acc.global_batch == 2 * 3 * 8
    assert acc.comm_time_s == pytest.approx(4e-3)  # one all-reduce per step, not per micro-batch
    cv = simulate_data_parallel(p, fab, BucketPolicy(bucketing="none", sync_jitter_cv=0.1), batch_size=2)
    from estimator.timeline.dataparallel import expected_max_normal

    assert expected_max_normal(1) == 0 and expected_max_normal(8) == pytest.approx(1.4236, abs=0.015)  # exact E[max of 8] = 1.4236
    assert cv.straggler_s == pytest.approx(5e-3 * 0.1 * expected_max_normal(8))
    slow_input = BucketPolicy(bucketing="none", input_samples_per_s_per_node=1000.0, gpus_per_node=4)
    lim = simulate_data_parallel(p, fab, slow_input, batch_size=2)
    assert lim.input_bound and lim.samples_per_s == pytest.approx(2 * 1000.0)  # 2 nodes of 4 GPUs
    with pytest.raises(EstimatorError, match="grad_accum"):
        BucketPolicy(grad_accum=0)
