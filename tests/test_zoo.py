"""Model zoo: exact parameter counts and forward FLOPs (PyTorch's counter, meta device)."""

from __future__ import annotations

import pytest

from estimator.config import compose, to_container
from estimator.errors import EstimatorError
from estimator.workloads import zoo
from estimator.workloads.flops import OP_CLASSES, forward_flops, op_class

# model -> (parameters of the reference module, forward GMACs per sample, relative tolerance)
REFERENCE = {
    "resnet50": (25_557_032, 4.089, 0.01),
    "vgg13": (133_047_848, 11.308, 0.01),
    "vgg16": (138_357_544, 15.47, 0.01),
    "mobilenet_v2": (3_504_872, 0.301, 0.02),
    "bert_base": (109_482_240, 11.17, 0.02),
    "bert_large": (335_141_888, 39.46, 0.02),
}


def model_cfg(name: str, *overrides: str) -> dict:
    return to_container(compose([f"model={name}", *(f"model.{o}" for o in overrides)]).model)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_params_and_forward_flops(name):
    params, gmacs, tol = REFERENCE[name]
    model = zoo.build(model_cfg(name), device="meta")
    assert zoo.count_params(model.core) == params
    flops = forward_flops(model, batch=1, core=True)
    assert flops == pytest.approx(2 * gmacs * 1e9, rel=tol)


def test_lenet5_from_layer_shapes():
    model = zoo.build(model_cfg("lenet5"), device="meta")
    convs = 6 * (1 * 25 + 1) + 16 * (6 * 25 + 1)
    fcs = (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)
    assert zoo.count_params(model.module) == convs + fcs == 61_706
    macs = 28 * 28 * 6 * 25 + 10 * 10 * 16 * 6 * 25 + 400 * 120 + 120 * 84 + 84 * 10
    assert forward_flops(model, batch=1, core=True) == 2 * macs == 833_040


def test_flops_scale_with_batch_and_loss_adds_nothing_for_vision():
    model = zoo.build(model_cfg("resnet50"), device="meta")
    one = forward_flops(model, batch=1, core=True)
    assert forward_flops(model, batch=3, core=True) == 3 * one
    assert forward_flops(model, batch=1) == one  # cross-entropy has no FLOP formula


def test_bert_pretraining_heads_and_sequence_length():
    base = zoo.build(model_cfg("bert_base"), device="meta")
    # MLM head (transform + LayerNorm + output bias; decoder tied to word embeddings) + NSP head
    heads = (768 * 768 + 768) + 2 * 768 + 30522 + (768 * 2 + 2)
    assert zoo.count_params(base.module) == 109_482_240 + heads
    assert base.info["seq_len"] == 128
    short = zoo.build(model_cfg("bert_base", "seq_len=64"), device="meta")
    f128, f64 = forward_flops(base, core=True), forward_flops(short, core=True)
    # linear layers scale with the sequence, attention scores with its square
    assert f64 / f128 == pytest.approx(0.5, abs=0.02) and f64 < f128 / 2


def test_vgg_and_resnet_keep_input_size_and_classes():
    small = zoo.build(model_cfg("resnet50", "num_classes=10"), device="meta")
    assert zoo.count_params(small.module) == 25_557_032 - 2049 * 990
    args, labels = small.make_inputs(2, "meta")
    assert tuple(args[0].shape) == (2, 3, 224, 224) and tuple(labels.shape) == (2,)


@pytest.mark.parametrize(
    "cfg, needle",
    [
        ({"name": "nope"}, "unknown architecture 'nope'"),
        ({"name": "x", "arch": "resnet50", "num_classes": 10}, "model.input_size"),
        ({"name": "x", "arch": "resnet50", "num_classes": 0, "input_size": 224}, "model.num_classes"),
        ({"name": "x", "arch": "lenet5", "num_classes": 10, "input_size": 8}, "at least 16"),
        ({"name": ""}, "model.name"),
    ],
)
def test_bad_model_configs_are_one_line_errors(cfg, needle):
    with pytest.raises(EstimatorError, match=needle) as err:
        zoo.build(cfg, device="meta")
    assert "\n" not in str(err.value)


def test_bert_config_errors():
    with pytest.raises(EstimatorError, match="divisible by num_heads"):
        zoo.build(model_cfg("bert_base", "num_heads=5"), device="meta")
    with pytest.raises(EstimatorError, match="exceeds max_position"):
        zoo.build(model_cfg("bert_base", "seq_len=1024"), device="meta")


@pytest.mark.parametrize(
    "op, phase, expected",
    [
        ("aten::conv2d", "forward", "conv"),
        ("aten::convolution_backward", "backward", "conv"),
        ("aten::linear", "forward", "matmul"),
        ("aten::mm", "backward", "matmul"),
        ("aten::native_batch_norm_backward", "backward", "norm"),
        ("aten::layer_norm", "forward", "norm"),
        ("aten::max_pool2d_with_indices_backward", "backward", "pool"),
        ("aten::adaptive_avg_pool2d", "forward", "pool"),
        ("aten::embedding_dense_backward", "backward", "embedding"),
        ("aten::_softmax", "forward", "softmax"),
        ("aten::relu_", "forward", "elementwise"),
        ("aten::threshold_backward", "backward", "elementwise"),
        ("aten::add_", "optimizer", "optimizer"),
        ("aten::view", "forward", "other"),
    ],
)
def test_op_class_mapping(op, phase, expected):
    assert op_class(op, phase) == expected
    assert expected in OP_CLASSES
