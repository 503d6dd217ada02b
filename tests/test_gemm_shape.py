"""GEMM efficiency by shape (estimator.compute.gemm_shape) and its use in node_times."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from estimator.compute import gemm_shape as gs
from estimator.compute.device import DeviceProfile, node_times, shape_factors
from estimator.errors import EstimatorError
from estimator.workloads.graph import Node, Workload

BF16 = gs.ShapeModel(e_inf=0.932, k0=1016)  # h35 4b, H100 BF16 (S2)
FP8 = gs.ShapeModel(e_inf=0.715, k0=610)  # h66 least squares, H100 FP8 cuBLASLt (h35 S3)
H100 = dict(name="h", peak_flops=989e12, peak_flops_bf16=989e12, peak_flops_fp8=1979e12, mem_bw_Bps=3.35e12,
            sm_count=132, compute_efficiency={"bf16": {"matmul": 0.8}, "fp8": {"matmul": 0.7},
                                              "fp16": {"matmul": 0.6}})
SHAPE = {"bf16": {"e_inf": 0.932, "k0": 1016}, "fp8": {"e_inf": 0.732, "k0": 728}}
A100 = gs.ShapeModel(e_inf=0.843, k0=258)  # h66 least squares, A100 SXM FP16 cuBLASLt (h35 S3)
# Azure/AI-benchmarking-guide@8fd0c6e1 Azure_Results/ND_A100_v4_results.md:24-31 (FP16) and ND_H100_v5_results.md:24-32
# (FP8), superbench cublaslt_gemm: (M, N, K) -> TFLOP/s, the points of at least one full wave (1024^3 left out), with
# the least-squares fit's pred / meas (docs/research/h66-gemm-lsq.md, conf/device/a100.yaml, h100.yaml)
S3_A100 = {(2048, 2048, 2048): (221.8, 0.898), (4096, 4096, 4096): (228.0, 1.029), (8192, 8192, 8192): (253.7, 1.003),
           (16384, 16384, 16384): (256.5, 1.008), (1024, 2145, 1024): (132.8, 1.090),
           (6144, 12288, 12288): (250.8, 1.019), (802816, 192, 768): (157.8, 0.929)}
S3_H100_FP8 = {(2048, 2048, 2048): (1011.3, 1.045), (4096, 4096, 4096): (1216.9, 0.981),
               (8192, 8192, 8192): (1290.1, 0.989), (16384, 16384, 16384): (1377.3, 0.983),
               (32768, 32768, 32768): (1382.2, 1.003), (1024, 2145, 1024): (410.7, 1.096),
               (6144, 12288, 12288): (1351.4, 0.994), (802816, 192, 768): (663.8, 0.882)}
TINY_BERT = {"name": "tiny_bert", "arch": "bert", "seq_len": 16, "hidden_size": 32, "num_layers": 2,
             "num_heads": 2, "intermediate_size": 64, "vocab_size": 500, "max_position": 64}


@pytest.fixture(scope="module")
def tiny_bert():
    """A zoo BERT (the bert_large workload's architecture) captured at batch 2, 16 tokens a sequence."""
    from estimator.workloads import zoo
    from estimator.workloads.capture import capture

    return capture(zoo.build(TINY_BERT), 2, warmup_iters=0, seed=0, model_cfg=TINY_BERT)


def test_reproduces_h35_derived_numbers():
    one_tile = replace(BF16, tiles=((128, 256),))
    # h35 5a (128x256 tiles by hand): QKV forward of hidden 2048 / 4096 at M = 16384
    assert gs.shape_factor(one_tile, 132, 1, 16384, 6144, 2048) == pytest.approx(0.604, abs=5e-4)
    assert gs.shape_factor(one_tile, 132, 1, 16384, 12288, 4096) == pytest.approx(0.739, abs=1e-3)  # h35 rounds W and the K term first
    # h35's appendix script over all three tiles: 128x128 fills 47 waves of 132 SMs better than 128x256's 24
    assert gs.shape_factor(BF16, 132, 1, 16384, 6144, 2048) == pytest.approx(0.932 * 6144 / 6204 * 2048 / 3064, rel=1e-9)
    assert gs.shape_factor(BF16, 132, 1, 16384, 12288, 4096) == pytest.approx(0.7395, abs=5e-4)
    # the fit points themselves (h35 4b) and checks of 4c, TFLOP/s
    assert gs.shape_factor(BF16, 132, 1, 4096, 4096, 4096) * 989 == pytest.approx(716, rel=2e-3)
    assert gs.shape_factor(BF16, 132, 1, 8192, 8192, 8192) * 989 == pytest.approx(795, rel=2e-3)
    h35_fp8 = gs.ShapeModel(e_inf=0.732, k0=728)  # h35 4b's two-point FP8 pair (S3), replaced by h66's fit
    assert gs.shape_factor(h35_fp8, 132, 1, 16384, 16384, 16384) * 1979 == pytest.approx(1377.3, rel=2e-3)
    assert gs.shape_factor(h35_fp8, 132, 1, 802816, 192, 768) * 1979 == pytest.approx(552, abs=1)


def test_split_k_only_above_min_split_k():
    m = replace(BF16, tiles=((128, 128),))
    # 256 x 256 output = 4 CTAs on 132 SMs: split-K 8 would help, but K / 8 = 128 < 256 leaves only s = 2
    four = gs.shape_factor(m, 132, 1, 256, 256, 512)
    assert four == pytest.approx(0.932 * 8 / 132 * 256 / (256 + 1016))
    assert gs.shape_factor(m, 132, 1, 256, 256, 8192) == pytest.approx(0.932 * 32 / 132 * 1024 / (1024 + 1016))


def test_gemm_dims_of_every_op_kind():
    assert gs.gemm_dims("aten::linear", ((4096, 1, 2048), (5120, 2048), ())) == (1, 4096, 5120, 2048)
    assert gs.gemm_dims("aten::mm", ((128, 4096), (4096, 2048))) == (1, 128, 2048, 4096)
    assert gs.gemm_dims("aten::addmm", ((30,), (64, 8), (8, 30))) == (1, 64, 30, 8)
    assert gs.gemm_dims("aten::bmm", ((12, 64, 32), (12, 32, 64))) == (12, 64, 64, 32)
    assert gs.gemm_dims("te::router_gemm", ((4096, 2048), (128, 2048))) == (1, 4096, 128, 2048)
    assert gs.gemm_dims("te::grouped_linear", ((32768, 2048), (8, 1536, 2048))) == (8, 4096, 1536, 2048)
    assert gs.gemm_dims("te::grouped_linear_dgrad", ((32768, 1536), (8, 1536, 2048))) == (8, 4096, 2048, 1536)
    wgrad = ((32768, 1536), (32768, 2048), ())
    assert gs.gemm_dims("te::grouped_linear_wgrad", wgrad) is None  # its expert count has no shape
    assert gs.gemm_dims("te::grouped_linear_wgrad", wgrad, groups=8) == (8, 1536, 2048, 4096)
    assert gs.gemm_dims("aten::matmul", ((1, 16, 128, 64), (1, 16, 64, 128))) == (16, 128, 128, 64)
    assert gs.gemm_dims("aten::matmul", ((8, 128, 1024), (1024, 4096))) == (1, 1024, 4096, 1024)
    assert gs.gemm_dims("aten::einsum", ((4, 4), (4, 4))) is None


def _mm(shapes, op="aten::mm", attrs=None, i=0, phase="backward"):
    dims = gs.gemm_dims(op, shapes, 8)
    return Node(id=i, name=op, op=op, op_class="matmul", phase=phase, flops=2.0 * math.prod(dims),
                input_shapes=shapes, scales_with_batch=True, attrs=attrs or {})


def test_capture_tags_the_token_dim_and_batch_scaling_follows_it():
    # one sequence of 4096 tokens = hidden 4096: dgrad and wgrad of the 4096 -> 14336 Linear have the same shapes
    shapes = ((4096, 4096), (4096, 14336))
    dgrad_tag = gs.token_attrs("aten::mm", shapes, ((8192, 4096), (4096, 14336)))
    wgrad_tag = gs.token_attrs("aten::mm", shapes, ((4096, 8192), (8192, 14336)))
    assert (dgrad_tag, wgrad_tag) == ({"gemm_tokens": "M"}, {"gemm_tokens": "K"})
    w = Workload("w", (_mm(shapes, attrs=dgrad_tag), _mm(shapes, attrs=wgrad_tag, i=1)))
    one, two = w.nodes, w.scaled_to_batch(2).nodes
    assert gs.node_dims(one[0]) == gs.node_dims(one[1]) == (1, 4096, 14336, 4096)
    assert gs.node_dims(two[0]) == (1, 8192, 14336, 4096)
    assert gs.node_dims(two[1]) == (1, 4096, 14336, 8192)
    # without the tag a scaled plain mm cannot be read (flat efficiency), a linear can (tokens are its rows)
    assert gs.node_dims(replace(two[0], attrs={})) is None
    lin = _mm(((4096, 1, 4096), (6144, 4096), ()), op="aten::linear", phase="forward")
    assert gs.node_dims(Workload("l", (lin,)).scaled_to_batch(3).nodes[0]) == (1, 3 * 4096, 6144, 4096)


def test_captured_dense_layer_scales_with_micro_batch():
    """Llama 3 8B at cp 2 (the calibration rows' layer): every GEMM is readable, and at micro-batch 2 exactly
    the token dim doubles: M of the forward and data-gradient GEMMs, K of the weight-gradient ones."""
    from estimator.config import compose_plain
    from estimator.parallel.layer import capture_parts
    from estimator.parallel.spec import TransformerSpec

    cfg = compose_plain(["model=llama3_8b"])
    if cfg is None:
        from omegaconf import OmegaConf

        from estimator.config import compose
        cfg = OmegaConf.to_container(compose(["model=llama3_8b"]), resolve=True)
    layer = capture_parts(TransformerSpec.from_cfg(cfg["model"]), 1, False, 2)["layer"]
    gemms = [n for n in layer.nodes if n.op_class == "matmul"]
    scaled = [n for n in layer.scaled_to_batch(2).nodes if n.op_class == "matmul"]
    assert len(gemms) == 12  # 4 Linears x (forward, dgrad, wgrad)
    grown = []
    for a, b in zip(gemms, scaled, strict=True):
        da, db = gs.node_dims(a), gs.node_dims(b)
        changed = [d for d, x, y in zip(gs.DIMS, da, db, strict=True) if x != y]
        assert len(changed) == 1 and db[gs.DIMS.index(changed[0])] == 2 * da[gs.DIMS.index(changed[0])] == 8192
        grown.append((a.phase, a.op, changed[0]))
    assert grown.count(("forward", "aten::linear", "M")) == 4
    assert grown.count(("backward", "aten::mm", "M")) == grown.count(("backward", "aten::mm", "K")) == 4
    dev = DeviceProfile.from_dict({**H100, "matmul_shape": SHAPE})
    t1 = node_times(layer.scaled_to_batch(2), dev, "bf16")
    flat = node_times(layer.scaled_to_batch(2), DeviceProfile.from_dict(H100), "bf16")
    is_gemm = [n.op_class == "matmul" for n in layer.nodes]
    assert all((a > b) == g for a, b, g in zip(t1, flat, is_gemm, strict=True) if g) and t1.sum() > flat.sum()


def test_grouped_experts_pool_their_waves():
    fwd = _mm(((32768, 2048), (8, 1536, 2048)), op="te::grouped_linear", phase="forward")
    wgrad = _mm(((32768, 1536), (32768, 2048), ()), op="te::grouped_linear_wgrad", i=1)
    groups = gs.expert_groups((fwd, wgrad))
    assert groups == 8
    assert gs.node_dims(fwd, groups) == (8, 4096, 1536, 2048)
    assert gs.node_dims(wgrad, groups) == (8, 1536, 2048, 4096)
    # 8 experts x 32 x 6 tiles of 128x256 = 1536 CTAs: 12 waves of 132 with one partial (one expert alone: 2 of 2)
    pooled = gs.shape_factor(replace(BF16, tiles=((128, 256),), splits=(1,)), 132, 8, 4096, 1536, 2048)
    alone = gs.shape_factor(replace(BF16, tiles=((128, 256),), splits=(1,)), 132, 1, 4096, 1536, 2048)
    assert pooled == pytest.approx(0.932 * 1536 / 1584 * 2048 / 3064)
    assert alone == pytest.approx(0.932 * 192 / 264 * 2048 / 3064)
    # scaled to micro-batch 2: each expert's rows double (forward M, weight-gradient K)
    two = Workload("g", (fwd, wgrad)).scaled_to_batch(2).nodes
    assert gs.node_dims(two[0], groups) == (8, 8192, 1536, 2048)
    assert gs.node_dims(two[1], groups) == (8, 1536, 2048, 8192)
    dev = DeviceProfile.from_dict({**H100, "matmul_shape": SHAPE})
    t = node_times(Workload("g", (fwd, wgrad)), dev, "bf16")
    assert t[0] == pytest.approx(fwd.flops / (989e12 * 0.8 * gs.shape_factor(BF16, 132, 8, 4096, 1536, 2048)))


def test_devices_and_precisions_without_the_block_price_as_before():
    w = Workload("w", (_mm(((4096, 1, 4096), (6144, 4096), ()), op="aten::linear", phase="forward"),))
    with_shape = DeviceProfile.from_dict({**H100, "matmul_shape": {"bf16": SHAPE["bf16"]}})
    without = DeviceProfile.from_dict(H100)
    flat = w.nodes[0].flops / (989e12 * 0.8)
    assert node_times(w, without, "bf16")[0] == pytest.approx(flat)
    assert node_times(w, with_shape, "fp16")[0] == node_times(w, without, "fp16")[0]  # fp16 not declared
    assert node_times(w, with_shape, "fp8")[0] == node_times(w, without, "fp8")[0]  # nor fp8 here
    assert node_times(w, with_shape, "bf16")[0] == pytest.approx(flat / gs.shape_factor(BF16, 132, 1, 4096, 6144, 4096))


def test_unread_matmul_gets_the_declared_factor():
    """An op whose GEMM dims cannot be read (an einsum) is priced at c x ``unread`` (the shipped H100: the flat
    fraction fitted before the shape model), a readable one at c x its shape factor."""
    w = Workload("w", (Node(id=0, name="aten::einsum", op="aten::einsum", op_class="matmul", phase="forward",
                            flops=2.0 * 4096**3, input_shapes=((), (4096, 4096), (4096, 4096))),))
    shape = {"bf16": {**SHAPE["bf16"], "unread": 0.5}}
    dev = DeviceProfile.from_dict({**H100, "matmul_shape": shape})
    flat = w.nodes[0].flops / (989e12 * 0.8)
    assert node_times(w, dev, "bf16")[0] == pytest.approx(flat / 0.5)
    from estimator.config import compose

    h100 = DeviceProfile.from_dict(dict(compose(["device=h100"])["device"]))
    for prec, before in (("bf16", 0.5888), ("fp8", 0.481)):
        model = dict(h100.matmul_shape)[prec]
        assert h100.efficiency("compute_efficiency", "matmul", prec) * model.unread == pytest.approx(before, abs=5e-4)
    a100 = DeviceProfile.from_dict(dict(compose(["device=a100"])["device"]))
    for prec in ("fp16", "bf16"):  # bf16 copies fp16's flat 0.676 (bertl-dgxa100-amp-1gpu), so its unread too
        model = dict(a100.matmul_shape)[prec]
        assert a100.efficiency("compute_efficiency", "matmul", prec) * model.unread == pytest.approx(0.676, abs=5e-4)


def test_shipped_devices():
    from estimator.config import compose

    def device(name):
        return DeviceProfile.from_dict(dict(compose([f"device={name}"])["device"]))

    for name in ("h100", "h200", "h800", "h100_gt"):
        assert dict(device(name).matmul_shape) == {"bf16": replace(BF16, unread=0.766),
                                                   "fp8": replace(FP8, unread=0.629)}, name
    assert dict(device("a100").matmul_shape) == {"fp16": replace(A100, unread=0.720),
                                                 "bf16": replace(A100, unread=0.720)}
    assert device("v100").matmul_shape is None


@pytest.mark.parametrize("shape, message", [
    ({"bf16": {"e_inf": 1.2, "k0": 1016}}, r"bf16\.e_inf must be a number in \(0, 1\]"),
    ({"bf16": {"e_inf": 0.9, "k0": -5}}, r"bf16\.k0 must be a number in \[0, inf\)"),
    ({"bf16": {"e_inf": 0.9}}, r"bf16 must be \{e_inf: \.\., k0: \.\., unread: \.\.\}"),
    ({"bf16": {"e_inf": 0.9, "k0": 1, "unread": 0}}, r"bf16\.unread must be a number in \(0, 1\]"),
    ({"bf61": {"e_inf": 0.9, "k0": 1}}, r"unknown key 'bf61'"),
    ({"tiles": [[128]], "bf16": {"e_inf": 0.9, "k0": 1}}, r"tiles entries must be \[tm, tn\]"),
    ({"splits": [2, 4], "bf16": {"e_inf": 0.9, "k0": 1}}, r"splits must include 1"),
])
def test_bad_values_are_one_line_errors(shape, message):
    with pytest.raises(EstimatorError, match=message) as err:
        DeviceProfile.from_dict({**H100, "matmul_shape": shape})
    assert "\n" not in str(err.value)


def test_needs_sm_count():
    with pytest.raises(EstimatorError, match="needs device.sm_count"):
        DeviceProfile.from_dict({**H100, "sm_count": None, "matmul_shape": SHAPE})


def test_generic_capture_tags_its_gemms(tiny_bert):
    """A zoo model's capture (tiny BERT at batch 2, 16 tokens a sequence) tags every readable GEMM with its token
    dim: so at batch 6 the backward mm's of a Linear grow M (data gradient) or K (weight gradient), never both."""
    w = tiny_bert
    mms = [n for n in w.nodes if n.op == "aten::mm" and n.phase == "backward"]
    assert mms and all(gs.node_dims(n) for n in mms)
    tags = [n.attrs.get("gemm_tokens") for n in mms if max(gs.node_dims(n)[1:]) >= 32]  # not the 1-row pooler
    assert set(tags) == {"M", "K"} and tags.count("M") == tags.count("K")
    six = w.scaled_to_batch(6).node_map()
    for a in (n for n in mms if n.attrs.get("gemm_tokens")):
        changed = [x != y for x, y in zip(gs.node_dims(a), gs.node_dims(six[a.id]), strict=True)]
        assert sum(changed) == 1 and changed[gs.DIMS.index(a.attrs["gemm_tokens"])]


def _rel_rms(model, sms, peak, points):
    """RMS of pred / meas - 1 over ``{(M, N, K): (TFLOP/s, ..)}`` at c = 1."""
    return math.sqrt(sum((gs.shape_factor(model, sms, 1, *mnk) * peak / t[0] - 1) ** 2 for mnk, t in points.items())
                     / len(points))


@pytest.mark.parametrize("model, sms, peak, points, rms, h35", [
    (A100, 108, 312, S3_A100, 0.0595, gs.ShapeModel(e_inf=0.833, k0=183)),
    (FP8, 132, 1979, S3_H100_FP8, 0.0571, gs.ShapeModel(e_inf=0.732, k0=728)),
])
def test_least_squares_constants_fit_their_source(model, sms, peak, points, rms, h35):
    """h66: the shipped e_inf / k0 reproduce every full-wave point of their source at the stated pred / meas (+-0.005),
    with the stated RMS, lower than h35's two-point pair on the same points, and no k0 in 0-2000 (each with its best
    e_inf, closed form) does better by more than the constants' rounding."""
    for mnk, (measured, ratio) in points.items():
        assert gs.shape_factor(model, sms, 1, *mnk) * peak / measured == pytest.approx(ratio, abs=5e-3), mnk
    assert _rel_rms(model, sms, peak, points) == pytest.approx(rms, abs=5e-4)
    assert _rel_rms(h35, sms, peak, points) > rms + 5e-3

    def best(k0):
        x = [gs.shape_factor(gs.ShapeModel(1.0, k0), sms, 1, *mnk) * peak / t for mnk, (t, _) in points.items()]
        return _rel_rms(gs.ShapeModel(sum(x) / sum(v * v for v in x), k0), sms, peak, points)
    assert min(best(k0) for k0 in range(0, 2001, 4)) > rms - 2e-4


def test_a100_constants_layer_table():
    """h35 5b's layer table on A100 SXM FP16 (108 SMs, c = 1) at h66's constants, and the S1 BF16 point (measured
    271.2 TFLOP/s, predicted 247.3; h35's pair: 247.8)."""
    assert gs.shape_factor(A100, 108, 1, 1024, 10240, 5120) * 312 == pytest.approx(247.3, abs=0.1)

    def layer(h, tokens):  # QKV, proj, fc1, fc2; forward, data and weight gradient; FLOP-weighted
        gemms = [g for k, n in ((h, 3 * h), (h, h), (h, 4 * h), (4 * h, h))
                 for g in ((tokens, n, k), (tokens, k, n), (k, n, tokens))]
        return sum(2 * math.prod(g) for g in gemms) / sum(2 * math.prod(g) / gs.shape_factor(A100, 108, 1, *g)
                                                         for g in gemms)
    for h, want in ((768, 0.6895), (1024, 0.7196), (2048, 0.7850), (4096, 0.8129)):  # h35's pair: 0.712 ... 0.811
        assert layer(h, 16384) == pytest.approx(want, abs=5e-4), h
    assert layer(1024, 32768) == pytest.approx(0.7408, abs=5e-4)  # bertl-dgxa100-amp-1gpu's Linears (h35 6: 0.7576)


def test_bert_gemms_are_read_on_a100(tiny_bert):
    """Every matmul-class op of the BERT capture (linear, the attention matmul / bmm, the backward mm's) has readable
    dims at the calibration row's micro-batch, so A100 fp16 prices each by its shape, none at ``unread``; tf32 (no
    matmul_shape) stays one flat fraction."""
    from estimator.config import compose

    spec = dict(compose(["device=a100"])["device"])
    a100, without = DeviceProfile.from_dict(spec), DeviceProfile.from_dict({**spec, "matmul_shape": None})
    w = tiny_bert.scaled_to_batch(256)
    gemms = [n for n in w.nodes if n.op_class == "matmul"]
    assert {gs._name(n.op) for n in gemms} >= {"linear", "mm", "matmul", "bmm"}
    assert all(gs.node_dims(n) is not None for n in gemms)
    classes = [n.op_class for n in w.nodes]
    factors = [f for f, c in zip(shape_factors(w, a100, "amp", classes), classes, strict=True) if c == "matmul"]
    assert len(factors) == len(gemms) and all(f != dict(a100.matmul_shape)["fp16"].unread for f in factors)
    assert (node_times(w, a100, "amp") != node_times(w, without, "amp")).any()
    assert (node_times(w, a100, "tf32") == node_times(w, without, "tf32")).all()


def test_bad_a100_block_is_a_one_line_error():
    from estimator.config import compose

    a100 = dict(compose(["device=a100"])["device"])
    with pytest.raises(EstimatorError, match=r"device.matmul_shape \(a100\).fp16.k0 must be a number") as err:
        DeviceProfile.from_dict({**a100, "matmul_shape": {"fp16": {"e_inf": 0.843, "k0": "258"}}})
    assert "\n" not in str(err.value)
