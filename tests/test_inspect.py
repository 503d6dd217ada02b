"""``estimator inspect``: summary numbers, comm volume rule, capture-on-demand, errors."""

from __future__ import annotations

import json

import pytest

from estimator import cli
from estimator.errors import EstimatorError
from estimator.workloads import io
from estimator.workloads.graph import Gradient, Node, Workload


def run_json(capsys, *args: str) -> tuple[dict, str]:
    assert cli.run(["inspect", *args, "output=json"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_captures_when_missing_then_reuses(tmp_path, capsys):
    result, err = run_json(capsys, "model=lenet5", f"traces_dir={tmp_path}")
    assert "capturing model lenet5" in err
    assert (tmp_path / "lenet5.workload.json").is_file()
    assert result["params"] == 61_706
    assert result["forward_flops"] == 833_040  # per sample
    assert result["gradients"] == 10 and result["gradient_bytes"] == 4 * 61_706
    assert result["comm_bytes"] == result["gradient_bytes"]  # data-parallel all-reduce volume
    assert set(result["by_phase"]) == {"forward", "backward", "optimizer"}
    for table in ("by_phase", "by_op_class"):
        rows = result[table].values()
        assert sum(r["ops"] for r in rows) == result["ops"]
        assert sum(r["flops"] for r in rows) == pytest.approx(result["flops"])
    assert result["by_op_class"]["conv"]["flops"] > 0

    again, err = run_json(capsys, "model=lenet5", f"traces_dir={tmp_path}")
    assert err == "" and again["ops"] == result["ops"]


def _graph() -> Workload:
    nodes = (
        Node(0, "fwd", op="matmul", op_class="matmul", phase="forward", flops=4e9, duration_s=0.5),
        Node(1, "fwd1", device=1, op="matmul", op_class="matmul", phase="forward", flops=4e9),
        Node(
            2, "ar", kind="collective", deps=(0, 1), collective="all_reduce", comm_bytes=1000.0, group=(0, 1)
        ),
        Node(3, "send", kind="p2p", deps=(2,), src=0, dst=1, comm_bytes=24.0),
    )
    grads = (Gradient("w", 400, 0, 0),)
    return Workload(
        "graph", nodes, source="test", devices=2, batch_size=2, forward_flops=8e9, gradients=grads
    )


def test_workload_path_with_collectives(tmp_path, capsys):
    path = io.save(_graph(), tmp_path / "g.workload.json")
    result, err = run_json(capsys, f"workload={path}")
    assert err == ""
    assert result["comm_bytes"] == 1024  # collective + p2p bytes, not the gradient bytes
    assert result["gradient_bytes"] == 400
    assert result["forward_flops"] == 4e9 and result["devices"] == 2
    assert result["ops"] == 2 and result["nodes"] == 4
    assert result["by_kind"]["collective"]["mem_bytes"] == 1000
    assert result["measured_compute_s"] == 0.5


def test_text_output(tmp_path, capsys):
    path = io.save(_graph(), tmp_path / "g.workload.json")
    assert cli.run(["inspect", f"workload={path}"]) == 0
    text = capsys.readouterr().out
    assert "forward FLOPs   4.0000 G per sample" in text
    assert "1,024 per iteration (collective+p2p nodes)" in text
    assert "node kind" in text


@pytest.mark.parametrize("content, needle", [(None, "no such workload file"), ("{oops", "not valid JSON")])
def test_bad_workload_files(tmp_path, content, needle):
    path = tmp_path / "bad.workload.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(EstimatorError, match=needle):
        cli.run(["inspect", f"workload={path}"])
