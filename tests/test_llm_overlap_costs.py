"""Overlap is not free: PyTorch's async TP leaves the backward's input-gradient reduce-scatters
exposed (``framework.tp_overlap_grad_reduce_scatter``), and data-parallel / ZeRO communication that
overlaps compute slows it by ``parallelism.comm_interference`` of the overlapped time."""

from __future__ import annotations

import subprocess
import sys

import pytest

import estimator
from estimator.estimate import estimate


def run(*overrides, n=256):
    return estimate(estimator.resolve_config([
        "model=llama3_70b", "parallelism=hybrid", "system=dgx_h100", f"fabric.nodes={n}", "precision=bf16",
        "parallelism.tp=8", "parallelism.pp=1", "parallelism.micro_batch_size=1", f"parallelism.global_batch={n // 8}",
        "parallelism.sequence_parallel=true", "parallelism.recompute=full", "model.fused_kernels=te", "framework=megatron",
        *overrides]))


def test_async_tp_exposes_two_reduce_scatters_per_layer():
    fixed_dp = "parallelism.dp_overlap=false"  # a longer backward would hide more of the gradient reduction
    vanilla = run(fixed_dp, "framework.tp_comm_overlap=false")
    userbuffers = run(fixed_dp, "framework.tp_comm_overlap=true").metrics
    async_tp = run(fixed_dp, "framework.tp_comm_overlap=true", "framework.tp_overlap_grad_reduce_scatter=false").metrics
    rs = next(c["time_s"] for c in vanilla.collectives if c["group"] == "tp" and c["collective"] == "reduce_scatter")
    layers = estimator.resolve_config(["model=llama3_70b"])["model"]["num_layers"]  # one pipeline stage
    extra = async_tp["iter_time_s"] - userbuffers["iter_time_s"]
    # with TE userbuffers every TP collective hides behind the GEMMs; async TP pays 2 reduce-scatters per layer
    assert extra == pytest.approx(2 * rs * layers * userbuffers["microbatches"], rel=0.02)
    assert userbuffers["iter_time_s"] < async_tp["iter_time_s"] < vanilla.metrics["iter_time_s"]


def test_fsdp_profile_is_async_tp_and_megatron_is_userbuffers():
    cfg = {name: estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"]
           for name in ("fsdp", "megatron")}
    assert cfg["fsdp"]["tp_overlap_grad_reduce_scatter"] is False
    assert cfg["megatron"]["tp_overlap_grad_reduce_scatter"] is True
    assert (cfg["fsdp"]["tp_overlap_scope"], cfg["megatron"]["tp_overlap_scope"]) == ("gemm", "layer")


def test_fsdp_async_tp_hides_each_collective_behind_its_own_gemms():
    """Inductor's micro-pipeline pass pairs a collective with the GEMMs that read or produce it
    (framework.tp_overlap_scope=gemm): wq/wk/wv are short next to the MLP's GEMMs, so the attention's
    all-gather and wo's reduce-scatter stay partly exposed where the pooled (userbuffers) model hides them."""
    # 96 GB (H100 NVL-class memory): at 80 GB this no-recompute layout misses by 0.3 GB once torch's fp32 loss holds
    # its backward's gradients; the point here is the overlap, not the fit
    fsdp = ("framework=fsdp", "framework.tp_comm_overlap=true", "framework.tp_overlap_grad_reduce_scatter=true",
            "parallelism.device_memory_bytes=96e9")
    pooled = run(*fsdp, "framework.tp_overlap_scope=layer", "parallelism.recompute=none").metrics
    matched = run(*fsdp, "parallelism.recompute=none").metrics
    assert matched["iter_time_s"] > pooled["iter_time_s"]
    # the exposure is the sum over the collectives of what exceeds its own GEMMs' time, computed by hand
    from estimator.parallel.spec import TransformerSpec
    from estimator.parallel.step import gemm_matched_tp

    spec = TransformerSpec.from_cfg(estimator.resolve_config(["model=llama3_70b", "parallelism=hybrid"])["model"])
    gemm = 1.0  # the layer's Linear GEMMs, seconds: shares by FLOPs (GQA: wk/wv 1/8 of wq at tp 8)
    fwd, bwd = gemm_matched_tp(spec, 8, gemm, (0.2, 0.2), (0.2, 0.2), 0, 0, False)
    q, kv, ffn = 8192 * 8192, 8192 * 1024, 8192 * 28672
    share = {"qkv": (q + 2 * kv) / (2 * q + 2 * kv + 3 * ffn), "wo": q / (2 * q + 2 * kv + 3 * ffn)}
    assert fwd == pytest.approx(max(0, 0.2 - share["qkv"]) + max(0, 0.2 - share["wo"]))
    assert bwd == pytest.approx(max(0, 0.2 - share["wo"]) + 0.4)  # + both input-gradient reduce-scatters whole
    # without sequence parallelism the pass fuses nothing: every all-reduce is exposed
    no_sp = run("framework=fsdp", "framework.tp_comm_overlap=true", "parallelism.sequence_parallel=false").metrics
    plain = run("framework=fsdp", "parallelism.sequence_parallel=false").metrics
    assert no_sp["iter_time_s"] == pytest.approx(plain["iter_time_s"])


def test_unknown_tp_overlap_scope_is_a_one_line_error():
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_8b", "parallelism=hybrid",
                           "framework=fsdp", "framework.tp_overlap_scope=tile"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "framework.tp_overlap_scope must be one of layer, gemm" in proc.stderr


def zero3_step(interference=None, *overrides, system="dgx_h100", n=64):
    """FSDP ZeRO-3 on n GPUs; ``interference`` None = the preset's default (the device's SM share)."""
    return estimate(estimator.resolve_config([
        "model=llama3_8b", "parallelism=hybrid", f"system={system}", f"fabric.nodes={n}", "precision=bf16",
        "parallelism.tp=1", "parallelism.pp=1", "parallelism.micro_batch_size=1", f"parallelism.global_batch={n}",
        "parallelism.zero=3", "parallelism.recompute=none", "framework=fsdp", "model.fused_kernels=te",
        *([] if interference is None else [f"parallelism.comm_interference={interference}"]), *overrides])).metrics


def test_interference_charges_the_overlapped_zero3_traffic():
    free, charged, heavy = zero3_step(0), zero3_step(0.15), zero3_step(0.5)
    # traffic the compute hid (zero3_exposed_time_s also holds FSDP's compute-stream copies, which are not traffic)
    hidden = free["zero3_comm_time_s"] - (free["zero3_exposed_time_s"] - free["zero3_copy_time_s"])
    assert hidden > 0.05 * free["iter_time_s"]
    # every hidden second costs 0.15 s more compute (a few first gathers are exposed whole, not hidden)
    assert charged["iter_time_s"] - free["iter_time_s"] == pytest.approx(0.15 * hidden, rel=0.1)
    assert free["iter_time_s"] < charged["iter_time_s"] < heavy["iter_time_s"]
    # the output names the charge: what the step grew by, part of the exposed communication
    assert free["interference_s"] == 0
    assert charged["interference_s"] == pytest.approx(charged["iter_time_s"] - free["iter_time_s"], rel=1e-6)
    assert charged["interference_s"] <= charged["exposed_comm_time_s"]


@pytest.mark.parametrize("system", ["dgx_h100", "dgx_a100"])
def test_default_interference_is_the_devices_nccl_sm_share(system):
    """Unstated, the charge is the SMs an NCCL collective holds over the device's (conf/device/*.yaml)."""
    device = estimator.resolve_config([f"system={system}"])["device"]
    share = device["collective_sms"] / device["sm_count"]
    assert 0.1 < share < 0.25  # 16 / 108 (A100), 24 / 132 (H100): not the former flat 0.15, not 0
    default, stated, free = zero3_step(None, system=system), zero3_step(share, system=system), zero3_step(0, system=system)
    assert default["interference_s"] > 0
    assert default["iter_time_s"] == stated["iter_time_s"]
    # an explicit 0 is the step without the charge, exactly
    assert free["interference_s"] == 0
    assert free["iter_time_s"] == pytest.approx(default["iter_time_s"] - default["interference_s"], rel=1e-9)


def test_device_stating_no_collective_sms_charges_nothing():
    unstated, free = zero3_step(None, "device.collective_sms=null"), zero3_step(0)
    assert unstated["interference_s"] == 0 and unstated["iter_time_s"] == free["iter_time_s"]


def test_no_overlapped_collective_no_interference():
    """One GPU (tp 1, dp 1): no data-parallel or ZeRO traffic to overlap, so the default charges nothing."""
    alone = zero3_step(None, "parallelism.device_memory_bytes=200e9", n=1)  # room for 8B's unsharded state
    assert alone["interference_s"] == 0 and alone["exposed_comm_time_s"] == 0


def test_bad_collective_sms_is_a_one_line_error():
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_8b", "parallelism=hybrid",
                          "system=dgx_h100", "fabric.nodes=8", "parallelism.tp=1", "device.collective_sms=132"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "device.collective_sms" in out.stderr


def test_bad_interference_is_a_one_line_error():
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_8b", "parallelism=hybrid",
                          "system=dgx_h100", "fabric.nodes=8", "parallelism.tp=1", "parallelism.comm_interference=1.5"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "parallelism.comm_interference" in out.stderr and "Traceback" not in out.stderr


def test_megatron_overlaps_tp_by_default_but_only_under_sequence_parallelism():
    """framework=megatron is Megatron-core as NVIDIA's recipes run it (TE userbuffers on); the overlap works on
    sequence parallelism's all-gather / reduce-scatter pairs, so without SP the TP all-reduces stay exposed."""
    assert estimator.resolve_config(["parallelism=hybrid"])["framework"]["tp_comm_overlap"] is True
    default = run().metrics["iter_time_s"]
    assert default == run("framework.tp_comm_overlap=true").metrics["iter_time_s"]
    assert default < run("framework.tp_comm_overlap=false").metrics["iter_time_s"]
    no_sp = ("parallelism.sequence_parallel=false", "parallelism.micro_batch_size=1")
    assert (run(*no_sp, "framework.tp_comm_overlap=true").metrics["iter_time_s"]
            == run(*no_sp, "framework.tp_comm_overlap=false").metrics["iter_time_s"])
