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
                                     "parallelism.sequence_parallel=true", "parallelism.global_batch=64", *overrides])


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
