"""An imported multi-device trace and `device` (issue #27): ops that carry FLOPs and bytes are
priced by the device model (an H100 is faster than an A100), a trace with measured durations only
is replayed, and the output says so plainly, in text and JSON, naming where they were measured."""

from __future__ import annotations

import json

import pytest

from estimator import cli
from estimator.workloads import io
from estimator.workloads.graph import Node, Workload
from tests.conftest import REPO

REFERENCE = REPO / "traces" / "reference" / "lenet5_gloo4.workload.json"


def _graph(with_costs: bool) -> Workload:
    nodes, nid = [], 0
    for dev in (0, 1):
        for phase in ("forward", "backward"):
            cost = {"flops": 2e12, "mem_bytes": 4e9} if with_costs else {}
            nodes.append(Node(nid, f"{phase}{dev}", device=dev, op="aten::mm", op_class="matmul", phase=phase,
                              duration_s=0.3, deps=(nid - 1,) if phase == "backward" else (), **cost))
            nid += 1
    nodes.append(Node(nid, "ar", kind="collective", deps=(1, 3), collective="all_reduce", comm_bytes=1e8,
                      group=(0, 1)))
    return Workload("two_gpus", tuple(nodes), devices=2, batch_size=8, capture_device="gpu-trace",
                    source="import:test").validate()


def _estimate(capsys, path, device, text=False):
    args = ["estimate", f"workload={path}", f"device={device}", "fabric=ideal", "fabric.nodes=4"]
    assert cli.run(args if text else [*args, "output=json"]) == 0
    out = capsys.readouterr().out
    return out if text else json.loads(out)


def test_a_trace_with_flops_and_bytes_is_priced_on_each_device(tmp_path, capsys):
    path = io.save(_graph(True), tmp_path / "g.workload.json")
    a100, h100 = (_estimate(capsys, path, d) for d in ("a100", "h100"))
    assert a100["compute_pricing"] == h100["compute_pricing"] == "device model"
    assert "durations_measured_on" not in a100
    assert h100["compute_time_s"] < a100["compute_time_s"] < 0.3  # not the measured 0.3 s per op
    assert "replayed" not in _estimate(capsys, path, "a100", text=True)


def test_a_trace_with_durations_only_is_replayed_and_says_so(tmp_path, capsys):
    path = io.save(_graph(False), tmp_path / "g.workload.json")
    a100, h100 = (_estimate(capsys, path, d) for d in ("a100", "h100"))
    assert a100["compute_time_s"] == h100["compute_time_s"] == pytest.approx(0.6)
    for result, device in ((a100, "a100"), (h100, "h100")):
        assert result["compute_pricing"] == "replayed" and result["durations_measured_on"] == "gpu-trace"
        assert "no FLOPs or bytes" in result["replay_reason"] and device in result["replay_reason"]
    text = _estimate(capsys, path, "h100", text=True)
    assert text.splitlines()[0].startswith("compute") and "replayed (measured on gpu-trace)" in text


def test_the_reference_trace_names_the_cpu_it_was_measured_on(capsys):
    result = _estimate(capsys, REFERENCE, "a100")
    assert (result["compute_pricing"], result["durations_measured_on"]) == ("replayed", "cpu")
    cpu = _estimate(capsys, REFERENCE, "cpu")
    assert cpu["compute_time_s"] == result["compute_time_s"]
    assert "capture device" in cpu["replay_reason"]


def test_a_zoo_capture_is_priced_by_the_device_model(tmp_path, capsys):
    args = ["estimate", "model=lenet5", f"traces_dir={tmp_path}", "output=json"]  # captured first
    assert cli.run([*args, "device=a100"]) == 0
    a100 = json.loads(capsys.readouterr().out)
    assert a100["compute_pricing"] == "device model"
    assert cli.run([*args, "device=cpu"]) == 0
    cpu = json.loads(capsys.readouterr().out)
    assert cpu["compute_pricing"] == "replayed" and cpu["durations_measured_on"] == "cpu"
