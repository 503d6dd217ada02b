import json

import pytest

from estimator.errors import EstimatorError
from estimator.workloads import io
from estimator.workloads.graph import Node, Workload
from tests.helpers import chain_workload


def test_canonical_form_round_trips_exactly(tmp_path):
    w = chain_workload([1e-3, 2e-3], [3e-3, 4e-3], 5e-4, [4000, 1_000_000])
    w = Workload(**{**w.__dict__, "meta": {"torch": "2.13.0", "nested": {"a": [1, 2.5]}}})
    path = io.save(w, tmp_path / "chain.workload.json")
    back = io.load(path)
    assert back == w
    assert io.dumps(back) == path.read_text()  # byte-identical re-serialisation


def test_multi_device_nodes_round_trip(tmp_path):
    nodes = (
        Node(0, "c0", device=0, flops=1e9, input_shapes=((2, 3), (3, 4))),
        Node(1, "ar", kind="collective", deps=(0,), collective="all_reduce", comm_bytes=1e6, group=(0, 1)),
        Node(2, "send", kind="p2p", deps=(1,), src=1, dst=0, comm_bytes=4096.0, attrs={"tag": 7}),
    )
    w = Workload("multi", nodes, devices=2, batch_size=8).validate()
    assert io.load(io.save(w, tmp_path / "m.workload.json")) == w


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["nodes"][1].update(deps=[99]), "missing node 99"),
        (lambda d: d["nodes"][0].update(deps=[3]), "cycle"),
        (lambda d: d["nodes"][0].update(flops=-1.0), "flops must be a non-negative"),
        (lambda d: d["nodes"][0].update(kind="teleport"), "unknown kind"),
        (lambda d: d.update(format="other"), "not an estimator workload"),
        (lambda d: d["nodes"][0].update(bogus=1), "unknown field"),
    ],
)
def test_inconsistent_files_are_rejected_with_one_line(tmp_path, mutate, message):
    w = chain_workload([1e-3], [1e-3, 1e-3], 1e-4, [400, 800])
    data = w.to_dict()
    mutate(data)
    path = tmp_path / "bad.workload.json"
    path.write_text(json.dumps(data))
    with pytest.raises(EstimatorError) as exc:
        io.load(path)
    text = str(exc.value)
    assert message in text and str(path) in text and "\n" not in text


def test_truncated_file_is_a_clear_error(tmp_path):
    w = chain_workload([1e-3], [1e-3], 1e-4, [400])
    path = io.save(w, tmp_path / "t.workload.json")
    path.write_text(path.read_text()[:-20])
    with pytest.raises(EstimatorError, match="not valid JSON"):
        io.load(path)


def test_scaling_to_batch_scales_only_batch_proportional_nodes():
    w = chain_workload([1e-3], [2e-3], 5e-4, [400], batch=2)
    big = w.scaled_to_batch(8)
    assert big.batch_size == 8
    assert big.nodes[0].duration_s == pytest.approx(4e-3)
    assert big.nodes[1].flops == pytest.approx(4 * w.nodes[1].flops)
    assert big.nodes[2].duration_s == w.nodes[2].duration_s  # optimizer does not scale
    assert big.gradients == w.gradients


def test_save_failure_leaves_no_partial_file(tmp_path):
    w = chain_workload([1e-3], [1e-3], 1e-4, [400])
    bad = Workload(**{**w.__dict__, "meta": {"x": float("nan")}})
    with pytest.raises(ValueError):
        io.save(bad, tmp_path / "x.workload.json")
    assert list(tmp_path.iterdir()) == []


def test_weight_bytes_do_not_scale_with_the_batch():
    """A GEMM captured at batch 1: its 4 MiB weight is read once at any batch; only activations scale."""
    gemm = Node(0, "aten::linear", op_class="matmul", phase="forward", flops=2.0 * 128 * 1024 * 1024,
                mem_bytes=4 * 2**20 + 1 * 2**20, weight_bytes=4 * 2**20, scales_with_batch=True)  # fmt: skip
    w = Workload("g", (gemm,), batch_size=1).validate()
    big = w.scaled_to_batch(256).nodes[0]
    assert big.mem_bytes == 4 * 2**20 + 256 * 2**20  # not 256 x 5 MiB
    assert big.weight_bytes == 4 * 2**20 and big.flops == 256 * gemm.flops
    again = Workload.from_dict(w.to_dict())
    assert again == w and again.nodes[0].weight_bytes == 4 * 2**20


def test_version_1_files_still_load_and_weight_bytes_are_checked():
    w = chain_workload([1e-3], [1e-3], 1e-4, [400])
    old = w.to_dict()
    old["format_version"] = 1
    assert Workload.from_dict(old).nodes == w.nodes  # no weight_bytes: everything scales, as before
    bad = Node(0, "x", mem_bytes=1.0, weight_bytes=2.0)
    with pytest.raises(EstimatorError, match="weight_bytes"):
        Workload("b", (bad,)).validate()
