"""framework.fp8_kernels: Transformer Engine's FP8 casts (``te``, the default, priced as before) or torchao's
Float8Linear (``torchao``: estimator.compute.torchao_kernels), and the refusals."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layer import capture_parts
from estimator.parallel.spec import TransformerSpec

LINEARS = 4  # the te Llama layer's GEMMs: fused QKV, output projection, fc1 (gate and up), fc2
TORCHAO = ("torchao::fp8_cast_dims", "torchao::fp8_cast_weight", "torchao::fp8_amax", "torchao::fp8_amax_final",
           "torchao::fp8_transpose_weight")


def small(**kw):
    cfg = estimator.resolve_config(["model=llama3_8b", "model.fused_kernels=te"])["model"]
    return replace(TransformerSpec.from_cfg(cfg), layers=2, seq_len=512, **kw)


def layer(fp8, mbs=1, spec=None):
    return capture_parts(spec or small(), 1, False, 1, fp8)["layer"].scaled_to_batch(mbs)


def counts(part):
    return Counter((n.op, n.phase) for n in part.nodes if n.op in TORCHAO)


def total(part, op, phase, key="mem_bytes"):
    return sum(getattr(n, key) for n in part.nodes if n.op == op and n.phase == phase)


def weights_fp32_bytes(spec):
    """fp32 bytes of the layer's four Linear weights (no biases in Llama)."""
    h, f, d = spec.hidden, spec.ffn, spec.head_dim
    qkv = (spec.heads + 2 * spec.kv_heads) * d * h
    return 4 * (qkv + spec.heads * d * h + 2 * f * h + f * h)


def test_every_framework_defaults_to_te_and_true_means_te():
    for name in ("megatron", "deepspeed", "deepspeed_2021", "fsdp"):
        assert Framework.from_cfg(estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"]).fp8_kernels == "te"
    te, true = layer("te"), layer(True)
    assert [(n.op, n.phase, n.mem_bytes, n.flops) for n in te.nodes] == [(n.op, n.phase, n.mem_bytes, n.flops) for n in true.nodes]
    assert not counts(te)


def test_te_leaves_the_estimate_unchanged():
    base = ["model=llama3_8b", "model.num_layers=4", "model.seq_len=1024", "system=dgx_h100", "framework=fsdp",
            "parallelism.zero=3", "parallelism.global_batch=16", "precision=fp8"]
    default = estimate(estimator.resolve_config(base)).metrics["iter_time_s"]
    named = estimate(estimator.resolve_config([*base, "framework.fp8_kernels=te"])).metrics["iter_time_s"]
    torchao = estimate(estimator.resolve_config([*base, "framework.fp8_kernels=torchao"])).metrics["iter_time_s"]
    gathered = estimate(estimator.resolve_config([*base, "framework.fp8_kernels=torchao_fsdp_fp8"])).metrics["iter_time_s"]
    assert default == named
    # the weight casts every microbatch cost time TE's per-step cache does not; FSDP's float8 all-gather saves them
    # and gathers one byte per weight (TE's FSDP gathers 16 bits), so on this gather-bound shape it beats TE (h101)
    assert torchao > default and torchao > gathered


@pytest.mark.parametrize("mbs", [1, 2])
def test_torchao_adds_exactly_its_kernels_per_linear(mbs):
    s = small()
    te, ao = layer("te", mbs, s), layer("torchao", mbs, s)
    assert counts(ao) == {
        ("torchao::fp8_cast_dims", "forward"): LINEARS, ("torchao::fp8_cast_dims", "backward"): LINEARS,
        ("torchao::fp8_amax", "forward"): LINEARS,
        ("torchao::fp8_cast_weight", "forward"): LINEARS, ("torchao::fp8_cast_weight", "backward"): LINEARS,
        ("torchao::fp8_amax_final", "forward"): 2 * LINEARS,  # each input's and each weight's second stage
        ("torchao::fp8_amax_final", "backward"): LINEARS,  # each output gradient's
    }
    # everything else is TE's layer op for op: the two recipes differ only in the casts
    rest = [(n.op, n.phase, n.flops, n.mem_bytes) for n in te.nodes if n.op != "te::fp8_cast_transpose"]
    assert rest == [(n.op, n.phase, n.flops, n.mem_bytes) for n in ao.nodes if n.op not in TORCHAO]
    # activations: the same 4 bytes per element as TE's cast-transpose (16-bit read, two FP8 layouts written)
    for phase in ("forward", "backward"):
        assert total(ao, "torchao::fp8_cast_dims", phase) == total(te, "te::fp8_cast_transpose", phase) > 0
    # weights, per microbatch whatever its size: amax 2 B, each cast 3 B per element (fp32 capture units: x2)
    w = weights_fp32_bytes(s)
    assert total(ao, "torchao::fp8_amax", "forward") == total(ao, "torchao::fp8_amax", "forward", "weight_bytes") == w
    for phase in ("forward", "backward"):
        assert total(ao, "torchao::fp8_cast_weight", phase) == 3 * w // 2
        assert total(ao, "torchao::fp8_cast_weight", phase, "weight_bytes") == 3 * w // 2


@pytest.mark.parametrize("mbs", [1, 2])
def test_fsdp_float8_all_gather_leaves_one_weight_copy_per_linear(mbs):
    s = small()
    ao, gathered = layer("torchao", mbs, s), layer("torchao_fsdp_fp8", mbs, s)
    weight_ops = {"torchao::fp8_cast_weight", "torchao::fp8_amax", "torchao::fp8_transpose_weight"}
    assert {k: v for k, v in counts(gathered).items() if k[0] in weight_ops} == {
        ("torchao::fp8_transpose_weight", "backward"): LINEARS}
    assert counts(gathered)[("torchao::fp8_amax_final", "forward")] == LINEARS  # the inputs' only
    # 1 B read + 1 B written per weight element (fp32 capture units: x2), not scaled by the microbatch
    w = weights_fp32_bytes(s)
    assert total(gathered, "torchao::fp8_transpose_weight", "backward") == w
    assert total(gathered, "torchao::fp8_transpose_weight", "backward", "weight_bytes") == w
    for op in ("torchao::fp8_cast_dims",):  # the activations' casts as without it
        for phase in ("forward", "backward"):
            assert total(gathered, op, phase) == total(ao, op, phase)


def test_activation_casts_scale_with_the_microbatch_and_weight_casts_do_not():
    one, two = layer("torchao", 1), layer("torchao", 2)
    assert total(two, "torchao::fp8_cast_dims", "forward") == 2 * total(one, "torchao::fp8_cast_dims", "forward")
    assert total(two, "torchao::fp8_cast_weight", "backward") == total(one, "torchao::fp8_cast_weight", "backward")


def test_bad_recipe_is_a_one_line_error():
    cfg = estimator.resolve_config(["parallelism=hybrid", "framework=fsdp", "framework.fp8_kernels=transformer_engine"])
    with pytest.raises(EstimatorError, match=r"^framework\.fp8_kernels must be one of te, torchao, torchao_fsdp_fp8, got 'transformer_engine'$"):
        Framework.from_cfg(cfg["framework"])
    with pytest.raises(EstimatorError, match="^fp8 kernels must be one of te, torchao") as err:
        capture_parts(small(), 1, False, 1, "bogus")
    assert "\n" not in str(err.value)


def test_torchao_refuses_moe_in_one_line():
    cfg_args = ["model=mixtral_8x7b", "model.fused_kernels=te", "system=dgx_h100", "fabric.nodes=2", "framework=fsdp",
                "precision=fp8"]
    cfg = estimator.resolve_config([*cfg_args, "framework.fp8_kernels=torchao"])
    with pytest.raises(EstimatorError, match="^framework.fp8_kernels=torchao: mixtral_8x7b is a MoE model") as err:
        estimate(cfg)
    assert "\n" not in str(err.value)
    moe = replace(TransformerSpec.from_cfg(cfg["model"]), layers=2, seq_len=256)
    with pytest.raises(EstimatorError, match="MoE model"):  # the capture refuses it too
        capture_parts(moe, 1, False, 1, "torchao")
    with pytest.raises(EstimatorError, match="fp8_kernels=torchao_fsdp_fp8: mixtral_8x7b is a MoE model"):
        estimate(estimator.resolve_config([*cfg_args, "framework.fp8_kernels=torchao_fsdp_fp8"]))
