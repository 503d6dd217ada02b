"""DeepSeek-V3's own training mechanisms (round h89): node-limited routing in the flex dispatcher's traffic
(model.moe_router_num_groups / moe_router_group_topk, moe_comm.units_reached), FP8 dispatch
(framework.moe_dispatch_fp8) and the DualPipe schedule (parallelism.schedule=dualpipe)."""

from __future__ import annotations

from itertools import combinations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.fabrics.registry import shared_fabric
from estimator.parallel.layout import Layout
from estimator.parallel.memory import dualpipe_rank, end_params, layer_bytes, memory, stage_memory
from estimator.parallel.moe_comm import (
    BF16_BYTES,
    FP8_ROW_BYTES,
    dispatch_time,
    dualpipe_merged_fraction,
    flex_strides,
    groups_reached,
    units_reached,
)
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.step import _Pricer

# The deepseek24-v3-h800-fp8-2048gpu row's layout (its overrides), small enough to price in seconds, with moe_act
# recomputed too (arXiv 2412.19437 Sec. 3.3.3: "we cache the inputs to the SwiGLU operator and recompute its output in
# the backward pass"): without it DualPipe's layout does not fit an H800 in the memory model
ROW = ["model=deepseek_v3", "system=dgx_h800", "fabric.nodes=2048", "parallelism=hybrid", "precision=fp8",
       "parallelism.tp=1", "parallelism.pp=16", "parallelism.global_batch=15360", "parallelism.ep=64",
       "parallelism.zero=1", "parallelism.recompute=selective", "parallelism.recompute_modules=[layernorm,mla_up_proj,moe_act]",
       "parallelism.fp32_grads=true", "model.mtp_layers=1", "framework.optimizer_state=bf16_moments"]


def run(extra):
    return estimate(estimator.resolve_config([*ROW, *extra])).metrics


def _limited_mean(experts, groups, topk, k, units):
    """Mean units reached, counted: every choice of topk groups, then every choice of k experts inside them."""
    per_group, per_unit = experts // groups, experts // units
    total = count = 0
    for picked in combinations(range(groups), topk):
        pool = [e for g in picked for e in range(g * per_group, (g + 1) * per_group)]
        for chosen in combinations(pool, k):
            total += len({e // per_unit for e in chosen})
            count += 1
    return total / count


@pytest.mark.parametrize("experts, groups, topk, k, units", [(16, 4, 2, 3, 4), (16, 4, 2, 3, 8), (16, 4, 2, 3, 2),
                                                              (24, 6, 3, 4, 3), (12, 4, 1, 2, 12)])
def test_units_reached_matches_a_count(experts, groups, topk, k, units):
    assert units_reached(experts, units, k, groups, topk) == pytest.approx(_limited_mean(experts, groups, topk, k, units),
                                                                           rel=1e-12)


def test_units_reached_without_a_limit_is_groups_reached():
    for topk in (None, 8):
        assert units_reached(256, 8, 8, None if topk is None else 8, topk) == groups_reached(256, 8, 8)


def test_deepseek_v3_tokens_reach_at_most_four_nodes():
    nodes = units_reached(256, 8, 8, 8, 4)
    assert 3.5 < nodes <= 4 < groups_reached(256, 8, 8)  # 3.63 against 5.29 unlimited
    with pytest.raises(EstimatorError, match="do not nest"):
        units_reached(256, 3, 8, 8, 4)


def _dispatch(fp8, limit=(8, 4), ep=64, tokens=4096, hidden=7168):
    fabric = shared_fabric(estimator.resolve_config(["system=dgx_h800", f"fabric.nodes={ep}"])["fabric"])
    pricer = _Pricer(fabric, {"ep": 1, **flex_strides(fabric, ep, 1)}, "default")
    t = dispatch_time(pricer, "deepep", tokens, hidden, 256, 8, ep, 4, limit, fp8)
    return t, pricer.colls


def test_fp8_dispatch_sends_one_byte_and_a_scale_per_128_values():
    t16, c16 = _dispatch(False)
    t8, c8 = _dispatch(True)
    rail16 = [c["bytes"] for c in c16 if c["group"] == "ep_rail"]
    rail8 = sorted(c["bytes"] for c in c8 if c["group"] == "ep_rail")
    assert rail8 == pytest.approx([rail16[0] * FP8_ROW_BYTES / BF16_BYTES, rail16[0]])
    assert FP8_ROW_BYTES == 1 + 4 / 128
    assert t8 < t16  # the mean of an FP8 dispatch and a BF16 combine
    assert rail16[0] == pytest.approx(4096 * 7168 * 2 * units_reached(256, 8, 8, 8, 4))


def test_fp8_dispatch_needs_the_flex_dispatcher_and_fp8():
    with pytest.raises(EstimatorError, match="moe_dispatch_fp8"):
        run(["framework.moe_dispatch_fp8=true"])  # the alltoall dispatcher


def _dualpipe_counts(m, pp, rank):
    """Merged forward-backward pairs of one rank, counted as deepseek-ai/DualPipe's step() loops run them."""
    half, h, c = pp // 2, min(rank, pp - 1 - rank), m // 2
    middle = rank in (half - 1, half)
    merged = 0
    for i in range(c - pp + h + 1):  # step 4
        merged += (0 if (i == 0 and middle) else 1) + 1
    merged += half - h - 1  # step 5
    return merged


@pytest.mark.parametrize("m, pp", [(120, 16), (20, 8), (16, 8), (8, 2)])
def test_dualpipe_merged_fraction_is_the_end_ranks_count(m, pp):
    assert dualpipe_merged_fraction(m, pp) == pytest.approx(_dualpipe_counts(m, pp, 0) / m)
    assert all(_dualpipe_counts(m, pp, r) >= _dualpipe_counts(m, pp, 0) for r in range(pp))


def test_dualpipe_layout_checks():
    for extra, why in ((["parallelism.pp=3", "fabric.nodes=1536"], "even number of pipeline"),
                       (["parallelism.global_batch=128"], "microbatches"),
                       (["parallelism.recompute=full", "parallelism.recompute_modules=null"], "recompute")):
        with pytest.raises(EstimatorError, match=f"dualpipe needs .*{why}"):
            run(["parallelism.schedule=dualpipe", *extra])


def test_dualpipe_memory_hint_never_suggests_full_recompute():
    # a DualPipe layout too big for the GPU: the hint must not offer recompute=full, which DualPipe refuses
    with pytest.raises(EstimatorError, match="too much") as err:
        run(["parallelism.schedule=dualpipe", "parallelism.recompute_modules=null", "fabric.nodes=256",
             "parallelism.ep=16", "parallelism.global_batch=1920"])
    assert "recompute=full" not in str(err.value) and "placement=auto" in str(err.value)


def test_dualpipe_against_1f1b():
    one = run(["framework.moe_dispatcher=deepep"])
    dual = run(["framework.moe_dispatcher=deepep", "parallelism.schedule=dualpipe"])
    assert "dualpipe" in dual["layout"] and "dualpipe" not in one["layout"]
    assert dual["bubble_time_s"] < one["bubble_time_s"]
    assert dual["pp_p2p_time_s"] > 0 and dual["exposed_comm_time_s"] < one["exposed_comm_time_s"]
    assert dual["iter_time_s"] < one["iter_time_s"]
    # the bubble is Table 2's (PP/2 - 1)(F&B + B - 3W): at most 7 of the paced rank's merged slots here
    per_slot = (dual["iter_time_s"] - dual["bubble_time_s"] - dual["dp_exposed_time_s"] - dual["optimizer_s"]) / 120
    assert 0 < dual["bubble_time_s"] <= 7 * 2 * per_slot


def test_dualpipe_memory_holds_two_stages_and_shares_the_mtp_embedding():
    cfg = estimator.resolve_config(ROW)
    spec = TransformerSpec.from_cfg(cfg["model"])
    one = Layout.from_cfg({**cfg["parallelism"], "recompute": "selective"}, spec, 2048)
    dual = Layout.from_cfg({**cfg["parallelism"], "recompute": "selective", "schedule": "dualpipe"}, spec, 2048)
    s2, s13 = (stage_memory(spec, one, i, 4, None, True) for i in (2, 13))
    mid = memory(spec, dual, 4, None, True)
    assert mid["stage"] == 2 and mid["weights"] == pytest.approx(s2["weights"] + s13["weights"])
    assert mid["optimizer"] == pytest.approx((s2["optimizer"] + s13["optimizer"]) / 2)  # ZeRO-1 over 2 dp copies
    first, last = (stage_memory(spec, one, i, 4, None, True) for i in (0, 15))
    end = dualpipe_rank(spec, dual, 0, 4, None, True, layer_bytes(spec, dual, True))
    copy = end_params(spec, one, 0)
    assert end["weights"] == pytest.approx(first["weights"] + last["weights"] - 2 * copy)  # the MTP's copy, shared
