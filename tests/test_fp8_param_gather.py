"""Megatron-core's FP8 parameter all-gather (framework.fp8_param_gather; estimator/parallel/step.py
fp8_gathered_params): with precision=fp8 and the distributed optimizer, the decoder layers' GEMM weights are gathered
at 1 byte per element (core_v0.13.1 distributed_data_parallel.py: a torch.uint8 buffer for Float8Tensor parameters),
the embedding, LM head and norms at 2; the gradients' reduce-scatter keeps its bytes."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.step import fp8_gathered_params

BASE = ["system=dgx_h100", "fabric.nodes=64", "model=llama3_8b", "parallelism=hybrid", "parallelism.tp=2",
        "parallelism.pp=1", "parallelism.micro_batch_size=1", "parallelism.global_batch=32", "model.seq_len=8192",
        "framework=megatron", "parallelism.zero=1", "parallelism.fp32_grads=false"]

# Llama 3.1 8B (Dubey et al. 2024 Table 3; HF config.json): hidden 4096, 32 layers, 32 heads of 128, 8 KV heads,
# FFN 14336 (SwiGLU: three matrices), vocabulary 128256, RMSNorm, untied head.
H, LAYERS, KV, FFN = 4096, 32, 8 * 128, 14336
GEMM_PER_LAYER = H * (H + 2 * KV) + H * H + 3 * H * FFN  # qkv, proj, fc1 (gate + up), fc2


def dp_collectives(*overrides: str) -> dict[str, float]:
    cfg = estimator.resolve_config([*BASE, *overrides])
    out = {}
    for c in estimate(cfg).collectives:
        if c["group"] in ("dp", "zero1"):
            out[c["collective"]] = c["bytes"]
    return out


def test_every_preset_leaves_it_off():
    for name in ("fsdp", "megatron", "deepspeed", "deepspeed_2021", "internlm"):
        cfg = estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])
        assert cfg["framework"]["fp8_param_gather"] is False, name


def test_not_a_bool_is_a_one_line_error():
    cfg = estimator.resolve_config(["parallelism=hybrid", "framework=megatron"])
    with pytest.raises(EstimatorError, match="framework.fp8_param_gather must be true or false") as err:
        Framework.from_cfg({**cfg["framework"], "fp8_param_gather": "yes"})
    assert "\n" not in str(err.value)


def test_fp8_share_is_the_layers_gemm_weights():
    cfg = estimator.resolve_config(BASE)
    spec = TransformerSpec.from_cfg(cfg["model"])
    for tp, pp in ((1, 1), (2, 1), (2, 2), (4, 4)):
        layout = Layout(tp=tp, pp=pp, dp=64 // (tp * pp), ep=1, micro_batch_size=1, microbatches=pp, zero=1,
                        sequence_parallel=tp > 1, recompute="none")
        per_stage = [fp8_gathered_params(spec, layout, i) for i in range(pp)]
        assert sum(per_stage) == pytest.approx(LAYERS * GEMM_PER_LAYER / tp)
        assert per_stage == pytest.approx([LAYERS // pp * GEMM_PER_LAYER / tp] * pp)


def test_all_gather_moves_one_byte_per_fp8_weight():
    off = dp_collectives("precision=fp8")
    on = dp_collectives("precision=fp8", "framework.fp8_param_gather=true")
    fp8 = LAYERS * GEMM_PER_LAYER / 2
    assert on["all_gather"] == pytest.approx(off["all_gather"] - fp8)
    assert off["all_gather"] == off["reduce_scatter"]  # 16-bit weights and 16-bit gradients (fp32_grads=false)
    assert on["reduce_scatter"] == off["reduce_scatter"]  # the gradients keep their dtype


def test_only_fp8_runs_gather_in_fp8():
    assert dp_collectives("precision=bf16", "framework.fp8_param_gather=true") == dp_collectives("precision=bf16")


def test_faster_gather_never_slows_the_step():
    cfg_off = estimator.resolve_config([*BASE, "precision=fp8"])
    cfg_on = estimator.resolve_config([*BASE, "precision=fp8", "framework.fp8_param_gather=true"])
    off, on = estimate(cfg_off).metrics, estimate(cfg_on).metrics
    assert on["dp_comm_time_s"] < off["dp_comm_time_s"]
    assert on["iter_time_s"] <= off["iter_time_s"]
