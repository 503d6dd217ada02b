"""Megatron-core's MoE experts under FP8 as Transformer Engine runs them (h84, docs/research/h84-moe-small-experts.md):
TEGroupedMLP's Fp8Padding / Fp8Unpadding copies of each expert's rows, TE GroupedLinear's per-expert quantization
by scaling recipe, and the launches of the per-expert kernels and GEMMs floored at the device's launch cost."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import estimator
import estimator.compute.te_kernels  # noqa: F401  (registers torch.ops.te.*)
import estimator.compute.te_moe_kernels  # noqa: F401
from estimator.compute.device import (
    COMPUTE_STREAMS,
    GROUPED_LAUNCHES,
    DeviceProfile,
    grouped_launches,
    node_times,
)
from estimator.parallel.layer import capture_parts, fp8_mode
from estimator.parallel.spec import TransformerSpec

SEQ, EP = 256, 8  # a short sequence (the floors bind) and 128 / 8 = 16 local experts
F32 = 4  # the capture's element size
PAD, UNPAD = "te::moe_fp8_pad", "te::moe_fp8_unpad"


def spec():
    m = dict(estimator.resolve_config(["model=qwen3_30b_a3b"])["model"])
    m.update(seq_len=SEQ)
    return TransformerSpec.from_cfg(m)


def layer(fp8, ep=EP):
    return capture_parts(spec(), 1, False, 1, fp8, None, ep, True)["layer"]


def h100():
    return DeviceProfile.from_dict(dict(estimator.resolve_config(["system=dgx_h100"])["device"]))


def test_fp8_pads_each_experts_rows_and_probabilities_and_unpads_fc2s_output():
    s = spec()
    n, h = s.top_k * SEQ, s.hidden  # rows the rank's experts hold (balanced routing)
    w = layer("te")
    pads = Counter((x.op, x.phase) for x in w.nodes if x.op in (PAD, UNPAD))
    # forward: the rows and the [N] probabilities padded, fc2's output unpadded; backward the inverse kernels
    assert pads == {(PAD, "forward"): 2, (UNPAD, "forward"): 1, (UNPAD, "backward"): 2, (PAD, "backward"): 1}
    rows = [x for x in w.nodes if x.op in (PAD, UNPAD) and x.input_shapes[0] == (n, h)]
    assert len(rows) == 4 and all(x.mem_bytes == 2 * n * h * F32 and x.flops == 0 for x in rows)  # one copy in, one out
    for fp8 in (fp8_mode("te", "tensorwise"), fp8_mode("te", "blockwise")):  # every recipe pads (TE Fp8Padding: 16 rows)
        assert Counter(x.op for x in layer(fp8).nodes if x.op in (PAD, UNPAD)) == {PAD: 3, UNPAD: 3}
    assert not [x for x in layer(False).nodes if x.op in (PAD, UNPAD)]  # bf16: no padding


def test_per_expert_kernels_are_floored_at_their_launches():
    dev = h100()
    experts = spec().experts // EP
    floor = dev.launch_s
    for fp8, op, kernels in ((fp8_mode("te", "tensorwise"), "te::fp8_grouped_amax", 3 * experts),  # zero, amax, scale
                             (fp8_mode("te", "tensorwise"), "te::fp8_grouped_cast_transpose", experts),
                             (fp8_mode("te", "blockwise"), "te::fp8_grouped_block_quantize", experts)):
        w = layer(fp8)
        t = node_times(w, dev, "fp8")
        got = [ti for ti, x in zip(t, w.nodes, strict=True) if x.op == op]
        # fc1 / fc2 inputs forward, their output gradients backward; at 256 tokens each expert's slice is far below
        # the floor, so every one of its kernels costs one launch
        assert len(got) == 4 and got == pytest.approx([kernels * floor] * 4)
    w = layer("te")  # delayed scaling: one multi-tensor kernel over the 16 experts, priced by its bytes
    assert [n for n, x in zip(grouped_launches(w), w.nodes, strict=True) if x.op == "te::fp8_multi_cast_transpose"] == [1] * 4
    bf16 = layer(False)
    launches = grouped_launches(bf16)
    gemms = [i for i, x in enumerate(bf16.nodes) if x.op.startswith("te::grouped_linear")]
    assert len(gemms) == 6 and all(launches[i] == -(-experts // COMPUTE_STREAMS) for i in gemms)  # 4 streams
    assert sum(launches) == len(bf16.nodes) + len(gemms) * (launches[gemms[0]] - 1)  # every other op: one launch


def test_dense_layers_and_tiny_expert_counts_keep_one_launch():
    dense = capture_parts(TransformerSpec.from_cfg(dict(estimator.resolve_config(["model=llama3_8b",
                                                                                 "model.fused_kernels=te"])["model"],
                                                        seq_len=SEQ, num_layers=2)), 1, False, 1, "te")["layer"]
    assert (grouped_launches(dense) == 1).all()
    # one local expert: one kernel each, but current scaling's amax op (zero, amax, scale)
    assert {op: f(1) for op, f in GROUPED_LAUNCHES.items() if f(1) != 1} == {"te::fp8_grouped_amax": 3}
    assert GROUPED_LAUNCHES["te::moe_fp8_pad"](128) == 2  # TE's multi-tensor kernels take 64 tensors per launch


def test_tensorwise_moe_layer_costs_more_than_delayed_by_its_per_expert_kernels():
    dev = h100()
    delayed, current = layer("te"), layer(fp8_mode("te", "tensorwise"))
    experts = spec().experts // EP
    grouped = ("te::fp8_multi_cast_transpose", "te::fp8_grouped_cast_transpose", "te::fp8_grouped_amax", "te::fp8_amax")

    def split(w):
        t = node_times(w, dev, "fp8")
        mine = sum(ti for ti, x in zip(t, w.nodes, strict=True) if x.op in grouped)
        return mine, t.sum() - mine

    (d_casts, d_rest), (c_casts, c_rest) = split(delayed), split(current)
    assert c_rest == pytest.approx(d_rest)  # every other op priced as under delayed scaling
    # at 256 tokens every grouped quantize sits at its floor: (3 + 1) x E kernels, 4 times, where delayed scaling runs
    # one multi-tensor kernel each; plus the attention Linears' 4 amax passes (QKV, proj; one launch each here)
    assert c_casts == pytest.approx(4 * 4 * experts * dev.launch_s + 4 * dev.launch_s)
    assert d_casts < 4 * 2 * dev.launch_s


def test_pad_kernels_compute_the_real_result():
    te = torch.ops.te
    x = torch.randn(8, 3, dtype=torch.double, requires_grad=True)
    assert torch.equal(te.moe_fp8_unpad(te.moe_fp8_pad(x, 2), 2), x)
    assert torch.autograd.gradcheck(lambda z: te.moe_fp8_pad(z, 2), (x,))
    assert torch.autograd.gradcheck(lambda z: te.moe_fp8_unpad(z, 2), (x,))
    amax = te.fp8_grouped_amax(x.detach(), 2)
    assert torch.equal(amax, torch.stack([x.detach()[:4].abs().max(), x.detach()[4:].abs().max()]))
