"""InternLM's HybridZeroOptimizer (conf/framework/internlm.yaml, docs/research/h87-internlm.md): ZeRO-1 over a shard
group smaller than dp, the weights broadcast within it, the gradients all-reduced whole in bf16 bucket by bucket behind
a device-wide synchronise, the step's own passes; Megatron unchanged."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.step import bucket_sync_tail

BASE = ["system=dgx_a100", "model=llama2_7b", "parallelism=hybrid", "precision=bf16", "parallelism.tp=1",
        "parallelism.pp=1", "parallelism.micro_batch_size=2", "model.seq_len=2048", "parallelism.zero=1",
        "parallelism.recompute=none", "model.vocab_size=103168", "model.fused_kernels=te", "fabric.uplinks=4",
        "fabric.uplink_bandwidth_Bps=12.5e9"]


def _run(gpus: int, *extra: str, gb: int | None = None):
    cfg = estimator.resolve_config([*BASE, f"fabric.nodes={gpus}", f"parallelism.global_batch={gb or 2 * gpus}", *extra])
    return estimate(cfg)


def test_bucket_sync_tail_compute_bound_exposes_the_last_bucket():
    # 4 buckets of 1 param-unit over a 4 s backward, each reduction 0.5 s: never waits, the last is exposed whole
    tail, comm, hidden = bucket_sync_tail([(4.0, 4.0)], 1.0, lambda p: 0.5 * p)
    assert tail == pytest.approx(0.5) and comm == pytest.approx(2.0) and hidden == pytest.approx(1.5)


def test_bucket_sync_tail_comm_bound_serialises():
    # reductions of 2 s per bucket against 1 s of compute per bucket: boundaries at 1, 2, 3 s; the backward stalls
    # (starts 1, 3, 5; ends 3, 5, 7), the last starts at 7 and ends at 9: 5 s beyond the 4 s backward
    tail, comm, _ = bucket_sync_tail([(4.0, 4.0)], 1.0, lambda p: 2.0 * p)
    assert tail == pytest.approx(5.0) and comm == pytest.approx(8.0)


def test_bucket_sync_tail_one_bucket_runs_after_the_backward():
    tail, comm, hidden = bucket_sync_tail([(1.0, 1.0), (3.0, 2.0)], None, lambda p: 0.25 * p)
    assert tail == pytest.approx(1.0) and comm == pytest.approx(1.0) and hidden == 0.0


def test_megatron_unchanged_by_the_new_keys():
    base = _run(128)
    same = _run(128, "framework.zero1_group=null", "framework.param_exchange=all_gather",
                "framework.grad_bucket_sync=false", "framework.shard_step_bytes=0", "framework.grad_add_bytes=0")
    assert same.metrics["iter_time_s"] == base.metrics["iter_time_s"]
    assert Framework.from_cfg(None).zero1_group is None


def test_internlm_shards_within_the_node_and_broadcasts_there():
    r = _run(128, "framework=internlm", "framework.zero1_group=8")
    params = r.metrics["params"]
    bcast = [c for c in r.collectives if c["collective"] == "broadcast"]
    assert len(bcast) == 1 and bcast[0]["group"] == "zero1" and bcast[0]["group_size"] == 8
    assert bcast[0]["count_per_step"] == 8 and bcast[0]["bytes"] == pytest.approx(params * 2 / 8)
    assert not [c for c in r.collectives if c["collective"] in ("all_gather", "reduce_scatter") and c["group"] == "dp"]
    assert r.metrics["memory_optimizer_bytes"] == pytest.approx(params * 12 / 8)
    # gradients: whole 512 Mi-element bf16 buckets all-reduced over all 128 ranks, and the remainder
    ar = sorted((c for c in r.collectives if c["group"] == "dp" and c["collective"] == "all_reduce"), key=lambda c: -c["bytes"])
    assert ar[0]["bytes"] == 536870912 * 2 and ar[0]["group_size"] == 128
    assert ar[0]["count_per_step"] * 536870912 + ar[1]["bytes"] / 2 == pytest.approx(params)


def test_internlm_step_and_accumulation_passes():
    fw = Framework.from_cfg(estimator.resolve_config([*BASE, "framework=internlm"])["framework"])
    assert (fw.shard_step_bytes, fw.adam_step_bytes, fw.grad_add_bytes, fw.grad_bucket_copy_bytes) == (44, 92, 6, 12)
    one = _run(8, "framework=internlm", "framework.zero1_group=8")
    whole = _run(8, "framework=internlm")  # InternLM's default shard group: the whole dp group (8 here): the same
    assert one.metrics["iter_time_s"] == whole.metrics["iter_time_s"]
    # 4 microbatches add 3 bf16 gradients in the backward; 1 microbatch none
    m4 = _run(8, "framework=internlm", gb=64)
    off = _run(8, "framework=internlm", "framework.grad_add_bytes=0", gb=64)
    assert m4.metrics["backward_s"] > off.metrics["backward_s"]


def test_sync_per_bucket_costs_more_than_a_free_overlap():
    sync = _run(1024, "framework=internlm", "framework.zero1_group=8", gb=2048)
    free = _run(1024, "framework=internlm", "framework.zero1_group=8", "framework.grad_bucket_sync=false", gb=2048)
    assert sync.metrics["dp_exposed_time_s"] > free.metrics["dp_exposed_time_s"]


def test_bad_keys_refused():
    with pytest.raises(EstimatorError, match="param_exchange"):
        _run(8, "framework=internlm", "framework.param_exchange=scatter")
    with pytest.raises(EstimatorError, match="zero1_group"):
        _run(8, "framework=internlm", "framework.zero1_group=0")


@pytest.mark.parametrize("group", [3, 16])
def test_zero1_group_must_divide_dp(group):
    # InternLM asserts data_parallel_size % zero1 == 0: 3 does not divide 8, and 16 > 8 does not either
    with pytest.raises(EstimatorError, match=f"zero1_group={group} must divide the data-parallel ranks"):
        _run(8, "framework=internlm", f"framework.zero1_group={group}")
    assert _run(8, "framework=internlm", "framework.zero1_group=4").metrics["iter_time_s"] > 0
    # ZeRO-2 / 3 do not use the group: not refused
    assert _run(8, "framework=internlm", f"framework.zero1_group={group}", "parallelism.zero=2").metrics["iter_time_s"] > 0


def test_prenorm_rerun_only_without_recompute():
    # dropout_selective_checkpoint: 30 bytes per tokens x hidden element per layer and microbatch, rerun in backward
    on, off = _run(8, "framework=internlm"), _run(8, "framework=internlm", "framework.norm_rerun_bytes=0")
    cfg = estimator.resolve_config([*BASE, "fabric.nodes=8", "parallelism.global_batch=16", "framework=internlm"])
    from estimator.compute.device import DeviceProfile
    hbm = DeviceProfile.from_dict(cfg["device"]).memory_rate("elementwise", "bf16")
    want = 32 * 2 * 2048 * 4096 * 30 / hbm
    assert on.metrics["backward_s"] - off.metrics["backward_s"] == pytest.approx(want, rel=1e-6)
    full = _run(8, "framework=internlm", "parallelism.recompute=full")
    full_off = _run(8, "framework=internlm", "parallelism.recompute=full", "framework.norm_rerun_bytes=0")
    assert full.metrics["backward_s"] == full_off.metrics["backward_s"]


def test_nullable_keys_on_the_command_line():
    # adam_step_bytes=null: back to the fused Adam of optimizer_state (32 B per shard parameter instead of 92)
    eager, fused = _run(8, "framework=internlm"), _run(8, "framework=internlm", "framework.adam_step_bytes=null")
    assert fused.metrics["optimizer_s"] < eager.metrics["optimizer_s"]
    assert _run(8, "framework=internlm", "framework.zero1_group=null").metrics["iter_time_s"] == eager.metrics["iter_time_s"]
