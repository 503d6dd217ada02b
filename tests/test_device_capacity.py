"""The capacity a layout must fit: the device's usable memory, not its datasheet GB (round h83).

usable = (memory_bytes x memory_visible_ratio - memory_reserved_bytes) x (1 - allocator_fragmentation)
(estimator/compute/device.py ``usable_memory_bytes``; the values and their sources: conf/device/h100.yaml, a100.yaml;
docs/research/h83-capacity.md).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.parallel.estimate import setup_hybrid, validate_hybrid
from estimator.parallel.memory import memory

# Mixtral 8x7B with top-4 routing on 2,048 A100 80GB: 80.6 GB per GPU, over the datasheet's 80 GB and under the
# 84.01 GB a process can allocate (tests/test_llm_groups.py uses the same layout).
EDGE = ["model=mixtral_8x7b", "model.fused_kernels=none", "parallelism=hybrid", "system=dgx_a100", "fabric.nodes=256",
        "parallelism.tp=2", "parallelism.pp=4", "parallelism.ep=8", "parallelism.global_batch=512",
        "parallelism.sequence_parallel=true", "parallelism.recompute=none", "model.experts_top_k=4"]
DATASHEET = ["device.memory_visible_ratio=1.0", "device.memory_reserved_bytes=0"]


def device(*overrides: str) -> DeviceProfile:
    return DeviceProfile.from_dict(dict(estimator.resolve_config(list(overrides))["device"]))


def test_usable_memory_of_the_presets():
    # H100 SXM5 80GB: CUDA reports 81559 MiB = 85,520,809,984 B (80e9 x 1.069 = 85.52e9); less the CUDA context
    # (0.5e9) and one NCCL communicator (0.69e9)
    assert device("device=h100").usable_memory_bytes == pytest.approx(80e9 * 1.069 - 1.19e9)
    assert device("device=h100").usable_memory_bytes == pytest.approx(84.33e9)
    assert device("device=h800").usable_memory_bytes == pytest.approx(84.33e9)  # inherits H100's
    assert device("device=a100").usable_memory_bytes == pytest.approx(84.01e9)
    # an A100 40GB row overrides memory_bytes: the ratio scales with it (its nvidia-smi total: 40960 MiB = 42.9e9)
    assert device("device=a100", "device.memory_bytes=40e9").usable_memory_bytes == pytest.approx(41.41e9)
    # a device without the keys keeps its datasheet capacity
    assert device("device=v100").usable_memory_bytes == 32e9
    frag = device("device=h100", "device.allocator_fragmentation=0.1").usable_memory_bytes
    assert frag == pytest.approx(84.33e9 * 0.9)


def test_a_layout_at_the_edge_fits_the_usable_capacity_and_not_the_datasheet():
    s = setup_hybrid(estimator.resolve_config(EDGE))
    need = memory(s.spec, s.layout, s.framework.grad_bytes(s.precision), s.framework, False)["total"]
    assert 80e9 < need < 84.01e9 and s.capacity == pytest.approx(84.01e9)
    validate_hybrid(estimator.resolve_config(EDGE))  # fits
    with pytest.raises(EstimatorError, match=r"but the device has 80\.0 GB"):
        validate_hybrid(estimator.resolve_config([*EDGE, *DATASHEET]))
    with pytest.raises(EstimatorError, match=r"but the device has 79\.8 GB"):  # 84.01 x (1 - 0.05)
        validate_hybrid(estimator.resolve_config([*EDGE, "device.allocator_fragmentation=0.05"]))
    # parallelism.device_memory_bytes states the usable bytes outright and still wins
    with pytest.raises(EstimatorError, match=r"but the device has 80\.0 GB"):
        validate_hybrid(estimator.resolve_config([*EDGE, "parallelism.device_memory_bytes=80e9"]))


@pytest.mark.parametrize("setting, needle", [
    ("device.memory_visible_ratio=1.2", "device.memory_visible_ratio"),
    ("device.memory_visible_ratio=0", "device.memory_visible_ratio"),
    ("device.memory_reserved_bytes=-1", "device.memory_reserved_bytes"),
    ("device.memory_reserved_bytes=100e9", "leaves no memory"),
    ("device.allocator_fragmentation=1", "device.allocator_fragmentation"),
    ("device.allocator_fragmentation=-0.1", "device.allocator_fragmentation"),
])
def test_bad_capacity_values_are_one_line_errors(setting, needle):
    with pytest.raises(EstimatorError, match=needle) as err:
        validate_hybrid(estimator.resolve_config([*EDGE, setting]))
    assert "\n" not in str(err.value)


def test_bad_capacity_value_exits_2_on_the_command_line():
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", *EDGE, "device.allocator_fragmentation=1.5"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "device.allocator_fragmentation" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


# ---- FSDP1's root unit (framework.fsdp_version) ------------------------------------------------------------------
FSDP = ["model=gpt3_13b", "parallelism=hybrid", "system=dgx_a100", "fabric.nodes=64", "framework=fsdp",
        "parallelism.tp=1", "parallelism.pp=1", "parallelism.zero=3", "parallelism.global_batch=64",
        "parallelism.recompute=full", "precision=bf16"]


def _need(*overrides: str) -> dict:
    s = setup_hybrid(estimator.resolve_config([*FSDP, *overrides]))
    return memory(s.spec, s.layout, s.framework.grad_bytes(s.precision), s.framework, False), s


def test_fsdp1_keeps_its_root_unit_gathered_fsdp2_does_not():
    two, s = _need()  # conf/framework/fsdp.yaml: fsdp_version 2
    one, _ = _need("framework.fsdp_version=1")
    spec = s.spec
    # the root unit: the (padded) embedding, the final norm and the LM head (GPT-3 ties it to the embedding), 16-bit
    root = spec.padded_vocab(1) * spec.hidden + spec.embedding_params() - spec.vocab * spec.hidden \
        + spec.head_params() - (0 if spec.tied else spec.vocab * spec.hidden)
    assert one["weights"] - two["weights"] == pytest.approx(2 * root)
    assert one["total"] - two["total"] == pytest.approx(2 * root) and 2 * root > 0.5e9
    # only under zero 3 (zero 2 keeps every weight whole already)
    z2_one, _ = _need("framework.fsdp_version=1", "parallelism.zero=2")
    z2_two, _ = _need("parallelism.zero=2")
    assert z2_one["total"] == z2_two["total"]


@pytest.mark.parametrize("value", ["3", "0", "true", "fsdp1"])
def test_bad_fsdp_version_is_a_one_line_error(value):
    with pytest.raises(EstimatorError, match="framework.fsdp_version") as err:
        validate_hybrid(estimator.resolve_config([*FSDP, f"framework.fsdp_version={value}"]))
    assert "\n" not in str(err.value)
