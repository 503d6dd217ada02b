"""Mixture-of-experts decoders (Mixtral 8x7B) with expert parallelism: parameter counts, the captured
MoE layer, expert-sharded memory, the expert all-to-all, and one-line errors."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.estimate import validate_hybrid
from estimator.parallel.layer import capture_parts
from estimator.parallel.spec import TransformerSpec
from tests.helpers import transformers_mixtral_params


def cfg(*overrides):
    return estimator.resolve_config(["model=mixtral_8x7b", "parallelism=hybrid", "system=dgx_a100", "fabric.nodes=256",
                                     "parallelism.tp=2", "parallelism.pp=4", "parallelism.global_batch=512", *overrides])


def spec(**change):
    model = dict(estimator.resolve_config(["model=mixtral_8x7b"])["model"])
    model.update(change)
    return TransformerSpec.from_cfg(model)


def test_mixtral_parameters_match_published_and_transformers():
    s = spec()
    published = estimator.resolve_config(["model=mixtral_8x7b"])["model"]["published_params"]
    assert abs(s.params() / published - 1) < 0.001
    assert transformers_mixtral_params(s) == s.params()


def test_moe_layer_capture_runs_k_experts_per_token():
    moe, dense = spec(seq_len=512), spec(seq_len=512, num_experts=0)
    tp = 2
    fwd = {name: sum(n.flops for n in capture_parts(sp, tp, False)["layer"].nodes if n.phase == "forward")
           for name, sp in (("moe", moe), ("dense", dense))}
    s, h, f, k, e = 512, moe.hidden, moe.ffn, moe.top_k, moe.experts
    mlp = 2 * s * 3 * h * f / tp  # SwiGLU: three h x f/tp matmuls per token
    router = 2 * s * h * e
    # the rest (softmax, top-k, weighting of the router) is elementwise: well under 1 % of a layer
    assert fwd["moe"] - fwd["dense"] == pytest.approx((k - 1) * mlp + router, rel=0.01)


def test_expert_parallel_memory_and_all_to_all():
    one = estimate(cfg("parallelism.ep=1")).metrics
    eight = estimate(cfg("parallelism.ep=8")).metrics
    assert one["ep_comm_time_s"] == 0 and eight["ep_comm_time_s"] > 0
    # experts hold ~96 % of Mixtral's layer weights: ep=8 cuts the weights per GPU by most of 7/8
    assert eight["memory_weights_bytes"] < 0.25 * one["memory_weights_bytes"]
    res = estimate(cfg("parallelism.ep=8"))
    a2a = [c for c in res.collectives if c["group"] == "ep"]
    assert len(a2a) == 1 and a2a[0]["collective"] == "all_to_all" and a2a[0]["group_size"] == 8
    s = spec()
    assert a2a[0]["bytes"] == s.seq_len * 1 * s.top_k * s.hidden * 2 / 2  # s b k h x 2 bytes / tp
    m, lps = eight["microbatches"], s.layers // 4
    assert a2a[0]["count_per_step"] == m * lps * 4  # dispatch + combine, forward + backward (selective recompute)
    edp = [c for c in res.collectives if c["group"] == "edp"]
    assert edp and edp[0]["group_size"] == eight["dp"] // 8


def test_expert_all_to_all_leaving_the_node_costs_more():
    crossing = estimate(cfg("parallelism.ep=8", "parallelism.tp=2")).metrics  # stride 2 x 8 = 16 > 8 GPUs per node
    staying = estimate(cfg("parallelism.ep=4", "parallelism.tp=2")).metrics  # stride 2 x 4 = 8: one node
    per_step = {n: r["ep_comm_time_s"] / r["microbatches"] for n, r in (("crossing", crossing), ("staying", staying))}
    assert per_step["crossing"] > 2 * per_step["staying"]


@pytest.mark.parametrize("extra, needle", [
    (("parallelism.ep=3",), "must divide the data-parallel degree"),
    (("parallelism.ep=16",), "8 experts, not divisible by ep"),
    (("model.experts_top_k=9",), "experts_top_k must be between 1 and num_experts 8"),
])
def test_bad_expert_layouts_are_errors(extra, needle):
    with pytest.raises(EstimatorError, match=needle):
        validate_hybrid(cfg(*extra))


def test_placement_auto_searches_the_expert_degree():
    m = estimate(cfg("parallelism.placement=auto")).metrics
    assert m["memory_total_bytes"] <= 80e9 and m["ep"] in (1, 2, 4, 8)
    assert m["layouts_evaluated"] > 20
