import pytest

from estimator.compute.device import DeviceProfile, node_times
from estimator.errors import EstimatorError
from estimator.workloads.graph import Node, Workload

GPU = DeviceProfile(name="g", peak_flops=100e12, peak_flops_fp32=10e12, mem_bw_Bps=1e12,
                    compute_efficiency=0.5, memory_efficiency=0.5)


def w(*nodes):
    return Workload("w", tuple(nodes)).validate()


def test_roofline_picks_the_binding_resource_and_precision():
    conv = Node(0, "conv", op_class="conv", flops=1e12, mem_bytes=1e9, duration_s=9.0)
    relu = Node(1, "relu", op_class="elementwise", mem_bytes=1e9, duration_s=9.0, deps=(0,))
    view = Node(2, "t", op_class="other", duration_s=9.0, deps=(1,))
    amp = node_times(w(conv, relu, view), GPU, "amp")
    fp32 = node_times(w(conv, relu, view), GPU, "fp32")
    assert amp[0] == pytest.approx(1e12 / 50e12)  # compute bound on tensor cores
    assert fp32[0] == pytest.approx(1e12 / 5e12)  # fp32 peak
    assert amp[1] == pytest.approx(0.5e9 / 0.5e12)  # 16-bit bytes at half the fp32 capture's
    assert fp32[1] == pytest.approx(1e9 / 0.5e12)
    assert amp[2] == 0.0  # a view costs nothing; its CPU time is not replayed on a GPU


def test_replay_device_and_duration_only_graphs_use_measured_times():
    cpu = DeviceProfile(name="cpu", peak_flops=1e9, mem_bw_Bps=1e9, replay=True)
    conv = Node(0, "conv", op_class="conv", flops=1e12, duration_s=0.25)
    assert node_times(w(conv), cpu)[0] == 0.25
    task = Node(0, "fwd", duration_s=0.125)  # e.g. a TopoOpt task with only a measured time
    assert node_times(w(task), GPU)[0] == 0.125


def test_bad_device_and_precision_are_one_line_errors():
    with pytest.raises(EstimatorError, match="mem_bw_Bps"):
        DeviceProfile(name="x", peak_flops=1e12, mem_bw_Bps=-1)
    with pytest.raises(EstimatorError, match="unknown parameter"):
        DeviceProfile.from_dict({"name": "x", "peak_flops": 1e12, "mem_bw_Bps": 1e9, "warp": 1})
    with pytest.raises(EstimatorError, match="precision"):
        node_times(w(Node(0, "a", flops=1.0)), GPU, "fp8")
