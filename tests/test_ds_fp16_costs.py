"""DeepSpeed's fp16 ZeRO stage-1 engine (docs/research/h85-ds-pipe.md; ``framework.fp16_grad_reduce`` /
``fp16_param_bytes`` / ``fp16_shard_bytes`` / ``fp16_grad_accum_bytes``): whole-bucket all-reduce of the gradients,
the step's passes over the stage's and the shard's parameters, autograd's accumulation of every microbatch after the
first; Megatron-LM and FSDP unchanged."""

from __future__ import annotations

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import stage_param_split
from estimator.parallel.spec import TransformerSpec

# a small GPT on 4 DGX A100 nodes: tp 2, pp 4, dp 4, two microbatches per replica
GPT = ["model=megatron_gpt", "parallelism=hybrid", "system=dgx_a100", "fabric.nodes=32", "parallelism.tp=2",
       "parallelism.pp=4", "parallelism.micro_batch_size=1", "parallelism.global_batch=8", "model.seq_len=1024",
       "model.hidden_size=2048", "model.num_layers=8", "model.num_heads=16", "model.ffn_size=8192",
       "model.vocab_size=50304", "parallelism.zero=1", "parallelism.recompute=full", "parallelism.sequence_parallel=false"]
OFF = ["framework.fp16_grad_reduce=zero", "framework.fp16_param_bytes=0", "framework.fp16_shard_bytes=0",
       "framework.fp16_grad_accum_bytes=0"]


def _run(*extra, precision="fp16", framework="deepspeed"):
    cfg = estimator.resolve_config([*GPT, f"precision={precision}", f"framework={framework}", *extra])
    return cfg, estimate(cfg)


def _rows(result, group, collective):
    return [c for c in result.collectives if c["group"] == group and c["collective"] == collective]


def _shape(cfg):
    spec = TransformerSpec.from_cfg(cfg["model"])
    layout = Layout.from_cfg(cfg["parallelism"], spec, 32)
    hbm = DeviceProfile.from_dict(cfg["device"]).memory_rate("elementwise", "fp16")
    return spec, layout, hbm


def test_zero1_all_reduces_the_whole_fp16_gradient():
    cfg, r = _run()
    spec, layout, _ = _shape(cfg)
    sizes = {float(sum(stage_param_split(spec, layout, i)) * 2) for i in range(layout.pp)}  # 2 bytes per parameter
    assert {c["bytes"] for c in _rows(r, "dp", "all_reduce")} == sizes
    assert not _rows(r, "dp", "reduce_scatter")
    assert {c["bytes"] for c in _rows(r, "dp", "all_gather")} == sizes  # the fp16 weights gathered after the step
    _, z = _run("framework.fp16_grad_reduce=zero")
    assert {c["bytes"] for c in _rows(z, "dp", "reduce_scatter")} == sizes
    assert not _rows(z, "dp", "all_reduce")
    # a ring all-reduce moves twice a reduce-scatter's bytes: the DP reduction's time grows
    assert r.metrics["dp_comm_time_s"] > z.metrics["dp_comm_time_s"]


def test_step_and_accumulation_passes_are_priced_at_the_memory_rate():
    cfg, base = _run()
    _, none = _run("framework.fp16_param_bytes=0", "framework.fp16_shard_bytes=0", "framework.fp16_grad_accum_bytes=0")
    spec, layout, hbm = _shape(cfg)
    slowest = base.metrics["slowest_stage"]
    assert none.metrics["slowest_stage"] == slowest
    params = sum(stage_param_split(spec, layout, slowest))
    shard = params / layout.dp
    m = layout.microbatches
    # every microbatch but the first adds its gradients into param.grad: (m - 1) x 6 bytes per stage parameter
    assert base.metrics["backward_s"] - none.metrics["backward_s"] == pytest.approx((m - 1) * 6 * params / hbm)
    assert base.metrics["optimizer_s"] - none.metrics["optimizer_s"] == pytest.approx((16 * params + 52 * shard) / hbm)
    assert base.metrics["iter_time_s"] > none.metrics["iter_time_s"]


def test_one_microbatch_accumulates_nothing():
    _, a = _run("parallelism.global_batch=4")  # dp 4: one microbatch per replica
    _, b = _run("parallelism.global_batch=4", "framework.fp16_grad_accum_bytes=0")
    assert a.metrics["backward_s"] == b.metrics["backward_s"]


def test_fp16_keys_leave_bf16_and_zero3_alone():
    _, a = _run(precision="bf16")
    _, b = _run(*OFF, precision="bf16")
    assert a.metrics["iter_time_s"] == b.metrics["iter_time_s"]
    _, c = _run("parallelism.zero=3", "parallelism.pp=1", "parallelism.global_batch=32")
    _, d = _run("parallelism.zero=3", "parallelism.pp=1", "parallelism.global_batch=32", *OFF)
    assert c.metrics["iter_time_s"] == d.metrics["iter_time_s"]


@pytest.mark.parametrize("framework", ["megatron", "fsdp"])
def test_megatron_and_fsdp_unchanged(framework):
    _, a = _run(framework=framework)
    _, b = _run(*OFF, framework=framework)
    assert a.metrics["iter_time_s"] == b.metrics["iter_time_s"]
    assert _rows(a, "dp", "reduce_scatter") and not _rows(a, "dp", "all_reduce")


def test_presets():
    def fw(name):
        return Framework.from_cfg(estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"])

    def keys(f):
        return f.fp16_grad_reduce, f.fp16_param_bytes, f.fp16_shard_bytes, f.fp16_grad_accum_bytes

    for name in ("megatron", "fsdp"):
        assert keys(fw(name)) == ("zero", 0, 0, 0)
    assert keys(fw("deepspeed")) == ("all_reduce", 16, 52, 6)
    assert keys(fw("deepspeed_2021")) == ("zero", 0, 0, 6)


@pytest.mark.parametrize("key, value, message", [
    ("fp16_grad_reduce", "all_reduce_bf16", r"^framework.fp16_grad_reduce must be one of zero, all_reduce, got 'all_reduce_bf16'$"),
    ("fp16_param_bytes", -1, r"^framework.fp16_param_bytes must be a number of bytes per parameter >= 0, got -1$"),
    ("fp16_shard_bytes", True, r"^framework.fp16_shard_bytes must be a number of bytes per parameter >= 0, got True$"),
    ("fp16_grad_accum_bytes", "x", r"^framework.fp16_grad_accum_bytes must be a number of bytes per parameter >= 0, got 'x'$"),
])
def test_bad_values_are_one_line_errors(key, value, message):
    cfg = estimator.resolve_config(["parallelism=hybrid", "framework=deepspeed"])["framework"]
    with pytest.raises(EstimatorError, match=message):
        Framework.from_cfg({**cfg, key: value})


def test_partitioned_tensor_gathers_per_microbatch():
    """DeepSpeed's PartitionedTensor: per microbatch a middle stage all-gathers its input (forward), its own output and
    the received gradient (backward) over TP: 3 x m all-gathers of the whole s x b x h activation; 2 x m in 2021."""
    cfg, r = _run()
    spec, layout, _ = _shape(cfg)
    act = spec.seq_len * spec.hidden * 2
    m = layout.microbatches
    (row,) = [c for c in _rows(r, "tp", "all_gather") if c["bytes"] == act]
    assert row["count_per_step"] == 3 * m and row["group_size"] == 2
    metas = [c for c in _rows(r, "pp", "p2p") if c["bytes"] < 1000]
    assert len(metas) == 1 and metas[0]["count_per_step"] == 2 * m
    assert r.metrics["p2p_gather_time_s"] > 0
    _, off = _run("framework.p2p_partitioned_tensor=false")
    assert off.metrics["p2p_gather_time_s"] == 0 and off.metrics["iter_time_s"] < r.metrics["iter_time_s"]
    assert not [c for c in _rows(off, "tp", "all_gather") if c["bytes"] == act]
    _, old = _run(framework="deepspeed_2021")
    (row,) = [c for c in _rows(old, "tp", "all_gather") if c["bytes"] == act]
    assert row["count_per_step"] == 2 * m


def test_partitioned_tensor_counts_with_two_stages():
    cfg, r = _run("parallelism.pp=2", "parallelism.global_batch=16")  # dp 8: two microbatches per replica
    spec, layout, _ = _shape(cfg)
    act = spec.seq_len * spec.hidden * 2
    (row,) = [c for c in _rows(r, "tp", "all_gather") if c["bytes"] == act]
    assert row["count_per_step"] == 2 * layout.microbatches  # stage 0: its output restored + the gradient rebuilt


def test_no_partitioned_tensor_without_tp_or_pipeline():
    for extra in (("parallelism.tp=1", "fabric.nodes=16"), ("parallelism.pp=1", "parallelism.global_batch=32"),
                  ("parallelism.sequence_parallel=true",)):  # with SP the output is already split: sent as it is
        _, r = _run(*extra)
        assert r.metrics["p2p_gather_time_s"] == 0


@pytest.mark.parametrize("framework", ["megatron", "fsdp"])
def test_no_partitioned_tensor_for_megatron_or_fsdp(framework):
    # Megatron's own receiver all-gather (framework.p2p_gather_on_receive, tests/test_p2p_receive_gather.py) switched off
    _, r = _run("framework.p2p_gather_on_receive=false", framework=framework)
    assert r.metrics["p2p_gather_time_s"] == 0
