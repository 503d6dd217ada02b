"""DeepSeek-style mixture of experts: a routed expert width apart from the dense MLP's
(``model.moe_ffn_size``) and a shared expert every token runs (``model.shared_expert_ffn_size``)."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.layer import capture_parts
from estimator.parallel.spec import TransformerSpec

SEQ = 512  # short sequences keep the captures quick


def spec(**change):
    model = dict(estimator.resolve_config(["model=qwen3_30b_a3b"])["model"])
    model.update(change)
    return TransformerSpec.from_cfg(model)


def forward_flops(s: TransformerSpec, tp: int = 2, sp: bool = True) -> float:
    return sum(n.flops for n in capture_parts(s, tp, sp)["layer"].nodes if n.phase == "forward")


def cfg(*overrides):
    return estimator.resolve_config(["model=qwen3_30b_a3b", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=32",
                                     "parallelism.tp=2", "parallelism.pp=2", "parallelism.ep=8",
                                     "parallelism.sequence_parallel=true", "parallelism.global_batch=64",
                                     *([] if any(o.startswith("parallelism.recompute=") for o in overrides)
                                       else ["parallelism.recompute=selective"]), *overrides])


def test_moe_ffn_size_null_or_equal_to_ffn_changes_nothing():
    assert spec(moe_ffn_size=None) == spec()
    assert spec(moe_ffn_size=768).params() == spec().params()


def test_moe_ffn_size_sets_the_expert_width_apart_from_the_dense_one():
    # every Qwen3-30B-A3B layer is MoE, so a dense ffn_size no layer uses moves nothing once moe_ffn_size holds 768
    split = spec(ffn_size=6144, moe_ffn_size=768, seq_len=SEQ)
    same = spec(seq_len=SEQ)
    assert split.moe_ffn == 768 and split.ffn == 6144
    assert split.params() == same.params()
    assert forward_flops(split) == pytest.approx(forward_flops(same), rel=1e-9)
    wider = spec(moe_ffn_size=1536, seq_len=SEQ)
    assert wider.expert_layer_params() == 2 * same.expert_layer_params()
    k, h, tp = same.top_k, same.hidden, 2
    assert forward_flops(wider) - forward_flops(same) == pytest.approx(k * SEQ * 2 * 3 * h * 768 / tp, rel=1e-6)


def test_shared_expert_adds_a_dense_mlp_every_token_runs():
    base, shared = spec(seq_len=SEQ), spec(seq_len=SEQ, shared_expert_ffn_size=2048)
    h, tp = base.hidden, 2
    assert shared.params() - base.params() == base.layers * 3 * h * 2048  # SwiGLU, no biases
    assert shared.expert_layer_params() == base.expert_layer_params()  # not sharded by expert parallelism
    gemm = SEQ * 2 * 3 * h * 2048 / tp  # three h x 2048/tp matmuls per token
    extra = forward_flops(shared) - forward_flops(base)
    assert extra == pytest.approx(gemm, rel=0.01)


def test_shared_expert_costs_time_memory_and_tp_collectives():
    base = estimate(cfg())
    shared = estimate(cfg("+model.shared_expert_ffn_size=2048"))
    b, s = base.metrics, shared.metrics
    assert s["iter_time_s"] > b["iter_time_s"] and s["memory_activations_bytes"] > b["memory_activations_bytes"]
    assert s["memory_weights_bytes"] > b["memory_weights_bytes"]
    assert s["ep_comm_time_s"] == pytest.approx(b["ep_comm_time_s"])  # no all-to-all for the shared expert

    def tp_count(res):
        return sum(c["count_per_step"] for c in res.collectives if c["group"] == "tp")

    # with sequence parallelism the attention gathers / reduce-scatters once each way, and so does the shared expert
    per_step = b["microbatches"] * 48 // 2
    assert tp_count(shared) - tp_count(base) == pytest.approx(4 * per_step)


@pytest.mark.parametrize("change, needle", [
    ({"moe_ffn_size": -1}, "model.moe_ffn_size must be a positive integer"),
    ({"moe_ffn_size": "big"}, "model.moe_ffn_size must be a positive integer"),
    ({"shared_expert_ffn_size": 1.5}, "model.shared_expert_ffn_size must be a positive integer"),
    ({"num_experts": 0, "moe_ffn_size": 768}, "model.moe_ffn_size=768 needs a mixture-of-experts model"),
    ({"shared_expert_ffn_size": 2048, "fused_kernels": "none"}, "model.shared_expert_ffn_size is modelled"),
])
def test_bad_moe_widths_are_one_line_errors(change, needle):
    with pytest.raises(EstimatorError, match=needle) as err:
        spec(**change)
    assert "\n" not in str(err.value)


def test_shared_expert_width_must_divide_by_tp():
    with pytest.raises(EstimatorError, match="shared_expert_ffn_size 2049 is not divisible by tp"):
        estimate(cfg("+model.shared_expert_ffn_size=2049"))


# ---- model.first_dense_layers: the first k layers have a dense MLP of ffn_size ----------------------------------

def layout(*overrides):
    from estimator.parallel.layout import Layout

    c = cfg(*overrides)
    s = TransformerSpec.from_cfg(c["model"])
    return s, Layout.from_cfg(c["parallelism"], s, 32)


@pytest.mark.parametrize("overrides, dense, moe", [
    (("+model.first_dense_layers=3",), (3, 0), (21, 24)),
    (("+model.first_dense_layers=30",), (24, 6), (0, 18)),
    (("+model.first_dense_layers=8", "parallelism.virtual_stages=2"), (8, 0), (16, 24)),  # chunk 0 holds 12 layers
    (("+model.first_dense_layers=14", "parallelism.virtual_stages=2"), (12, 2), (12, 22)),  # chunk 1 sits on stage 1
])
def test_first_dense_layers_sit_on_the_first_chunks(overrides, dense, moe):
    from estimator.parallel.layout import layer_kinds

    s, lay = layout(*overrides)
    (dense_kind, d), (moe_kind, m) = layer_kinds(s, lay)
    assert (d, m) == (dense, moe)
    assert dense_kind.experts == 0 and dense_kind.ffn == s.ffn and moe_kind is s


def test_first_dense_layers_parameters_match_transformers():
    from tests.helpers import transformers_qwen3_moe_params

    s = spec(ffn_size=6144, moe_ffn_size=768, first_dense_layers=3)
    assert transformers_qwen3_moe_params(s) == s.params()
    dense_mlp, moe_mlp = 3 * s.hidden * 6144, s.expert_layer_params() + s.hidden * s.experts
    assert spec().params() - s.params() == 3 * (moe_mlp - dense_mlp)


def test_first_dense_layers_weights_per_stage():
    from estimator.parallel.memory import stage_param_split

    base, lay = layout()
    s, lay3 = layout("+model.first_dense_layers=3", "model.ffn_size=6144", "+model.moe_ffn_size=768")
    dense_mlp = 3 * s.hidden * 6144
    for stage, n_dense in ((0, 3), (1, 0)):
        d0, e0 = stage_param_split(base, lay, stage)
        d3, e3 = stage_param_split(s, lay3, stage)
        assert e0 - e3 == n_dense * s.expert_layer_params() // (lay.expert_tp * lay.ep)
        assert d3 - d0 == n_dense * (dense_mlp - s.hidden * s.experts) // lay.tp


def test_first_dense_layers_price_each_stage_by_its_layers():
    one = ("parallelism.pp=1", "parallelism.tp=1", "parallelism.sequence_parallel=false")
    base = estimate(cfg(*one)).metrics
    three = estimate(cfg(*one, "+model.first_dense_layers=3", "model.ffn_size=6144", "+model.moe_ffn_size=768")).metrics
    assert three["ep_comm_time_s"] == pytest.approx(base["ep_comm_time_s"] * 45 / 48)  # no all-to-all in dense layers
    assert three["model_flops_per_step"] != base["model_flops_per_step"]
    # a wide dense MLP on the first stage's layers makes that stage the slowest
    wide = ("+model.first_dense_layers=6", "model.ffn_size=65536", "+model.moe_ffn_size=768")
    assert estimate(cfg()).metrics["slowest_stage"] == 1
    heavy = estimate(cfg(*wide)).metrics
    assert heavy["slowest_stage"] == 0 and heavy["memory_peak_stage"] == 0


@pytest.mark.parametrize("change, needle", [
    ({"first_dense_layers": -1}, r"model.first_dense_layers must be an integer in \[0, num_layers 48\)"),
    ({"first_dense_layers": 48}, r"model.first_dense_layers must be an integer in \[0, num_layers 48\)"),
    ({"first_dense_layers": True}, "model.first_dense_layers must be an integer"),
    ({"num_experts": 0, "first_dense_layers": 1}, "model.first_dense_layers=1 needs a mixture-of-experts model"),
])
def test_bad_first_dense_layers_are_one_line_errors(change, needle):
    with pytest.raises(EstimatorError, match=needle) as err:
        spec(**change)
    assert "\n" not in str(err.value)


# ---- multi-head latent attention -------------------------------------------------------------------------------

def mla_spec(**change):
    model = dict(estimator.resolve_config(["model=deepseek_v3"])["model"])
    model.update({"seq_len": SEQ, **change})
    return TransformerSpec.from_cfg(model)


def test_deepseek_v3_activated_parameters():
    s = mla_spec()
    routed_idle = (s.layers - s.dense_layers) * (s.experts - s.top_k) * 3 * s.hidden * s.moe_ffn
    mtp = s.layer_params() + s.mtp_extra_params()
    assert 37e9 < s.params() - mtp - routed_idle < 38e9  # "37B activated for each token" (arXiv 2412.19437)


def test_mla_layer_capture_has_its_projections_and_attention_flops():
    s, tp = mla_spec(), 2
    q_lora, kv_lora, qk, rope, v = s.mla
    h, a = s.hidden, s.heads
    dense = s.dense_layer()
    layer = capture_parts(dense, tp, True)["layer"]
    fwd = sum(n.flops for n in layer.nodes if n.phase == "forward")
    # down-projections on the rank's s/tp tokens (sequence parallel), the rest split by heads over tp
    down = 2 * (SEQ / tp) * h * (q_lora + kv_lora + rope)
    up = 2 * SEQ * (q_lora * a * (qk + rope) + kv_lora * a * (qk + v)) / tp
    proj = 2 * SEQ * a * v * h / tp
    attention = SEQ * SEQ * (a / tp) * ((qk + rope) + v)  # causal: QK^T and PV halved
    mlp = 2 * SEQ * 3 * h * s.ffn / tp
    assert fwd == pytest.approx(down + up + proj + attention + mlp, rel=0.01)
    # the TP rank holds the replicated down-projections whole and 1/tp of the rest
    replicated = h * (q_lora + kv_lora + rope) + q_lora + kv_lora
    assert layer.params == replicated + (dense.layer_params() - replicated - 2 * h) // tp + 2 * h
    core = capture_parts(dense, tp, True)["attention"]
    assert sum(n.flops for n in core.nodes if n.phase == "forward") == pytest.approx(attention)


def test_mla_tp_gathers_its_latents_not_the_hidden_state():
    c = estimator.resolve_config(["model=deepseek_v3", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=256",
                                  "parallelism.tp=2", "parallelism.pp=16", "parallelism.ep=16", "parallelism.etp=1",
                                  "parallelism.sequence_parallel=true", "parallelism.global_batch=256",
                                  "parallelism.recompute=full", "precision=fp8"])
    res = estimate(c)
    s = TransformerSpec.from_cfg(c["model"])
    q_lora, kv_lora, _, rope, _ = s.mla
    act = s.seq_len * s.hidden * 2
    gathers = sorted({g["bytes"] for g in res.collectives if g["group"] == "tp" and g["collective"] == "all_gather"})
    assert gathers[0] == pytest.approx(s.seq_len * (q_lora + kv_lora + rope) * 2) and act in gathers
    m = res.metrics
    assert m["memory_total_bytes"] < 80e9 and m["tokens_per_s"] > 0
    assert m["stage_layers"].split(",")[0] == "3"  # 61 layers on 16 stages: the first takes 3 (the 3 dense ones)


def test_mla_activation_memory_counts_latents_and_narrow_values():
    from estimator.parallel.layout import Layout
    from estimator.parallel.memory import activation_bytes_per_layer, te_dense_mlp_bytes

    s = mla_spec().dense_layer()
    c = cfg("parallelism.tp=2")
    lay = Layout.from_cfg(c["parallelism"], TransformerSpec.from_cfg(c["model"]), 32)
    q_lora, kv_lora, qk, rope, v = s.mla
    t, h = 2, s.hidden
    per_token = 6 * h / t + 4 * (q_lora + kv_lora) / t + 2 * s.heads * (2 * (qk + rope) + 2 * v) / t
    assert activation_bytes_per_layer(s, lay) - te_dense_mlp_bytes(s, lay) == pytest.approx(s.seq_len * per_token)


@pytest.mark.parametrize("change, needle", [
    ({"kv_lora_rank": None}, "model.q_lora_rank is a multi-head latent attention width; set model.kv_lora_rank"),
    ({"v_head_dim": 0}, "model.v_head_dim must be a positive integer with model.kv_lora_rank set"),
    ({"qk_rope_head_dim": -64}, "model.qk_rope_head_dim must be a positive integer"),
    ({"fused_kernels": "none"}, "modelled as Megatron-core's MLASelfAttention"),
    ({"num_kv_heads": 8}, "leave model.num_kv_heads and model.head_dim null"),
])
def test_bad_mla_widths_are_one_line_errors(change, needle):
    with pytest.raises(EstimatorError, match=needle) as err:
        mla_spec(**change)
    assert "\n" not in str(err.value)


def test_mla_without_query_compression():
    s = mla_spec(q_lora_rank=None)
    with_q = mla_spec()
    h, a = s.hidden, s.heads
    q_lora, _, qk, rope, _ = with_q.mla
    assert with_q.attention_params() - s.attention_params() == (h + 1) * q_lora + q_lora * a * (qk + rope) - h * a * (qk + rope)
    assert capture_parts(s.dense_layer(), 2, True)["layer"].params > 0


# ---- multi-token prediction ------------------------------------------------------------------------------------

def mtp_cfg(*overrides):
    return estimator.resolve_config(["model=deepseek_v3", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=256",
                                     "parallelism.tp=2", "parallelism.pp=16", "parallelism.ep=16", "parallelism.etp=1",
                                     "parallelism.sequence_parallel=true", "parallelism.global_batch=256",
                                     "parallelism.recompute=full", "precision=fp8", *overrides])


def test_mtp_parameters_are_one_layer_a_projection_and_three_norms():
    with_mtp, without = mla_spec(), mla_spec(mtp_layers=0)
    h = with_mtp.hidden
    assert with_mtp.mtp == 1
    assert with_mtp.params() - without.params() == with_mtp.layer_params() + 2 * h * h + 3 * h


def test_mtp_runs_on_the_last_stage():
    from estimator.parallel.layout import Layout
    from estimator.parallel.memory import stage_param_split

    one, none = mtp_cfg(), mtp_cfg("model.mtp_layers=0")
    a, b = estimate(one), estimate(none)
    m1, m0 = a.metrics, b.metrics
    assert m1["iter_time_s"] > m0["iter_time_s"]
    s1, s0 = (TransformerSpec.from_cfg(c["model"]) for c in (one, none))
    lay1, lay0 = (Layout.from_cfg(c["parallelism"], s, 256) for c, s in ((one, s1), (none, s0)))
    for stage in range(15):  # only the last stage holds it
        assert stage_param_split(s1, lay1, stage) == stage_param_split(s0, lay0, stage)
    (d1, e1), (d0, e0) = stage_param_split(s1, lay1, 15), stage_param_split(s0, lay0, 15)
    assert e1 - e0 == s1.expert_layer_params() // 16
    emb = s1.padded_vocab(2) * s1.hidden // 2  # its copy of the shared embedding
    assert d1 - d0 > emb
    # the model FLOPs grow by one MoE layer, the projection, one more embedding and head per sequence
    scale = m1["global_batch"] * 2  # captured per TP rank
    h, v = s1.hidden, s1.padded_vocab(2)
    grown = (m1["model_flops_per_step"] - m0["model_flops_per_step"]) / scale
    head = 3 * 2 * s1.seq_len * h * v / 2  # forward + backward of the LM head per TP rank
    assert grown > head
    from estimator.parallel.memory import stage_memory

    acts1, acts0 = (stage_memory(sp, lay, 15)["activations"] for sp, lay in ((s1, lay1), (s0, lay0)))
    assert acts1 > acts0  # its layer and its logits, one microbatch each
    assert stage_memory(s1, lay1, 0) == stage_memory(s0, lay0, 0)


@pytest.mark.parametrize("value, needle", [(-1, "model.mtp_layers must be a non-negative integer"),
                                           (True, "model.mtp_layers must be a non-negative integer"),
                                           (1.5, "model.mtp_layers must be a non-negative integer")])
def test_bad_mtp_layers_are_one_line_errors(value, needle):
    with pytest.raises(EstimatorError, match=needle):
        mla_spec(mtp_layers=value)


def test_mtp_needs_the_te_layer():
    with pytest.raises(EstimatorError, match="model.mtp_layers=1 is modelled as Megatron-core's MTP"):
        spec(mtp_layers=1, fused_kernels="none")
