"""Megatron-core's MoE communication (estimator/parallel/moe_comm.py): the flex dispatcher's DeepEP / HybridEP
backends (framework.moe_dispatcher) and the merged 1F1B all-to-all overlap (framework.moe_a2a_overlap)."""

from __future__ import annotations

import subprocess
import sys
from itertools import combinations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.fabrics.registry import shared_fabric
from estimator.parallel.moe_comm import (
    dispatch_time,
    flex_strides,
    groups_reached,
    merged_exposure,
    merged_fraction,
    sm_share,
)
from estimator.parallel.step import _Pricer
from tests.conftest import REPO

# (overrides, iter_time_s) priced before the two keys existed (commit 1e6c371): the defaults must not move them
DEFAULT_RUNS = [  # pinned at h57 (GEMM efficiency by shape on H100; h54: 48.678 / 3.4805 / 33.851 s); Qwen3 at h61
    # (its q/k RMSNorms, model.qk_norm: 35.76042496680612 s before, and with model.qk_norm=false); the TP 2 runs at the
    # sixteenth stop (framework=megatron overlaps TP by default: 48.57777999813308 / 3.4606319421097513 s without); the
    # FP8 DeepSeek-V3 run at the seventeenth (least-squares FP8 GEMM constants + TE's delayed amax all-reduces:
    # 47.91268453110396 s before); all three at the eighteenth (comm_interference = H100's NCCL SM share 24/132, was a
    # flat 0.15: 47.87664295049033 / 3.3967404245261483 / 36.066011158982356 s with parallelism.comm_interference=0.15);
    # the FP8 DeepSeek-V3 run at h84 (TEGroupedMLP's Fp8Padding / Fp8Unpadding copies of each expert's rows, four per
    # layer and microbatch: 47.8777407624947 s before)
    (["model=deepseek_v3", "system=dgx_h100", "fabric.nodes=1024", "parallelism.tp=2", "parallelism.pp=16",
      "parallelism.ep=64", "parallelism.etp=1", "parallelism.global_batch=8192", "precision=fp8"], 48.61771364297232),
    (["model=mixtral_8x7b", "system=dgx_h100", "fabric.nodes=64", "parallelism.tp=2", "parallelism.pp=4",
      "parallelism.ep=8", "parallelism.global_batch=256", "precision=bf16"], 3.396950599111835),
    (["model=qwen3_30b_a3b", "system=dgx_h100", "fabric.nodes=16", "parallelism.tp=1", "parallelism.pp=1",
      "parallelism.ep=16", "parallelism.global_batch=1024", "precision=bf16"], 36.06675946651987),
]
QWEN = DEFAULT_RUNS[2][0]


def run(overrides):
    stated = any(o.startswith("parallelism.recompute=") for o in overrides)  # the old default (selective) unless stated
    return estimate(estimator.resolve_config(["parallelism=hybrid", *([] if stated else ["parallelism.recompute=selective"]),
                                              *overrides])).metrics


@pytest.mark.parametrize("experts, groups, k", [(8, 4, 2), (12, 3, 4), (16, 8, 3), (6, 6, 2)])
def test_groups_reached_closed_form_matches_a_count(experts, groups, k):
    size = experts // groups
    picks = list(combinations(range(experts), k))
    mean = sum(len({e // size for e in pick}) for pick in picks) / len(picks)
    assert groups_reached(experts, groups, k) == pytest.approx(mean, rel=1e-12)


def _dispatch(dispatcher, ep, tokens=4096, hidden=7168, experts=256, k=8):
    fabric = shared_fabric(estimator.resolve_config(["system=dgx_h100", f"fabric.nodes={ep}"])["fabric"])
    pricer = _Pricer(fabric, {"ep": 1, **flex_strides(fabric, ep, 1)}, "default")
    t = dispatch_time(pricer, dispatcher, tokens, hidden, experts, k, ep, 1)
    return t, {c["group"]: c for c in pricer.colls}


def _cross_node_bytes(colls, ep, per_node=8):
    """Bytes one rank sends off its node: the alltoall's share to the other nodes' ranks, the rail exchange's
    share to the other nodes."""
    out = 0.0
    if "ep" in colls and ep > per_node:
        out += colls["ep"]["bytes"] * (ep - per_node) / ep
    if "ep_rail" in colls:
        n = colls["ep_rail"]["group_size"]
        out += colls["ep_rail"]["bytes"] * (n - 1) / n
    return out


def test_deepep_crosses_the_network_once_per_token_and_node():
    a2a_t, a2a = _dispatch("alltoall", 64)
    dep_t, dep = _dispatch("deepep", 64)
    assert set(dep) == {"ep_rail", "ep_node"} and dep["ep_rail"]["group_size"] == 8
    reached = groups_reached(256, 8, 8)  # of 8 nodes: ~5.3 per token, against 8 expert copies
    assert dep["ep_rail"]["bytes"] == pytest.approx(4096 * 7168 * 2 * reached)
    assert _cross_node_bytes(dep, 64) < 0.7 * _cross_node_bytes(a2a, 64)
    assert dep_t < a2a_t
    assert _dispatch("hybridep", 64)[0] == dep_t  # one mechanism (moe_comm docstring)


def test_deepep_inside_one_node_sends_once_per_token_and_rank():
    a2a_t, a2a = _dispatch("alltoall", 8)
    dep_t, dep = _dispatch("deepep", 8)
    assert _cross_node_bytes(a2a, 8) == _cross_node_bytes(dep, 8) == 0.0  # NVLink only, both
    assert set(dep) == {"ep_node"}
    ratio = dep["ep_node"]["bytes"] / a2a["ep"]["bytes"]
    assert ratio == pytest.approx(groups_reached(256, 8, 8) / 8) and ratio < 0.7
    assert dep_t < a2a_t


def test_merged_exposure_is_between_zero_and_the_four_all_to_alls():
    assert merged_exposure(1.0, 0.0, 0.0, 0.0, 0.0) == pytest.approx(4.0)  # nothing to hide behind
    assert merged_exposure(0.0, 1.0, 2.0, 3.0, 4.0) == 0.0
    for a2a in (1e-4, 1e-3, 1e-2, 1e-1):
        exposed = merged_exposure(a2a, 2e-3, 3e-3, 4e-3, 6e-3)
        assert 0.0 <= exposed < 4 * a2a
    assert merged_exposure(1e-4, 2e-3, 3e-3, 4e-3, 6e-3) == 0.0  # short all-to-alls: all hidden


def test_merged_fraction_leaves_the_warm_up_and_cool_down_alone():
    assert merged_fraction(64, 1, 1, None) == pytest.approx(63 / 64)
    assert merged_fraction(8, 4, 2, None) == pytest.approx((16 - (6 + 4 + 1)) / 16)
    assert merged_fraction(2, 4, 2, None) == 0.0


def test_overlap_lowers_the_exposed_all_to_all():
    plain, merged = run(QWEN), run([*QWEN, "framework.moe_a2a_overlap=true"])
    assert merged["ep_comm_time_s"] == plain["ep_comm_time_s"]  # the same bytes, hidden
    assert 0.0 <= merged["ep_exposed_time_s"] < 0.5 * plain["ep_exposed_time_s"]
    assert merged["iter_time_s"] < plain["iter_time_s"]
    assert plain["ep_exposed_time_s"] == plain["ep_comm_time_s"]


def test_a_hidden_nccl_all_to_all_slows_the_compute_it_hides_behind():
    """The NCCL all-to-all's CTAs hold SMs while it runs beside compute: the overlap pays the CTAs NCCL launches over
    the device's SMs of the hidden time (h97: 4 of 132 for ep 16 on two DGX H100 nodes, moe_comm.nccl_a2a_ctas); a
    stated comm_interference prices it instead (0 = the exchange hidden for free)."""
    merged = [*QWEN, "framework.moe_a2a_overlap=true"]
    free, charged = run([*merged, "parallelism.comm_interference=0"]), run(merged)
    assert charged["iter_time_s"] > free["iter_time_s"]
    plain = run(QWEN)
    hidden = plain["ep_exposed_time_s"] - free["ep_exposed_time_s"]  # what the overlap hides, per step
    device = estimator.resolve_config(["system=dgx_h100"])["device"]
    for stated, share in ((None, 4 / device["sm_count"]), (0.25, 0.25)):
        got = charged if stated is None else run([*merged, f"parallelism.comm_interference={stated}"])
        extra = got["iter_time_s"] - free["iter_time_s"]
        assert 0.5 * share * hidden < extra <= share * plain["ep_comm_time_s"] * 1.0001


def test_deepep_lowers_the_qwen3_all_to_all_over_two_nodes():
    plain, flex = run(QWEN), run([*QWEN, "framework.moe_dispatcher=deepep"])
    assert flex["ep_comm_time_s"] < 0.5 * plain["ep_comm_time_s"]
    assert flex["compute_time_s"] < plain["compute_time_s"]  # no chunk sort by local expert


@pytest.mark.parametrize("overrides, iter_time", DEFAULT_RUNS)
def test_defaults_leave_moe_estimates_unchanged(overrides, iter_time):
    assert run(overrides)["iter_time_s"] == pytest.approx(iter_time, rel=1e-12)
    stated = run([*overrides, "framework.moe_dispatcher=alltoall", "framework.moe_a2a_overlap=false"])
    assert stated["iter_time_s"] == pytest.approx(iter_time, rel=1e-12)


@pytest.mark.parametrize("extra, needle", [
    (["parallelism.pp=2", "parallelism.ep=8"], "with pp=2 needs virtual pipeline stages"),
    (["parallelism.ep=1"], "needs expert parallelism"),
    (["parallelism.recompute=full"], "refuses full recompute"),
    (["parallelism.recompute=selective", "parallelism.recompute_modules=[moe]"], "refuses moe in recompute_modules"),
])
def test_overlap_refuses_what_megatron_refuses(extra, needle):
    with pytest.raises(EstimatorError, match=needle):
        run([*QWEN, "framework.moe_a2a_overlap=true", *extra])


def test_bad_dispatcher_and_dense_overlap_are_errors():
    with pytest.raises(EstimatorError, match="moe_dispatcher must be one of alltoall, deepep, hybridep"):
        run([*QWEN, "framework.moe_dispatcher=ncclep"])
    with pytest.raises(EstimatorError, match="etp x ep > 1"):
        run([*QWEN[:3], "fabric.nodes=1", "parallelism.ep=1", "parallelism.global_batch=8",
             "framework.moe_dispatcher=deepep"])
    with pytest.raises(EstimatorError, match="has no experts"):
        run(["model=llama3_8b", "system=dgx_h100", "fabric.nodes=8", "parallelism.tp=8", "parallelism.pp=1",
             "parallelism.global_batch=8", "framework.moe_a2a_overlap=true"])


def test_cli_error_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", *QWEN, "parallelism.pp=2", "parallelism.ep=8",
                          "framework.moe_a2a_overlap=true"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "virtual pipeline stages" in out.stderr


def test_an_unstated_layout_is_searched_with_the_flex_dispatcher():
    """The layout search checks each layout it tries; the base layout (ep 1 until searched) is not refused up front."""
    cfg = estimator.resolve_config(["model=qwen3_30b_a3b", "system=dgx_h100", "fabric.nodes=16", "precision=bf16",
                                    "parallelism.global_batch=64", "framework.moe_dispatcher=hybridep"])
    m = estimate(cfg).metrics
    assert m["placement"] == "auto" and m["ep"] > 1 and m["layouts_evaluated"] > 1
    dense = estimator.resolve_config(["model=llama3_8b", "system=dgx_h100", "fabric.nodes=8",
                                      "framework.moe_a2a_overlap=true"])
    with pytest.raises(EstimatorError, match="^framework.moe_a2a_overlap: Megatron-core requires expert parallelism"):
        estimate(dense)  # what no layout changes is said at once, not as "no layout fits"


# ---- the SMs the flex dispatcher holds (framework.moe_dispatcher_sms, moe_comm.sm_share)
FLEX_OVERLAP = [*QWEN, "framework.moe_dispatcher=hybridep", "framework.moe_a2a_overlap=true"]


def test_sm_share_is_the_dispatchers_sms_over_the_devices():
    from types import SimpleNamespace as NS
    h100 = NS(sm_count=132)
    assert sm_share(NS(moe_dispatcher="deepep", moe_dispatcher_sms=None), h100) == pytest.approx(20 / 132)
    assert sm_share(NS(moe_dispatcher="hybridep", moe_dispatcher_sms=None), h100) == pytest.approx(32 / 132)
    assert sm_share(NS(moe_dispatcher="hybridep", moe_dispatcher_sms=24), h100) == pytest.approx(24 / 132)
    # the NCCL all-to-all: its CTAs (moe_comm.nccl_a2a_ctas) over the device's SMs; without them (stated
    # parallelism.comm_interference, or a device without p2p channel counts) what any hidden NCCL collective costs
    assert sm_share(NS(moe_dispatcher="alltoall", moe_dispatcher_sms=24), h100) == 0.0
    assert sm_share(NS(moe_dispatcher="alltoall", moe_dispatcher_sms=None), h100, 0.182) == pytest.approx(0.182)
    assert sm_share(NS(moe_dispatcher="alltoall", moe_dispatcher_sms=None), h100, 0.182, 8) == pytest.approx(8 / 132)
    assert sm_share(NS(moe_dispatcher="alltoall", moe_dispatcher_sms=None), NS(sm_count=None), 0.182, 8) == 0.182
    assert sm_share(NS(moe_dispatcher="deepep", moe_dispatcher_sms=None), h100, 0.182, 8) == pytest.approx(20 / 132)
    assert sm_share(NS(moe_dispatcher="deepep", moe_dispatcher_sms=None), h100, 0.5) == pytest.approx(20 / 132)
    assert sm_share(NS(moe_dispatcher="deepep", moe_dispatcher_sms=None), NS(sm_count=None)) == 0.0
    with pytest.raises(EstimatorError, match="leaves no SM"):
        sm_share(NS(moe_dispatcher="deepep", moe_dispatcher_sms=132), h100)


def test_hidden_flex_dispatch_slows_compute_by_its_share_of_the_sms():
    """Each hidden second of dispatch costs sms / 132 of a second; a dispatch that is not hidden costs no SMs."""
    few, many = run([*FLEX_OVERLAP, "framework.moe_dispatcher_sms=1"]), run([*FLEX_OVERLAP, "framework.moe_dispatcher_sms=65"])
    hidden = few["ep_comm_time_s"] - few["ep_exposed_time_s"]
    assert hidden > 0
    grown = many["iter_time_s"] - few["iter_time_s"]
    assert grown > 0
    # the charge is what is hidden at 1 SM (less what 65 SMs expose anyway), times 64 / 132; within the exposed part's shift
    assert grown == pytest.approx(64 / 132 * hidden, rel=0.25)
    plain = [*QWEN, "framework.moe_dispatcher=hybridep"]
    assert run([*plain, "framework.moe_dispatcher_sms=100"])["iter_time_s"] == run(plain)["iter_time_s"]


@pytest.mark.parametrize("value", [0, -4, 1.5, True])
def test_a_bad_dispatcher_sm_count_is_an_error(value):
    with pytest.raises(EstimatorError, match="moe_dispatcher_sms must be a whole number"):
        run([*FLEX_OVERLAP, f"framework.moe_dispatcher_sms={value}"])
