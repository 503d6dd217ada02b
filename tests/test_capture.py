"""Capture with torch.profiler: structure, FLOPs, gradient readiness, canonical round trip."""

from __future__ import annotations

import json

import pytest

from estimator import cli
from estimator.config import compose, to_container
from estimator.errors import EstimatorError
from estimator.workloads import io, zoo
from estimator.workloads.capture import capture
from estimator.workloads.flops import OP_CLASSES, forward_flops

TINY_BERT = {
    "name": "tiny_bert", "arch": "bert", "seq_len": 16, "hidden_size": 32, "num_layers": 2,
    "num_heads": 2, "intermediate_size": 64, "vocab_size": 500, "max_position": 64,
}  # fmt: skip


def model_cfg(name: str) -> dict:
    return to_container(compose([f"model={name}"]).model)


def _capture(cfg: dict, batch: int):
    model = zoo.build(cfg)
    workload = capture(model, batch, warmup_iters=1, seed=0, model_cfg=cfg)
    reference = forward_flops(zoo.build(cfg, device="meta"), batch=1)
    param_tensors = [p for p in model.module.parameters() if p.requires_grad]
    return workload, reference, param_tensors


@pytest.fixture(scope="module", params=["lenet5", "resnet50", "tiny_bert"])
def captured(request):
    if request.param == "tiny_bert":
        return request.param, *_capture(TINY_BERT, 2)
    batch = {"lenet5": 4, "resnet50": 1}[request.param]
    return request.param, *_capture(model_cfg(request.param), batch)


def test_structure_phases_and_chain(captured):
    _, w, _, _ = captured
    w.validate()
    assert w.capture_device == "cpu" and w.devices == 1 and w.source.startswith("capture:")
    phases = [n.phase for n in w.nodes]
    assert {"forward", "backward", "optimizer"} == set(phases)
    # execution order: all forward ops, then backward, then the optimizer step
    assert phases == sorted(phases, key=["forward", "backward", "optimizer"].index)
    for i, n in enumerate(w.nodes):
        assert n.id == i and n.deps == ((i - 1,) if i else ())
        assert n.op.startswith("aten::") and n.op_class in OP_CLASSES and n.device == 0
        assert n.scales_with_batch == (n.phase != "optimizer")
        assert n.duration_s is not None and n.duration_s >= 0
    assert all(n.op_class == "optimizer" for n in w.nodes if n.phase == "optimizer")
    assert sum(n.duration_s for n in w.nodes) > 0
    assert w.meta["unmatched_ops"] == 0
    assert w.meta["torch_version"] and w.meta["optimizer"]["momentum"] == 0.9


NESTED = {"aten::convolution", "aten::_convolution", "aten::mkldnn_convolution", "aten::native_batch_norm",
          "aten::_batch_norm_impl_index", "aten::native_layer_norm", "aten::addmm"}  # fmt: skip


def test_no_nested_double_counting(captured):
    _, w, _, _ = captured
    forward_ops = {n.op for n in w.nodes if n.phase == "forward"}
    # kernels nested inside top-level ops (conv2d -> convolution -> ..., linear -> addmm) are not nodes
    assert not forward_ops & NESTED
    assert forward_ops & {"aten::conv2d", "aten::linear"}
    # top-level ops do not overlap, so their measured times fit in the profiled iteration
    assert sum(n.duration_s for n in w.nodes) <= w.meta["iteration_wall_s"]


def test_forward_flops_match_pytorch_counter(captured):
    _, w, reference, _ = captured
    forward = sum(n.flops for n in w.nodes if n.phase == "forward")
    assert forward == pytest.approx(reference * w.batch_size, rel=1e-9)
    assert w.forward_flops == forward
    backward = sum(n.flops for n in w.nodes if n.phase == "backward")
    assert 1.0 * forward < backward <= 2.0 * forward * 1.0001  # dX (not for the input) + dW


def test_gradients_complete_and_ordered(captured):
    name, w, _, params = captured
    assert len(w.gradients) == len(params)
    assert w.params == sum(p.numel() for p in params)
    assert w.gradient_bytes == 4 * w.params
    assert sorted(g.order for g in w.gradients) == list(range(len(params)))
    nodes = w.node_map()
    by_order = sorted(w.gradients, key=lambda g: g.order)
    assert all(nodes[g.ready_node].phase == "backward" for g in by_order)
    ready = [g.ready_node for g in by_order]
    assert ready == sorted(ready)  # readiness follows the backward timeline
    first = {g.name for g in by_order[:4]}
    last = {g.name for g in by_order[-4:]}
    expected_first, expected_last = {
        "lenet5": ("classifier.4.", "features.0."),
        "resnet50": ("fc.", "features.0."),
        "tiny_bert": ("model.cls.", "model.bert.embeddings."),
    }[name]
    assert any(n.startswith(expected_first) for n in first)
    assert any(n.startswith(expected_last) for n in last)


def test_round_trip_through_io(captured, tmp_path):
    _, w, _, _ = captured
    path = io.save(w, tmp_path / "m.workload.json")
    again = io.load(path)
    assert again == w
    assert io.dumps(again) == path.read_text()
    assert not list(tmp_path.glob("*.tmp"))


def test_lenet_bytes_moved_of_first_conv():
    w, _, _ = _capture(model_cfg("lenet5"), 2)
    conv = w.nodes[0]
    assert conv.op == "aten::conv2d" and conv.input_shapes[:3] == ((2, 1, 32, 32), (6, 1, 5, 5), (6,))
    # input + weight + bias + output, float32
    assert conv.mem_bytes == 4 * (2 * 32 * 32 + 6 * 25 + 6 + 2 * 6 * 28 * 28)
    assert conv.flops == 2 * 2 * 28 * 28 * 6 * 25


def test_tied_bert_decoder_has_one_gradient():
    w, _, params = _capture(TINY_BERT, 1)
    names = [g.name for g in w.gradients]
    assert "model.bert.embeddings.word_embeddings.weight" in names
    assert not any("decoder.weight" in n for n in names)  # tied: same tensor as the embeddings
    assert len(names) == len(set(names)) == len(params)
    assert w.meta["seq_len"] == 16


def test_capture_command_writes_trace(tmp_path, capsys):
    code = cli.run(["capture", "model=lenet5", f"traces_dir={tmp_path}", "capture.batch=3", "output=json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    path = tmp_path / "lenet5.workload.json"
    assert result["output"] == str(path) and path.is_file()
    w = io.load(path)
    assert w.batch_size == 3 and result["forward_flops"] == 833_040
    assert w.meta["model"]["name"] == "lenet5"


@pytest.mark.parametrize(
    "override, needle",
    [
        ("capture.batch=0", "capture.batch"),
        ("capture.batch=two", "capture.batch"),
        ("capture.warmup_iters=-1", "capture.warmup_iters"),
        ("model.num_classes=0", "model.num_classes"),
    ],
)
def test_capture_user_errors(tmp_path, override, needle):
    with pytest.raises(EstimatorError, match=needle):
        cli.run(["capture", "model=lenet5", f"traces_dir={tmp_path}", override])
    assert not list(tmp_path.iterdir())


def test_unknown_model_is_one_line_error(tmp_path):
    with pytest.raises(EstimatorError, match="unknown model 'nope'"):
        cli.run(["capture", "model=nope", f"traces_dir={tmp_path}"])


def test_unwritable_traces_dir_is_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(EstimatorError, match="cannot write workload"):
        cli.run(["capture", "model=lenet5", f"traces_dir={blocker}"])
    assert blocker.read_text() == "not a directory"


def test_parameter_without_gradient_is_listed_last():
    import torch
    from torch import nn

    from estimator.workloads.zoo.common import ZooModel, classification_inputs, cross_entropy

    class WithUnused(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(16, 3)
            self.unused = nn.Linear(4, 4)

        def forward(self, x):
            return self.used(x.flatten(1))

    module = WithUnused()
    model = ZooModel("unused", module, classification_inputs(1, 4, 3), cross_entropy, module)
    w = capture(model, 2, warmup_iters=1)
    by_order = sorted(w.gradients, key=lambda g: g.order)
    assert {g.name for g in by_order[-2:]} == {"unused.weight", "unused.bias"}
    last_backward = max(n.id for n in w.nodes if n.phase == "backward")
    assert all(g.ready_node == last_backward for g in by_order[-2:])
    assert w.gradient_bytes == 4 * sum(p.numel() for p in module.parameters())
    assert torch.is_grad_enabled()


def test_recapture_with_unchanged_content_leaves_the_trace_alone(tmp_path, capsys):
    """A second capture of the same model differs only in timings: the file (bytes and mtime) is
    kept, so Snakemake sees nothing new; capture.force=true and a changed batch rewrite it."""
    import os

    args = ["capture", "model=lenet5", f"traces_dir={tmp_path}", "capture.batch=2", "output=json"]
    assert cli.run(args) == 0
    first = json.loads(capsys.readouterr().out)
    path = tmp_path / "lenet5.workload.json"
    assert first["written"] is True
    os.utime(path, (1_000_000_000, 1_000_000_000))  # an old mtime any rewrite would change
    before = path.read_bytes()
    assert cli.run(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["written"] is False
    assert path.read_bytes() == before and path.stat().st_mtime == 1_000_000_000
    assert cli.run([*args, "capture.force=true"]) == 0
    assert json.loads(capsys.readouterr().out)["written"] is True and path.stat().st_mtime > 1_000_000_000
    os.utime(path, (1_000_000_000, 1_000_000_000))
    assert cli.run([*args[:-2], "capture.batch=3", "output=json"]) == 0  # different content
    assert json.loads(capsys.readouterr().out)["written"] is True
    assert io.load(path).batch_size == 3


def test_content_digest_ignores_timings_only():
    from dataclasses import replace

    from estimator.workloads.capture import content_digest

    w, _, _ = _capture(model_cfg("lenet5"), 2)
    retimed = replace(w, nodes=tuple(replace(n, duration_s=(n.duration_s or 0) * 2 + 1e-3) for n in w.nodes),
                      meta={**w.meta, "captured_at": "2000-01-01T00:00:00+00:00", "load_avg_1min": 9.0,
                            "torch_threads": w.meta["torch_threads"] + 3})
    assert content_digest(retimed) == content_digest(w)
    reshaped = replace(w, nodes=(replace(w.nodes[0], flops=w.nodes[0].flops + 1), *w.nodes[1:]))
    assert content_digest(reshaped) != content_digest(w)
    assert content_digest(replace(w, meta={**w.meta, "seed": 1})) != content_digest(w)
