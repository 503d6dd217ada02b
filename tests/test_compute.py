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


A100ISH = DeviceProfile.from_dict({
    "name": "g", "peak_flops": 300e12, "peak_flops_fp32": 20e12, "peak_flops_tf32": 150e12, "peak_flops_bf16": None,
    "mem_bw_Bps": 2e12, "compute_efficiency": {"fp16": {"conv": 0.5}, "tf32": {"conv": 0.25}, "matmul": 0.8},
    "memory_efficiency": {"norm": 0.5, "default": 0.8}, "launch_s": 5e-6, "amp_elementwise_fusion": 0.5,
})  # fmt: skip


def test_peaks_and_efficiencies_per_precision_and_class():
    conv = Node(0, "conv", op_class="conv", flops=1e12)
    mm = Node(1, "mm", op_class="matmul", flops=1e12, deps=(0,))
    wl = w(conv, mm)
    fp16, tf32, fp32 = (node_times(wl, A100ISH, p) for p in ("amp", "tf32", "fp32"))
    assert fp16[0] == pytest.approx(1e12 / (300e12 * 0.5)) and fp16[1] == pytest.approx(1e12 / (300e12 * 0.8))
    assert tf32[0] == pytest.approx(1e12 / (150e12 * 0.25)) and tf32[1] == pytest.approx(1e12 / (150e12 * 0.8))
    assert fp32[0] == pytest.approx(1e12 / 20e12)  # no fp32 entry for conv: the default 1.0
    with pytest.raises(EstimatorError, match="device g has no bf16"):
        node_times(wl, A100ISH, "bf16")


def test_launch_floor_fusion_and_fp32_optimizer_state():
    tiny = Node(0, "add", op_class="elementwise", mem_bytes=8.0)
    ew = Node(1, "relu", op_class="elementwise", mem_bytes=1e9, deps=(0,))
    norm = Node(2, "bn", op_class="norm", mem_bytes=1e9, deps=(1,))
    opt = Node(3, "sgd", op_class="optimizer", phase="optimizer", mem_bytes=1e9, deps=(2,))
    amp, fp32 = node_times(w(tiny, ew, norm, opt), A100ISH, "amp"), node_times(w(tiny, ew, norm, opt), A100ISH, "fp32")
    assert amp[0] == fp32[0] == 5e-6  # a kernel is never shorter than its launch
    assert amp[1] == pytest.approx(1e9 * 0.5 * 0.5 / (2e12 * 0.8))  # 16-bit bytes, half fused away
    assert fp32[1] == pytest.approx(1e9 / (2e12 * 0.8))
    assert amp[2] == pytest.approx(1e9 * 0.5 / (2e12 * 0.5))  # per-class memory efficiency
    assert amp[3] == fp32[3] == pytest.approx(1e9 / (2e12 * 0.8))  # fp32 master weights under AMP


def test_bad_efficiency_tables_are_named():
    with pytest.raises(EstimatorError, match="unknown op class 'convs'"):
        DeviceProfile.from_dict({"name": "x", "peak_flops": 1e12, "mem_bw_Bps": 1e9, "compute_efficiency": {"convs": 0.5}})
    with pytest.raises(EstimatorError, match=r"fp16.conv.*\(0, 1\]"):
        DeviceProfile.from_dict({"name": "x", "peak_flops": 1e12, "mem_bw_Bps": 1e9,
                                 "compute_efficiency": {"fp16": {"conv": 1.5}}})  # fmt: skip
