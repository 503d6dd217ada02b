"""FSDP gathering fp32 parameters under torch autocast (framework.fsdp_param_bytes=4: Composer's mixed_precision
DEFAULT up to v0.13.1, conf/framework/fsdp.yaml): 4-byte all-gathers, fp32 gathered units and unit gradient, autocast's
weight casts and the fp32 gradient path on the compute stream (estimator/parallel/zero3.py engine_copies,
estimator/parallel/memory.py stage_memory)."""

from __future__ import annotations

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import zero3_unit_grad_bytes, zero3_units
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.zero3 import EngineCopies, engine_copies

BASE = ["system=dgx_a100", "fabric.nodes=8", "model=megatron_gpt", "parallelism=hybrid", "precision=bf16",
        "parallelism.tp=1", "parallelism.pp=1", "parallelism.micro_batch_size=1", "parallelism.global_batch=8",
        "model.seq_len=2048", "model.hidden_size=2048", "model.num_layers=8", "model.num_heads=16",
        "model.ffn_size=8192", "model.vocab_size=50257", "model.fused_kernels=sdpa", "framework=fsdp",
        "framework.attention_kernel=flash1", "parallelism.zero=3", "framework.fsdp_version=1"]


def run(*overrides: str):
    cfg = estimator.resolve_config([*BASE, *overrides])
    return cfg, estimate(cfg).metrics


def test_presets_gather_16_bit_parameters():
    for name in ("fsdp", "megatron", "deepspeed", "deepspeed_2021"):
        cfg = estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])
        assert cfg["framework"]["fsdp_param_bytes"] == 2, name


def test_bad_value_is_a_one_line_error():
    cfg = estimator.resolve_config(["parallelism=hybrid", "framework=fsdp"])
    with pytest.raises(EstimatorError, match="framework.fsdp_param_bytes must be 2 or 4") as err:
        Framework.from_cfg({**cfg["framework"], "fsdp_param_bytes": 3})
    assert "\n" not in str(err.value)


def test_fp32_gathers_need_fsdp1():
    cfg = estimator.resolve_config(["parallelism=hybrid", "framework=fsdp"])
    with pytest.raises(EstimatorError, match="fsdp_param_bytes=4 is modelled for framework.fsdp_version=1") as err:
        Framework.from_cfg({**cfg["framework"], "fsdp_param_bytes": 4})  # the profile's fsdp_version 2
    assert "\n" not in str(err.value)


def test_bytes_per_parameter():
    # no shard cast (torch 1.13.1: no low-precision shard without param_dtype); autocast's cast 4 + 2 per forward
    # execution; the gradient's cast back (2 + 4) and the fp32 concatenation (4 + 4); on the post-backward stream the
    # cast to bf16 (4 + 2) and its pre-divide (2 + 2)
    assert engine_copies(1, 2, 4) == EngineCopies(gather_in=0, gather_out=0, grad_compute=14, grad_stream=10, autocast=6)
    assert engine_copies(1, 4, 4).grad_stream == 8  # fp32 reduce: no cast, the pre-divide of the fp32 gradient
    assert engine_copies(1, 2) == engine_copies(1, 2, 2)  # the 16-bit default is unchanged
    assert zero3_unit_grad_bytes(10.0, 2, 4) == 60.0 and zero3_unit_grad_bytes(10.0, 4, 4) == 40.0
    assert zero3_unit_grad_bytes(10.0, 4) == 60.0


@pytest.mark.parametrize(("recompute", "per_param"), [("full", 6 + 6 + 14), ("none", 6 + 14)])
def test_compute_stream_copies_per_step(recompute, per_param):
    """Autocast casts each weight once per forward execution (the recompute's too), the backward casts and concatenates
    the fp32 gradient: the step's copy time is every layer's parameters times those bytes at the elementwise rate."""
    cfg, m = run(f"parallelism.recompute={recompute}", "framework.fsdp_param_bytes=4", "parallelism.fp32_grads=false")
    spec = TransformerSpec.from_cfg(cfg["model"])
    layout = Layout.from_cfg(cfg["parallelism"], spec, 8)
    unit = sum(zero3_units(spec, layout, "layer"))
    hbm = DeviceProfile.from_dict(cfg["device"]).memory_rate("elementwise", "bf16")
    assert m["zero3_copy_time_s"] == pytest.approx(spec.layers * unit * per_param / hbm, rel=1e-9)


@pytest.mark.parametrize("recompute", ["full", "none"])
def test_fp32_gathers_cost_time_and_memory(recompute):
    _, two = run(f"parallelism.recompute={recompute}", "parallelism.fp32_grads=false")
    cfg, four = run(f"parallelism.recompute={recompute}", "framework.fsdp_param_bytes=4", "parallelism.fp32_grads=false")
    assert four["iter_time_s"] > two["iter_time_s"]
    assert four["zero3_comm_time_s"] > two["zero3_comm_time_s"]  # 4-byte all-gathers
    assert four["compute_time_s"] == two["compute_time_s"]  # the GEMMs run in bf16 either way
    spec = TransformerSpec.from_cfg(cfg["model"])
    layout = Layout.from_cfg(cfg["parallelism"], spec, 8)
    unit = max(zero3_units(spec, layout, "layer"))
    # the gathered units (running + prefetched) and the root unit are fp32: 2 more bytes per parameter
    assert four["memory_weights_bytes"] > two["memory_weights_bytes"] + 2 * 2 * unit
    if recompute == "none":  # every held layer keeps autocast's bf16 weight copies for its backward
        assert four["memory_activations_bytes"] == pytest.approx(
            two["memory_activations_bytes"] + spec.layers * unit * 2, rel=1e-9)


# ---- framework.attention_host_sync: the next unit's gather is issued after the host passes the attention ----------

def test_presets_do_not_sync_in_attention():
    for name in ("fsdp", "megatron", "deepspeed", "deepspeed_2021"):
        cfg = estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])
        assert cfg["framework"]["attention_host_sync"] is False, name


def test_bad_sync_value_is_a_one_line_error():
    cfg = estimator.resolve_config(["parallelism=hybrid", "framework=fsdp"])
    with pytest.raises(EstimatorError, match="framework.attention_host_sync must be true or false") as err:
        Framework.from_cfg({**cfg["framework"], "attention_host_sync": "yes"})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("recompute", ["full", "none"])
def test_a_synced_attention_shortens_the_gathers_window(recompute):
    """Comm-bound (64 GPUs over the node network, one short sequence per GPU): the gathers hide behind less compute,
    so more of them is exposed; the compute itself is unchanged."""
    comm_bound = ["fabric.nodes=64", "parallelism.global_batch=64", "model.seq_len=512", "model.hidden_size=4096",
                  "model.num_heads=32", "model.ffn_size=16384", "framework.fsdp_param_bytes=4",
                  f"parallelism.recompute={recompute}"]
    _, off = run(*comm_bound)
    _, on = run(*comm_bound, "framework.attention_host_sync=true")
    assert on["zero3_exposed_time_s"] > off["zero3_exposed_time_s"]
    assert on["iter_time_s"] > off["iter_time_s"]
    assert on["compute_time_s"] == off["compute_time_s"]
    assert on["zero3_comm_time_s"] == off["zero3_comm_time_s"]


def test_hidden_gathers_are_unchanged_by_the_sync():
    """Where one unit's gather is far shorter than the layer's compute after its attention, nothing moves."""
    _, off = run("parallelism.micro_batch_size=8", "parallelism.global_batch=64")
    _, on = run("parallelism.micro_batch_size=8", "parallelism.global_batch=64", "framework.attention_host_sync=true")
    assert on["iter_time_s"] == pytest.approx(off["iter_time_s"], rel=1e-12)
