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


def test_input_pipeline_cap_is_host_cores_times_the_per_core_rate():
    """Item 10: a JPEG pipeline decoded on the host delivers min(workers, cores) x rate per node; DALI
    delivers gpus x its per-GPU rate; data that are not JPEGs, or decode=none, have no cap."""
    host = {"cpu_cores": 16, "cpu_decode_per_core_per_s": 100.0}
    cpu = BucketPolicy.from_dict({"gpus_per_node": 4, "input": {"decode": "cpu", **host}})
    assert cpu.input_cap_per_node(jpeg=True) == pytest.approx(1600.0)  # 16 cores x 100 img/s
    assert cpu.input_cap_per_node(jpeg=False) is None  # tokens: nothing to decode
    few = BucketPolicy.from_dict({"gpus_per_node": 4, "input": {"workers_per_gpu": 2, **host}})
    assert few.input_cap_per_node(jpeg=True) == pytest.approx(800.0)  # 8 workers on 16 cores
    many = BucketPolicy.from_dict({"gpus_per_node": 4, "input": {"workers_per_gpu": 8, **host}})
    assert many.input_cap_per_node(jpeg=True) == pytest.approx(1600.0)  # 32 workers share 16 cores
    gpu = BucketPolicy.from_dict({"gpus_per_node": 4, "input": {"decode": "gpu", "gpu_decode_per_gpu_per_s": 3000, **host}})
    assert gpu.input_cap_per_node(jpeg=True) == pytest.approx(12000.0)
    assert BucketPolicy.from_dict({"input": {"decode": "gpu", **host}}).input_cap_per_node(jpeg=True) is None
    assert BucketPolicy.from_dict({"input": {"decode": "none", **host}}).input_cap_per_node(jpeg=True) is None
    assert BucketPolicy.from_dict({"input": {"decode": "cpu"}}).input_cap_per_node(jpeg=True) is None  # no host
    measured = BucketPolicy.from_dict({"input_samples_per_s_per_node": 500.0, "input": {"decode": "none"}})
    assert measured.input_cap_per_node(jpeg=False) == 500.0  # your own measured loader rate wins

    # in the timeline: 8 GPUs x batch 2 every 6 ms (5 ms compute + the last all-reduce) = 2667 samples/s; 2 nodes of 4 GPUs with
    # 2 cores x 500 img/s each deliver 2000: input bound at exactly that
    w = chain_workload([1e-3], [1e-3] * 4, 0.0, [10**6] * 4)
    p = compute_profile(w, REPLAY)
    small = BucketPolicy.from_dict({"bucketing": "none", "gpus_per_node": 4,
                                    "input": {"cpu_cores": 2, "cpu_decode_per_core_per_s": 500.0}})
    capped = simulate_data_parallel(p, linear_fabric(), small, batch_size=2, model_input="imagenet_jpeg")
    free = simulate_data_parallel(p, linear_fabric(), small, batch_size=2, model_input="tokenized")
    assert capped.input_bound and capped.samples_per_s == pytest.approx(2 * 1000.0)
    assert not free.input_bound and free.samples_per_s == pytest.approx(16 / 6e-3)


@pytest.mark.parametrize("inp, needle", [
    ({"decode": "dali"}, "parallelism.input.decode must be one of cpu, gpu, none"),
    ({"cpu_cores": 0}, "parallelism.input.cpu_cores must be a positive integer"),
    ({"workers_per_gpu": 2.5}, "parallelism.input.workers_per_gpu must be a positive integer"),
    ({"cpu_decode_per_core_per_s": -1}, "parallelism.input.cpu_decode_per_core_per_s must be a positive number"),
    ({"gpu_decode_per_gpu_per_s": "fast"}, "parallelism.input.gpu_decode_per_gpu_per_s must be a positive number"),
    ({"cores": 8}, "parallelism.input: unknown key"),
])
def test_bad_input_pipeline_settings_are_one_line_errors(inp, needle):
    with pytest.raises(EstimatorError, match=needle.replace(".", r"\.")) as err:
        BucketPolicy.from_dict({"input": inp})
    assert "\n" not in str(err.value)


def test_system_presets_carry_the_host_and_resnet50_reads_jpegs():
    """The plain ResNet-50 command on a DGX A100 is input bound at 8 GPUs (128 cores x 130.1 img/s) and
    not at one; BERT (tokens) on the same box is never capped; hybrid layouts accept the preset."""
    import estimator

    def cfg(*ov):
        return estimator.resolve_config(["system=dgx_a100", *ov])

    a100 = BucketPolicy.from_dict(cfg()["parallelism"])
    assert a100.input_cap_per_node(jpeg=True) == pytest.approx(128 * 130.1)
    assert cfg("model=resnet50")["model"]["input"] == "imagenet_jpeg"
    assert cfg("model=bert_large")["model"]["input"] == "tokenized"
    h100 = BucketPolicy.from_dict(estimator.resolve_config(["system=dgx_h100"])["parallelism"])
    assert h100.input_cap_per_node(jpeg=True) == pytest.approx(112 * 130.1)
    dali = BucketPolicy.from_dict(estimator.resolve_config(["system=dgx_h100", "parallelism.input.decode=gpu"])["parallelism"])
    assert dali.input_cap_per_node(jpeg=True) is None  # DALI's GPU decoder: no published rate, not a bound
    hybrid = estimator.resolve_config(["system=dgx_a100", "parallelism=hybrid"])
    assert hybrid["parallelism"]["input"]["cpu_cores"] == 128  # composed after the group, accepted by hybrid
