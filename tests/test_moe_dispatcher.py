"""Megatron-core's MoE layer as the estimator prices it: the token permutations around the experts
(te::moe_* kernels), the experts' own tensor-parallel degree (``parallelism.etp``, MoE parallel
folding) and the dispatcher's tensor-parallel collectives."""

from __future__ import annotations

import pytest
import torch

import estimator
import estimator.compute.te_moe_kernels  # noqa: F401  (registers torch.ops.te.moe_*)
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.estimate import validate_hybrid
from estimator.parallel.layer import capture_parts
from estimator.parallel.layout import Layout
from estimator.parallel.memory import moe_mlp_bytes, stage_param_split
from estimator.parallel.search import candidates
from estimator.parallel.spec import TransformerSpec

GROK = ["model=grok1_314b", "parallelism=hybrid", "system=dgx_h100", "precision=bf16", "model.seq_len=4096",
        "parallelism.sequence_parallel=true", "parallelism.recompute=none", "parallelism.global_batch=256"]


def cfg(*overrides, gpus=512):
    return estimator.resolve_config([*GROK, f"fabric.nodes={gpus}", "parallelism.tp=4", "parallelism.pp=8", *overrides])


def spec(model="grok1_314b", **change):
    m = dict(estimator.resolve_config([f"model={model}"])["model"])
    m.update(change)
    return TransformerSpec.from_cfg(m)


def _ops(workload, name):
    return [n for n in workload.nodes if n.op.endswith(name)]


def test_permutation_kernels_compute_the_real_result():
    x, probs = torch.randn(6, 4, requires_grad=True), torch.rand(6, 3, requires_grad=True)
    routed, routed_probs = torch.ops.te.moe_permute(x, probs, 2)
    assert torch.equal(routed[::2], x.detach()) and torch.equal(routed[1::2], x.detach())
    assert torch.equal(routed_probs.view(6, 2), probs.detach().topk(2, -1).values)  # each token's k probabilities
    sorted_ = torch.ops.te.moe_sort_chunks(routed, 2, 3)
    assert not torch.equal(sorted_, routed) and torch.equal(torch.ops.te.moe_sort_chunks(sorted_, 3, 2), routed)
    out = torch.ops.te.moe_unpermute(routed, 2)  # no probabilities: the experts' weighted SwiGLU applied them
    assert torch.allclose(out, 2 * x)
    double = torch.randn(6, 4, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: torch.ops.te.moe_unpermute(a, 2), (double,))


def test_captured_moe_layer_moves_the_permutations_bytes():
    s = spec("qwen3_30b_a3b", seq_len=1024)
    layer = capture_parts(s, 1, False, 1, False, None, 8)["layer"]
    t, h, k = s.seq_len, s.hidden, s.top_k
    (permute,) = [n for n in _ops(layer, "moe_permute") if n.phase == "forward"]
    # fp32 capture: reads T rows, writes kT, plus the kT routed probabilities read and written
    assert permute.mem_bytes == pytest.approx((t + k * t) * h * 4, rel=1e-3)
    (unpermute,) = [n for n in _ops(layer, "moe_unpermute") if n.phase == "forward"]
    assert unpermute.mem_bytes == (k * t + t) * h * 4
    assert len(_ops(layer, "moe_sort_chunks")) == 4  # 16 local experts: sorted and restored, forward and backward
    one_expert_each = capture_parts(s, 1, False, 1, False, None, 128)["layer"]
    assert not _ops(one_expert_each, "moe_sort_chunks")  # one local expert: nothing to sort


def test_etp_keeps_the_experts_work_and_widens_their_gemms():
    s = spec(seq_len=1024, moe_permute_fusion=True)  # TE's chunk sort (Grok-1's preset: Megatron-core's unfused default)
    split = capture_parts(s, 4, True, 1, False, None, 2)["layer"]  # experts split over the 4 TP ranks
    whole = capture_parts(s, 4, True, 1, False, 1, 2)["layer"]  # etp 1: whole experts on a quarter of the rows
    gemm = {name: sum(n.flops for n in w.nodes if n.op_class == "matmul") for name, w in (("split", split), ("whole", whole))}
    assert gemm["whole"] == pytest.approx(gemm["split"], rel=1e-6)  # the same FLOPs either way
    rows = {name: max(n.mem_bytes for n in _ops(w, "moe_sort_chunks")) for name, w in (("split", split), ("whole", whole))}
    assert rows["split"] == pytest.approx(4 * rows["whole"])  # sorted after the TP gather: 4 x the rows


def test_etp_one_folds_the_expert_groups_over_the_tensor_parallel_ranks():
    folded = estimate(cfg("parallelism.ep=8", "parallelism.etp=1"))
    split = estimate(cfg("parallelism.ep=2"))
    ep = [c for c in folded.collectives if c["group"] == "ep"]
    assert ep[0]["group_size"] == 8 and ep[0]["stride"] == 1  # EP 8 over TP 4 x 2 DP ranks of a stage
    assert not [c for c in folded.collectives if c["group"] == "etp"]  # whole experts: no TP collective around them
    edp = [c for c in folded.collectives if c["group"] == "edp"]
    assert edp[0]["group_size"] == 8 and edp[0]["stride"] == 8  # edp = 4 x 16 / (1 x 8), the next 8-rank blocks
    split_ep = [c for c in split.collectives if c["group"] == "ep"][0]
    assert split_ep["group_size"] == 2 and split_ep["stride"] == 4  # EP over DP ranks, as before
    # the dispatcher gathers the k x T routed rows over the experts' TP ranks: k times the sequence gather
    gathers = sorted(c["bytes"] for c in split.collectives if c["group"] == "tp" and c["collective"] == "all_gather")
    assert gathers[1] == pytest.approx(spec().top_k * gathers[0])  # Grok-1: top-2


def test_etp_shards_expert_parameters_over_etp_x_ep():
    s = spec()
    split = Layout(4, 8, 2, 2, 1, 128, 1, True, "none")
    whole = Layout(4, 8, 2, 8, 1, 128, 1, True, "none", etp=1)
    assert split.edp == 1 and whole.edp == 1
    _, e_split = stage_param_split(s, split, 1)
    _, e_whole = stage_param_split(s, whole, 1)
    assert e_whole == e_split  # 8 experts / (4 x 2) = 8 / (1 x 8): one expert's worth either way
    wide = Layout(4, 8, 2, 4, 1, 128, 1, True, "none", etp=1)
    assert wide.edp == 2 and stage_param_split(s, wide, 1)[1] == 2 * e_split


@pytest.mark.parametrize("extra, needle", [
    (("parallelism.ep=8", "parallelism.etp=16"), r"etp x ep = 16 x 8 must divide tp x cp x dp = 64"),
    (("parallelism.ep=8", "parallelism.etp=1", "parallelism.sequence_parallel=false"), "needs parallelism.sequence_parallel=true"),
    (("parallelism.ep=4", "parallelism.etp=1", "parallelism.order=tp-pp-dp"), "pp outermost or innermost"),
    (("parallelism.etp=0",), "parallelism.etp must be an integer >= 1"),
])
def test_bad_expert_folds_are_one_line_errors(extra, needle):
    with pytest.raises(EstimatorError, match=needle):
        c = cfg(*extra)
        validate_hybrid(c)
        estimate(c)


def test_etp_on_a_dense_model_is_an_error():
    c = estimator.resolve_config(["model=llama3_8b", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=16",
                                  "parallelism.tp=2", "parallelism.sequence_parallel=true", "parallelism.etp=1",
                                  "parallelism.global_batch=64"])
    with pytest.raises(EstimatorError, match="is dense"):
        validate_hybrid(c)


def test_moe_activations_keep_fp8_inputs_and_the_gathered_rows():
    s = spec(seq_len=4096)
    split = Layout(4, 8, 16, 2, 1, 128, 1, True, "none")  # etp = tp = 4: fc1's input is the gathered k T x 4 rows
    whole = Layout(4, 8, 16, 8, 1, 128, 1, True, "none", etp=1)
    t_rows, h, f, k = 4096 / 4, s.hidden, s.ffn, s.top_k
    extra_rows = split.expert_tp - whole.expert_tp  # rows kept per routed token beyond etp 1's: 16-bit fc1 input + fp32 prob
    assert moe_mlp_bytes(s, split) - moe_mlp_bytes(s, whole) == pytest.approx(k * t_rows * extra_rows * (2 * h + 4))
    assert moe_mlp_bytes(s, whole) - moe_mlp_bytes(s, whole, fp8=True) == pytest.approx(k * t_rows * (h + f))


def test_qwen3_235b_layout_that_ran_fits():
    """Megatron-Bridge's DGX-H100 Qwen3-235B-A22B layout (TP 2, PP 8, VP 4, EP 32, ETP 1, FP8, no recompute;
    docs/performance-summary-archive.md, 25.11 to 26.04.01) ran, so it fits; at twice the micro-batch it would not."""
    layout = ["model=qwen3_235b_a22b", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=256", "framework=megatron",
              "parallelism.tp=2", "parallelism.pp=8", "parallelism.virtual_stages=4", "parallelism.ep=32",
              "parallelism.etp=1", "parallelism.sequence_parallel=true", "parallelism.recompute=none",
              "parallelism.fp32_grads=false", "parallelism.global_batch=2048", "precision=fp8"]
    validate_hybrid(estimator.resolve_config(layout))
    with pytest.raises(EstimatorError, match=r"needs \d+\.\d GB per GPU on pipeline stage"):
        validate_hybrid(estimator.resolve_config([*layout, "parallelism.micro_batch_size=2"]))


def test_layout_search_tries_whole_experts_folded_over_tensor_parallelism():
    s = spec()
    base = Layout(4, 8, 16, 1, 1, 64, 1, True, "none")
    found = {(x.tp, x.ep, x.etp) for x in candidates(s, base, 512, 8, 1024, (1,))}
    assert (4, 8, 1) in found and (4, 8, None) in found  # EP 8 over 8 DP ranks, or over TP 4 x 2 DP ranks whole
    assert not {x for x in found if x[2] == 1 and x[0] == 1}  # tp 1: nothing to fold
    dense = {x.etp for x in candidates(spec("qwen3_30b_a3b", num_experts=0), base, 512, 8, 1024, (1,))}
    assert dense == {None}
