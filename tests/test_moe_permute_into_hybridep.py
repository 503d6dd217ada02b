"""HybridEP's permute (h90, docs/research/h90-qwen3-facts.md): it pads each expert's rows to the FP8 alignment, so
TEGroupedMLP's Fp8Padding / Fp8Unpadding copies do not run under HybridEP; fused into its dispatch and combine kernels
(``framework.moe_permute_fusion_into_hybridep``, Megatron-core's ``moe_permute_fusion_into_hybridep``) it drops the
layer's standalone permute / unpermute copies in forward and backward and nothing else; refused without HybridEP."""

from __future__ import annotations

from collections import Counter

import pytest

import estimator
from estimator.compute.device import DeviceProfile, node_times
from estimator.errors import EstimatorError
from estimator.parallel.estimate import setup_hybrid
from estimator.parallel.framework import Framework
from estimator.parallel.layer import capture_parts, fp8_mode
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.step import part_times

SEQ, EP = 256, 16  # a short sequence and Megatron-Bridge's 16-GPU layout (8 local experts)
FUSED_AWAY = {("forward", "te::moe_permute"), ("forward", "te::moe_unpermute"),
              ("backward", "te::moe_unpermute_backward"), ("backward", "te::moe_permute_backward")}


def spec():
    m = dict(estimator.resolve_config(["model=qwen3_30b_a3b", "model.moe_router_fusion=true"])["model"])
    m.update(seq_len=SEQ)
    return TransformerSpec.from_cfg(m)


def h100():
    return DeviceProfile.from_dict(dict(estimator.resolve_config(["system=dgx_h100"])["device"]))


def layer(fused, fp8=False):  # the flex dispatcher's layer (no chunk sort), HybridEP's permute standalone or fused
    return capture_parts(spec(), 1, False, 1, fp8, None, EP, False, "fused" if fused else "standalone")["layer"]


def kernels(w):  # the ops that cost something (views and allocations cost nothing)
    return Counter((n.phase, n.op) for n in w.nodes if n.kind == "compute" and (n.flops > 0 or n.mem_bytes > 0))


def test_fused_permute_drops_the_four_copies_and_nothing_else():
    plain, fused = kernels(layer(False)), kernels(layer(True))
    assert plain - fused == Counter(FUSED_AWAY)  # HybridEP executor.cu: the standalone permute / unpermute kernels
    assert not fused - plain  # no kernel added: the dispatch / combine write and read the rows themselves
    # the row-id map (HybridEP's metadata preprocessing still runs) stays
    assert fused[("forward", "te::moe_row_id_map_pass1")] == plain[("forward", "te::moe_row_id_map_pass1")] == 1


def test_layer_time_falls_by_exactly_the_fused_away_kernels():
    dev, s = h100(), spec()
    w = layer(False)
    t = node_times(w, dev, "bf16")
    saved = {ph: sum(x for n, x in zip(w.nodes, t, strict=True) if (n.phase, n.op) in FUSED_AWAY and n.phase == ph)
             for ph in ("forward", "backward")}
    assert saved["forward"] > 0 and saved["backward"] > 0
    a = part_times(s, 1, False, 1, dev, "bf16", 1, "cudnn", None, EP, False, False, "standalone")["layer"]
    b = part_times(s, 1, False, 1, dev, "bf16", 1, "cudnn", None, EP, False, False, "fused")["layer"]
    assert a.fwd - b.fwd == pytest.approx(saved["forward"], rel=1e-9)
    assert a.bwd - b.bwd == pytest.approx(saved["backward"], rel=1e-9)


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_refused_without_hybridep(dispatcher):
    cfg = estimator.resolve_config(["model=qwen3_30b_a3b", "system=dgx_h100", "fabric.nodes=16", "parallelism=hybrid",
                                    "parallelism.tp=1", "parallelism.pp=1", f"parallelism.ep={EP}",
                                    "parallelism.global_batch=1024", "precision=bf16",
                                    f"framework.moe_dispatcher={dispatcher}",
                                    "framework.moe_permute_fusion_into_hybridep=true"])
    with pytest.raises(EstimatorError, match="moe_permute_fusion_into_hybridep.*needs framework.moe_dispatcher=hybridep"):
        setup_hybrid(cfg)


def test_off_by_default_in_every_framework():
    for name in ("megatron", "deepspeed", "deepspeed_2021", "fsdp"):
        fw = Framework.from_cfg(estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"])
        assert fw.moe_permute_fusion_into_hybridep is False


PAD, UNPAD = "te::moe_fp8_pad", "te::moe_fp8_unpad"


def test_hybridep_pads_as_it_permutes_so_no_fp8_padding_copy_runs():
    tensorwise = fp8_mode("te", "tensorwise")
    other = capture_parts(spec(), 1, False, 1, tensorwise, None, EP, False)["layer"]  # DeepEP: TE's padding copies
    assert Counter(n.op for n in other.nodes if n.op in (PAD, UNPAD)) == {PAD: 3, UNPAD: 3}
    pads = Counter((n.phase, n.op) for n in other.nodes if n.op in (PAD, UNPAD))
    standalone = layer(False, tensorwise)
    assert kernels(other) - kernels(standalone) == pads and not kernels(standalone) - kernels(other)  # only those
    assert not [n for n in layer(True, tensorwise).nodes if n.op in (PAD, UNPAD)]
    assert not [n for n in layer(False).nodes if n.op in (PAD, UNPAD)]  # bf16: none either way
