"""Megatron-core's selective recompute of named modules (``parallelism.recompute_modules``): the bytes each module
drops, hand-computed for DeepSeek-V3 at 512 tokens on tp 2 with sequence parallelism and etp 1; the recompute's
time; the one-line errors; ``null`` and ``[core_attn]`` leave today's ``selective`` as it was."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.layout import Layout
from estimator.parallel.memory import layer_activation_bytes
from estimator.parallel.spec import TransformerSpec

SEQ, T = 512, 2  # tokens per microbatch, tensor-parallel degree (sequence parallel: each rank holds SEQ / T tokens)
H, HEADS, Q_LORA, KV_LORA, QK, ROPE, DV = 7168, 128, 1536, 512, 128, 64, 128  # DeepSeek-V3 (conf/model/deepseek_v3.yaml)
TOP_K, EXPERTS, MOE_FFN, SHARED_FFN, FFN = 8, 256, 2048, 2048, 18432


def spec() -> TransformerSpec:
    model = dict(estimator.resolve_config(["model=deepseek_v3"])["model"])
    return TransformerSpec.from_cfg({**model, "seq_len": SEQ})


def layout(modules=None, recompute="selective") -> Layout:
    par = {"tp": T, "pp": 1, "dp": 16, "ep": 16, "etp": 1, "global_batch": 16, "sequence_parallel": True,
           "recompute": recompute, "recompute_modules": modules}
    return Layout.from_cfg(par, spec(), 32)


def dropped(modules, kind=None, fp8=False) -> float:
    s = kind or spec()
    return layer_activation_bytes(s, layout(), fp8) - layer_activation_bytes(s, layout(modules), fp8)


@pytest.mark.parametrize("modules, per_token", [
    # q and k up-projection outputs (rope'd parts included) and v, split over the heads; the latent norms' outputs
    (["mla_up_proj"], 2 * (Q_LORA + KV_LORA) / T + 2 * HEADS * (2 * (QK + ROPE) + DV) / T),
    # MLA's input norm output, the pre-MLP norm's output the router keeps (the shared expert's fc1 keeps the same tensor)
    (["layernorm"], 2 * H / T + 2 * H / T),
    # fc2's input (the activation output) of the k routed rows
    (["moe_act"], TOP_K * 2 * MOE_FFN / T),
    # the shared expert's 2f-wide fc1 output and f-wide activation output (SwiGLU; its input is the router's tensor)
    (["shared_experts"], (4 * SHARED_FFN + 2 * SHARED_FFN) / T),
    # router probabilities (fp32), the routed rows' fc1 input, fc1 (activation input) and activation outputs and fp32
    # probability (the unpermute keeps nothing); the shared expert; only the MoE input (2h) stays (no dropout mask)
    (["moe"], (4 * EXPERTS + TOP_K * (2 * H + 4 * MOE_FFN + 2 * MOE_FFN + 4)) / T + 6 * SHARED_FFN / T),
    (["core_attn"], 0.0),  # flash attention: nothing to drop
])
def test_each_module_drops_its_stated_bytes(modules, per_token):
    assert dropped(modules) == pytest.approx(SEQ * per_token)


def test_mlp_drops_the_dense_layers_mlp_and_nothing_of_a_moe_layer():
    assert dropped(["mlp"], spec().dense_layer()) == pytest.approx(SEQ * (2 * H + 6 * FFN) / T)
    assert dropped(["mlp"]) == 0.0
    assert dropped(["moe_act", "moe", "shared_experts"], spec().dense_layer()) == 0.0


def test_layernorm_under_fp8_drops_the_one_byte_copies_the_linears_would_keep():
    # MLA's down-projections keep the FP8 norm output (1 byte); the router its 16-bit input, which the shared expert's fc1
    # keeps too (shared_experts.py sets save_original_input on it under FP8)
    assert dropped(["layernorm"], fp8=True) == pytest.approx(SEQ * (H / T + 2 * H / T))


def test_modules_add_up_and_moe_covers_its_parts():
    parts = dropped(["mla_up_proj"]) + dropped(["layernorm"])
    assert dropped(["mla_up_proj", "layernorm"]) == pytest.approx(parts)
    assert dropped(["moe", "moe_act", "shared_experts"]) == pytest.approx(dropped(["moe"]))
    # the norm output the MoE checkpoint keeps goes too (the shared expert's fc1 holds that same tensor, no copy)
    assert dropped(["moe", "layernorm"]) == pytest.approx(dropped(["moe"]) + dropped(["layernorm"]))


def cfg(*overrides):
    return estimator.resolve_config(["model=deepseek_v3", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=256",
                                     "parallelism.tp=2", "parallelism.pp=16", "parallelism.ep=16", "parallelism.etp=1",
                                     "parallelism.sequence_parallel=true", "parallelism.global_batch=256",
                                     "precision=fp8", "parallelism.device_memory_bytes=1e12", *overrides])


def run(*modules, recompute="selective"):
    rc = [f"parallelism.recompute={recompute}"]
    if modules:
        rc.append(f"parallelism.recompute_modules=[{','.join(modules)}]")
    return estimate(cfg(*rc))


def ep_count(res) -> float:
    return sum(c["count_per_step"] for c in res.collectives if c["group"] == "ep")


def test_recompute_time_grows_with_the_modules_and_moe_repeats_its_all_to_alls():
    none, full = run(recompute="none"), run(recompute="full")
    up, up_mlp_moe = run("mla_up_proj"), run("mla_up_proj", "mlp", "moe")
    tput = [r.metrics["tokens_per_s"] for r in (none, up, up_mlp_moe, full)]
    assert tput == sorted(tput, reverse=True) and len(set(tput)) == 4
    mem = [r.metrics["memory_activations_bytes"] for r in (none, up, up_mlp_moe, full)]
    assert mem == sorted(mem, reverse=True)
    assert ep_count(up) == ep_count(none) and ep_count(up_mlp_moe) == ep_count(none) * 6 / 4 == ep_count(full)
    # the up-projections are a few % of the layer's forward: their recompute costs far less than the full one
    assert 0 < 1 - tput[1] / tput[0] < 0.1 * (1 - tput[3] / tput[0])


def test_null_and_core_attn_are_todays_selective():
    base = run()
    for res in (run("core_attn"),):
        assert res.metrics["tokens_per_s"] == base.metrics["tokens_per_s"]
        assert res.metrics["memory_total_bytes"] == base.metrics["memory_total_bytes"]
    assert run("mla_up_proj").metrics["tokens_per_s"] > base.metrics["tokens_per_s"]  # no core attention rerun


@pytest.mark.parametrize("model, overrides, needle", [
    ("deepseek_v3", ["parallelism.recompute_modules=[mla_up_proj,attn]"], "unknown module 'attn'"),
    ("deepseek_v3", ["parallelism.recompute=none", "parallelism.recompute_modules=[mla_up_proj]"],
     "needs parallelism.recompute=selective"),
    ("deepseek_v3", ["parallelism.recompute=full", "parallelism.recompute_modules=[moe]"],
     "needs parallelism.recompute=selective"),
    ("deepseek_v3", ["parallelism.recompute_modules=mla_up_proj"], "must be a list of module names"),
    ("qwen3_30b_a3b", ["parallelism.recompute_modules=[mla_up_proj]"], "has no multi-head latent attention"),
    ("qwen3_30b_a3b", ["parallelism.recompute_modules=[shared_experts]"], "has no shared expert"),
    ("llama3_8b", ["model.fused_kernels=te", "parallelism.recompute_modules=[moe_act]"], "has no experts"),
    ("llama3_8b", ["model.fused_kernels=te", "parallelism.recompute_modules=[moe]"], "has no experts"),
    ("llama3_8b", ["model.fused_kernels=none", "parallelism.recompute_modules=[mlp]"], "needs model.fused_kernels=te"),
])
def test_bad_modules_are_one_line_errors(model, overrides, needle):
    c = estimator.resolve_config([f"model={model}", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=256",
                                  "parallelism.tp=2", "parallelism.pp=16", "parallelism.global_batch=256",
                                  "parallelism.recompute=selective", *overrides])
    with pytest.raises(EstimatorError, match=needle) as err:
        estimate(c)
    assert "\n" not in str(err.value)
