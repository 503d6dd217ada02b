"""Parallel groups priced where they sit on OCS (own circuits + reconfiguration), SiPAC (WSS levels),
OPSquare (intra- / inter-pod path), and MoE activation memory."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.circuits import plan
from estimator.parallel.concurrent import concurrent_cost
from estimator.parallel.layout import Layout
from estimator.parallel.memory import dense_mlp_bytes, memory, recomputed_bytes
from estimator.parallel.placement import group_cost, p2p_cost
from estimator.parallel.spec import TransformerSpec

MB64 = 2**26


def fabric(*overrides):
    return estimator.make_fabric(estimator.resolve_config(list(overrides))["fabric"])


# ---- OCS: circuits per group ---------------------------------------------------------------------
def test_ocs_group_on_its_own_circuits_beats_the_whole_fabric_spread():
    f = fabric("fabric=ocs", "fabric.nodes=1024")
    spread = f.collective_cost("all_reduce", MB64, group_size=8).time_s  # 8 servers of the 32 x 32 torus
    t, algo, how = group_cost(f, "all_reduce", MB64, 8, 1)
    assert how == "hook" and t < spread
    # circuits join any ports: where the group's servers are does not matter
    assert group_cost(f, "all_reduce", MB64, 8, 128)[0] == t
    # the group's own 8-server torus is what an 8-server OCS prices
    assert t == fabric("fabric=ocs", "fabric.nodes=8").collective_cost("all_reduce", MB64).time_s
    # the whole fabric as one group is unchanged
    assert group_cost(f, "all_reduce", MB64, 1024, 1)[0] == f.collective_cost("all_reduce", MB64).time_s
    # a pipeline send rides one direct circuit: alpha + one link + bytes / port
    c = f.cfg
    assert p2p_cost(f, MB64, 8) == pytest.approx(c.inner_node_delay_s + c.link_delay_s + MB64 * 8 / c.port_bps)


def test_ocs_group_ports_follow_the_wired_shape():
    f = fabric("fabric=ocs", "fabric.nodes=64")
    assert [f.group_ports(n, "ring") for n in (1, 2, 8)] == [0, 1, 2]
    assert f.group_ports(8, "torus2d") == 3  # 2 x 4 torus: one cable along the 2-long dimension
    assert f.group_ports(16, "torus2d") == 4
    assert f.group_ports(8, "btree") == 3 and f.group_ports(8, "chain") == 2
    assert fabric("fabric=ocs", "fabric.nodes=64", "fabric.topology=one_switch").group_ports(8) == 0


def test_circuit_plan_keeps_what_fits_and_rewires_the_rest():
    f = fabric("fabric=ocs", "fabric.nodes=64")  # torus2d, 4 ports
    p = plan(f, {"tp": (8, 100), "pp": (4, 20), "dp": (2, 1), "ep": (1, 0), "edp": (2, 0)})
    # tp's 2 x 4 torus takes 3 of 4 ports; the chain needs 2 (rewired), dp's pair 1 (fits)
    assert p.resident == ("tp", "dp") and p.rewired == ("pp",)
    assert p.reconfigs_per_step == 2 * 20
    assert p.reconfig_s == pytest.approx(p.reconfigs_per_step * f.cfg.reconfig_s)
    ring = fabric("fabric=ocs", "fabric.nodes=64", "fabric.topology=ring")
    q = plan(ring, {"tp": (8, 100), "pp": (4, 20), "dp": (2, 1)})
    assert q.resident == ("tp", "pp") and q.rewired == ("dp",) and q.reconfigs_per_step == 2
    assert plan(fabric("fabric=ocs", "fabric.nodes=64", "fabric.ports=8"), {"tp": (8, 100), "pp": (4, 20), "dp": (2, 1)}).reconfig_s == 0
    assert plan(fabric("fabric=lumorph", "fabric.nodes=64"), {"tp": (8, 100), "pp": (4, 20)}).reconfig_s == 0  # no plan


LLAMA_OCS = ["model=llama2_7b", "parallelism=hybrid", "device=a100", "fabric=ocs", "fabric.nodes=16", "parallelism.tp=2",
             "parallelism.pp=2", "parallelism.global_batch=16"]


def test_ocs_step_pays_each_circuit_change():
    def run(*extra):
        return estimate(estimator.resolve_config([*LLAMA_OCS, *extra])).metrics

    torus = run()  # tp2 pp2 dp4: tp 1 port + chain 1 port + dp torus of 4 (2 x 2: 2 ports) = 4 ports: all resident
    assert torus["reconfig_time_s"] == 0 and torus["circuit_plan"] == "resident tp,pp,dp; rewired -"
    small = run("fabric.ports=4", "parallelism.tp=4", "parallelism.pp=2")  # tp 4 (2 x 2: 2 ports) + chain 1 + dp 2 (1) = 4
    assert small["reconfig_time_s"] == 0
    btree = run("fabric.topology=btree", "fabric.ports=3")  # tp 1 + chain 1 + btree of 4 (2 ports): dp rewired
    assert btree["circuit_plan"] == "resident tp,pp; rewired dp" and btree["circuit_reconfigs_per_step"] == 2
    assert btree["reconfig_time_s"] == pytest.approx(2 * 25e-3)
    slow = run("fabric.topology=btree", "fabric.ports=3", "fabric.reconfig_s=0.1")
    assert slow["reconfig_time_s"] == pytest.approx(0.2)
    assert slow["iter_time_s"] - btree["iter_time_s"] == pytest.approx(0.2 - 0.05, rel=1e-6)
    pp_rewired = run("fabric.topology=btree", "fabric.ports=3", "parallelism.pp=4", "parallelism.tp=1")  # dp4 btree 2 + chain 2
    m = pp_rewired["microbatches"]
    assert pp_rewired["circuit_plan"] == "resident pp; rewired dp"
    assert pp_rewired["circuit_reconfigs_per_step"] == 2
    # ring, 2 ports, tp2 pp4 dp2: tp's pair (1 port) stays, the chain (2) does not, dp's pair (1) stays:
    # every pipeline send (2 per microbatch) rewires there and back
    tp_then_pp = run("fabric.topology=ring", "fabric.ports=2", "parallelism.pp=4")
    assert tp_then_pp["circuit_plan"] == "resident tp,dp; rewired pp"
    assert tp_then_pp["circuit_reconfigs_per_step"] == 2 * 2 * tp_then_pp["microbatches"] == 2 * 2 * m * 2
    assert tp_then_pp["iter_time_s"] > tp_then_pp["reconfig_time_s"] == pytest.approx(4 * m * 2 * 25e-3)


# ---- SiPAC: the WSS levels a group spans -------------------------------------------------------------
def test_sipac_group_uses_the_levels_it_spans():
    f = fabric("fabric=sipac")  # SiPAC(8, 2): 512 CUs, 3 levels
    c = f.cfg
    for coll in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):  # whole fabric = the closed form
        assert group_cost(f, coll, MB64, 512, 1)[0] == pytest.approx(f.collective_cost(coll, MB64).time_s, rel=1e-12)
    one_switch = c.alpha_s + MB64 * (c.r - 1) / (c.r * c.port_Bps)  # inside one level-0 WSS: one port
    assert group_cost(f, "all_reduce", MB64, 8, 1)[0] == pytest.approx(2 * one_switch, rel=1e-12)
    assert group_cost(f, "all_reduce", MB64, 8, 64)[0] == pytest.approx(2 * one_switch, rel=1e-12)  # level 2 alike
    # across two levels: two ports, the sub-SiPAC closed form with B = 2 ports
    two = 2 * (2 * c.alpha_s + (64 - 1) / 64 * MB64 / (2 * c.port_Bps))
    assert group_cost(f, "all_reduce", MB64, 64, 1)[0] == pytest.approx(two, rel=1e-12)
    # half a switch: 3 of the 7 channels of b/(r-1)
    assert f.group_levels(4, 1) == (4,) and f.group_levels(16, 1) == (8, 2)
    assert group_cost(f, "all_reduce", MB64, 4, 1)[0] == pytest.approx(2 * (c.alpha_s + MB64 * (c.r - 1) / (4 * c.port_Bps)))
    # a group that occupies one port is slower than the old price with all the CU's ports
    assert group_cost(f, "all_reduce", MB64, 8, 1)[0] > 2 * f.collective_cost("all_reduce", MB64, group_size=8).time_s


def test_sipac_group_closed_form_equals_the_merged_schedule_on_the_topology():
    # all sibling groups' dimension-wise / direct schedules routed together on the SiPAC(4, 2) channels
    f = fabric("fabric=sipac", "fabric.r=4", "fabric.l=2", "fabric.nodes=64")
    for coll in ("all_reduce", "reduce_scatter", "all_to_all"):
        for size, stride in ((4, 1), (4, 16), (16, 4), (64, 1)):
            merged = concurrent_cost(f, coll, 2**24, size, stride)
            if merged is not None:
                assert f.group_cost(coll, 2**24, size, stride).time_s == pytest.approx(merged[0], rel=1e-9)


# ---- OPSquare: intra-pod and inter-pod paths ---------------------------------------------------------
def test_opsquare_group_priced_on_the_pod_path_it_uses():
    f = fabric("fabric=opsquare")  # 16 pods x 16 nodes, 4 transceiver groups of 4
    bps = f.cfg.transceiver_bps
    # contiguous groups: as before
    for n in (8, 16, 32):
        assert group_cost(f, "all_reduce", MB64, n, 1)[0] == f.collective_cost("all_reduce", MB64, group_size=n).time_s
    # 4 ranks 4 apart inside one pod: intra-pod only, one peer per transceiver, two one-hop rounds
    t = group_cost(f, "all_reduce", MB64, 4, 4)[0]
    assert t == pytest.approx(2 * f.hop_s + 2 * 1 * MB64 / 4 * 8 / bps)
    # 8 ranks one per pod (stride 16): inter-pod switch only
    t = group_cost(f, "all_reduce", MB64, 8, 16)[0]
    assert t == pytest.approx(2 * f.hop_s + 2 * 7 / 8 * MB64 * 8 / bps)
    # 32 ranks 8 apart: 2 per pod over 16 pods: intra + inter + inter + intra
    assert f.group_shape(32, 8) == (16, 2, 1)
    t = group_cost(f, "all_reduce", MB64, 32, 8)[0]
    assert t == pytest.approx(4 * f.hop_s + 2 * MB64 / 2 * 8 / bps + 2 * 15 / 16 * MB64 / 2 * 8 / bps)
    # an all-to-all among one rank per pod takes one hop (no relay inside the destination pod)
    a2a = group_cost(f, "all_to_all", MB64, 16, 16)[0]
    assert a2a == pytest.approx(f.hop_s + 15 / 16 * MB64 * 8 / bps)


def test_opsquare_estimate_prices_strided_dp_across_pods():
    m = estimate(estimator.resolve_config([
        "model=llama2_7b", "parallelism=hybrid", "device=a100", "fabric=opsquare", "parallelism.tp=16", "parallelism.pp=1",
        "parallelism.global_batch=32"])).collectives
    dp = [c for c in m if c["group"] == "dp"]
    assert dp and all(c["pricing"] == "hook" and c["stride"] == 16 for c in dp)
    f = fabric("fabric=opsquare")
    assert dp[0]["time_s"] == pytest.approx(group_cost(f, dp[0]["collective"], dp[0]["bytes"], 16, 16)[0])


# ---- MoE activation memory -----------------------------------------------------------------------
def test_moe_activation_memory_grows_with_top_k():
    spec = TransformerSpec.from_cfg(estimator.resolve_config(["model=mixtral_8x7b"])["model"])
    layout = Layout(2, 4, 32, 8, 1, 16, 0, True, "none")
    acts = [memory(replace(spec, top_k=k), layout)["activations"] for k in (1, 2, 4)]
    s, b, h, t, f = spec.seq_len, 1, spec.hidden, 2, spec.ffn
    # one more expert per token (Megatron-core's MoE layer: fc1's input and the fp32 probability the weighted SwiGLU keeps,
    # per row gathered over the experts' TP ranks, t (2 h + 4); the 2f-wide fc1 output and fc2's input, 6 f; nothing of
    # the unpermute), layers/pp x pp in flight
    per_k = s * b / t * (t * (2 * h + 4) + 6 * f) * (spec.layers // 4) * 4
    assert acts[1] - acts[0] == pytest.approx(per_k) and acts[2] - acts[1] == pytest.approx(2 * per_k)
    dense = replace(spec, experts=0)
    assert memory(spec, layout)["activations"] > memory(dense, layout)["activations"]  # k=2 experts > the dense formula
    assert dense_mlp_bytes(spec, layout) == pytest.approx(s * b * h * 19 / t)
    full = Layout(2, 4, 32, 8, 1, 16, 0, True, "full")
    kept = [memory(m, full)["activations"] - recomputed_bytes(m, full, memory(m, full)["stage"]) for m in (spec, dense)]
    assert kept[0] == kept[1]  # only the layer input is kept
    assert recomputed_bytes(spec, full, 0) > recomputed_bytes(dense, full, 0)  # the layer recomputed has its experts'


MIXTRAL = ["model=mixtral_8x7b", "model.fused_kernels=none", "parallelism=hybrid", "system=dgx_a100", "fabric.nodes=256",
           "parallelism.tp=2",
           "parallelism.pp=4", "parallelism.ep=8", "parallelism.global_batch=512", "parallelism.sequence_parallel=true",
           "parallelism.recompute=none"]


def test_moe_layout_over_memory_is_a_one_line_error():
    from estimator.parallel.estimate import validate_hybrid

    validate_hybrid(estimator.resolve_config([*MIXTRAL, "model.experts_top_k=2"]))  # 67 GB: fits A100's usable 84.0 GB
    # top-k 6: 94 GB (top-k 4, 80.6 GB, fits the usable 84.0 GB of conf/device/a100.yaml since h83)
    with pytest.raises(EstimatorError, match=r"activations [0-9.]+\) but the device has 84.0 GB"):
        validate_hybrid(estimator.resolve_config([*MIXTRAL, "model.experts_top_k=6"]))
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", *MIXTRAL, "model.experts_top_k=6"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "GB too much" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_te_moe_layer_keeps_no_scores_and_routes_k_copies():
    """model.fused_kernels=te with experts: Megatron-core's MoE layer on TE (flash attention) -- the same
    MoE bytes as the eager layer, without the s x s attention scores; the captured MLP runs on k x the tokens."""
    from estimator.parallel.layer import capture_parts
    from estimator.parallel.memory import moe_mlp_bytes, te_dense_mlp_bytes

    te = TransformerSpec.from_cfg(estimator.resolve_config(["model=mixtral_8x7b"])["model"])
    eager = replace(te, fused="none")
    assert te.fused == "te"  # the preset's default
    layout = Layout(1, 4, 16, 8, 1, 16, 1, False, "none")
    per_layer = memory(te, layout)["activations"] / (te.layers // 4 * 4)  # layers/pp x pp in flight on stage 0
    s, h = te.seq_len, te.hidden
    assert memory(eager, layout)["activations"] > memory(te, layout)["activations"] + 5 * te.heads * s * s * (te.layers // 4) * 4
    assert te_dense_mlp_bytes(te, layout) == pytest.approx(s * (2 * h + 6 * te.ffn))
    # the TE layer without its MLP share (the second norm's output is the router's input, counted in the MoE bytes)
    assert per_layer == pytest.approx(s * (6 * h + 4 * h + 2 * 2 * te.kv_heads * te.head_dim) + moe_mlp_bytes(te, layout))
    small = replace(te, hidden=256, heads=4, kv_heads=2, ffn=512, seq_len=128, layers=1, vocab=512)
    layer = capture_parts(small, 1, False)["layer"]
    fwd = [n for n in layer.nodes if n.phase == "forward"]
    dense = capture_parts(replace(small, experts=0), 1, False)["layer"]
    mm = lambda nodes: sum(n.flops for n in nodes  # noqa: E731  (the experts: TE GroupedLinear)
                           if n.phase == "forward" and n.op in ("aten::linear", "te::grouped_linear"))
    router = 2 * 128 * 256 * small.experts
    assert mm(fwd) == pytest.approx(mm(dense.nodes) + (small.top_k - 1) * 2 * 128 * 256 * 3 * 512 + router)
