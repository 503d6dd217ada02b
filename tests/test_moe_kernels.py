"""The kernels of Megatron-core's MoE layer the capture records (estimator/compute/te_moe_kernels.py): each new op's
bytes and FLOPs against a hand count from the source, the router / permutation keys selecting the fused or unfused
kernels, and the dense layer's capture left alone (docs/research/h54-moe-kernels.md)."""

from __future__ import annotations

import math

import pytest
import torch

import estimator
import estimator.compute.te_moe_kernels  # noqa: F401  (registers torch.ops.te.*)
from estimator.errors import EstimatorError
from estimator.parallel.layer import capture_parts
from estimator.parallel.spec import MoeRouter, TransformerSpec

SEQ = 256  # tokens of the captured sequence (T): small enough to capture in a second
F32 = 4  # the capture's element size


def spec(model="qwen3_30b_a3b", **change):
    m = dict(estimator.resolve_config([f"model={model}"])["model"])
    m.update(seq_len=SEQ, **change)
    return TransformerSpec.from_cfg(m)


def layer(s, ep=16, **kw):
    return capture_parts(s, 1, False, 1, False, None, ep, **kw)["layer"]


def ops(w, name, phase=None):
    return [n for n in w.nodes if n.op == name and (phase is None or n.phase == phase)]


def one(w, name, phase):
    (node,) = ops(w, name, phase)
    return node


def test_qwen3_preset_sets_what_megatron_bridge_sets():
    r = spec().router
    assert r == MoeRouter(permute_fusion=True, aux_loss_coeff=1e-3)  # qwen3_moe_bridge.py l.63-68
    assert spec(model="deepseek_v3").router == MoeRouter(permute_fusion=True, aux_loss_coeff=1e-4, fp32=True,
                                                          pre_softmax=True, score="sigmoid", expert_bias=True,
                                                          num_groups=8, group_topk=4)  # node-limited routing (h89)


def test_grouped_gemms_read_every_local_experts_weights():
    s = spec()
    t, h, k, f = SEQ, s.hidden, s.top_k, s.moe_ffn
    n = k * t  # rows a rank holds (balanced routing)
    for ep in (16, 32):
        e = s.experts // ep
        w = layer(s, ep)
        fc1 = ops(w, "te::grouped_linear", "forward")[0]
        assert fc1.flops == 2 * n * h * 2 * f  # every row through one expert's [2f, h] weight
        assert fc1.weight_bytes == pytest.approx(e * 2 * f * h * F32)  # the E_local experts' weights, once per microbatch
        assert fc1.mem_bytes == pytest.approx((n * h + e * 2 * f * h + n * 2 * f) * F32)
        dgrad = [x for x in ops(w, "te::grouped_linear_dgrad") if x.flops == fc1.flops][0]
        wgrad = [x for x in ops(w, "te::grouped_linear_wgrad") if x.flops == fc1.flops][0]
        assert dgrad.mem_bytes == pytest.approx((n * 2 * f + e * 2 * f * h + n * h) * F32)
        assert wgrad.mem_bytes == pytest.approx((n * 2 * f + n * h + e * 2 * f * h) * F32)  # writes every dW
    half = layer(s, 32)
    assert sum(x.flops for x in half.nodes) == sum(x.flops for x in layer(s, 16).nodes)  # same work, half the weights


def test_fused_permutation_kernels_move_the_bytes_of_their_triton_kernels():
    s = spec()
    t, h, k, e = SEQ, s.hidden, s.top_k, s.experts
    w = layer(s)
    blocks = math.ceil(t / 1024)
    assert one(w, "te::moe_row_id_map_pass1", "forward").mem_bytes == 2 * (t * e * (1 + 4) + e * blocks * 4)
    assert one(w, "te::moe_row_id_map_pass2", "forward").mem_bytes == 2 * (2 * t * e * 4)
    assert one(w, "te::moe_row_id_map_pass3", "forward").mem_bytes == 2 * (t * e * 4 + t * (2 * k + 1) * 4)
    # tokens read once and written k times, with their k probabilities (16-bit, real 2 + 2 bytes per routed entry)
    assert one(w, "te::moe_permute", "forward").mem_bytes == (t + k * t) * h * F32 + 2 * k * t * F32
    # backward: k gradient rows summed per token; probability gradients scattered into [T, E]
    assert one(w, "te::moe_permute_backward", "backward").mem_bytes == (k * t + t) * h * F32 + 2 * k * t * F32 + t * e * F32
    # no probabilities in the unpermutation (the experts applied them): kT rows in, T out, and back
    assert one(w, "te::moe_unpermute", "forward").mem_bytes == (k * t + t) * h * F32
    assert one(w, "te::moe_unpermute_backward", "backward").mem_bytes == (t + k * t) * h * F32
    assert [n.mem_bytes for n in ops(w, "te::moe_chunk_sort_map")] == [2 * k * t * 4] * 2  # dispatch and combine
    assert not ops(w, "te::moe_chunk_sort_map", "backward")  # backward reuses the map


def test_weighted_swiglu_applies_the_probabilities_in_one_kernel_each_way():
    s = spec()
    n, f = s.top_k * SEQ, s.moe_ffn
    w = layer(s)
    assert one(w, "te::weighted_swiglu", "forward").mem_bytes == (n * 2 * f + n + n * f) * F32
    assert one(w, "te::weighted_swiglu_backward", "backward").mem_bytes == (n * f + n * 2 * f + n + n * 2 * f + n) * F32
    assert not ops(w, "te::swiglu")


def test_host_sync_is_one_launch_floor_op_per_forward():
    w = layer(spec())
    (sync,) = ops(w, "te::moe_host_sync")
    assert sync.phase == "forward" and sync.flops == 0 and sync.mem_bytes > 0  # priced at the device's launch_s


def test_router_fusion_runs_one_kernel_each_way():
    s = spec(moe_router_fusion=True)
    t, e = SEQ, s.experts
    w = layer(s)
    lb = 2  # bf16 logits (moe_router_dtype null)
    assert one(w, "te::moe_topk_score", "forward").mem_bytes == 2 * t * e * (2 * lb + 1 + 4)
    assert one(w, "te::moe_topk_score_backward", "backward").mem_bytes == 2 * t * e * (1 + 4 + 2 * lb)
    assert one(w, "te::moe_aux_scores", "forward").mem_bytes == 2 * t * e * (lb + 1 + 2 * 4)
    assert one(w, "te::moe_aux_scores_backward", "backward").mem_bytes == 2 * t * e * (2 * 4 + lb)
    assert one(w, "te::moe_aux_loss", "forward").mem_bytes == 2 * t * e * 4
    assert one(w, "te::moe_aux_loss_backward", "backward").mem_bytes == 2 * t * e * 4
    assert not ops(w, "aten::topk") and not ops(w, "aten::softmax")
    unfused = layer(spec())
    assert not ops(unfused, "te::moe_topk_score") and len(ops(unfused, "aten::topk", "forward")) == 2  # routing + aux


def test_no_aux_loss_kernels_without_a_coefficient():
    w = layer(spec(moe_aux_loss_coeff=0, moe_router_fusion=True))
    assert not ops(w, "te::moe_aux_scores") and not ops(w, "aten::ones_like")
    with_loss = layer(spec(moe_router_fusion=True))
    assert len(ops(with_loss, "aten::ones_like", "backward")) == 1  # MoEAuxLossAutoScaler's ones_like(loss) * scale


def test_fp32_router_casts_and_fp32_gemms():
    s = spec(moe_router_dtype="fp32")
    t, h, e = SEQ, s.hidden, s.experts
    w = layer(s)
    gemm = one(w, "te::router_gemm", "forward")
    assert gemm.flops == 2 * t * h * e and gemm.mem_bytes == (t * h + e * h) * F32 + 2 * t * e * 4  # fp32 logits
    casts = sorted(n.mem_bytes for n in ops(w, "te::cast", "backward") if n.mem_bytes > 2 * t * e * 8)
    assert casts == [2 * e * h * 6] * 2 + [2 * t * h * 6] * 2  # weight and input to fp32, both gradients back
    fp32 = ops(w, "te::router_gemm_fp32", "backward")
    assert [n.flops for n in fp32] == [2 * t * e * h] * 2
    assert all(n.mem_bytes == 2 * (t * e + e * h + t * h) * 4 for n in fp32)
    assert not ops(layer(spec()), "te::router_gemm")  # bf16 logits: the plain Linear as before


def test_unfused_permutation_is_moe_utils_aten_ops():
    s = spec(moe_permute_fusion=False)
    t, h, k = SEQ, s.hidden, s.top_k
    w = layer(s)
    assert not ops(w, "te::moe_permute") and not ops(w, "te::moe_sort_chunks") and not ops(w, "te::moe_unpermute")
    (gather,) = ops(w, "aten::index_select", "forward")
    assert gather.mem_bytes == t * h * F32 + k * t * 8 + k * t * h * F32  # rows, int64 index, kT rows
    assert len(ops(w, "aten::argsort", "forward")) == 1
    assert len([n for n in ops(w, "aten::cat", "forward") if n.mem_bytes >= 2 * k * t * h * F32]) == 2  # split + cat
    (scatter,) = ops(w, "aten::index_add_", "forward")
    assert scatter.mem_bytes == t * h * F32 * 2 + k * t * 8 + k * t * h * F32  # read-modify-write T rows + kT rows


def test_flex_dispatcher_sorts_nothing():
    assert not ops(layer(spec(), sorts=False), "te::moe_sort_chunks")


def test_dense_layer_capture_ignores_the_moe_keys():
    dense = spec(model="llama3_8b")
    w = capture_parts(dense, 2, True)["layer"]
    assert not [n for n in w.nodes if "moe" in n.op or "grouped" in n.op]
    from dataclasses import replace
    flagged = replace(dense, router=MoeRouter(fusion=True, permute_fusion=True, aux_loss_coeff=1e-2, fp32=True))
    again = capture_parts(flagged, 2, True)["layer"]
    assert [(n.op, n.flops, n.mem_bytes, n.weight_bytes) for n in again.nodes] == \
        [(n.op, n.flops, n.mem_bytes, n.weight_bytes) for n in w.nodes]


@pytest.mark.parametrize(("change", "needle"), [
    ({"moe_router_dtype": "fp64"}, "model.moe_router_dtype must be null"),
    ({"moe_router_fusion": "yes"}, "model.moe_router_fusion must be true or false"),
    ({"moe_aux_loss_coeff": -1}, "model.moe_aux_loss_coeff must be a non-negative number"),
    ({"moe_router_score_function": "sqrtsoftplus"}, "model.moe_router_score_function must be softmax or sigmoid"),
])
def test_bad_router_keys_are_one_line_errors(change, needle):
    with pytest.raises(EstimatorError, match=needle):
        spec(**change)


def test_kernels_compute_the_real_result():
    te = torch.ops.te
    x, w = torch.randn(8, 3, dtype=torch.double), torch.randn(2, 5, 3, dtype=torch.double)
    out = te.grouped_linear(x, w)
    assert torch.allclose(out[:4], x[:4] @ w[0].T) and torch.allclose(out[4:], x[4:] @ w[1].T)
    assert torch.autograd.gradcheck(te.grouped_linear, (x.requires_grad_(), w.requires_grad_()))
    y, p = torch.randn(4, 6, dtype=torch.double, requires_grad=True), torch.rand(4, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(te.weighted_swiglu, (y, p))
    logits = torch.randn(5, 4, dtype=torch.double, requires_grad=True)
    probs, rmap, _ = te.moe_topk_score(logits, 2, 2)
    assert rmap.sum(1).eq(2).all() and torch.allclose(probs.sum(1), torch.ones(5, dtype=torch.double))
    assert torch.autograd.gradcheck(lambda z: te.moe_topk_score(z, 2, 2)[0], (logits,))
    assert torch.autograd.gradcheck(lambda z: te.moe_aux_scores(z, 2, 2)[1], (logits,))
    rows = torch.randn(6, 4, dtype=torch.double, requires_grad=True)
    routing = torch.rand(6, 3, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: te.moe_permute(a, b, 2)[0].sum() + te.moe_permute(a, b, 2)[1].sum(),
                                    (rows, routing))
    assert torch.equal(te.moe_unpermute(te.moe_permute(rows, routing, 2)[0], 2), 2 * rows)
