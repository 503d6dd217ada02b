"""PyTorch FSDP's own HBM copies around ZeRO-3's flat-buffer collectives (framework.fsdp_version,
estimator/parallel/zero3.py engine_copies): FSDP2's copy-out after every all-gather and gradient copy-in before every
reduce-scatter on the compute stream, FSDP1's gradient concatenation there, the shard casts beside the collectives;
none for the Megatron and DeepSpeed profiles."""

from __future__ import annotations

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import zero3_units
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.zero3 import EngineCopies, engine_copies

BASE = ["system=dgx_h100", "fabric.nodes=8", "model=llama3_8b", "parallelism=hybrid", "precision=bf16",
        "parallelism.tp=1", "parallelism.pp=1", "parallelism.micro_batch_size=1", "parallelism.global_batch=8",
        "model.seq_len=8192", "parallelism.zero=3", "parallelism.recompute=op", "model.fused_kernels=te"]


def run(*overrides: str, framework: str = "fsdp"):
    cfg = estimator.resolve_config([*BASE, f"framework={framework}", *overrides])
    return cfg, estimate(cfg).metrics


def test_presets_state_the_key():
    cfg = estimator.resolve_config(["parallelism=hybrid", "framework=fsdp"])
    assert cfg["framework"]["fsdp_version"] == 2
    for name in ("megatron", "deepspeed", "deepspeed_2021"):
        cfg = estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])
        assert cfg["framework"]["fsdp_version"] is None, name


@pytest.mark.parametrize("framework", ["megatron", "deepspeed"])
def test_other_profiles_price_no_copies(framework):
    _, m = run(framework=framework)
    assert m["zero3_copy_time_s"] == 0


def test_bad_value_is_a_one_line_error():
    cfg = estimator.resolve_config(["parallelism=hybrid", "framework=fsdp"])
    with pytest.raises(EstimatorError, match="framework.fsdp_version must be 1, 2 or null") as err:
        Framework.from_cfg({**cfg["framework"], "fsdp_version": 3})
    assert "\n" not in str(err.value)


def test_bytes_per_parameter():
    # FSDP2: fp32 shard cast to bf16 (4 + 2) and copied into the all-gather buffer (2 + 2); copy-out 2 + 2;
    # chunk_cat of the bf16 gradient into the reduce-dtype buffer (2 + 4 with fp32 reduce, 2 + 2 with bf16)
    assert engine_copies(2, 4) == EngineCopies(10, 4, 6, 0)
    assert engine_copies(2, 2).grad_compute == 4
    # FSDP1: the shard cast (4 + 2), no copy-out, autograd's cat (2 + 2); on the post-backward stream the cast to fp32
    # (2 + 4) and the pre-divide (4 + 4), only the pre-divide with bf16 reduce (2 + 2)
    assert engine_copies(1, 4) == EngineCopies(6, 0, 4, 14)
    assert engine_copies(1, 2).grad_stream == 4
    assert engine_copies(None, 4) == EngineCopies()


@pytest.mark.parametrize(("copies", "per_param"), [("2", 2 * 4 + 6), ("1", 4), ("null", 0)])
def test_compute_stream_copies_per_step(copies, per_param):
    """One forward and one backward gather per unit (recompute=op), one gradient copy per backward: the step's copy
    time is every layer's unit parameters times those bytes at the device's elementwise memory rate."""
    cfg, m = run("parallelism.fp32_grads=true", f"framework.fsdp_version={copies}")
    spec = TransformerSpec.from_cfg(cfg["model"])
    layout = Layout.from_cfg(cfg["parallelism"], spec, 8)
    unit = sum(zero3_units(spec, layout, "layer"))
    hbm = DeviceProfile.from_dict(cfg["device"]).memory_rate("elementwise", "bf16")
    assert m["zero3_copy_time_s"] == pytest.approx(spec.layers * unit * per_param / hbm, rel=1e-9)


def test_copies_slow_the_step_and_sit_in_the_zero3_exposure():
    _, none = run("framework.fsdp_version=null")
    _, two = run()
    _, one = run("framework.fsdp_version=1")
    assert none["iter_time_s"] < one["iter_time_s"] < two["iter_time_s"]
    # without interference the exposure grows by the copies (and the first gathers' shard cast, a few 0.1 ms)
    _, free_none = run("framework.fsdp_version=null", "parallelism.comm_interference=0")
    _, free_two = run("parallelism.comm_interference=0")
    grown = free_two["zero3_exposed_time_s"] - free_none["zero3_exposed_time_s"]
    assert grown == pytest.approx(free_two["zero3_copy_time_s"], rel=0.02) and grown >= free_two["zero3_copy_time_s"]
    # FSDP1's cast and pre-divide ride the reduce-scatter's stream; FSDP2's shard cast and copy-in the all-gather's
    assert one["zero3_comm_time_s"] > none["zero3_comm_time_s"]
    assert two["zero3_comm_time_s"] > none["zero3_comm_time_s"]
    assert none["compute_time_s"] == one["compute_time_s"] == two["compute_time_s"]


def test_the_command_line_takes_null_for_the_fsdp_generation():
    """framework.fsdp_version is 2 in the fsdp profile, but null (not PyTorch FSDP: no copies) is a value too."""
    from estimator.config_checks import check_value

    check_value("framework.fsdp_version", None, 2)
    with pytest.raises(EstimatorError, match="framework.fsdp_version must be a number"):
        check_value("framework.fsdp_version", "abc", 2)
    with pytest.raises(EstimatorError, match="must be a number"):
        check_value("framework.zero3_prefetch_params", None, 5.0e7)  # other numeric keys still refuse null
