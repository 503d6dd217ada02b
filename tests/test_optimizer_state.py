"""Adam's state dtype (``framework.optimizer_state``): fp32 keeps 12 bytes per parameter, bf16 (Apex's
DistributedFusedAdam with dtype=bf16, NeMo's optim.dtype: bf16) keeps 6, bf16_moments (fp32 master weights,
bf16 moments: Megatron-core's precision-aware optimizer) keeps 8, in memory and in the optimizer step's HBM traffic."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import stage_memory
from estimator.parallel.spec import TransformerSpec

BASE = ["model=llama3_8b", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=16", "precision=bf16",
        "parallelism.tp=2", "parallelism.pp=1", "parallelism.micro_batch_size=1", "parallelism.global_batch=16",
        "parallelism.zero=1", "parallelism.recompute=selective"]


def _cfg(*extra):
    framework = [] if any(e.startswith("framework=") for e in extra) else ["framework=megatron"]
    return estimator.resolve_config([*BASE, *framework, *extra])


def _stage0(state: str) -> dict:
    """Stage 0's memory of the base layout (fp16 gradients) with the framework's Adam state dtype ``state``."""
    cfg = _cfg()
    spec = TransformerSpec.from_cfg(cfg["model"])
    framework = Framework.from_cfg({**cfg["framework"], "optimizer_state": state})
    return stage_memory(spec, Layout.from_cfg(cfg["parallelism"], spec, 16), 0, 2, framework)


def test_bf16_state_halves_the_optimizer_memory_and_nothing_else():
    assert Framework.from_cfg(_cfg()["framework"]).optimizer_state == "fp32"  # the preset's own state
    a, b = _stage0("fp32"), _stage0("bf16")
    assert a["optimizer"] > 0
    assert b["optimizer"] == pytest.approx(a["optimizer"] / 2)
    assert {k: b[k] for k in ("weights", "gradients", "activations")} == {k: a[k] for k in ("weights", "gradients", "activations")}
    # ZeRO-1 over dp 8: the shard is 12 (6) bytes x the stage's parameters / 8
    params = a["weights"] / 2
    assert a["optimizer"] == pytest.approx(12 * params / 8)


def test_bf16_state_halves_the_optimizer_step():
    fp32, bf16 = estimate(_cfg()).metrics, estimate(_cfg("framework.optimizer_state=bf16")).metrics
    assert bf16["optimizer_s"] == pytest.approx(fp32["optimizer_s"] / 2)
    assert bf16["memory_total_bytes"] < fp32["memory_total_bytes"]


def test_every_framework_preset_states_fp32():
    for name in ("megatron", "deepspeed", "deepspeed_2021", "fsdp"):
        assert _cfg(f"framework={name}")["framework"]["optimizer_state"] == "fp32"


def test_unknown_optimizer_state_is_a_one_line_error():
    with pytest.raises(EstimatorError, match=r"^framework.optimizer_state must be one of fp32, bf16, bf16_moments, got 'fp16'$"):
        estimate(_cfg("framework.optimizer_state=fp16"))


def test_bf16_moments_keep_two_thirds_of_the_state_and_stream_three_quarters_of_the_step():
    a, b = _stage0("fp32"), _stage0("bf16_moments")
    assert b["optimizer"] == pytest.approx(a["optimizer"] * 8 / 12)  # 4 + 2 + 2 bytes against 4 + 4 + 4
    assert b["weights"] == a["weights"] and b["activations"] == a["activations"]
    # the step: fp32 master read + written (8), bf16 moments read + written (8), gradient + weight (8) = 24 of 32
    full, part = estimate(_cfg()).metrics, estimate(_cfg("framework.optimizer_state=bf16_moments")).metrics
    assert part["optimizer_s"] == pytest.approx(full["optimizer_s"] * 24 / 32)
