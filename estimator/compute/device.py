"""Accelerator profiles and the per-op compute-time model.

A profile (``conf/device/<name>.yaml``) gives the vendor's spec-sheet peaks per precision and the
HBM bandwidth, plus per-op-class efficiencies (each value is sourced or calibrated in the yaml,
next to it). Per op of class ``c`` (``estimator.workloads.flops.OP_CLASSES``):

    t = max(flops / (peak[precision, c] * compute_efficiency[c]),
            bytes[precision, c] / (mem_bw * memory_efficiency[c]),
            launch_s)

* **Precision** (``precision=``): ``fp32`` — every op on the FP32 (CUDA-core) peak; ``tf32`` —
  conv/matmul on the TF32 tensor-core peak, the rest FP32, tensors stay 32-bit; ``fp16`` (alias
  ``amp``, PyTorch autocast mixed precision) and ``bf16`` — conv/matmul/attention on that 16-bit
  tensor-core peak and activations move as 16-bit values (half the bytes of the fp32 CPU capture),
  while the optimizer step keeps fp32 master weights and state (its bytes are not halved); ``fp8``
  — Transformer Engine's recipe (NVIDIA Transformer Engine docs, "Using FP8 with Transformer
  Engine"): the GEMMs of its Linear layers (op class ``matmul``) run on the FP8 tensor-core peak,
  everything else — attention (TE's dot-product attention stays BF16 unless ``NVTE_FP8_DPA=1``),
  convolutions, pointwise ops — runs as ``bf16`` with bf16's peaks and efficiencies; activations
  stay 16-bit in memory. The casts FP8 needs are ops of the captured layer
  (``estimator.compute.te_kernels``), not a factor here. A device without a peak for a precision
  (``peak_flops_tf32: null``, e.g. V100; ``peak_flops_fp8`` on anything before Hopper) rejects it.
* **Peaks**: ``peak_flops`` is the dense FP16 tensor-core rate, ``peak_flops_fp32`` the FP32 rate,
  ``peak_flops_tf32`` / ``peak_flops_bf16`` / ``peak_flops_fp8`` the TF32 / BF16 / FP8 tensor-core
  rates (null = absent). Ops of other classes have no FLOP formula (they count 0 FLOPs, see
  ``flops.py``) and are priced by their bytes.
* **Efficiency per op class**: ``compute_efficiency`` (fraction of the FLOP peak reached by conv /
  matmul / attention kernels) and ``memory_efficiency`` (fraction of HBM bandwidth reached by each
  class's kernels), each one number, a mapping class -> fraction, or a mapping precision (fp32,
  tf32, fp16, bf16, fp8) -> class -> fraction, because the same convolution reaches a different
  share of the CUDA-core, TF32 and FP16 peaks (cuDNN picks other kernels and layouts). Lookup
  order: (precision, class), (precision, default), (class), (default); an ``attention`` op (a fused
  attention kernel: tensor-core GEMMs) without an ``attention`` entry uses ``matmul``'s. Every
  precision stands on its own: a table that names precisions must name each 16/8-bit tensor-core
  precision the device has a peak for (fp16, bf16, fp8; tf32), so bf16 never borrows fp16's values
  silently (a one-line error names the missing one).
* **GEMM shape** (``matmul_shape``, optional, per precision): the ``matmul`` efficiency of an op whose
  GEMM dims can be read is ``compute_efficiency`` x a wave / tile / short-K factor of its shape on
  ``sm_count`` SMs (:mod:`estimator.compute.gemm_shape`); other classes and precisions are unchanged.
* **Kernel launches** (``launch_s``): PyTorch eager launches one or more kernels per op
  asynchronously; a kernel shorter than the host's per-op dispatch + launch time cannot keep the
  GPU busy, so no op finishes faster than ``launch_s``.
* **Grouped launches** (:data:`GROUPED_LAUNCHES`): an op that stands for a kernel per local expert of a
  Transformer Engine GroupedLinear (its ``E`` cuBLAS GEMMs, its per-expert FP8 quantization; sources in
  ``estimator.compute.te_kernels`` and ``te_moe_kernels``) or a multi-tensor kernel over them is floored at
  the kernels it runs in a row x ``launch_s`` (each kernel's floor, as if captured one op per kernel), ``E``
  being the workload's local experts (``gemm_shape.expert_groups``).
* **Elementwise fusion under AMP** (``amp_elementwise_fusion``): with fp16/bf16 the training
  recipes the validation rows come from fuse pointwise ops into their neighbours (cuDNN
  conv+bias+activation, apex/NVFuser bias-GeLU, fused LayerNorm, TorchScript). This fraction of
  each elementwise op's bytes remains; 1.0 = no fusion.
* **Attention passes** (``attention_passes``, optional, per fused-attention kernel): the kernel's efficiency as a
  fraction of the 16-bit tensor-core peak for a causal forward, an unmasked forward and a backward, in place of
  ``compute_efficiency``'s one value for its class. A forward op's FLOPs may run partly in causal and partly in
  unmasked calls (PyTorch's load-balanced ring attention: one causal step of ``cp``); the caller states the causal
  share (``node_times``' ``causal_share``) and the op is priced at the time-weighted mix. The backward has one value:
  the published FlashAttention-2 numbers differ by under 1 % between masks (cited in ``conf/device/h100.yaml``).
* When the profile is the capture device (``replay: true``), measured durations are replayed.
* A workload with no FLOP/byte costs at all (e.g. a TopoOpt task graph that only carries
  measured task times) keeps its measured durations on any device: there is nothing to scale.
  In a workload that has costs, an op with zero FLOPs and bytes (a view such as ``aten::t``)
  launches no kernel and costs nothing on the target device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from estimator.compute import gemm_shape
from estimator.errors import EstimatorError, positive
from estimator.workloads.flops import OP_CLASSES
from estimator.workloads.graph import Workload

# Fused attention kernels a framework can run (``framework.attention_kernel``): ``cudnn`` prices the
# ``attention`` op class; another kernel prices it as ``attention_<kernel>`` (falling back to ``attention``,
# then ``matmul``, where the device has no entry for it).
ATTENTION_KERNELS = ("cudnn", "flash2", "flash1", "triton")
ATTENTION_CLASSES = ("attention", *(f"attention_{k}" for k in ATTENTION_KERNELS if k != "cudnn"))
TENSOR_CORE_CLASSES = frozenset({"conv", "matmul", *ATTENTION_CLASSES})
# precision -> (peak field for tensor-core classes, activation bytes relative to the fp32 capture)
PRECISIONS = {
    "fp32": ("peak_flops_fp32", 1.0),
    "tf32": ("peak_flops_tf32", 1.0),
    "fp16": ("peak_flops", 0.5),
    "amp": ("peak_flops", 0.5),  # alias: PyTorch autocast fp16 mixed precision
    "bf16": ("peak_flops_bf16", 0.5),
    "fp8": ("peak_flops_fp8", 0.5),  # Transformer Engine: Linear GEMMs in FP8, the rest BF16 (module doc)
}
FP8_CLASSES = frozenset({"matmul"})  # op classes Transformer Engine runs in FP8 (its Linear layers' GEMMs)
EFFICIENCY_KEYS = (*OP_CLASSES, *ATTENTION_CLASSES, "default")
MULTI_TENSOR_MAX = 64  # tensors per launch of TE's multi-tensor kernels (TE v2.9 / v2.16 common/util/padding.cu l.25,
# common/transpose/multi_cast_transpose.cu l.26: kMaxTensorsPerKernel = 64)
COMPUTE_STREAMS = 4  # TE's grouped GEMM streams (v2.9 / v2.16 common/util/multi_stream.cpp l.52-54 num_compute_streams)
# kernels an op runs one after another on the GPU, as a function of the local experts E (module doc, "Grouped
# launches"): TE GroupedLinear's one cuBLAS GEMM per expert each way, round-robin on COMPUTE_STREAMS streams (so
# E / 4 in a row); current scaling's per-expert zero-amax, amax and scale kernels (one op) and cast-transpose;
# blockwise's per-expert quantize; the multi-tensor cast-transpose and row (un)padding (one kernel per 64 experts)
GROUPED_LAUNCHES = {
    **dict.fromkeys(("te::grouped_linear", "te::grouped_linear_dgrad", "te::grouped_linear_wgrad"),
                    lambda e: -(-e // COMPUTE_STREAMS)),
    "te::fp8_grouped_amax": lambda e: 3 * e, "te::fp8_grouped_cast_transpose": lambda e: e,
    "te::fp8_grouped_block_quantize": lambda e: e,
    "te::fp8_multi_cast_transpose": lambda e: -(-e // MULTI_TENSOR_MAX),
    "te::moe_fp8_pad": lambda e: -(-e // MULTI_TENSOR_MAX), "te::moe_fp8_unpad": lambda e: -(-e // MULTI_TENSOR_MAX),
}


PRECISION_KEYS = ("fp32", "tf32", "fp16", "bf16", "fp8")
# tensor-core precisions an efficiency table that names precisions must name when the device has their peak
OWN_VALUES = {"tf32": "peak_flops_tf32", "fp16": "peak_flops", "bf16": "peak_flops_bf16", "fp8": "peak_flops_fp8"}


def op_precision(precision: str, op_class: str) -> str:
    """The precision an op of ``op_class`` runs at under ``precision`` (fp8: only FP8_CLASSES, the rest bf16)."""
    prec = "fp16" if precision == "amp" else precision
    if prec == "fp8" and op_class not in FP8_CLASSES:
        return "bf16"
    return prec


def _fraction(frac, where: str) -> float:
    if isinstance(frac, bool) or not isinstance(frac, int | float) or not 0 < frac <= 1:
        raise EstimatorError(f"{where} must be in (0, 1], got {frac!r}")
    return float(frac)


def _class(cls, where: str) -> str:
    if cls not in EFFICIENCY_KEYS:
        raise EstimatorError(f"{where}: unknown op class {cls!r} (known: {', '.join(EFFICIENCY_KEYS)})")
    return cls


def _efficiency(value, key: str, device: str) -> tuple[tuple[str, str, float], ...]:
    """Normalise an efficiency spec to a hashable tuple of ``(precision or "*", class, fraction)``.

    Accepted: one number (every precision and class); ``{class: fraction}`` (every precision);
    ``{precision: {class: fraction}}`` (a number in place of the inner mapping = every class)."""
    where = f"device.{key} ({device})"
    if isinstance(value, tuple):  # already normalised
        return value
    out: dict[tuple[str, str], float] = {}
    if isinstance(value, Mapping):
        for name, inner in value.items():
            if name in PRECISION_KEYS:
                pairs = inner.items() if isinstance(inner, Mapping) else (("default", inner),)
                for cls, frac in pairs:
                    out[(name, _class(cls, where))] = _fraction(frac, f"{where}.{name}.{cls}")
            else:
                out[("*", _class(name, where))] = _fraction(inner, f"{where}.{name}")
    else:
        out[("*", "default")] = _fraction(value, where)
    out.setdefault(("*", "default"), 1.0)
    return tuple(sorted((p, c, f) for (p, c), f in out.items()))


def _rail_rates(value, device: str) -> tuple[tuple[int, float, float], ...] | None:
    """``device.hybridep_rail_Bps`` as ``((nodes, dispatch_Bps, combine_Bps), ...)`` sorted by nodes;
    one-line errors."""
    if value is None or isinstance(value, tuple):
        return value
    where = f"device.hybridep_rail_Bps ({device})"
    if not isinstance(value, Mapping) or not value:
        raise EstimatorError(f"{where} must be a non-empty mapping {{nodes: [dispatch, combine]}}, got {value!r}")
    out = []
    for nodes, pair in value.items():
        if isinstance(nodes, str) and nodes.isdigit():  # a key read as text
            nodes = int(nodes)
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 2:
            raise EstimatorError(f"{where}: node counts must be whole numbers >= 2 (a rail spans nodes), got {nodes!r}")
        if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise EstimatorError(f"{where}.{nodes} must be [dispatch_Bps, combine_Bps], got {pair!r}")
        rates = tuple(positive(r, f"{where}.{nodes}") for r in pair)
        out.append((nodes, float(rates[0]), float(rates[1])))
    return tuple(sorted(out))


ATTENTION_PASS_KEYS = ("forward_causal", "forward", "backward")  # device.attention_passes.<kernel> (module docstring)


def _attention_passes(value, device: str) -> tuple[tuple[str, float, float, float], ...]:
    """``{kernel: {forward_causal, forward, backward}}`` as a hashable tuple of ``(kernel, causal forward, unmasked
    forward, backward)`` fractions of the 16-bit tensor-core peak (empty: none)."""
    if value is None or isinstance(value, tuple):
        return value or ()
    where = f"device.attention_passes ({device})"
    if not isinstance(value, Mapping):
        raise EstimatorError(f"{where} must map a kernel ({', '.join(ATTENTION_KERNELS)}) to "
                             f"{{{', '.join(ATTENTION_PASS_KEYS)}}}, got {value!r}")
    out = []
    for kernel, passes in value.items():
        if kernel not in ATTENTION_KERNELS:
            raise EstimatorError(f"{where}: unknown kernel {kernel!r} (known: {', '.join(ATTENTION_KERNELS)})")
        if not isinstance(passes, Mapping) or set(passes) != set(ATTENTION_PASS_KEYS):
            raise EstimatorError(f"{where}.{kernel} must give exactly {', '.join(ATTENTION_PASS_KEYS)}, got {passes!r}")
        out.append((kernel, *(_fraction(passes[k], f"{where}.{kernel}.{k}") for k in ATTENTION_PASS_KEYS)))
    return tuple(sorted(out))


def attention_pass_efficiency(passes: tuple[float, float, float], phase: str, causal_share: float) -> float:
    """One attention op's efficiency from a kernel's ``(causal forward, unmasked forward, backward)`` fractions: the
    backward's, or for a forward the time-weighted mix of its FLOPs, ``causal_share`` of them in causal calls and the
    rest in unmasked ones (``1 / e = share / e_causal + (1 - share) / e_unmasked``)."""
    causal, unmasked, backward = passes
    if phase == "backward":
        return backward
    if not 0 <= causal_share <= 1:
        raise EstimatorError(f"causal_share must be in [0, 1], got {causal_share!r}")
    return 1.0 / (causal_share / causal + (1.0 - causal_share) / unmasked)


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    peak_flops: float
    mem_bw_Bps: float
    peak_flops_fp32: float | None = None
    peak_flops_tf32: float | None = None
    peak_flops_bf16: float | None = None
    peak_flops_fp8: float | None = None
    replay: bool = False
    compute_efficiency: float | Mapping | tuple = 0.5
    memory_efficiency: float | Mapping | tuple = 0.7
    launch_s: float = 0.0
    amp_elementwise_fusion: float = 1.0
    op_overhead_s: float = 0.0  # added to every compute op (kept for hand-made profiles)
    memory_bytes: float | None = None  # device memory (HBM) capacity, the datasheet's decimal GB
    # What a training process can allocate (``usable_memory_bytes``, the capacity parallelism=hybrid checks a layout
    # against; docs/research/h83-capacity.md): the total CUDA reports (cudaMemGetInfo / torch ``total_memory``) as a
    # ratio of ``memory_bytes`` (HBM is sold in binary GiB less what the driver keeps; a ratio so that an override of
    # ``memory_bytes``, e.g. A100 40GB rows, scales with it; None = 1), less ``memory_reserved_bytes`` outside PyTorch's
    # allocator (CUDA context, NCCL's buffers), less ``allocator_fragmentation`` of the rest (reserved, never handed out)
    memory_visible_ratio: float | None = None
    memory_reserved_bytes: float = 0.0
    allocator_fragmentation: float = 0.0
    sm_count: int | None = None  # streaming multiprocessors (datasheet); what a kernel that holds some of them leaves
    collective_sms: int | None = None  # SMs an NCCL data-parallel collective holds (one CTA per channel, cited per device)
    # NCCL's send/recv channels (p2pnChannels, one CTA each) of a communicator inside one NVLink node and of one
    # spanning nodes: what NCCL's all-to-all holds (estimator.parallel.moe_comm.nccl_a2a_ctas; cited per device;
    # None: not stated)
    p2p_channels_nvlink: int | None = None
    p2p_channels_network: int | None = None
    # HybridEP's measured rail (RDMA) exchange rates on this device's node: ``{nodes: [dispatch, combine]}`` in bytes/s
    # of "algorithm bandwidth" (token rows x nodes each token reaches, its own node included, x hidden x 2 over the
    # kernel's time; estimator.parallel.moe_comm.hybridep_rail_rates; cited per device; None: not stated, the rail
    # exchange keeps the fabric's price). Parsed to ``((nodes, dispatch, combine), ...)``.
    hybridep_rail_Bps: Mapping | tuple | None = None
    matmul_shape: Mapping | tuple | None = None  # GEMM efficiency by shape per precision (estimator.compute.gemm_shape)
    # a fused attention kernel's efficiency by pass and mask (module docstring, "Attention passes"; cited per device)
    attention_passes: Mapping | tuple | None = None

    @property
    def usable_memory_bytes(self) -> float | None:
        """Bytes a layout may use: ``(memory_bytes x memory_visible_ratio - memory_reserved_bytes) x (1 -
        allocator_fragmentation)``; None when the device states no memory (unchecked)."""
        if self.memory_bytes is None:
            return None
        visible = self.memory_bytes * (self.memory_visible_ratio or 1.0)
        return (visible - self.memory_reserved_bytes) * (1.0 - self.allocator_fragmentation)

    @property
    def collective_share(self) -> float:
        """The share of its SMs an NCCL collective holds (``collective_sms / sm_count``; 0 when not stated): the
        default compute slow-down while data-parallel / ZeRO traffic overlaps it (``parallelism.comm_interference``)."""
        return self.collective_sms / self.sm_count if self.collective_sms else 0.0

    def __post_init__(self) -> None:
        positive(self.peak_flops, f"device.peak_flops ({self.name})")
        positive(self.mem_bw_Bps, f"device.mem_bw_Bps ({self.name})")
        for key in ("peak_flops_fp32", "peak_flops_tf32", "peak_flops_bf16", "peak_flops_fp8"):
            if getattr(self, key) is not None:
                positive(getattr(self, key), f"device.{key} ({self.name})")
        if self.memory_bytes is not None:
            positive(self.memory_bytes, f"device.memory_bytes ({self.name})")
        self._check_usable_memory()
        if self.sm_count is not None and (isinstance(self.sm_count, bool) or not isinstance(self.sm_count, int)
                                          or self.sm_count <= 0):
            raise EstimatorError(f"device.sm_count ({self.name}) must be a whole number > 0, got {self.sm_count!r}")
        if self.collective_sms is not None and (isinstance(self.collective_sms, bool)
                                                or not isinstance(self.collective_sms, int) or self.collective_sms <= 0
                                                or not self.sm_count or self.collective_sms >= self.sm_count):
            raise EstimatorError(f"device.collective_sms ({self.name}) must be a whole number of SMs in [1, sm_count), "
                                 f"got {self.collective_sms!r} of sm_count {self.sm_count!r}")
        for key in ("p2p_channels_nvlink", "p2p_channels_network"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0
                                      or value & (value - 1) or not self.sm_count or value >= self.sm_count):
                raise EstimatorError(f"device.{key} ({self.name}) must be a power of two (NCCL rounds p2pnChannels "
                                     f"up to one) in [1, sm_count), got {value!r} of sm_count {self.sm_count!r}")
        object.__setattr__(self, "hybridep_rail_Bps", _rail_rates(self.hybridep_rail_Bps, self.name))
        object.__setattr__(self, "matmul_shape", gemm_shape.parse(self.matmul_shape, self.name, PRECISION_KEYS))
        object.__setattr__(self, "attention_passes", _attention_passes(self.attention_passes, self.name))
        if self.matmul_shape and not self.sm_count:
            raise EstimatorError(f"device.matmul_shape ({self.name}) needs device.sm_count (its waves are counted in SMs)")
        for key in ("compute_efficiency", "memory_efficiency"):
            object.__setattr__(self, key, _efficiency(getattr(self, key), key, self.name))
            named = {p for p, _c, _f in getattr(self, key) if p != "*"}
            missing = [p for p, peak in OWN_VALUES.items() if named and p not in named and getattr(self, peak) is not None]
            if missing:
                raise EstimatorError(f"device.{key} ({self.name}) names {', '.join(sorted(named))} but not "
                                     f"{', '.join(missing)}, which the device has a peak for: give each its own values")
        for key in ("launch_s", "op_overhead_s"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                raise EstimatorError(f"device.{key} must be a number of seconds in [0, 1), got {value!r}")
        if not (isinstance(self.amp_elementwise_fusion, int | float) and 0 < self.amp_elementwise_fusion <= 1):
            raise EstimatorError(f"device.amp_elementwise_fusion must be in (0, 1], got {self.amp_elementwise_fusion!r}")

    def _check_usable_memory(self) -> None:
        ratio, reserved, frag = self.memory_visible_ratio, self.memory_reserved_bytes, self.allocator_fragmentation
        # at most the binary reading of the datasheet's GB (GiB / GB = 1.0737): no device shows CUDA more than that
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, int | float)
                                  or not 0 < ratio <= 2**30 / 1e9):
            raise EstimatorError(f"device.memory_visible_ratio ({self.name}) must be in (0, {2**30 / 1e9:.4f}] "
                                 f"(CUDA's total over memory_bytes), got {ratio!r}")
        if isinstance(reserved, bool) or not isinstance(reserved, int | float) or reserved < 0:
            raise EstimatorError(f"device.memory_reserved_bytes ({self.name}) must be a number of bytes >= 0, got {reserved!r}")
        if isinstance(frag, bool) or not isinstance(frag, int | float) or not 0 <= frag < 1:
            raise EstimatorError(f"device.allocator_fragmentation ({self.name}) must be a fraction in [0, 1), got {frag!r}")
        if self.memory_bytes is not None and self.usable_memory_bytes <= 0:
            raise EstimatorError(f"device.memory_reserved_bytes ({self.name}) = {reserved:.3g} leaves no memory of "
                                 f"memory_bytes {self.memory_bytes:.3g} x memory_visible_ratio {ratio or 1.0}")

    @classmethod
    def from_dict(cls, data: dict) -> DeviceProfile:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise EstimatorError(f"device: unknown parameter(s) {unknown}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise EstimatorError(f"device: {exc}") from None

    def efficiency(self, key: str, op_class: str, precision: str = "fp16") -> float:
        """The ``key`` efficiency of ``op_class`` at ``precision``: the most specific entry of
        (precision, class), (precision, default), (any, class), (any, default); an ``attention``
        class without its own entry takes ``matmul``'s (``attention_<kernel>``: ``attention``'s, then
        ``matmul``'s). Under fp8, classes outside FP8_CLASSES
        use bf16's entries (they run in bf16)."""
        table = {(p, c): f for p, c, f in getattr(self, key)}
        prec = op_precision(precision, op_class)
        classes = (op_class,) + (("attention",) if op_class.startswith("attention_") else ()) + \
            (("matmul",) if op_class.startswith("attention") else ())
        for probe in (*((prec, c) for c in classes), (prec, "default"), *(("*", c) for c in classes), ("*", "default")):
            if probe in table:
                return table[probe]
        return 1.0

    def memory_rate(self, op_class: str, precision: str) -> float:
        """Bytes/s a memory-bound ``op_class`` kernel streams at ``precision``: HBM bandwidth x its
        ``memory_efficiency``."""
        return self.mem_bw_Bps * self.efficiency("memory_efficiency", op_class, precision)

    def tensor_peak(self, precision: str) -> float:
        """The conv/matmul peak FLOP/s at ``precision``; a one-line error if the device lacks it."""
        check_precision(precision)
        peak = getattr(self, PRECISIONS[precision][0])
        if precision == "fp32" and peak is None:
            peak = self.peak_flops
        if peak is None:
            have = ", ".join(p for p in PRECISIONS if p == "fp32" or getattr(self, PRECISIONS[p][0]) is not None)
            raise EstimatorError(f"device {self.name} has no {precision} ({PRECISIONS[precision][0]} is null); use precision={have}")
        return float(peak)


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise EstimatorError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")


def replay_reason(workload: Workload, device: DeviceProfile) -> str | None:
    """Why :func:`node_times` replays ``workload``'s measured durations instead of pricing its ops
    on ``device`` (None when it prices them): the device is the capture device (``replay: true``),
    or no node carries FLOPs or bytes (an imported trace with durations only: nothing to price)."""
    if device.replay:
        return f"device {device.name} replays the durations measured on the capture device"
    if not any(n.flops or n.mem_bytes for n in workload.nodes):
        return f"the trace has durations but no FLOPs or bytes per op, so device {device.name} cannot price them"
    return None


def shape_factors(workload: Workload, device: DeviceProfile, precision: str, classes: list[str]) -> np.ndarray:
    """Per node, the factor :mod:`estimator.compute.gemm_shape` puts on the ``matmul`` efficiency where the
    device declares ``matmul_shape`` for the op's precision (its ``unread`` factor where the GEMM dims cannot be
    read), else 1."""
    model = dict(device.matmul_shape or ()).get(op_precision(precision, "matmul"))
    out = np.ones(len(classes))
    if model is None:
        return out
    groups = gemm_shape.expert_groups(workload.nodes)
    for i, (node, cls) in enumerate(zip(workload.nodes, classes, strict=True)):
        if cls != "matmul" or node.kind != "compute":
            continue
        dims = gemm_shape.node_dims(node, groups)
        out[i] = model.unread if dims is None else gemm_shape.shape_factor(model, device.sm_count, *dims)
    return out


def grouped_launches(workload: Workload) -> np.ndarray:
    """Per node, the kernels it launches (:data:`GROUPED_LAUNCHES` of the workload's local experts; 1 elsewhere)."""
    out = np.ones(len(workload.nodes))
    names = [n.op for n in workload.nodes]
    if not GROUPED_LAUNCHES.keys() & set(names):
        return out
    experts = gemm_shape.expert_groups(workload.nodes) or 1
    for i, name in enumerate(names):
        if name in GROUPED_LAUNCHES:
            out[i] = max(1, GROUPED_LAUNCHES[name](experts))
    return out


def node_times(workload: Workload, device: DeviceProfile, precision: str = "amp",
               attention_kernel: str = "cudnn", causal_share: float = 1.0) -> np.ndarray:
    """Seconds per node of ``workload`` (in node order); 0 for communication nodes. Fused attention
    ops are priced as ``attention_kernel`` runs them (:data:`ATTENTION_KERNELS`); where the device gives that
    kernel's ``attention_passes``, a 16-bit attention op takes its pass's efficiency, a forward's mixed by
    ``causal_share`` (the share of its FLOPs the framework runs in causal calls, :func:`attention_pass_efficiency`;
    1 = a causal self-attention in one call)."""
    return node_prices(workload, device, precision, attention_kernel, causal_share)["time_s"]


def node_prices(workload: Workload, device: DeviceProfile, precision: str = "amp",
                attention_kernel: str = "cudnn", causal_share: float = 1.0) -> dict[str, np.ndarray]:
    """:func:`node_times` with the terms of its price per node (in node order): ``time_s`` (what
    :func:`node_times` returns), ``compute_s`` (FLOPs over the efficiency-scaled peak), ``memory_s`` (bytes
    over the efficiency-scaled bandwidth), ``floor_s`` (the launch floor, 0 for a node that launches
    nothing), ``compute_efficiency`` (with the GEMM shape factor and the attention pass), ``memory_efficiency``,
    ``peak_flops`` (the peak the op runs at, before efficiency) and ``replayed`` (True where a measured duration
    stands)."""
    check_precision(precision)
    if attention_kernel not in ATTENTION_KERNELS:
        raise EstimatorError(f"attention kernel must be one of {', '.join(ATTENTION_KERNELS)}, got {attention_kernel!r}")
    n = len(workload.nodes)
    flops = np.fromiter((x.flops for x in workload.nodes), float, n)
    mem = np.fromiter((x.mem_bytes for x in workload.nodes), float, n)
    is_compute = np.fromiter((x.kind == "compute" for x in workload.nodes), bool, n)
    measured = np.fromiter((np.nan if x.duration_s is None else x.duration_s for x in workload.nodes), float, n)
    replay = replay_reason(workload, device) is not None
    classes = [x.op_class for x in workload.nodes]
    if attention_kernel != "cudnn":
        classes = [f"attention_{attention_kernel}" if c == "attention" else c for c in classes]
    tensor = np.fromiter((c in TENSOR_CORE_CLASSES for c in classes), bool, n)
    fp32 = device.peak_flops_fp32 or device.peak_flops
    kinds = set(classes)
    if replay:
        peak_of = {c: getattr(device, PRECISIONS[precision][0]) or device.peak_flops for c in kinds}
    else:
        peak_of = {c: device.tensor_peak(op_precision(precision, c)) for c in kinds}
    ceff_of = {c: device.efficiency("compute_efficiency", c, precision) for c in kinds}
    meff_of = {c: device.efficiency("memory_efficiency", c, precision) for c in kinds}
    ceff = np.fromiter((ceff_of[c] for c in classes), float, n)
    if not replay:
        ceff = ceff * shape_factors(workload, device, precision, classes)
        passes = {k: p for k, *p in device.attention_passes}.get(attention_kernel)
        target = "attention" if attention_kernel == "cudnn" else f"attention_{attention_kernel}"
        if passes and target in kinds and op_precision(precision, target) in ("fp16", "bf16"):
            for i, (node, cls) in enumerate(zip(workload.nodes, classes, strict=True)):
                if cls == target:
                    ceff[i] = attention_pass_efficiency(passes, node.phase, causal_share)
    meff = np.fromiter((meff_of[c] for c in classes), float, n)
    peak = np.where(tensor, np.fromiter((peak_of[c] for c in classes), float, n), fp32) * ceff
    scale = PRECISIONS[precision][1]
    byte_scale = np.fromiter((1.0 if c == "optimizer" else scale for c in classes), float, n)
    if scale < 1.0:  # 16-bit training: pointwise ops fused into their neighbours
        fused = np.fromiter((c == "elementwise" for c in classes), bool, n)
        byte_scale = np.where(fused, byte_scale * device.amp_elementwise_fusion, byte_scale)
    compute_s, memory_s = flops / peak, mem * byte_scale / (device.mem_bw_Bps * meff)
    t = np.maximum(compute_s, memory_s)
    launches = (flops > 0) | (mem > 0)
    floor = device.launch_s * grouped_launches(workload)
    t = np.where(launches, np.maximum(t, floor), 0.0)
    t = np.where(is_compute, t + device.op_overhead_s, 0.0)
    replayed = np.zeros(n, bool)
    if replay:  # the capture device (or a graph with nothing to scale): measured durations
        replayed = is_compute & ~np.isnan(measured)
        t = np.where(replayed, measured, t)
    return {"time_s": t, "compute_s": compute_s, "memory_s": memory_s, "floor_s": np.where(launches, floor, 0.0),
            "compute_efficiency": ceff, "memory_efficiency": meff, "peak_flops": peak / ceff, "replayed": replayed}
