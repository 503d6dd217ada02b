"""Accelerator profiles and the per-op compute-time model.

A profile (``conf/device/<name>.yaml``) gives peak FLOP/s (tensor-core rate for matmul/conv,
FP32 rate for everything else) and memory bandwidth from the vendor's spec sheet.

Compute-time model (roofline): an op takes

    max(flops / (peak * compute_efficiency[op_class]), mem_bytes / (mem_bw * memory_efficiency))

Assumptions, documented here because the papers do not fix them:

* ``compute_efficiency`` = 0.5 for conv/matmul/attention on tensor cores, 0.5 of the FP32 rate for
  other arithmetic. Large GEMMs reach 70-90% of peak, but training kernels of vision models are
  smaller; 0.5 is a middle choice (override ``device.compute_efficiency``).
* ``memory_efficiency`` = 0.7: streaming kernels typically reach 70-90% of spec-sheet HBM bandwidth.
* ``precision`` — ``amp`` (mixed precision, the default for training on tensor-core GPUs): conv
  and matmul run at the tensor-core peak and activations/weights move as 16-bit values, i.e.
  half the bytes of the fp32 CPU capture; ``fp32``: every op at the FP32 peak, bytes as captured.
* Kernel launches are asynchronous and hidden behind running kernels (``op_overhead_s`` = 0).
* When the profile is the capture device (``replay: true``), measured durations are replayed.
* A workload with no FLOP/byte costs at all (e.g. a TopoOpt task graph that only carries
  measured task times) keeps its measured durations on any device: there is nothing to scale.
  In a workload that has costs, an op with zero FLOPs and bytes (a view such as ``aten::t``)
  costs nothing on the target device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.errors import EstimatorError, positive
from estimator.workloads.graph import Workload

TENSOR_CORE_CLASSES = frozenset({"conv", "matmul", "attention"})
PRECISIONS = {"amp": 0.5, "fp32": 1.0}  # precision -> bytes relative to the fp32 capture


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    peak_flops: float
    mem_bw_Bps: float
    peak_flops_fp32: float | None = None
    replay: bool = False
    compute_efficiency: float = 0.5
    memory_efficiency: float = 0.7
    op_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        positive(self.peak_flops, f"device.peak_flops ({self.name})")
        positive(self.mem_bw_Bps, f"device.mem_bw_Bps ({self.name})")
        if self.peak_flops_fp32 is not None:
            positive(self.peak_flops_fp32, f"device.peak_flops_fp32 ({self.name})")
        for key in ("compute_efficiency", "memory_efficiency"):
            value = getattr(self, key)
            if not 0 < value <= 1:
                raise EstimatorError(f"device.{key} must be in (0, 1], got {value!r}")
        if self.op_overhead_s < 0:
            raise EstimatorError(f"device.op_overhead_s must be >= 0, got {self.op_overhead_s!r}")

    @classmethod
    def from_dict(cls, data: dict) -> DeviceProfile:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise EstimatorError(f"device: unknown parameter(s) {unknown}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise EstimatorError(f"device: {exc}") from None


def node_times(workload: Workload, device: DeviceProfile, precision: str = "amp") -> np.ndarray:
    """Seconds per node of ``workload`` (in node order); 0 for communication nodes."""
    if precision not in PRECISIONS:
        raise EstimatorError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    n = len(workload.nodes)
    flops = np.fromiter((x.flops for x in workload.nodes), float, n)
    mem = np.fromiter((x.mem_bytes for x in workload.nodes), float, n)
    is_compute = np.fromiter((x.kind == "compute" for x in workload.nodes), bool, n)
    tensor = np.fromiter((x.op_class in TENSOR_CORE_CLASSES for x in workload.nodes), bool, n)
    fp32 = device.peak_flops_fp32 or device.peak_flops
    tensor_peak = device.peak_flops if precision == "amp" else fp32
    peak = np.where(tensor, tensor_peak, fp32) * device.compute_efficiency
    moved = mem * PRECISIONS[precision]
    t = np.maximum(flops / peak, moved / (device.mem_bw_Bps * device.memory_efficiency))
    t = np.where(is_compute, t + device.op_overhead_s, 0.0)
    measured = np.fromiter((np.nan if x.duration_s is None else x.duration_s for x in workload.nodes), float, n)
    replay = device.replay or not (flops.any() or mem.any())
    use_measured = is_compute & ~np.isnan(measured) & replay
    t = np.where(use_measured, measured, t)
    return t
