"""A captured CNN as another implementation fuses its kernels (``model.fused_kernels`` of a data-parallel model).

The zoo captures a CNN with PyTorch eager (``estimator capture``): every BatchNorm, ReLU and residual add is its
own kernel, each a pass over its activations in memory. That is how the PyTorch recipes of the validation rows
(NVIDIA DeepLearningExamples' ResNet-50) run, so ``none`` (the default) prices the capture as it is.

Two profiles are NVIDIA's MLPerf Training ResNet-50 (MXNet, NHWC, mlcommons/training_results_v3.0 at 63e326c4,
``NVIDIA/benchmarks/resnet/implementations/mxnet``; ``run_and_time.sh`` passes ``--fuse-bn-relu 1
--fuse-bn-add-relu 1``). Which network a run used is in its config: ``config_DGXH100.sh`` (one node) sets
``NETWORK=resnet-v1b-mainloop-fl``, the multi-node configs (``config_DGXH100_multi_*.sh``) ``resnet-v1b-fl``;
the Azure and Dell submissions of the same round use the same files.

``nhwc_bn_relu`` (``symbols/resnet-v1b-fl.py``, ``residual_unit``): cuDNN convolutions, each followed by
MXNet's NHWC ``BatchNorm`` with ``act_type='relu'`` (the ReLU applied in the BatchNorm kernel), and at the end
of a block one ``BatchNormAddRelu`` kernel (``batchnorm_add_relu``): the block's third BatchNorm, the residual
add and the last ReLU. So: the ReLUs make no pass; each BatchNorm keeps its passes except the block's third,
whose passes are those of the captured ``add`` (it reads the convolution output and the shortcut and writes the
sum); a projection shortcut's BatchNorm stays a kernel of its own.

``nhwc_norm_conv`` (``symbols/resnet-v1b-mainloop-fl.py``, ``residual_unit_norm_conv``): the block's
convolutions are ``NormConvolution``. Its cuDNN kernel (``CUDNN_FUSED_SCALE_BIAS_ACTIVATION_CONV_BNSTATS``)
applies the previous BatchNorm's scale and bias and the ReLU to its input as it loads it and writes its output's
per-channel sum and sum of squares from its epilogue (``cudnn_norm_convolution-inl.h``, the MXNet source NVIDIA
shipped in mlcommons/training_results_v0.7 at c6640611, ``Fujitsu/.../src/operator/nn/cudnn/``);
``BNStatsFinalize`` turns the sums into scale and bias (a per-channel kernel). The block's third BatchNorm, a
projection shortcut's BatchNorm (whose convolution also writes its statistics: ``NormalizedConvolution``), the
add and the last ReLU are one ``ScaleBiasAddRelu`` kernel (dual for a projection block) that reads the two
branches and writes the sum: the passes of the captured ``add``. So no BatchNorm of a block makes a pass.

Both: the stem's ``BatchNorm`` (``bn0``, ``act_type='relu'``) keeps its passes, its ReLU makes none. Backward:
the BatchNorm backward is MXNet's NHWC kernel with the ReLU's derivative fused (``act_type`` relu; the
``NormConvolution`` backward runs it in place after the convolution's data gradient, and fuses its weight
gradient with the input's scale-bias-ReLU: ``CUDNN_FUSED_SCALE_BIAS_ACTIVATION_WGRAD``), so the ReLU backward
kernels make no pass; the BatchNorm backward passes and the gradient sums of the residual branches stay as
captured. BatchNorm's ``num_batches_tracked += 1`` (a 16-byte PyTorch kernel before every forward BatchNorm)
does not exist in MXNet.

Rules on the captured graph (``aten`` op names in capture order; a block's BatchNorms are counted from the
stem's max-pool or the previous residual ``add``): every forward ``relu`` / ``relu_`` and backward
``threshold_backward`` -> no kernel; a forward ``add_`` right before a ``batch_norm`` (the counter) -> no
kernel; ``nhwc_bn_relu``: each block's third forward ``batch_norm`` -> no kernel; ``nhwc_norm_conv``: every
forward ``batch_norm`` but the stem's -> no kernel. Everything else (convolutions, the residual ``add``, pooling,
the loss, the optimizer) is priced as captured.

Not modelled: MXNet's fused multi-tensor LARS optimizer (the capture's SGD step is one small kernel per
tensor) and CUDA graphs (the MLPerf code replays the step as a graph: ``cuda_graphs/``), both of which only
remove per-kernel launch floors.
"""

from __future__ import annotations

from dataclasses import replace

from estimator.errors import EstimatorError
from estimator.workloads.graph import Workload

PROFILES = ("none", "nhwc_bn_relu", "nhwc_norm_conv")


def check(profile: str | None) -> str:
    """The profile name, checked (null = ``none``)."""
    name = "none" if profile is None else profile
    if name not in PROFILES:
        raise EstimatorError(f"model.fused_kernels must be one of {', '.join(PROFILES)} for a data-parallel CNN, "
                             f"got {profile!r}")
    return name


def _op(name: str) -> str:
    return name.split("::")[-1]


def fused_nodes(workload: Workload, profile: str) -> frozenset[int]:
    """Ids of the captured nodes that ``profile`` runs inside other kernels (module docstring)."""
    if check(profile) == "none":
        return frozenset()
    nodes = workload.nodes
    if not workload.name.startswith("resnet") or not any(n.phase == "forward" and _op(n.name) == "batch_norm"
                                                          for n in nodes):
        raise EstimatorError(f"model.fused_kernels={profile} is NVIDIA's MLPerf ResNet (BatchNorm and ReLU fused into "
                             f"its convolutions); workload {workload.name!r} is not a ResNet with BatchNorm")
    out: set[int] = set()
    seq = [n for n in nodes if n.phase == "forward"]
    in_block = None  # BatchNorms since the block began (None: still in the stem)
    for i, n in enumerate(seq):
        op = _op(n.name)
        nxt = _op(seq[i + 1].name) if i + 1 < len(seq) else ""
        if op in ("relu", "relu_") or (op == "add_" and nxt == "batch_norm"):
            out.add(n.id)
        elif op in ("max_pool2d", "add"):
            in_block = 0
        elif op == "batch_norm" and in_block is not None:
            in_block += 1
            if profile == "nhwc_norm_conv" or in_block == 3:
                out.add(n.id)
    out.update(n.id for n in nodes if n.phase == "backward" and _op(n.name) == "threshold_backward")
    return frozenset(out)


def apply(workload: Workload, profile: str | None) -> Workload:
    """``workload`` with the nodes ``profile`` fuses away costing nothing (no FLOPs, no bytes: no kernel)."""
    gone = fused_nodes(workload, check(profile))
    if not gone:
        return workload
    nodes = tuple(replace(n, flops=0.0, mem_bytes=0.0, weight_bytes=0.0, duration_s=None) if n.id in gone else n
                  for n in workload.nodes)
    return replace(workload, nodes=nodes)
